//! `fit_body`: Region B measured, capped, yielded and cut in one call (ADR
//! 0001, "Assembly hot path").
//!
//! This layer reads the objects — one pass over the history for each item's
//! cached rendered form, its `_cj` digest and length, `seq` and tool-pair
//! role — and measures everything under one estimator lock. The decisions
//! are `ctxengine_core::assembly::fit_body`, over numbers; the Python
//! callbacks (`render`, `render_recall`, `pointer`) run at exactly the points
//! the reference runs them.

use ctxengine_core::assembly::{self, BodyHost, Limits, Measured, Step};
use ctxengine_core::cut::PairValidator;
use ctxengine_core::hash::{hex, sha256, PrefixStates};
use ctxengine_core::CoreError;
use pyo3::exceptions::{PyAttributeError, PyIndexError, PyValueError};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::arguments;
use crate::batch::{
    canonicalize_pending, check_conversation, read_attr, read_digest, seq_of, tool_role, Attr,
    Facts, Items, Sort, Types,
};
use crate::conversions::item_canonical as item_cache;
use crate::errors::{argument_error, guard, to_pyerr};
use crate::estimator::{Resolved, TokenEstimator};

static REFERENCE_FIT_BODY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// Stored digest-list prefixes per thread (see `PrefixStates`).
const BODY_PREFIX_BYTES: usize = 32 << 20;

thread_local! {
    static BODY_PREFIXES: std::cell::Cell<Option<Box<PrefixStates>>> =
        std::cell::Cell::new(Some(Box::new(PrefixStates::new(BODY_PREFIX_BYTES))));
}

/// Objects measured in the reference's order, with their facts.
struct Gather<'py> {
    py: Python<'py>,
    types: Types,
    objs: Vec<Bound<'py, PyAny>>,
    facts: Vec<Facts>,
    /// The value has an item cache (`digest_list` reads its digest).
    is_item: Vec<bool>,
    /// Values whose facts still need canonicalization: (index, value).
    pending: Vec<(usize, Bound<'py, PyAny>)>,
    /// The `_cj` tuples whose canonical bytes the facts point into.
    keep: Vec<Bound<'py, PyAny>>,
}

impl<'py> Gather<'py> {
    fn new(py: Python<'py>, capacity: usize) -> PyResult<Self> {
        Ok(Gather {
            py,
            types: Types::new(py)?,
            objs: Vec::with_capacity(capacity),
            facts: Vec::with_capacity(capacity),
            is_item: Vec::with_capacity(capacity),
            pending: Vec::new(),
            keep: Vec::with_capacity(capacity),
        })
    }

    /// Add a value to measure; returns its index.
    #[inline(always)]
    fn push(&mut self, obj: Bound<'py, PyAny>) -> PyResult<usize> {
        let t = self.types.info(&obj)?;
        let info = &self.types.infos[t];
        let (kind, item) = (info.kind, info.sort == Sort::Item);
        let cj = if item {
            read_attr(&obj, info.cj, intern!(self.py, "_cj"))
                .ok()
                .flatten()
        } else {
            None
        };
        // SAFETY: a live object; read_digest checks the tuple and digest.
        let cached = cj
            .as_ref()
            .and_then(|cj| unsafe { read_digest(cj.as_ptr()) });
        let i = self.facts.len();
        match cached {
            Some((digest, bytes)) => {
                // The length is read on a memo miss only: `keep` holds the
                // tuple, and so its canonical bytes, until then.
                self.facts.push(Facts::of_bytes(kind, digest, bytes));
                if let Some(cj) = cj {
                    self.keep.push(cj);
                }
            }
            None => {
                self.facts.push(Facts::known(kind, 0, [0; 32]));
                self.pending.push((i, obj.clone()));
            }
        }
        self.is_item.push(item);
        self.objs.push(obj);
        Ok(i)
    }

