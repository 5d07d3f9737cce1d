//! Region B's measuring, capping, yielding and cut (ADR 0001, "Assembly hot
//! path"; the yield ladder of ADR 0003), over numbers only.
//!
//! The reference `fit_body` (`ctxengine/reference/assembly.py`) is the
//! specification: the same checks, loops and steps in the same order. The
//! two operations that need the caller's objects — re-rendering a shortened
//! recall block and truncating a history tool result to a pointer — go
//! through [`BodyHost`], called at exactly the points the reference calls its
//! callbacks.

use crate::calibrate::{apply, Ratio};
use crate::cut::{fit_index, floor_bound, pair_reach};
use crate::error::{CoreError, CoreResult};

/// The absolute numbers of the body, in the order of the reference's `LIMITS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub usable: i128,
    pub history_cap: i128,
    pub tool_cap: i128,
    pub working_state_cap: i128,
    pub skill_items_cap: i128,
    pub skill_tokens_cap: i128,
    pub knowledge_items_cap: i128,
    pub knowledge_tokens_cap: i128,
    pub recall_cap: i128,
    /// Items with `seq <= summary_floor` are never retained (`i64::MIN`: none).
    pub summary_floor: i64,
    pub summary_compactable: bool,
}

/// The raw estimates of everything in the body, measured by the caller.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    /// One per history item (rendered); truncation rewrites entries.
    pub history: Vec<i64>,
    /// `seq` of each history item (`None` when not an int).
    pub history_seqs: Vec<Option<i64>>,
    /// Indices of the history items that are tool results, in order.
    pub tool_results: Vec<usize>,
    pub turn: i64,
    pub summary: i64,
    pub skills: i64,
    pub skill_count: usize,
    pub working_state: i64,
    pub corrections: i64,
    pub metadata: i64,
    /// One per knowledge passage, highest ranked first.
    pub knowledge: Vec<i64>,
    pub recall_lines: usize,
    pub recall: i64,
}

/// Why the body does (not) fit; the names are the `Pressure.reason` strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Fits,
    HistoryRequiresCompaction,
    WorkingStateExceedsCap,
    FixedBodyExceedsContextWindow,
    BodyExceedsContextWindow,
    SkillBodiesExceedCap,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Fits => "fits",
            Reason::HistoryRequiresCompaction => "history_requires_compaction",
            Reason::WorkingStateExceedsCap => "working_state_exceeds_cap",
            Reason::FixedBodyExceedsContextWindow => "fixed_body_exceeds_context_window",
            Reason::BodyExceedsContextWindow => "body_exceeds_context_window",
            Reason::SkillBodiesExceedCap => "skill_bodies_exceed_cap",
        }
    }
}

/// One yield step, in the order taken. Knowledge steps name the passage by
/// its index in the input; the caller formats the passage id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    KnowledgeOverCap(usize),
    RecallLinesOverCap(usize),
    KnowledgeDropped(usize),
    RecallLinesDropped(usize),
    ToolResultsOverCap(usize),
    ToolResultsTruncated(usize),
    HistoryCut(usize),
}

impl Step {
    /// The step's name (before the `:`).
    pub fn name(self) -> &'static str {
        match self {
            Step::KnowledgeOverCap(_) => "knowledge_over_cap",
            Step::RecallLinesOverCap(_) => "recall_lines_over_cap",
            Step::KnowledgeDropped(_) => "knowledge_dropped",
            Step::RecallLinesDropped(_) => "recall_lines_dropped",
            Step::ToolResultsOverCap(_) => "tool_results_over_cap",
            Step::ToolResultsTruncated(_) => "tool_results_truncated",
            Step::HistoryCut(_) => "history_cut",
        }
    }
}

/// What the fit decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyFit {
    pub reason: Reason,
    pub compactable: bool,
    pub steps: Vec<Step>,
    /// The first `knowledge_kept` passages stay.
    pub knowledge_kept: usize,
    /// The first `recall_lines` recall lines stay (the host holds the block).
    pub recall_lines: usize,
    /// History indices whose pointer replaced the rendered item, in order.
    pub truncated: Vec<usize>,
    /// `history[cut..]` is retained.
    pub cut: usize,
    pub history_budget: i128,
    pub body_raw: i64,
}

/// The caller's side of the fit.
pub trait BodyHost {
    type Error: From<CoreError>;

