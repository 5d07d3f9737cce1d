//! The estimator's snapshot formats (ADR 0001, ADR 0012): version 1 (the
//! settings and the reconciled sums) and version 2 (adds the caller's
//! counting table and the calibration samples). [`restore`] reads both;
//! [`EstimatorState::snapshot`] writes the lowest version that holds the
//! state. The twin is `ctxengine/reference/snapshot.py`: the same checks in
//! the same order and the same words.

use super::config::{check_count, check_count_max, check_settings, check_table, fail};
use super::{EstimatorState, Reconciled, Shape, Values};
use crate::calibrate;
use crate::data::Data;
use crate::tokenize::Method;

/// The newest snapshot format this core writes and reads.
pub const SNAPSHOT_VERSION: i64 = 2;
/// Version 1's keys, sorted (the order of the "missing" message).
pub const V1_KEYS: [&str; 6] = [
    "bytes_per_token",
    "corrections",
    "framing_tokens",
    "memo_capacity",
    "profiles",
    "version",
];
/// Version 2's keys, sorted.
pub const V2_KEYS: [&str; 8] = [
    "bytes_per_token",
    "corrections",
    "encodings",
    "framing_tokens",
    "memo_capacity",
    "profiles",
    "samples",
    "version",
];

/// One calibration key's sample window, oldest first.
pub type Window = Vec<(u64, u64)>;

/// What `snapshot()` returns: the settings and the calibration (not the memo).
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// 1 or 2; `encodings` and `samples` are written only in version 2.
    pub version: i64,
    pub bytes_per_token: f64,
    pub framing_tokens: i64,
    pub profiles: Vec<(String, super::Profile)>,
    pub memo_capacity: usize,
    /// Calibration key -> sums, in first-reconcile order.
    pub corrections: Vec<(String, Reconciled)>,
    /// The caller's counting table, in order.
    pub encodings: Vec<(String, Method)>,
    /// Calibration key -> its window, for the non-empty windows.
    pub samples: Vec<(String, Window)>,
}

impl Snapshot {
    /// The dict `snapshot()` returns, keys in the order both backends write
    /// them (`encodings` and `samples` in version 2 only).
    pub fn to_data(&self) -> Data {
        let pair = |a: u64, b: u64| Data::List(vec![Data::int(a), Data::int(b)]);
        let mut d = vec![
            ("version", Data::int(self.version)),
            ("bytes_per_token", Data::Float(self.bytes_per_token)),
            ("framing_tokens", Data::int(self.framing_tokens)),
            (
                "profiles",
                Data::dict(self.profiles.iter().map(|(prefix, p)| {
                    let p = vec![Data::Float(p.bytes_per_token), Data::int(p.framing_tokens)];
                    (prefix.as_str(), Data::List(p))
                })),
            ),
            ("memo_capacity", Data::int(self.memo_capacity as u64)),
            (
                "corrections",
                Data::dict(
                    (self.corrections.iter())
                        .map(|(key, s)| (key.as_str(), pair(s.estimated, s.actual))),
                ),
            ),
        ];
        if self.version >= 2 {
            let encodings = self.encodings.iter();
            let samples = self.samples.iter().map(|(key, window)| {
                let pairs = window.iter().map(|&(e, a)| pair(e, a)).collect();
                (key.as_str(), Data::List(pairs))
            });
            let encodings = encodings.map(|(prefix, m)| (prefix.as_str(), Data::from(m.name())));
            d.push(("encodings", Data::dict(encodings)));
            d.push(("samples", Data::dict(samples)));
        }
        Data::dict(d)
    }
}

/// `snapshot()`'s `max_version`: 1 or 2 (`None`: the newest).
pub fn check_max_version<H: Values>(h: &mut H, v: Option<&H::Value>) -> Result<i64, H::Error> {
    let Some(v) = v else {
        return Ok(SNAPSHOT_VERSION);
    };
    match h.shape(v)? {
        Shape::Int {
            value: Ok(n @ (1 | 2)),
            ..
        } => Ok(n),
        _ => fail(format!("max_version: expected 1 or 2, got {}", h.repr(v)?)),
    }
}

