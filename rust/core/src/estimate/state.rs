//! Everything a `TokenEstimator` holds (ADR 0001, ADR 0012): the profiles of
//! the byte heuristic, the counting table, the memo, and the calibration of
//! each model.
//!
//! A key (what Python passes as `model_id`) resolves once to a [`Counter`]:
//! its method, its memo counter (the model id for the heuristic, the
//! encoding for an exact method) and its calibration key.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Memo, MemoKey, Profile};
use crate::calibrate::{self, Ratio};
use crate::canonical::write_f64;
use crate::counting::{resolve, Calibrations};
use crate::error::CoreResult;
use crate::tokenize::message::{exact_raw, RECIPE_VERSION};
use crate::tokenize::table::EncodingTable;
use crate::tokenize::Method;

/// How many values ahead a batch of lookups fetches the memo's index entry,
/// and the entry it points at (`EstimatorState::raw_counted_each`).
const INDEX_AHEAD: usize = 16;
const NODE_AHEAD: usize = 8;
/// Lookups in a row found at their slot guess after which a batch counts as
/// in insertion order and stops fetching ahead (until a guess misses).
const IN_ORDER: usize = 8;

/// Cumulative reconciled sums of one model: `E` estimated, `A` actual.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reconciled {
    pub estimated: u64,
    pub actual: u64,
}

/// How one key counts.
#[derive(Debug, Clone)]
pub struct Counter {
    pub method: Method,
    /// The interned memo counter.
    pub memo: u32,
    /// The heuristic's profile (of the model id without its `#method`).
    pub profile: Profile,
    pub calibration: String,
}

impl Counter {
    pub fn two_sided(&self) -> bool {
        self.method == Method::Heuristic
    }

    /// The id a raw count of `kind` is stored under: equal ids mean equal
    /// counts of equal canonical bytes. `heuristic:BYTES_PER_TOKEN:FRAMING|kind`
    /// (the float as canonical JSON prints it) for the heuristic,
    /// `ENCODING:RECIPE_VERSION|kind` for an exact method; no id of one
    /// method is another's.
    pub fn stored_id(&self, kind: &str) -> String {
        match self.method {
            Method::Heuristic => {
                let mut bpt = Vec::new();
                // A profile holds a positive finite number only.
                let _ = write_f64(&mut bpt, self.profile.bytes_per_token);
                let bpt = String::from_utf8_lossy(&bpt);
                format!("heuristic:{bpt}:{}|{kind}", self.profile.framing_tokens)
            }
            Method::Exact(e) => format!("{}:{RECIPE_VERSION}|{kind}", e.name()),
        }
    }
}

/// The next [`EstimatorState::serial`] (0 is never one).
static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1);

fn next_serial() -> u64 {
    NEXT_SERIAL.fetch_add(1, Ordering::Relaxed)
}

#[derive(Debug)]
pub struct EstimatorState {
    /// This state's own number in the process (a clone gets another).
    serial: u64,
    default: Profile,
    /// Prefix profiles in the order given.
    profiles: Vec<(String, Profile)>,
    table: EncodingTable,
    memo: Memo,
    /// Interned memo counters.
    memo_ids: HashMap<String, u32>,
    /// Key -> index into `counter_list`.
    counters: HashMap<String, u32>,
    counter_list: Vec<Counter>,
    /// Interned kinds and their names.
    kinds: HashMap<String, u32>,
    kind_names: Vec<String>,
    calibrations: Calibrations,
}

impl Clone for EstimatorState {
    /// A copy under a serial of its own: the two intern counters and kinds
    /// apart from here on, so an id of one may name something else in the
    /// other.
    fn clone(&self) -> Self {
        EstimatorState {
            serial: next_serial(),
            default: self.default,
            profiles: self.profiles.clone(),
            table: self.table.clone(),
            memo: self.memo.clone(),
            memo_ids: self.memo_ids.clone(),
            counters: self.counters.clone(),
            counter_list: self.counter_list.clone(),
            kinds: self.kinds.clone(),
            kind_names: self.kind_names.clone(),
            calibrations: self.calibrations.clone(),
        }
    }
}