    /// Keep only the first `lines` recall lines: re-render the recall block
    /// (none when `lines == 0`) and return its raw estimate.
    fn shorten_recall(&mut self, lines: usize) -> Result<i64, Self::Error>;

    /// The raw estimate of history item `index` truncated to its pointer.
    fn pointer_raw(&mut self, index: usize) -> Result<i64, Self::Error>;

    /// For each history item, the index of its tool call's result
    /// ([`crate::cut::NO_RESULT`] for non-calls); the pairing error if the
    /// history's tool pairs are invalid.
    fn pairs(&mut self) -> Result<&[usize], Self::Error>;
}

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

/// Region B measured, capped, yielded and cut.
pub fn fit_body<H: BodyHost>(
    limits: &Limits,
    mut m: Measured,
    factor: Ratio,
    host: &mut H,
) -> Result<BodyFit, H::Error> {
    let c = |raw: i64| apply(raw, factor);
    let mut steps = Vec::new();

    let fixed_raw = [m.skills, m.working_state, m.corrections, m.metadata, m.turn]
        .iter()
        .try_fold(0i64, |acc, &v| add(acc, v))?;
    let mut reason = Reason::Fits;
    let mut compactable = false;
    if c(m.working_state) > limits.working_state_cap {
        reason = Reason::WorkingStateExceedsCap;
    } else if m.skill_count as i128 > limits.skill_items_cap
        || c(m.skills) > limits.skill_tokens_cap
    {
        reason = Reason::SkillBodiesExceedCap;
    } else if c(fixed_raw) > limits.usable {
        reason = Reason::FixedBodyExceedsContextWindow;
    } else if c(add(fixed_raw, m.summary)?) > limits.usable {
        reason = Reason::BodyExceedsContextWindow;
        compactable = limits.summary_compactable;
    }

    // Class caps first (absolute, independent of pressure). (A negative
    // item cap empties the list here; the reference then fails popping an
    // empty list, which its callers check for before.)
    let mut kept = m.knowledge.len();
    while kept > 0 {
        let over_items = kept as i128 > limits.knowledge_items_cap;
        if !over_items && c(sum(&m.knowledge[..kept])?) <= limits.knowledge_tokens_cap {
            break;
        }
        kept -= 1;
        steps.push(Step::KnowledgeOverCap(kept));
    }
    let mut lines = m.recall_lines;
    let mut recall_raw = m.recall;
    let mut over_cap = 0;
    while lines > 0 && c(recall_raw) > limits.recall_cap {
        lines -= 1;
        recall_raw = host.shorten_recall(lines)?;
        over_cap += 1;
    }
    if over_cap > 0 {
        steps.push(Step::RecallLinesOverCap(over_cap));
    }

    let mut knowledge_raw = sum(&m.knowledge[..kept])?;
    let mut history_raw = sum(&m.history)?;
    let base_raw = add(fixed_raw, m.summary)?;
    let total = |knowledge: i64, recall: i64, history: i64| -> CoreResult<i64> {
        add(add(add(base_raw, knowledge)?, recall)?, history)
    };

    // The ladder, each rung only while the body is still over.
    while kept > 0 && c(total(knowledge_raw, recall_raw, history_raw)?) > limits.usable {
        kept -= 1;
        knowledge_raw -= m.knowledge[kept];
        steps.push(Step::KnowledgeDropped(kept));
    }
    let mut dropped = 0;
    while lines > 0 && c(total(knowledge_raw, recall_raw, history_raw)?) > limits.usable {
        lines -= 1;
        recall_raw = host.shorten_recall(lines)?;
        dropped += 1;
    }
    if dropped > 0 {
        steps.push(Step::RecallLinesDropped(dropped));
    }

    // Tool results are part of history: while the whole history is within
    // the tool-result cap and nothing is over, no result needs looking at.
    let mut results: &[usize] = &[];
    let mut result_raw: i64 = 0;
    if c(history_raw) > limits.tool_cap
        || c(total(knowledge_raw, recall_raw, history_raw)?) > limits.usable
        || c(history_raw) > limits.history_cap
    {
        results = &m.tool_results;
        for &i in results {
            result_raw = add(result_raw, m.history[i])?;
        }
    }
    let mut next_result = 0;
    let mut truncated_at: Vec<usize> = Vec::new();
    // Truncate the oldest untruncated history tool result; false when none is left.
    let mut truncate_next = |history: &mut [i64],
                             result_raw: &mut i64,
                             history_raw: &mut i64,
                             host: &mut H|
     -> Result<bool, H::Error> {
        while next_result < results.len() {
            let i = results[next_result];
            next_result += 1;
            let new_raw = host.pointer_raw(i)?;
            if new_raw < history[i] {
                let delta = new_raw - history[i];
                *result_raw = add(*result_raw, delta)?;
                *history_raw = add(*history_raw, delta)?;
                history[i] = new_raw;
                truncated_at.push(i);
                return Ok(true);
            }
        }
        Ok(false)
    };
    let mut truncated = 0;
    while c(result_raw) > limits.tool_cap
        && truncate_next(&mut m.history, &mut result_raw, &mut history_raw, host)?
    {
        truncated += 1;
    }
    if truncated > 0 {
        steps.push(Step::ToolResultsOverCap(truncated));
    }
    truncated = 0;
    while (c(total(knowledge_raw, recall_raw, history_raw)?) > limits.usable
        || c(history_raw) > limits.history_cap)
        && truncate_next(&mut m.history, &mut result_raw, &mut history_raw, host)?
    {
        truncated += 1;
    }
    if truncated > 0 {
        steps.push(Step::ToolResultsTruncated(truncated));
    }

    let other_raw = add(add(base_raw, knowledge_raw)?, recall_raw)?;
    let history_budget = limits
        .history_cap
        .min(limits.usable.saturating_sub(c(other_raw)))
        .max(0);
    let mut cut = 0;
    if !m.history.is_empty() {
        cut = select_measured(&m, limits.summary_floor, history_budget, &c, host)?;
    }
    if cut > 0 {
        steps.push(Step::HistoryCut(cut));
        if reason == Reason::Fits {
            reason = Reason::HistoryRequiresCompaction;
            compactable = true;
        }
    }
    let body_raw = add(other_raw, history_raw - sum(&m.history[..cut])?)?;
    Ok(BodyFit {
        reason,
        compactable,
        steps,
        knowledge_kept: kept,
        recall_lines: lines,
        truncated: truncated_at,
        cut,
        history_budget,
        body_raw,
    })
}