    /// Canonicalize what no cache held (the reference's `raw_estimates`
    /// does it at the same point).
    fn finish(&mut self) -> PyResult<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut self.pending);
        canonicalize_pending(self.py, &mut self.types, &mut self.facts, pending)
    }

    /// Push every value of a sequence; returns the index range.
    fn push_all(&mut self, values: &Bound<'py, PyAny>) -> PyResult<(usize, usize)> {
        let start = self.facts.len();
        let values = Items::new(values)?;
        let mut i = 0;
        while let Some(v) = values.get(i) {
            self.push(v)?;
            i += 1;
        }
        Ok((start, self.facts.len()))
    }

    /// Each item's cached rendered form for `region` (`item._rc`, a dict or
    /// None), else `render(item, region)`; the rendered forms are pushed.
    /// With `history`, the items' seqs, tool results and pairs are read on
    /// the way.
    fn render_pass(
        &mut self,
        items: &Items<'py>,
        from: usize,
        to: usize,
        region: &Bound<'py, PyAny>,
        render: &Bound<'py, PyAny>,
        mut history: Option<&mut HistoryFacts>,
    ) -> PyResult<()> {
        let py = self.py;
        let rc_name = intern!(py, "_rc");
        let seq_name = intern!(py, "seq");
        let get_name = intern!(py, "get");
        let mut result_of: Vec<usize> = Vec::new();
        let mut call_ids: Vec<Bound<'py, PyAny>> = Vec::new();
        let mut pairs =
            PairValidator::new(&mut result_of, if history.is_some() { to / 4 } else { 0 });
        let mut pair_error: Option<CoreError> = None;
        // First the items (their render caches, renders on a miss), then
        // the rendered forms: the reference estimates after rendering all,
        // and two short loops overlap their memory reads better than one.
        let mut rendered: Vec<Bound<'py, PyAny>> = Vec::with_capacity(to - from);
        let mut i = from;
        while i < to {
            let Some(item) = items.get(i) else {
                break;
            };
            let t = self.types.info(&item)?;
            let info = &self.types.infos[t];
            let (rc_how, seq_how, call_id_how) = (info.rc, info.seq, info.call_id);
            let (role, tool_result) = (info.role, info.tool_result);
            // `item._rc`: a missing attribute raises, as in the reference.
            let cache = match rc_how {
                // SAFETY: the offset of an object member of this type.
                Attr::Slot(offset) => unsafe {
                    let p = *((item.as_ptr() as *mut u8).offset(offset) as *mut *mut ffi::PyObject);
                    Bound::from_borrowed_ptr_or_opt(py, p)
                        .ok_or_else(|| PyAttributeError::new_err("_rc"))?
                },
                Attr::Lookup => item.getattr(rc_name)?,
            };
            let hit = if cache.is_none() {
                None
            } else if let Ok(d) = cache.cast_exact::<PyDict>() {
                d.get_item(region)?
            } else {
                Some(cache.call_method1(get_name, (region,))?)
            };
            rendered.push(match hit {
                Some(h) if !h.is_none() => h,
                _ => render.call1((&item, region))?,
            });
            if let Some(h) = history.as_deref_mut() {
                let seq = read_attr(&item, seq_how, seq_name)?;
                h.seqs.push(seq.and_then(|v| seq_of(&v)));
                if tool_result {
                    h.tool_results.push(i);
                }
                if pair_error.is_none() {
                    let (tool_role, hash) = tool_role(
                        &item,
                        role,
                        call_id_how,
                        &mut call_ids,
                        (F, "history_items", i),
                    )?;
                    if let Err(e) = pairs.push_hashed(tool_role, hash) {
                        pair_error = Some(e);
                    }
                }
            }
            i += 1;
        }
        for r in rendered {
            self.push(r)?;
        }
        if let Some(h) = history {
            let outcome = match pair_error {
                Some(e) => {
                    drop(pairs);
                    Err(e)
                }
                None => pairs.finish(),
            };
            h.pairs = outcome.map(|()| result_of);
        }
        Ok(())
    }
}

/// What the history pass learns besides the rendered forms.
struct HistoryFacts {
    seqs: Vec<Option<i64>>,
    tool_results: Vec<usize>,
    /// The result index of each call, or the first pairing error (raised
    /// where the reference's `select_history` raises it).
    pairs: Result<Vec<usize>, CoreError>,
}

