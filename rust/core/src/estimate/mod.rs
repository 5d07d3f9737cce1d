//! Token estimation: per-model profiles, the raw-estimate formula, the
//! bounded LRU memo and the exact-integer correction (ADR 0001); counting
//! methods, exact counts and two-sided calibration (ADR 0012).
//!
//! [`EstimatorState`] is plain data; the binding keeps it behind one mutex
//! and looks a whole history up under a single lock.

mod batch;
mod config;
mod memo;
mod memo_index;
mod prime;
mod snapshot;
#[cfg(test)]
mod tests;

pub use batch::{Fact, Measured, Measuring, Resolved};
pub use config::{
    check_count, check_raw_sum, check_reconcile, check_table, settings, Shape, Values, SETTINGS,
};
pub use memo::{Memo, MemoKey, PassThrough};
pub use prime::check_prime;
pub use snapshot::{check_max_version, restore, Snapshot, SNAPSHOT_VERSION, V1_KEYS, V2_KEYS};

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

mod state;
pub use state::{Counter, EstimatorState, Reconciled};