/// `select_history` over measured raws: the pairs first, then floor, fit
/// and pair reach.
fn select_measured<H: BodyHost>(
    m: &Measured,
    summary_floor: i64,
    history_tokens: i128,
    c: &impl Fn(i64) -> i128,
    host: &mut H,
) -> Result<usize, H::Error> {
    let result_of = host.pairs()?;
    let floor = floor_bound(&m.history_seqs, summary_floor);
    let fit = fit_index(
        &m.history,
        history_tokens,
        |s| Ok::<i128, CoreError>(c(s)),
        overflow,
    )?;
    Ok(pair_reach(fit.max(floor), result_of))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cut::{validate_tool_pairs, ToolRole};

    /// A host over plain numbers that records its calls.
    struct Mock {
        recall_raws: Vec<i64>,
        pointer_raws: Vec<i64>,
        result_of: CoreResult<Vec<usize>>,
        calls: Vec<String>,
    }

    impl BodyHost for Mock {
        type Error = CoreError;
        fn shorten_recall(&mut self, lines: usize) -> CoreResult<i64> {
            self.calls.push(format!("recall:{lines}"));
            Ok(self.recall_raws[lines])
        }
        fn pointer_raw(&mut self, index: usize) -> CoreResult<i64> {
            self.calls.push(format!("pointer:{index}"));
            Ok(self.pointer_raws[index])
        }
        fn pairs(&mut self) -> CoreResult<&[usize]> {
            match &self.result_of {
                Ok(r) => Ok(r),
                Err(e) => Err(e.clone()),
            }
        }
    }

    fn limits(usable: i128) -> Limits {
        Limits {
            usable,
            history_cap: usable,
            tool_cap: usable,
            working_state_cap: usable,
            skill_items_cap: 10,
            skill_tokens_cap: usable,
            knowledge_items_cap: 10,
            knowledge_tokens_cap: usable,
            recall_cap: usable,
            summary_floor: i64::MIN,
            summary_compactable: true,
        }
    }

    /// History: (user, call, result, assistant) x 2 with the given raws.
    fn session(raws: [i64; 8]) -> (Measured, Mock) {
        let roles = [
            ToolRole::Other,
            ToolRole::Call("a"),
            ToolRole::Result("a"),
            ToolRole::Other,
            ToolRole::Other,
            ToolRole::Call("b"),
            ToolRole::Result("b"),
            ToolRole::Other,
        ];
        let m = Measured {
            history: raws.to_vec(),
            history_seqs: (1..=8).map(Some).collect(),
            tool_results: vec![2, 6],
            turn: 5,
            working_state: 5,
            metadata: 5,
            knowledge: vec![10, 20],
            recall_lines: 3,
            recall: 30,
            ..Measured::default()
        };
        let mock = Mock {
            recall_raws: vec![0, 10, 20, 30],
            pointer_raws: vec![0, 0, 4, 0, 0, 0, 4, 0],
            result_of: validate_tool_pairs(&roles),
            calls: Vec::new(),
        };
        (m, mock)
    }

    #[test]
    fn everything_fits() {
        let (m, mut host) = session([10; 8]);
        let fit = fit_body(&limits(1000), m, (1, 1), &mut host).unwrap();
        assert_eq!(fit.reason, Reason::Fits);
        assert_eq!(fit.cut, 0);
        assert!(fit.steps.is_empty());
        assert_eq!(fit.body_raw, 15 + 30 + 30 + 80);
        assert_eq!(fit.history_budget, 1000 - 75);
        assert!(host.calls.is_empty());
    }

    #[test]
    fn the_ladder_in_order() {
        // fixed 15, knowledge 30, recall 30, history 80: 155 in all.
        let (m, mut host) = session([10; 8]);
        let fit = fit_body(&limits(110), m.clone(), (1, 1), &mut host).unwrap();
        // both passages go (135, 125), then two recall lines (115, 105).
        assert_eq!(host.calls, vec!["recall:2", "recall:1"]);
        assert_eq!(fit.reason, Reason::Fits);
        assert_eq!(fit.body_raw, 105);

        let (m2, mut host) = session([10; 8]);
        let fit = fit_body(&limits(60), m2, (1, 1), &mut host).unwrap();
        assert_eq!(
            fit.steps,
            vec![
                Step::KnowledgeDropped(1),
                Step::KnowledgeDropped(0),
                Step::RecallLinesDropped(3),
                Step::ToolResultsTruncated(2),
                Step::HistoryCut(3),
            ]
        );
        assert_eq!(
            host.calls,
            vec!["recall:2", "recall:1", "recall:0", "pointer:2", "pointer:6"]
        );
        assert_eq!(fit.truncated, vec![2, 6]);
        assert_eq!(fit.reason, Reason::HistoryRequiresCompaction);
        assert!(fit.compactable);
        // history 80 - 12 = 68 over a budget of 60 - 15 = 45: 44 retained from 3 on
        assert_eq!(fit.history_budget, 45);
        assert_eq!(fit.cut, 3);
        assert_eq!(fit.body_raw, 15 + 68 - 24);
        let _ = m;
    }

    #[test]
    fn caps_and_reasons() {
        let (m, mut host) = session([10; 8]);
        let mut l = limits(1000);
        l.knowledge_items_cap = 1;
        l.recall_cap = 15;
        l.working_state_cap = 4;
        let fit = fit_body(&l, m, (1, 1), &mut host).unwrap();
        assert_eq!(fit.reason, Reason::WorkingStateExceedsCap);
        assert_eq!(
            fit.steps,
            vec![Step::KnowledgeOverCap(1), Step::RecallLinesOverCap(2)]
        );
        assert_eq!(fit.knowledge_kept, 1);
        assert_eq!(fit.recall_lines, 1);
    }

    #[test]
    fn the_pairing_error_comes_at_the_cut() {
        let (m, mut host) = session([10; 8]);
        host.result_of = Err(CoreError::orphan("a", 2, "x"));
        let err = fit_body(&limits(1000), m, (1, 1), &mut host).unwrap_err();
        assert_eq!(err, CoreError::orphan("a", 2, "x"));
    }

    #[test]
    fn corrections_scale_every_comparison() {
        let (m, mut host) = session([10; 8]);
        // 155 raw * 2 = 310 > 200
        let fit = fit_body(&limits(200), m, (2, 1), &mut host).unwrap();
        assert_eq!(fit.steps[0], Step::KnowledgeDropped(1));
    }
}