impl EstimatorState {
    /// Version 1 when that holds everything (or `max_version` is 1: the table
    /// and the samples are then left out, the sums kept), else version 2.
    pub fn snapshot(&self, max_version: i64) -> Snapshot {
        let default = self.default_profile();
        let mut corrections = Vec::new();
        let mut samples = Vec::new();
        for (key, sums, window) in self.calibrations().iter() {
            corrections.push((key.to_owned(), sums));
            if !window.is_empty() {
                samples.push((key.to_owned(), window.to_vec()));
            }
        }
        let encodings = self.table().extra().to_vec();
        let needs_v2 = !encodings.is_empty()
            || !samples.is_empty()
            || corrections.iter().any(|(k, _)| k.contains('#'));
        let version = if needs_v2 && max_version >= 2 { 2 } else { 1 };
        if version == 1 {
            samples.clear();
        }
        Snapshot {
            version,
            bytes_per_token: default.bytes_per_token,
            framing_tokens: default.framing_tokens,
            profiles: self.profiles().to_vec(),
            memo_capacity: self.memo().capacity(),
            corrections,
            encodings: if version == 2 { encodings } else { Vec::new() },
            samples,
        }
    }
}

/// A key of `corrections` or `samples`: a string without a lone surrogate.
fn calibration_key<H: Values>(h: &mut H, key: &H::Value, place: &str) -> Result<String, H::Error> {
    match h.shape(key)? {
        Shape::Str(Some(text)) => Ok(text),
        Shape::Str(None) => fail(format!("{place}: lone surrogate in model id")),
        _ => fail(format!("{place}: model id is not a string")),
    }
}

/// A list or tuple of exactly two elements.
fn pair<H: Values>(h: &mut H, v: &H::Value) -> Result<Option<[H::Value; 2]>, H::Error> {
    Ok(match h.shape(v)? {
        Shape::Sequence(items) => <[H::Value; 2]>::try_from(items).ok(),
        _ => None,
    })
}

/// The version a snapshot says it is when it is an int (`None` past 64
/// bits), and where it is among the members.
fn declared_version<H: Values>(
    h: &mut H,
    members: &[(H::Value, H::Value)],
) -> Result<Option<(Option<i64>, usize)>, H::Error> {
    for (at, (key, value)) in members.iter().enumerate() {
        if matches!(h.shape(key)?, Shape::Str(Some(ref k)) if k == "version") {
            return Ok(match h.shape(value)? {
                Shape::Int { value: n, .. } => Some((n.ok(), at)),
                _ => None,
            });
        }
    }
    Ok(None)
}

/// An estimator's state from a `snapshot()` of any version (either backend's).
pub fn restore<H: Values>(h: &mut H, snapshot: &H::Value) -> Result<EstimatorState, H::Error> {
    let Shape::Mapping(members) = h.shape(snapshot)? else {
        let name = h.type_name(snapshot);
        return fail(format!("snapshot: expected a mapping, got {name}"));
    };
    let declared = declared_version(h, &members)?;
    if let Some((n, at)) = declared {
        if !matches!(n, Some(1 | 2)) {
            let shown = h.repr(&members[at].1)?;
            return fail(format!("snapshot: unsupported version {shown}"));
        }
    }
    let two = matches!(declared, Some((Some(2), _)));
    // The keys of the version it says it is (version 1's for anything else).
    let keys: &[&str] = if two { &V2_KEYS } else { &V1_KEYS };
    let mut found: Vec<Option<usize>> = vec![None; keys.len()];
    let mut unknown: Vec<String> = Vec::new();
    for (at, (key, _)) in members.iter().enumerate() {
        let known = match h.shape(key)? {
            Shape::Str(Some(name)) => keys.iter().position(|k| *k == name),
            _ => None,
        };
        match known {
            Some(i) => found[i] = Some(at),
            None => unknown.push(h.text(key)?),
        }
    }
    let missing: Vec<&str> = keys
        .iter()
        .zip(&found)
        .filter(|(_, f)| f.is_none())
        .map(|(k, _)| *k)
        .collect();
    if !missing.is_empty() {
        return fail(format!("snapshot: missing {}", missing.join(", ")));
    }
    if !unknown.is_empty() {
        unknown.sort();
        return fail(format!("snapshot: unknown key {}", unknown.join(", ")));
    }
    let field = |name: &str| {
        let i = keys.iter().position(|k| *k == name).unwrap_or(0);
        &members[found[i].unwrap_or(0)].1
    };
    if declared.is_none() {
        let version = field("version");
        return fail(format!(
            "snapshot: unsupported version {}",
            h.repr(version)?
        ));
    }
    let (default, profiles, capacity) = check_settings(
        h,
        Some(field("bytes_per_token")),
        Some(field("framing_tokens")),
        Some(field("profiles")),
        Some(field("memo_capacity")),
        "snapshot.",
    )?;
    let corrections = read_corrections(h, field("corrections"))?;
    let (table, mut windows) = if two {
        let table = check_table(h, field("encodings"), "snapshot.encodings")?;
        (table, read_samples(h, field("samples"), &corrections)?)
    } else {
        (Default::default(), Vec::new())
    };
    let mut state = EstimatorState::with_table(default, profiles, capacity, table);
    for (key, sums) in corrections {
        let window = windows
            .iter()
            .position(|(k, _)| *k == key)
            .map(|i| windows.swap_remove(i).1)
            .unwrap_or_default();
        state.set_calibration(&key, sums, window);
    }
    Ok(state)
}