impl EstimatorState {
    /// A number no other state of this process has (never 0): with a memo
    /// counter and a kind id of this state, it names one way of counting
    /// (ids never change within a state), so a raw count kept under it
    /// elsewhere is this state's count of the same bytes.
    pub fn serial(&self) -> u64 {
        self.serial
    }

    pub fn new(default: Profile, profiles: Vec<(String, Profile)>, memo_capacity: usize) -> Self {
        Self::with_table(default, profiles, memo_capacity, EncodingTable::default())
    }

    pub fn with_table(
        default: Profile,
        profiles: Vec<(String, Profile)>,
        memo_capacity: usize,
        table: EncodingTable,
    ) -> Self {
        EstimatorState {
            serial: next_serial(),
            default,
            profiles,
            table,
            memo: Memo::new(memo_capacity),
            memo_ids: HashMap::new(),
            counters: HashMap::new(),
            counter_list: Vec::new(),
            kinds: HashMap::new(),
            kind_names: Vec::new(),
            calibrations: Calibrations::default(),
        }
    }

    pub fn default_profile(&self) -> Profile {
        self.default
    }

    pub fn profiles(&self) -> &[(String, Profile)] {
        &self.profiles
    }

    pub fn table(&self) -> &EncodingTable {
        &self.table
    }

    pub fn memo(&self) -> &Memo {
        &self.memo
    }

    pub fn memo_mut(&mut self) -> &mut Memo {
        &mut self.memo
    }

    pub fn calibrations(&self) -> &Calibrations {
        &self.calibrations
    }

    /// The profile of the longest matching prefix, else the default.
    pub fn profile_for(&self, model_id: &str) -> Profile {
        let mut best: Option<(&str, Profile)> = None;
        for (prefix, p) in &self.profiles {
            if model_id.starts_with(prefix.as_str())
                && best.is_none_or(|(b, _)| prefix.len() > b.len())
            {
                best = Some((prefix, *p));
            }
        }
        best.map_or(self.default, |(_, p)| p)
    }

    /// The counter of a key, resolved on first use (ids never change).
    pub fn counter_id(&mut self, key: &str) -> u32 {
        if let Some(&id) = self.counters.get(key) {
            return id;
        }
        let resolved = resolve(key, &self.table);
        let memo_name = resolved.memo_counter();
        let next = self.memo_ids.len() as u32;
        let memo = *self.memo_ids.entry(memo_name).or_insert(next);
        let counter = Counter {
            method: resolved.method,
            memo,
            profile: self.profile_for(resolved.model),
            calibration: resolved.calibration_key(),
        };
        let id = self.counter_list.len() as u32;
        self.counter_list.push(counter);
        self.counters.insert(key.to_owned(), id);
        id
    }

    pub fn counter(&self, id: u32) -> &Counter {
        &self.counter_list[id as usize]
    }

    /// The method of a key.
    pub fn method(&mut self, key: &str) -> Method {
        let id = self.counter_id(key);
        self.counter(id).method
    }

    /// The interned id of an item kind.
    pub fn kind(&mut self, kind: &str) -> u32 {
        if let Some(&id) = self.kinds.get(kind) {
            return id;
        }
        let id = self.kinds.len() as u32;
        self.kinds.insert(kind.to_owned(), id);
        self.kind_names.push(kind.to_owned());
        id
    }

    /// The raw count of a value through the memo. On a miss the heuristic
    /// asks only for the canonical length, an exact method for the bytes.
    #[inline]
    pub fn raw_counted(
        &mut self,
        counter: u32,
        kind: u32,
        digest: &[u8; 32],
        len: impl FnOnce() -> usize,
        bytes: impl FnOnce() -> Vec<u8>,
    ) -> CoreResult<i64> {
        let c = &self.counter_list[counter as usize];
        let key = MemoKey {
            model: c.memo,
            kind,
            digest: *digest,
        };
        let (method, profile) = (c.method, c.profile);
        let kind_names = &self.kind_names;
        self.memo.get_or_insert_with(key, || match method {
            Method::Heuristic => profile.raw(len()),
            Method::Exact(encoding) => exact_raw(encoding, &kind_names[kind as usize], &bytes()),
        })
    }

