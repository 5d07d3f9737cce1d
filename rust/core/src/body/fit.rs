//! The fit itself: reason, class caps, ladder, tool results, cut, body.

use super::{Block, BodyFit, BodyHost, BodyLimits, HistoryItem, Kind, Part, Reason};
use crate::calibrate::{apply, Ratio};
use crate::cut::{select_history, CutHost, PairValidator, NO_RESULT};
use crate::error::{CoreError, CoreResult};

fn overflow() -> CoreError {
    CoreError::estimator("raw estimate sum overflows a 64-bit integer")
}

#[inline]
fn add(a: i64, b: i64) -> CoreResult<i64> {
    a.checked_add(b).ok_or_else(overflow)
}

fn sum(values: &[i64]) -> CoreResult<i64> {
    values.iter().try_fold(0i64, |acc, &v| add(acc, v))
}

/// Region B measured, capped, yielded and cut; the body in block order.
pub fn fit_body<H: BodyHost>(
    limits: &BodyLimits,
    blocks: &[Block<'_>],
    history: &[HistoryItem<'_>],
    factor: Ratio,
    host: &mut H,
) -> Result<BodyFit, H::Error> {
    let c = |raw: i64| apply(raw, factor);
    let usable = limits.usable as i128;
    let mut steps: Vec<String> = Vec::new();

    let total = |kind: Kind| -> CoreResult<i64> {
        blocks
            .iter()
            .filter(|b| b.kind == kind)
            .try_fold(0i64, |acc, b| add(acc, sum(&b.raws)?))
    };
    let summary_raw = total(Kind::Summary)?;
    let ws_raw = total(Kind::WorkingState)?;
    let skills_raw = total(Kind::Skills)?;
    let fixed_raw = add(
        add(ws_raw, skills_raw)?,
        add(total(Kind::Fixed)?, total(Kind::Turn)?)?,
    )?;
    let over_cap = |cap: Option<i64>, raw: i64| cap.is_some_and(|t| c(raw) > t as i128);
    let ws = blocks.iter().find(|b| b.kind == Kind::WorkingState);
    let skills = blocks.iter().find(|b| b.kind == Kind::Skills);
    let mut reason = Reason::Fits;
    let mut compactable = false;
    if ws.is_some_and(|b| over_cap(b.max_tokens, ws_raw)) {
        reason = Reason::WorkingStateExceedsCap;
    } else if skills.is_some_and(|b| {
        b.max_items.is_some_and(|m| b.len as i128 > m as i128) || over_cap(b.max_tokens, skills_raw)
    }) {
        reason = Reason::SkillBodiesExceedCap;
    } else if c(fixed_raw) > usable {
        reason = Reason::FixedBodyExceedsContextWindow;
    } else if c(add(fixed_raw, summary_raw)?) > usable {
        reason = Reason::BodyExceedsContextWindow;
        compactable = limits.summary_compactable;
    }

    // The yielding blocks: how many items (passages) or lines stay, and their raw.
    let mut kept: Vec<usize> = blocks.iter().map(|b| b.len).collect();
    let mut yield_raw: Vec<i64> = blocks
        .iter()
        .map(|b| sum(&b.raws))
        .collect::<CoreResult<_>>()?;
    let yielding: Vec<usize> = (0..blocks.len())
        .filter(|&at| blocks[at].kind.yields())
        .collect();

    // Drop the last line of lines block `at`.
    let shorten = |at: usize, kept: &mut [usize], yield_raw: &mut [i64], host: &mut H| {
        kept[at] -= 1;
        yield_raw[at] = if kept[at] > 0 {
            host.lines_raw(at, kept[at])?
        } else {
            0
        };
        Ok::<(), H::Error>(())
    };

    // Class caps first (absolute, independent of pressure), block by block.
    for &at in &yielding {
        let b = &blocks[at];
        if b.kind == Kind::Passages {
            while kept[at] > 0
                && (b.max_items.is_some_and(|m| kept[at] as i128 > m as i128)
                    || over_cap(b.max_tokens, sum(&b.raws[..kept[at]])?))
            {
                kept[at] -= 1;
                steps.push(format!("{}_over_cap:{}", b.class, b.ids[kept[at]]));
            }
            yield_raw[at] = sum(&b.raws[..kept[at]])?;
        } else if b.max_tokens.is_some() {
            let mut dropped = 0;
            while kept[at] > 0 && over_cap(b.max_tokens, yield_raw[at]) {
                shorten(at, &mut kept, &mut yield_raw, host)?;
                dropped += 1;
            }
            if dropped > 0 {
                steps.push(format!("{}_lines_over_cap:{dropped}", b.class));
            }
        }
    }

    let mut history_raws: Vec<i64> = history.iter().map(|h| h.raw).collect();
    let mut history_raw = sum(&history_raws)?;
    let base_raw = add(fixed_raw, summary_raw)?;
    let yielded = |yield_raw: &[i64]| -> CoreResult<i64> {
        yielding
            .iter()
            .try_fold(0i64, |acc, &at| add(acc, yield_raw[at]))
    };
    let over = |yield_raw: &[i64], history_raw: i64| -> CoreResult<bool> {
        Ok(c(add(add(base_raw, yielded(yield_raw)?)?, history_raw)?) > usable)
    };

    // The ladder, each rung only while the body is still over.
    for &at in &yielding {
        let b = &blocks[at];
        if b.kind == Kind::Passages {
            while kept[at] > 0 && over(&yield_raw, history_raw)? {
                kept[at] -= 1;
                yield_raw[at] -= b.raws[kept[at]];
                steps.push(format!("{}_dropped:{}", b.class, b.ids[kept[at]]));
            }
        } else {
            let mut dropped = 0;
            while kept[at] > 0 && over(&yield_raw, history_raw)? {
                shorten(at, &mut kept, &mut yield_raw, host)?;
                dropped += 1;
            }
            if dropped > 0 {
                steps.push(format!("{}_lines_dropped:{dropped}", b.class));
            }
        }
    }

    // Tool results are part of history: while the whole history is within
    // the tool-result cap and nothing is over, no result needs looking at.
    let tool_cap = limits.tool_cap as i128;
    let history_cap = limits.history_cap as i128;
    let mut results: Vec<usize> = Vec::new();
    let mut result_raw: i64 = 0;
    if c(history_raw) > tool_cap || over(&yield_raw, history_raw)? || c(history_raw) > history_cap {
        results = (0..history.len())
            .filter(|&i| matches!(history[i].role, crate::cut::ToolRole::Result(_)))
            .collect();
        for &i in &results {
            result_raw = add(result_raw, history_raws[i])?;
        }
    }
    let mut t = Truncation {
        results: &results,
        next: 0,
        truncated: vec![false; history.len()],
        history_raws: &mut history_raws,
        history_raw: &mut history_raw,
        result_raw,
    };
    let mut lacking = false;
    match t.run(host, |r, _| Ok(c(r) > tool_cap))? {
        Some(0) => {}
        Some(count) => steps.push(format!("tool_results_over_cap:{count}")),
        None => lacking = true,
    }
    let mut count = 0;
    if !lacking {
        match t.run(host, |_, h| Ok(over(&yield_raw, h)? || c(h) > history_cap))? {
            Some(n) => count = n,
            None => lacking = true,
        }
    }
    let truncated = t.truncated;
    if lacking {
        return Ok(BodyFit::missing(host.lacking_pointers(&results)?));
    }
    if count > 0 {
        steps.push(format!("tool_results_truncated:{count}"));
    }

    let other_raw = add(base_raw, yielded(&yield_raw)?)?;
    let history_budget = history_cap.min(usable - c(other_raw)).max(0);
    let mut cut = 0;
    if !history.is_empty() {
        let mut measured = Measured {
            history,
            raws: &history_raws,
            result_of: Vec::new(),
            factor,
        };
        cut = select_history(&mut measured, limits.summary_floor, history_budget)?;
    }
    if cut > 0 {
        steps.push(format!("history_cut:{cut}"));
        if reason == Reason::Fits {
            reason = Reason::HistoryRequiresCompaction;
            compactable = true;
        }
    }

    // The body, in block (the region table's) order.
    let mut body = Vec::new();
    for (at, b) in blocks.iter().enumerate() {
        match b.kind {
            Kind::History => body.extend((cut..history.len()).map(|i| {
                if truncated[i] {
                    Part::Pointer(i)
                } else {
                    Part::History(i)
                }
            })),
            Kind::Lines if kept[at] > 0 => body.push(Part::Item {
                block: at,
                item: kept[at] - 1,
            }),
            Kind::Lines => {}
            _ => body.extend((0..kept[at]).map(|item| Part::Item { block: at, item })),
        }
    }
    let retained = history_raw - sum(&history_raws[..cut])?;
    Ok(BodyFit {
        body,
        body_raw: add(other_raw, retained)?,
        reason,
        compactable,
        cut,
        history_budget,
        steps,
        missing: Vec::new(),
    })
}

/// The measured history as the cut reads it.
struct Measured<'a, 'b> {
    history: &'b [HistoryItem<'a>],
    raws: &'b [i64],
    result_of: Vec<usize>,
    factor: Ratio,
}

impl CutHost for Measured<'_, '_> {
    type Error = CoreError;

    fn validate_pairs(&mut self) -> CoreResult<()> {
        let mut result_of = std::mem::take(&mut self.result_of);
        let mut pairs = PairValidator::new(&mut result_of, self.history.len() / 4);
        for h in self.history {
            pairs.push_hashed(h.role, h.hash)?;
        }
        pairs.finish()?;
        self.result_of = result_of;
        Ok(())
    }

    fn measure(&mut self) -> CoreResult<()> {
        Ok(())
    }

    fn raws(&self) -> &[i64] {
        self.raws
    }

    fn result_of(&self) -> &[usize] {
        debug_assert!(self
            .result_of
            .iter()
            .all(|&r| r == NO_RESULT || r < self.raws.len()));
        &self.result_of
    }

    fn corrected(&self, raw_sum: i64) -> CoreResult<i128> {
        Ok(apply(raw_sum, self.factor))
    }

    fn seq(&self, index: usize) -> CoreResult<Option<i64>> {
        Ok(self.history[index].seq)
    }
}

/// Tool results truncated to their pointers, oldest first.
struct Truncation<'a> {
    /// The history indices of tool results, oldest first.
    results: &'a [usize],
    /// The next result to look at.
    next: usize,
    truncated: Vec<bool>,
    history_raws: &'a mut [i64],
    history_raw: &'a mut i64,
    result_raw: i64,
}