fn read_corrections<H: Values>(
    h: &mut H,
    corrections: &H::Value,
) -> Result<Vec<(String, Reconciled)>, H::Error> {
    let Shape::Mapping(corrections) = h.shape(corrections)? else {
        return fail("snapshot.corrections: expected a mapping".to_owned());
    };
    let mut out: Vec<(String, Reconciled)> = Vec::new();
    for (key, sums) in corrections {
        let place = format!("snapshot.corrections[{}]", h.repr(&key)?);
        let key = calibration_key(h, &key, &place)?;
        let Some([e, a]) = pair(h, &sums)? else {
            return fail(format!("{place}: expected [estimated, actual]"));
        };
        let sums = Reconciled {
            estimated: check_count(h, &e, &format!("{place}.estimated"))? as u64,
            actual: check_count(h, &a, &format!("{place}.actual"))? as u64,
        };
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = sums,
            None => out.push((key, sums)),
        }
    }
    Ok(out)
}

fn read_samples<H: Values>(
    h: &mut H,
    samples: &H::Value,
    corrections: &[(String, Reconciled)],
) -> Result<Vec<(String, Window)>, H::Error> {
    let Shape::Mapping(samples) = h.shape(samples)? else {
        return fail("snapshot.samples: expected a mapping".to_owned());
    };
    let mut out: Vec<(String, Window)> = Vec::new();
    for (key, window) in samples {
        let place = format!("snapshot.samples[{}]", h.repr(&key)?);
        let key = calibration_key(h, &key, &place)?;
        if !corrections.iter().any(|(k, _)| *k == key) {
            return fail(format!("{place}: no reconciled sums for this model"));
        }
        let items = match h.shape(&window)? {
            Shape::Sequence(items) if items.len() <= calibrate::WINDOW => items,
            _ => {
                return fail(format!(
                    "{place}: expected at most {} [estimated, actual] pairs",
                    calibrate::WINDOW
                ))
            }
        };
        let mut pairs = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let Some([e, a]) = pair(h, item)? else {
                return fail(format!("{place}[{i}]: expected [estimated, actual]"));
            };
            let at = format!("{place}[{i}]");
            let e = check_count_max(
                h,
                &e,
                &format!("{at}.estimated"),
                calibrate::STORED_MAX as i64,
            )?;
            let a = check_count_max(h, &a, &format!("{at}.actual"), calibrate::SAMPLE_MAX as i64)?;
            if e == 0 {
                return fail(format!("{at}.estimated: must be positive, got 0"));
            }
            pairs.push((e as u64, a as u64));
        }
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = pairs,
            None => out.push((key, pairs)),
        }
    }
    Ok(out)
}
