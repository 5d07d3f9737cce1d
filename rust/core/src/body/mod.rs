//! Region B's fit (ADR 0001, "Assembly hot path"; the yield ladder of ADR
//! 0003) over measured numbers: the pressure reason, the class caps, the
//! ladder, the history cut and the body's order.
//!
//! The caller measures every rendered item (the estimator memo) and hands
//! in [`Block`]s in body order and the history as [`HistoryItem`]s. The
//! two lookups the ladder may need later — a shorter lines block and a
//! tool result's pointer — go through [`BodyHost`], asked at exactly the
//! points the reference (`ctxengine/reference/assembly.py`) asks.

mod checks;
mod fit;
pub mod line;
mod result;
#[cfg(test)]
mod tests;

pub use checks::BlockChecks;
pub use fit::fit_body;
pub use result::{body_sha256, UNMEASURED};

use crate::cut::ToolRole;
use crate::error::CoreError;

/// How a block enters the fit (`ctxengine.model.body.BLOCK_KINDS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The compacted summary: over the window, the body is compactable.
    Summary,
    /// Where the history goes.
    History,
    /// Never yields; over its token cap it names the reason.
    WorkingState,
    /// Never yield; over their item or token cap they name the reason.
    Skills,
    /// Whole items drop, last first, over the caps and under pressure.
    Passages,
    /// Lines drop from the end: item `k - 1` holds the first `k` lines.
    Lines,
    /// Never yield.
    Fixed,
    Turn,
}

impl Kind {
    pub const NAMES: [&'static str; 8] = [
        "summary",
        "history",
        "working_state",
        "skills",
        "passages",
        "lines",
        "fixed",
        "turn",
    ];

    pub fn parse(name: &str) -> Option<Kind> {
        const KINDS: [Kind; 8] = [
            Kind::Summary,
            Kind::History,
            Kind::WorkingState,
            Kind::Skills,
            Kind::Passages,
            Kind::Lines,
            Kind::Fixed,
            Kind::Turn,
        ];
        Kind::NAMES
            .iter()
            .position(|n| *n == name)
            .map(|i| KINDS[i])
    }

    /// Its name in `ctxengine.model.body.BLOCK_KINDS`.
    pub fn name(self) -> &'static str {
        Kind::NAMES[self as usize]
    }

    /// Passages and lines yield; everything else is fixed (or history).
    pub fn yields(self) -> bool {
        matches!(self, Kind::Passages | Kind::Lines)
    }
}

/// One Region-B class, measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block<'a> {
    pub class: &'a str,
    pub kind: Kind,
    /// How many rendered items the block has.
    pub len: usize,
    /// The raw estimate of each item (a lines block: of its whole block only).
    pub raws: Vec<i64>,
    /// The passages' ids (the yield steps name them).
    pub ids: Vec<&'a str>,
    pub max_items: Option<i64>,
    pub max_tokens: Option<i64>,
}

/// One history item, measured (its rendered form's raw estimate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryItem<'a> {
    pub raw: i64,
    pub seq: Option<i64>,
    pub role: ToolRole<'a>,
    /// The call id's hash (equal ids, equal hashes; see `PairValidator`).
    pub hash: u64,
}

/// The absolute numbers of the fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyLimits {
    pub usable: i64,
    pub history_cap: i64,
    pub tool_cap: i64,
    pub summary_floor: Option<i64>,
    pub summary_compactable: bool,
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

/// One place in the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Item `item` of block `block`.
    Item { block: usize, item: usize },
    /// History item `index`, rendered.
    History(usize),
    /// History item `index` truncated to its pointer.
    Pointer(usize),
}

/// What the fit decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyFit {
    /// The body, in block order.
    pub body: Vec<Part>,
    pub body_raw: i64,
    pub reason: Reason,
    pub compactable: bool,
    /// `history[cut..]` is retained.
    pub cut: usize,
    pub history_budget: i128,
    pub steps: Vec<String>,
    /// History indices whose pointer the caller lacks (nothing else is set).
    pub missing: Vec<usize>,
}

/// The caller's side of the fit.
pub trait BodyHost {
    type Error: From<CoreError>;

    /// The raw estimate of item `lines - 1` of lines block `block` (its
    /// first `lines` lines).
    fn lines_raw(&mut self, block: usize, lines: usize) -> Result<i64, Self::Error>;

    /// The raw estimate of history item `index` truncated to its pointer;
    /// `None` when the caller has no pointer for it.
    fn pointer_raw(&mut self, index: usize) -> Result<Option<i64>, Self::Error>;

    /// Of the history indices `results`, those the caller has no pointer for.
    fn lacking_pointers(&mut self, results: &[usize]) -> Result<Vec<usize>, Self::Error>;
}