impl Truncation<'_> {
    /// Truncate results while `go(result_raw, history_raw)`: how many were,
    /// or `None` when a pointer is lacking.
    fn run<H: BodyHost>(
        &mut self,
        host: &mut H,
        mut go: impl FnMut(i64, i64) -> CoreResult<bool>,
    ) -> Result<Option<usize>, H::Error> {
        let mut count = 0;
        while go(self.result_raw, *self.history_raw)? {
            match self.next_one(host)? {
                Some(true) => count += 1,
                Some(false) => break,
                None => return Ok(None),
            }
        }
        Ok(Some(count))
    }

    /// Truncate the oldest untruncated result that gets smaller:
    /// `Some(true)` when one did, `Some(false)` when none is left, `None`
    /// when a pointer is lacking.
    fn next_one<H: BodyHost>(&mut self, host: &mut H) -> Result<Option<bool>, H::Error> {
        while self.next < self.results.len() {
            let i = self.results[self.next];
            let Some(new_raw) = host.pointer_raw(i)? else {
                return Ok(None);
            };
            self.next += 1;
            if new_raw < self.history_raws[i] {
                let delta = new_raw - self.history_raws[i];
                self.result_raw = add(self.result_raw, delta)?;
                *self.history_raw = add(*self.history_raw, delta)?;
                self.history_raws[i] = new_raw;
                self.truncated[i] = true;
                return Ok(Some(true));
            }
        }
        Ok(Some(false))
    }
}
