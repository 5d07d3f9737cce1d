//! Tool-pair validation and the deterministic history cut (ADR 0001): one
//! backward pass for the fit, a backward floor scan from the end to the
//! fit, one forward pass for pair reach.
//!
//! [`select_history`] is the whole orchestration; a [`CutHost`] (the
//! binding over Python items, or the turn body's fit) supplies the pairs,
//! the raw estimates, the correction and each item's `seq` when asked.

mod pairs;
#[cfg(test)]
mod tests;

pub use pairs::{
    fnv1a, pair_foreign, validate_tool_pairs, validate_tool_pairs_into, PairValidator, ToolRole,
    NO_RESULT, REASON_CALL_WITHOUT_RESULT, REASON_DUPLICATE_CALL, REASON_RESULT_WITHOUT_CALL,
};

use crate::error::CoreError;

/// The class `kind`s of conversation items (`ctxengine.model.ITEM_TYPES`):
/// what `select_history` and `validate_tool_pairs` accept, and the two of
/// them whose pairing they check.
pub const CONVERSATION_KINDS: [&str; 6] = [
    "system_message",
    "user_message",
    "assistant_message",
    "tool_call",
    "tool_result",
    "reasoning",
];

/// What the cut reads of a history, in the order it asks.
pub trait CutHost {
    type Error: From<CoreError>;
    /// Check the tool pairs: the first violation in scan order is the error.
    fn validate_pairs(&mut self) -> Result<(), Self::Error>;
    /// Measure every item's raw estimate (after the pairs).
    fn measure(&mut self) -> Result<(), Self::Error>;
    /// One raw estimate per item (after [`CutHost::measure`]).
    fn raws(&self) -> &[i64];
    /// For each item, the index of its call's result ([`NO_RESULT`] for
    /// non-calls), after [`CutHost::validate_pairs`].
    fn result_of(&self) -> &[usize];
    /// `corrected(raw_sum)` for the model.
    fn corrected(&self, raw_sum: i64) -> Result<i128, Self::Error>;
    /// Item `index`'s `seq` (`None` when it has none, or one above any floor).
    fn seq(&self, index: usize) -> Result<Option<i64>, Self::Error>;
    /// The floor scan: one past the last item in `from..count` whose `seq`
    /// is at most `floor`, reading backwards from `count` (0 if none). A
    /// host may read its items in one loop instead of one [`CutHost::seq`]
    /// each.
    fn floor_bound(&self, from: usize, count: usize, floor: i64) -> Result<usize, Self::Error> {
        for i in (from..count).rev() {
            if matches!(self.seq(i)?, Some(seq) if seq <= floor) {
                return Ok(i + 1);
            }
        }
        Ok(0)
    }
}

/// The cut index: `items[cut..]` is the largest suffix that fits
/// `history_tokens`, holds no item with `seq <= summary_floor` (`None`: no
/// floor) and splits no tool pair.
pub fn select_history<H: CutHost>(
    host: &mut H,
    summary_floor: Option<i64>,
    history_tokens: i128,
) -> Result<usize, H::Error> {
    host.validate_pairs()?;
    host.measure()?;
    let raws = host.raws();
    let fit = fit_index(
        raws,
        history_tokens,
        |sum| host.corrected(sum),
        || CoreError::estimator("raw estimate sum overflows a 64-bit integer").into(),
    )?;
    // Only an item at or after the fit can move the cut: the floor scan
    // reads backwards from the end to the fit, up to the first hit.
    let floor_bound = match summary_floor {
        Some(floor) => host.floor_bound(fit, raws.len(), floor)?,
        None => 0,
    };
    Ok(pair_reach(fit.max(floor_bound), host.result_of()))
}

/// The cut of a history already measured and paired: [`select_history`]
/// over `raws`, `seqs` and `result_of` (the interop cuts), at least
/// `not_before` (after a foreign history's last orphan, [`pair_foreign`]).
pub fn cut_after_validation(
    raws: &[i64],
    seqs: &[Option<i64>],
    result_of: &[usize],
    summary_floor: Option<i64>,
    history_tokens: i128,
    corrected: impl Fn(i64) -> i128,
    not_before: usize,
) -> Result<usize, CoreError> {
    struct Measured<'a, F> {
        raws: &'a [i64],
        seqs: &'a [Option<i64>],
        result_of: &'a [usize],
        corrected: F,
    }
    impl<F: Fn(i64) -> i128> CutHost for Measured<'_, F> {
        type Error = CoreError;
        fn validate_pairs(&mut self) -> Result<(), CoreError> {
            Ok(())
        }
        fn measure(&mut self) -> Result<(), CoreError> {
            Ok(())
        }
        fn raws(&self) -> &[i64] {
            self.raws
        }
        fn result_of(&self) -> &[usize] {
            self.result_of
        }
        fn corrected(&self, raw_sum: i64) -> Result<i128, CoreError> {
            Ok((self.corrected)(raw_sum))
        }
        fn seq(&self, index: usize) -> Result<Option<i64>, CoreError> {
            Ok(self.seqs.get(index).copied().flatten())
        }
    }
    let mut host = Measured {
        raws,
        seqs,
        result_of,
        corrected,
    };
    let cut = select_history(&mut host, summary_floor, history_tokens)?;
    Ok(if cut >= not_before {
        cut
    } else {
        pair_reach(not_before, result_of)
    })
}

/// The smallest `c` with `corrected(sum(raw[c..])) <= history_tokens`
/// (`raw.len()` if none), in one backward pass. Raw estimates are
/// non-negative, so the corrected suffix sum only grows as `c` falls.
pub fn fit_index<E>(
    raw: &[i64],
    history_tokens: i128,
    mut corrected: impl FnMut(i64) -> Result<i128, E>,
    overflow: impl Fn() -> E,
) -> Result<usize, E> {
    let mut fit = raw.len();
    let mut sum: i64 = 0;
    for (i, &r) in raw.iter().enumerate().rev() {
        sum = sum.checked_add(r).ok_or_else(&overflow)?;
        if corrected(sum)? <= history_tokens {
            fit = i;
        } else {
            break;
        }
    }
    Ok(fit)
}

/// Move `cut` later while a call before it has its result at or after it.
pub fn pair_reach(cut: usize, result_of: &[usize]) -> usize {
    let mut c = cut;
    let mut reach: Option<usize> = None; // latest result of any call before i
    for (i, &r) in result_of.iter().enumerate() {
        if i >= c {
            match reach {
                Some(m) if m >= c => c = m + 1,
                _ => return c,
            }
        }
        if r != NO_RESULT {
            reach = Some(reach.map_or(r, |m| m.max(r)));
        }
    }
    match reach {
        Some(m) if m >= c => m + 1,
        _ => c,
    }
}