/// A failure inside the fit: a core error or a Python one.
enum HostError {
    Core(CoreError),
    Py(PyErr),
}

impl From<CoreError> for HostError {
    fn from(e: CoreError) -> Self {
        HostError::Core(e)
    }
}

impl From<PyErr> for HostError {
    fn from(e: PyErr) -> Self {
        HostError::Py(e)
    }
}

struct Host<'a, 'py> {
    g: &'a mut Gather<'py>,
    est: &'a TokenEstimator,
    model_id: &'a str,
    history: &'a Items<'py>,
    pairs: &'a Result<Vec<usize>, CoreError>,
    render_recall: &'a Bound<'py, PyAny>,
    pointer: &'a Bound<'py, PyAny>,
    lines: Vec<Bound<'py, PyAny>>,
    /// Gather indices of the current recall block (zero or more items).
    recall: Vec<usize>,
    /// (history index, gather index) of each pointer measured.
    pointers: Vec<(usize, usize)>,
    resolved: Resolved,
}

impl Host<'_, '_> {
    /// `raw_of([obj])`: measure one new value through the memo.
    fn measure(&mut self, i: usize) -> Result<i64, HostError> {
        self.g.finish()?;
        self.est
            .raw_one(
                &mut self.resolved,
                self.model_id,
                &self.g.types.kinds,
                &self.g.facts[i],
            )
            .map_err(HostError::Core)
    }
}

impl BodyHost for Host<'_, '_> {
    type Error = HostError;

    fn shorten_recall(&mut self, lines: usize) -> Result<i64, HostError> {
        self.lines.truncate(lines);
        if lines == 0 {
            self.recall.clear();
            return Ok(0);
        }
        let py = self.g.py;
        let arg = PyList::new(py, &self.lines)?;
        let block = self.render_recall.call1((arg,))?;
        let i = self.g.push(block)?;
        self.recall = vec![i];
        self.measure(i)
    }

    fn pointer_raw(&mut self, index: usize) -> Result<i64, HostError> {
        let item = self
            .history
            .get(index)
            .ok_or_else(|| PyIndexError::new_err(index))?;
        let short = self.pointer.call1((item,))?;
        let i = self.g.push(short)?;
        self.pointers.push((index, i));
        self.measure(i)
    }

    fn pairs(&mut self) -> Result<&[usize], HostError> {
        match self.pairs {
            Ok(r) => Ok(r),
            Err(e) => Err(HostError::Core(e.clone())),
        }
    }
}

/// The names of `limits`, in order (the reference's `LIMITS`).
const LIMITS: [&str; 11] = [
    "usable",
    "history_cap",
    "tool_cap",
    "working_state_cap",
    "skill_items_cap",
    "skill_tokens_cap",
    "knowledge_items_cap",
    "knowledge_tokens_cap",
    "recall_cap",
    "summary_floor",
    "summary_compactable",
];

fn parse_limits(limits: &Bound<'_, PyAny>) -> PyResult<Limits> {
    let py = limits.py();
    let values = arguments::sequence(F, "limits", limits, "limits")?;
    if values.len() != LIMITS.len() {
        return Err(argument_error(
            py,
            F,
            "limits",
            format!("expected {} values, got {}", LIMITS.len(), values.len()),
        ));
    }
    let mut ints = [0i128; 9];
    for (i, slot) in ints.iter_mut().enumerate() {
        let name = format!("limits.{}", LIMITS[i]);
        let v = arguments::int64(
            F,
            &name,
            &values.get(i).unwrap_or_else(|| py.None().into_bound(py)),
        )?;
        if LIMITS[i].ends_with("_items_cap") && v < 0 {
            return Err(argument_error(
                py,
                F,
                name,
                format!("must not be negative, got {v}"),
            ));
        }
        *slot = v as i128;
    }
    let none = || py.None().into_bound(py);
    let floor = arguments::optional_int64(
        F,
        "limits.summary_floor",
        &values.get(9).unwrap_or_else(none),
    )?;
    Ok(Limits {
        usable: ints[0],
        history_cap: ints[1],
        tool_cap: ints[2],
        working_state_cap: ints[3],
        skill_items_cap: ints[4],
        skill_tokens_cap: ints[5],
        knowledge_items_cap: ints[6],
        knowledge_tokens_cap: ints[7],
        recall_cap: ints[8],
        summary_floor: floor.unwrap_or(i64::MIN),
        summary_compactable: values.get(10).unwrap_or_else(none).is_truthy()?,
    })
}