    /// [`EstimatorState::raw_counted`] of many values of one counter into
    /// `out`, the counter read once: `read` gives a value's kind and digest.
    pub fn raw_counted_each<T>(
        &mut self,
        counter: u32,
        values: &[T],
        read: impl Fn(&T) -> (u32, &[u8; 32]),
        len: impl Fn(&T) -> usize,
        bytes: impl Fn(&T) -> Vec<u8>,
        out: &mut Vec<i64>,
    ) -> CoreResult<()> {
        let c = &self.counter_list[counter as usize];
        let (model, method, profile) = (c.memo, c.method, c.profile);
        let (memo, kind_names) = (&mut self.memo, &self.kind_names);
        let key_of = |v: &T| {
            let (kind, digest) = read(v);
            MemoKey {
                model,
                kind,
                digest: *digest,
            }
        };
        // Lookups in a row that found their entry at the slot guessed.
        let mut guessed = 0usize;
        for (i, v) in values.iter().enumerate() {
            // Unless lookups run in insertion order (their slot guessed, in
            // a row), lookups ahead: the index entry of one far ahead, the
            // entry of one nearer (its index entry fetched by now).
            guessed = if memo.guessed() { guessed + 1 } else { 0 };
            if guessed < IN_ORDER {
                if let Some(ahead) = values.get(i + INDEX_AHEAD) {
                    memo.prefetch_index(&key_of(ahead));
                }
                if let Some(ahead) = values.get(i + NODE_AHEAD) {
                    memo.prefetch_node(&key_of(ahead));
                }
            }
            let key = key_of(v);
            out.push(memo.get_or_insert_with(key, || match method {
                Method::Heuristic => profile.raw(len(v)),
                Method::Exact(encoding) => {
                    exact_raw(encoding, &kind_names[key.kind as usize], &bytes(v))
                }
            })?);
        }
        Ok(())
    }

    /// The factor applied to raw sums of a counter.
    pub fn factor(&mut self, counter: u32) -> Ratio {
        let c = &self.counter_list[counter as usize];
        self.calibrations.factor(&c.calibration, c.two_sided())
    }

    /// `ceil(raw_sum * factor)` for a key, exactly in integers.
    pub fn corrected(&mut self, raw_sum: i64, key: &str) -> i128 {
        let id = self.counter_id(key);
        calibrate::apply(raw_sum, self.factor(id))
    }

    /// Record one response.
    pub fn reconcile(&mut self, key: &str, estimated: i64, actual: i64) -> CoreResult<()> {
        let id = self.counter_id(key);
        let c = &self.counter_list[id as usize];
        let (calibration, two_sided) = (c.calibration.clone(), c.two_sided());
        self.calibrations
            .reconcile(&calibration, two_sided, estimated, actual)
    }

    /// The reconciled sums of a key's calibration.
    pub fn reconciled(&mut self, key: &str) -> Reconciled {
        let id = self.counter_id(key);
        self.calibrations
            .sums(&self.counter_list[id as usize].calibration)
    }

    /// Set a calibration key's state outright (restoring a snapshot).
    pub fn set_calibration(&mut self, key: &str, sums: Reconciled, window: Vec<(u64, u64)>) {
        self.calibrations.set(key, sums, window);
    }

    /// The factor as a float; 1.0 before any reconcile.
    pub fn correction(&mut self, key: &str) -> f64 {
        let id = self.counter_id(key);
        let (num, den) = self.factor(id);
        num as f64 / den as f64
    }

    /// `A / E` unclamped; 1.0 before any reconcile.
    pub fn error_ratio(&mut self, key: &str) -> f64 {
        let r = self.reconciled(key);
        if r.estimated == 0 {
            1.0
        } else {
            r.actual as f64 / r.estimated as f64
        }
    }
}
