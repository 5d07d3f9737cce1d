//! Token estimation: per-model profiles, the raw-estimate formula, the
//! bounded LRU memo and the exact-integer correction (ADR 0001).
//!
//! [`EstimatorState`] is plain data; the binding keeps it behind one mutex
//! and looks a whole history up under a single lock.

mod config;
mod memo;
#[cfg(test)]
mod tests;

pub use config::{
    check_count, check_raw_sum, check_reconcile, restore, settings, Shape, Snapshot, Values,
    SNAPSHOT_KEYS, SNAPSHOT_VERSION,
};
pub use memo::{Memo, MemoKey, PassThrough};

use std::collections::HashMap;

use crate::error::{CoreError, CoreResult};

/// Bytes per token and framing tokens per item for one model family.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Profile {
    pub bytes_per_token: f64,
    pub framing_tokens: i64,
}

impl Profile {
    pub fn new(bytes_per_token: f64, framing_tokens: i64) -> CoreResult<Self> {
        if !(bytes_per_token.is_finite() && bytes_per_token > 0.0) {
            return Err(CoreError::estimator(format!(
                "bytes_per_token must be a positive finite number, got {bytes_per_token}"
            )));
        }
        if framing_tokens < 0 {
            return Err(CoreError::estimator(format!(
                "framing_tokens must be a non-negative integer, got {framing_tokens}"
            )));
        }
        Ok(Profile {
            bytes_per_token,
            framing_tokens,
        })
    }

    /// `ceil(len / bytes_per_token) + framing_tokens`, the division in
    /// IEEE-754 double.
    #[inline]
    pub fn raw(&self, len: usize) -> CoreResult<i64> {
        let q = (len as f64 / self.bytes_per_token).ceil();
        let overflow = || CoreError::estimator("raw estimate overflows a 64-bit integer");
        if q >= 4.0e18 {
            return Err(overflow());
        }
        (q as i64)
            .checked_add(self.framing_tokens)
            .ok_or_else(overflow)
    }
}

/// `raw_sum` scaled by the model's reconciled `actual / estimated`, rounded
/// up, exactly in integers; unchanged when `estimated == 0` or
/// `actual <= estimated`.
#[inline]
pub fn corrected(raw_sum: i64, estimated: u64, actual: u64) -> i128 {
    if estimated == 0 || actual <= estimated {
        return raw_sum as i128;
    }
    let e = estimated as i128;
    // |raw_sum| < 2^63 and actual < 2^64: the product fits in i128.
    (raw_sum as i128 * actual as i128 + e - 1).div_euclid(e)
}

/// Cumulative reconciled sums of one model: `E` estimated, `A` actual.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reconciled {
    pub estimated: u64,
    pub actual: u64,
}

#[derive(Debug, Clone, Copy)]
struct ModelEntry {
    id: u32,
    profile: Profile,
}

/// Everything a `TokenEstimator` holds.
#[derive(Debug, Clone)]
pub struct EstimatorState {
    default: Profile,
    /// Prefix profiles in the order given.
    profiles: Vec<(String, Profile)>,
    memo: Memo,
    models: HashMap<String, ModelEntry>,
    kinds: HashMap<String, u32>,
    /// Per-model sums in first-reconcile order.
    corrections: Vec<(String, Reconciled)>,
    correction_index: HashMap<String, usize>,
}

impl EstimatorState {
    pub fn new(default: Profile, profiles: Vec<(String, Profile)>, memo_capacity: usize) -> Self {
        EstimatorState {
            default,
            profiles,
            memo: Memo::new(memo_capacity),
            models: HashMap::new(),
            kinds: HashMap::new(),
            corrections: Vec::new(),
            correction_index: HashMap::new(),
        }
    }

    pub fn default_profile(&self) -> Profile {
        self.default
    }

    pub fn profiles(&self) -> &[(String, Profile)] {
        &self.profiles
    }

    pub fn memo(&self) -> &Memo {
        &self.memo
    }

    pub fn memo_mut(&mut self) -> &mut Memo {
        &mut self.memo
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

    /// The interned id and profile of a model.
    pub fn model(&mut self, model_id: &str) -> (u32, Profile) {
        if let Some(e) = self.models.get(model_id) {
            return (e.id, e.profile);
        }
        let entry = ModelEntry {
            id: self.models.len() as u32,
            profile: self.profile_for(model_id),
        };
        self.models.insert(model_id.to_owned(), entry);
        (entry.id, entry.profile)
    }

    /// The interned id of an item kind.
    pub fn kind(&mut self, kind: &str) -> u32 {
        if let Some(&id) = self.kinds.get(kind) {
            return id;
        }
        let id = self.kinds.len() as u32;
        self.kinds.insert(kind.to_owned(), id);
        id
    }

    /// The raw estimate of canonical bytes with digest `digest`, through
    /// the memo; `len` is asked for only on a miss.
    #[inline]
    pub fn raw(
        &mut self,
        model: u32,
        profile: Profile,
        kind: u32,
        digest: &[u8; 32],
        len: impl FnOnce() -> usize,
    ) -> CoreResult<i64> {
        let key = MemoKey {
            model,
            kind,
            digest: *digest,
        };
        self.memo.get_or_insert_with(key, || profile.raw(len()))
    }

    pub fn reconciled(&self, model_id: &str) -> Reconciled {
        self.correction_index
            .get(model_id)
            .map_or_else(Reconciled::default, |&i| self.corrections[i].1)
    }

    pub fn corrections(&self) -> &[(String, Reconciled)] {
        &self.corrections
    }

    /// `corrected(raw_sum)` for `model_id`.
    pub fn corrected(&self, raw_sum: i64, model_id: &str) -> i128 {
        let r = self.reconciled(model_id);
        corrected(raw_sum, r.estimated, r.actual)
    }

    /// Add one response's estimated and actual token counts.
    pub fn reconcile(&mut self, model_id: &str, estimated: i64, actual: i64) -> CoreResult<()> {
        if estimated <= 0 {
            return Err(CoreError::estimator(format!(
                "estimated must be a positive integer, got {estimated}"
            )));
        }
        if actual < 0 {
            return Err(CoreError::estimator(format!(
                "actual must be a non-negative integer, got {actual}"
            )));
        }
        let current = self.reconciled(model_id);
        let next = Reconciled {
            estimated: current
                .estimated
                .checked_add(estimated as u64)
                .ok_or_else(|| CoreError::estimator("reconciled sums overflow 64 bits"))?,
            actual: current
                .actual
                .checked_add(actual as u64)
                .ok_or_else(|| CoreError::estimator("reconciled sums overflow 64 bits"))?,
        };
        self.set_reconciled(model_id, next);
        Ok(())
    }

    /// Set a model's sums outright (restoring a snapshot).
    pub fn set_reconciled(&mut self, model_id: &str, sums: Reconciled) {
        match self.correction_index.get(model_id) {
            Some(&i) => self.corrections[i].1 = sums,
            None => {
                self.correction_index
                    .insert(model_id.to_owned(), self.corrections.len());
                self.corrections.push((model_id.to_owned(), sums));
            }
        }
    }

    /// `max(1.0, A / E)`; 1.0 before any reconcile.
    pub fn correction(&self, model_id: &str) -> f64 {
        self.error_ratio(model_id).max(1.0)
    }

    /// `A / E` unclamped; 1.0 before any reconcile.
    pub fn error_ratio(&self, model_id: &str) -> f64 {
        let r = self.reconciled(model_id);
        if r.estimated == 0 {
            1.0
        } else {
            r.actual as f64 / r.estimated as f64
        }
    }
}