const F: &str = "fit_body";

/// `(pid, item)` of one knowledge entry (any two-element iterable).
fn unpack_pair<'py>(entry: &Bound<'py, PyAny>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    if let Ok(t) = entry.cast::<PyTuple>() {
        if t.len() == 2 {
            return Ok((t.get_item(0)?, t.get_item(1)?));
        }
    }
    let parts: Vec<Bound<'py, PyAny>> = entry.try_iter()?.collect::<PyResult<_>>()?;
    match <[Bound<'py, PyAny>; 2]>::try_from(parts) {
        Ok([a, b]) => Ok((a, b)),
        Err(parts) if parts.len() < 2 => Err(PyValueError::new_err(format!(
            "not enough values to unpack (expected 2, got {})",
            parts.len()
        ))),
        Err(_) => Err(PyValueError::new_err(
            "too many values to unpack (expected 2)",
        )),
    }
}

fn sum_range(raws: &[i64], (a, b): (usize, usize)) -> PyResult<i64> {
    raws[a..b].iter().try_fold(0i64, |acc, &r| {
        acc.checked_add(r).ok_or_else(|| {
            pyo3::exceptions::PyOverflowError::new_err(
                "raw estimate sum overflows a 64-bit integer",
            )
        })
    })
}

/// Region B measured, capped, yielded and cut; see the reference
/// `ctxengine.reference.assembly.fit_body`, its specification.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (
    history_items, turn_items, first_user, summary, skills, working_state, knowledge,
    recall_lines, recall, corrections, metadata, limits, render, render_recall, pointer,
    estimator, model_id
))]
pub fn fit_body<'py>(
    py: Python<'py>,
    history_items: &Bound<'py, PyAny>,
    turn_items: &Bound<'py, PyAny>,
    first_user: &Bound<'py, PyAny>,
    summary: &Bound<'py, PyAny>,
    skills: &Bound<'py, PyAny>,
    working_state: &Bound<'py, PyAny>,
    knowledge: &Bound<'py, PyAny>,
    recall_lines: &Bound<'py, PyAny>,
    recall: &Bound<'py, PyAny>,
    corrections: &Bound<'py, PyAny>,
    metadata: &Bound<'py, PyAny>,
    limits: &Bound<'py, PyAny>,
    render: &Bound<'py, PyAny>,
    render_recall: &Bound<'py, PyAny>,
    pointer: &Bound<'py, PyAny>,
    estimator: &Bound<'py, PyAny>,
    model_id: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTuple>> {
    guard(py, || {
        // The arguments, in order, before any work.
        let mut types = Types::new(py)?;
        check_conversation(
            F,
            "history_items",
            &arguments::sequence(F, "history_items", history_items, "conversation items")?,
            &mut types,
        )?;
        check_conversation(
            F,
            "turn_items",
            &arguments::sequence(F, "turn_items", turn_items, "conversation items")?,
            &mut types,
        )?;
        let checked_limits = parse_limits(limits)?;
        arguments::estimator_like(F, estimator)?;
        let model_id_text = arguments::string(F, "model_id", model_id)?;
        let Ok(est) = estimator.cast::<TokenEstimator>() else {
            // Another estimator's memo and correction are its own methods:
            // the reference makes exactly its calls.
            let reference =
                REFERENCE_FIT_BODY.import(py, "ctxengine.reference.assembly", "fit_body")?;
            let args = PyTuple::new(
                py,
                [
                    history_items,
                    turn_items,
                    first_user,
                    summary,
                    skills,
                    working_state,
                    knowledge,
                    recall_lines,
                    recall,
                    corrections,
                    metadata,
                    limits,
                    render,
                    render_recall,
                    pointer,
                    estimator,
                    model_id,
                ],
            )?;
            return reference
                .call1(args)?
                .cast_into::<PyTuple>()
                .map_err(Into::into);
        };
        let est = est.get();
        let model_id: &str = model_id_text;
        let limits = checked_limits;
        fit_own(
            py,
            [
                history_items,
                turn_items,
                first_user,
                summary,
                skills,
                working_state,
                knowledge,
                recall_lines,
                recall,
                corrections,
                metadata,
            ],
            &limits,
            [render, render_recall, pointer],
            est,
            model_id,
        )
    })
}

/// `fit_body` with this module's own estimator.
fn fit_own<'py>(
    py: Python<'py>,
    [history_items, turn_items, first_user, summary, skills, working_state, knowledge, recall_lines, recall, corrections, metadata]: [&Bound<'py, PyAny>; 11],
    limits: &Limits,
    [render, render_recall, pointer]: [&Bound<'py, PyAny>; 3],
    est: &TokenEstimator,
    model_id: &str,
) -> PyResult<Bound<'py, PyTuple>> {
    let history = Items::new(history_items)?;
    let turn = Items::new(turn_items)?;
    let n_history = history.len();
    let mut g = Gather::new(py, n_history + turn.len() + 8)?;
    let mut h = HistoryFacts {
        seqs: Vec::with_capacity(n_history),
        tool_results: Vec::new(),
        pairs: Ok(Vec::new()),
    };

    // Rendered history, then the turn (the reference's render_measure calls).
    let history_region = intern!(py, "history").as_any();
    g.render_pass(&history, 0, n_history, history_region, render, Some(&mut h))?;
    g.finish()?;
    let history_range = (0, g.facts.len());
    let turn_start = g.facts.len();
    let current_turn = intern!(py, "current_turn").as_any();
    if first_user.is_truthy()? {
        let n = turn.len();
        let head = n.min(1);
        g.render_pass(
            &turn,
            0,
            head,
            intern!(py, "current_user").as_any(),
            render,
            None,
        )?;
        g.finish()?;
        g.render_pass(&turn, head, n, current_turn, render, None)?;
    } else {
        g.render_pass(&turn, 0, turn.len(), current_turn, render, None)?;
    }
    g.finish()?;
    let turn_range = (turn_start, g.facts.len());

    // The blocks, in the reference's order (`raw_of` of each).
    let summary_range = g.push_all(summary)?;
    let skills_range = g.push_all(skills)?;
    let ws_range = g.push_all(working_state)?;
    let corrections_range = g.push_all(corrections)?;
    let metadata_range = g.push_all(metadata)?;
    let mut pids: Vec<Bound<'py, PyAny>> = Vec::new();
    let mut knowledge_at: Vec<usize> = Vec::new();
    for entry in knowledge.try_iter()? {
        let (pid, item) = unpack_pair(&entry?)?;
        pids.push(pid);
        knowledge_at.push(g.push(item)?);
    }
    let lines: Vec<Bound<'py, PyAny>> = recall_lines.try_iter()?.collect::<PyResult<_>>()?;
    let recall_range = g.push_all(recall)?;
    g.finish()?;

    // Every estimate under one lock, in the reference's lookup order.
    let mut raws = Vec::with_capacity(g.facts.len());
    let sums = est
        .raw_batch_into(model_id, &g.types.kinds, &g.facts, &mut raws)
        .map_err(|e| to_pyerr(py, e))?;

    let measured = Measured {
        history: raws[history_range.0..history_range.1].to_vec(),
        history_seqs: std::mem::take(&mut h.seqs),
        tool_results: std::mem::take(&mut h.tool_results),
        turn: sum_range(&raws, turn_range)?,
        summary: sum_range(&raws, summary_range)?,
        skills: sum_range(&raws, skills_range)?,
        skill_count: skills_range.1 - skills_range.0,
        working_state: sum_range(&raws, ws_range)?,
        corrections: sum_range(&raws, corrections_range)?,
        metadata: sum_range(&raws, metadata_range)?,
        knowledge: knowledge_at.iter().map(|&i| raws[i]).collect(),
        recall_lines: lines.len(),
        recall: sum_range(&raws, recall_range)?,
    };
    let mut host = Host {
        g: &mut g,
        est,
        model_id,
        history: &history,
        pairs: &h.pairs,
        render_recall,
        pointer,
        lines,
        recall: (recall_range.0..recall_range.1).collect(),
        pointers: Vec::new(),
        resolved: Resolved::default(),
    };
    let fit = match assembly::fit_body(limits, measured, sums, &mut host) {
        Ok(fit) => fit,
        Err(HostError::Core(e)) => return Err(to_pyerr(py, e)),
        Err(HostError::Py(e)) => return Err(e),
    };
    let recall_now = std::mem::take(&mut host.recall);
    let pointers = std::mem::take(&mut host.pointers);

    // The body, in the region table's order, as gather indices.
    let mut history_at: Vec<usize> = (history_range.0..history_range.1).collect();
    if !fit.truncated.is_empty() {
        // Each history index gets at most one pointer (results are
        // truncated oldest first, once).
        let mut pointer_at = vec![usize::MAX; history_at.len()];
        for &(h, at) in &pointers {
            pointer_at[h] = at;
        }
        for &i in &fit.truncated {
            if pointer_at[i] != usize::MAX {
                history_at[i] = pointer_at[i];
            }
        }
    }
    let mut body: Vec<usize> = Vec::with_capacity(g.facts.len());
    body.extend(summary_range.0..summary_range.1);
    body.extend_from_slice(&history_at[fit.cut.min(history_at.len())..]);
    body.extend(skills_range.0..skills_range.1);
    body.extend(ws_range.0..ws_range.1);
    body.extend_from_slice(&knowledge_at[..fit.knowledge_kept]);
    body.extend_from_slice(&recall_now);
    body.extend(corrections_range.0..corrections_range.1);
    body.extend(metadata_range.0..metadata_range.1);
    body.extend(turn_range.0..turn_range.1);

    let list = PyList::new(py, body.iter().map(|&i| &g.objs[i]))?;
    let mut flat: Vec<u8> = Vec::with_capacity(body.len() * 32);
    for &i in &body {
        if g.is_item[i] {
            flat.extend_from_slice(&g.facts[i].digest);
        } else {
            // No item cache: `item_canonical` raises, as digest_list does.
            let tuple = item_cache(&g.objs[i])?;
            let digest = tuple.get_item(1)?;
            flat.extend_from_slice(digest.cast::<pyo3::types::PyBytes>()?.as_bytes());
        }
    }
    // The leading summary and history digests repeat from build to build.
    let stable =
        32 * (summary_range.1 - summary_range.0 + history_at.len().saturating_sub(fit.cut));
    let body_sha = hex(&BODY_PREFIXES.with(|cell| match cell.take() {
        Some(mut states) => {
            let digest = states.sha256(&flat, stable);
            cell.set(Some(states));
            digest
        }
        None => sha256(&flat),
    }));

    let mut steps: Vec<Bound<'py, PyString>> = Vec::with_capacity(fit.steps.len());
    for step in &fit.steps {
        let text = match *step {
            Step::KnowledgeOverCap(k) | Step::KnowledgeDropped(k) => {
                format!("{}:{}", step.name(), pids[k].str()?.to_str()?)
            }
            Step::RecallLinesOverCap(n)
            | Step::RecallLinesDropped(n)
            | Step::ToolResultsOverCap(n)
            | Step::ToolResultsTruncated(n)
            | Step::HistoryCut(n) => format!("{}:{n}", step.name()),
        };
        steps.push(PyString::new(py, &text));
    }
    let out = (
        list,
        fit.body_raw,
        PyString::new(py, fit.reason.as_str()),
        fit.compactable,
        fit.cut,
        fit.history_budget,
        PyList::new(py, steps)?,
        body_sha,
    );
    out.into_pyobject(py)
}
