//! `fit_body`: Region B measured, capped, yielded and cut in one call (the
//! contract: `ctxengine.model.body`; the specification: the reference).
//!
//! This layer reads the inputs (`inputs`), takes each history render from
//! the line's state, the line or the tables (by item digest), measures
//! everything under one estimator lock in the reference's order (`gather`),
//! and converts the decisions of `ctxengine_core::body::fit_body` back: no
//! callback into Python runs.

mod gather;
mod inputs;
mod line;
mod line_state;
mod memo;

pub use line_state::LineState;

use ctxengine_core::body::{self, Block, BodyHost, HistoryItem, Kind, Part};
use ctxengine_core::estimate::{Measuring, Resolved};
use ctxengine_core::hash::PrefixStates;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::arguments::{self, type_name};
use crate::errors::{argument_error, guard, HostError, IntoPy};
use crate::estimator::TokenEstimator;
use crate::items::{Facts, Types};
use gather::Gather;
use inputs::{BlockIn, HistoryRead, Row, F};
use line_state::{Entry, Taken};

/// Region B measured, capped, yielded and cut (`ctxengine.model.body`).
#[pyfunction]
#[pyo3(signature = (*, inputs, limits, estimator, model_id))]
pub fn fit_body<'py>(
    py: Python<'py>,
    inputs: &Bound<'py, PyAny>,
    limits: &Bound<'py, PyAny>,
    estimator: &Bound<'py, PyAny>,
    model_id: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    guard(py, || fit(py, inputs, limits, estimator, model_id))
}

/// The `BodyFit` dict: `body`, `body_raw`, `reason`, `compactable`, `cut`,
/// `history_budget`, `yield_steps`, `body_sha256` and `missing` (keys
/// interned once: no new key strings per call).
fn body_fit<'py>(
    py: Python<'py>,
    fit: &body::BodyFit,
    body: Bound<'py, PyList>,
    body_sha256: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item(pyo3::intern!(py, "body"), body)?;
    d.set_item(pyo3::intern!(py, "body_raw"), fit.body_raw)?;
    d.set_item(pyo3::intern!(py, "reason"), fit.reason.as_str())?;
    d.set_item(pyo3::intern!(py, "compactable"), fit.compactable)?;
    d.set_item(pyo3::intern!(py, "cut"), fit.cut)?;
    d.set_item(pyo3::intern!(py, "history_budget"), fit.history_budget)?;
    d.set_item(pyo3::intern!(py, "yield_steps"), &fit.steps)?;
    d.set_item(pyo3::intern!(py, "body_sha256"), body_sha256)?;
    d.set_item(pyo3::intern!(py, "missing"), &fit.missing)?;
    Ok(d)
}

/// A `BodyFit` whose only news is the history indices the tables lack.
fn missing<'py>(py: Python<'py>, indices: Vec<usize>) -> PyResult<Bound<'py, PyDict>> {
    body_fit(py, &body::BodyFit::missing(indices), PyList::empty(py), "")
}

fn fit<'py>(
    py: Python<'py>,
    inputs: &Bound<'py, PyAny>,
    limits: &Bound<'py, PyAny>,
    estimator: &Bound<'py, PyAny>,
    model_id: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    // Every argument read before any work, the history last; errors are
    // raised in the reference's order.
    let mut types = Types::new(py)?;
    let line = line::line(inputs);
    let held = line.as_ref().ok().and_then(Option::as_ref);
    // What calls read of the line before (none when another call has it).
    let mut state = held.and_then(line::Line::state).and_then(Taken::take);
    let mut readings = state.as_mut().and_then(Taken::readings);
    let renders = inputs::table(inputs, "renders", pyo3::intern!(py, "renders"));
    let pointers = inputs::table(inputs, "pointers", pyo3::intern!(py, "pointers"));
    let kept = readings.as_deref_mut().map(|r| &mut r.blocks);
    let blocks = inputs::blocks(inputs, &mut types, kept);
    let kept = readings.as_deref_mut().map(|r| &mut r.limits);
    let limits = inputs::limits(limits, kept);
    // (This backend's own estimator is one: its type has both methods.)
    let estimator_ok = if estimator.get_type().is(py.get_type::<TokenEstimator>()) {
        Ok(())
    } else {
        arguments::estimator_like(F, estimator)
    };
    let model_id = arguments::string(F, "model_id", model_id);
    let (cached, prefixes) = match readings.as_deref_mut() {
        Some(r) => {
            let (entries, prefixes) = r.parts();
            (entries, Some(prefixes))
        }
        None => (&[][..], None),
    };
    let read = inputs::history(inputs, held, cached, &mut types)?;
    let (renders, pointers) = (renders?, pointers?);
    line?;
    let (blocks, limits) = (blocks?, limits?);
    estimator_ok?;
    let model_id = model_id?;
    let Ok(est) = estimator.cast::<TokenEstimator>() else {
        return Err(argument_error(
            py,
            F,
            "estimator",
            format!(
                "this backend fits with its own TokenEstimator, got {} (ctxengine.core.body.fit_body picks the backend)",
                type_name(estimator)
            ),
        ));
    };
    let tables = Tables { renders, pointers };
    let counting = Counting {
        est: est.get(),
        model_id,
        known: &cached[..read.from_cache],
        keep: prefixes.is_some(),
    };
    let from_cache = read.from_cache;
    let (result, kept) = history_fit(
        py, read, types, &tables, &blocks, &limits, counting, prefixes,
    )?;
    if let (Some(r), Some(kept)) = (readings, kept) {
        r.keep_served(from_cache);
        r.extend(kept.entries);
        // Every entry keeps its render's count as this call measured it
        // (those served keep theirs).
        let (m, counts) = (&kept.measuring, &kept.counts);
        r.measured_from(m.served, |i| m.tag(counts[i].0, counts[i].1));
    }
    Ok(result)
}

/// The history's render and pointer tables, by item digest.
struct Tables<'py> {
    renders: Bound<'py, PyDict>,
    pointers: Bound<'py, PyDict>,
}

/// How the fit counts: the estimator, the key, what the line state's
/// entries measured before (one per leading history item it served), and
/// whether the line state keeps what this call reads.
struct Counting<'a> {
    est: &'a TokenEstimator,
    model_id: &'a str,
    known: &'a [Entry],
    keep: bool,
}

/// What a fit leaves for the line state: how it counted, each history
/// render's kind and count, and the entries it read past the state's.
struct Kept {
    measuring: Measuring,
    counts: Vec<(usize, i64)>,
    entries: Vec<Entry>,
}

/// 1. The history's digests and renders; 2. everything measured and fit.
#[allow(clippy::too_many_arguments)]
fn history_fit<'e, 'py>(
    py: Python<'py>,
    read: HistoryRead<'py, 'e>,
    mut types: Types,
    tables: &Tables<'py>,
    blocks: &[BlockIn<'py>],
    limits: &body::BodyLimits,
    counting: Counting<'e>,
    prefixes: Option<&mut PrefixStates>,
) -> PyResult<(Bound<'py, PyDict>, Option<Kept>)> {
    let HistoryRead {
        mut history,
        mut rows,
        fresh,
        ids: _ids,
        ..
    } = read;
    let from = counting.known.len();
    if !fresh.is_empty() {
        let mut facts = vec![Facts::pending(0); history.len()];
        let mut keep = Vec::new();
        crate::items::canonicalize_pending(py, &mut types, &mut facts, &mut keep, fresh.clone())?;
        for (i, item) in &fresh {
            rows[*i - from].key = Some(crate::canonical::item_canonical(item)?.get_item(1)?);
        }
    }
    let values = history.len() + blocks.iter().map(|b| b.items.len()).sum::<usize>();
    let mut g = Gather::new(py, types, values);
    for e in counting.known {
        g.push_entry(e)?;
    }
    let mut lacking = Vec::new();
    // The entries read past the state's (the line's, while it held them),
    // made while each render and its `_cj` tuple are at hand.
    let mut entries = Vec::new();
    let mut open = counting.keep;
    for (i, row) in rows.iter_mut().enumerate() {
        if let (None, Some(key)) = (&row.render, &row.key) {
            row.render = tables.renders.get_item(key)?;
        }
        let Some(render) = row.render.as_ref().filter(|_| lacking.is_empty()) else {
            if row.render.is_none() {
                lacking.push(from + i);
            }
            continue;
        };
        let at = g.push(render.clone())?;
        if open {
            let e = entry(&mut g, row, at, &history);
            open = e.is_some();
            entries.extend(e);
        }
    }
    if !lacking.is_empty() {
        return Ok((missing(py, lacking)?, None));
    }
    let (result, measuring) = measure_and_fit(
        &mut g,
        blocks,
        limits,
        &tables.pointers,
        &counting,
        prefixes,
        &mut history,
        &rows,
    )?;
    if !counting.keep {
        return Ok((result, None));
    }
    // (Past a render canonicalized since it was pushed.)
    for (i, row) in rows.iter_mut().enumerate().skip(entries.len()) {
        let Some(e) = entry(&mut g, row, from + i, &history) else {
            break;
        };
        entries.push(e);
    }
    let facts = g.facts();
    let counts = history.iter().zip(facts).map(|(h, f)| (f.kind, h.raw));
    let kept = Kept {
        measuring,
        counts: counts.collect(),
        entries,
    };
    Ok((result, Some(kept)))
}

/// The line state's entry for `row`, the value `at` of `g` (`None`: not
/// the line's, or its render's `_cj` not filled).
fn entry(
    g: &mut Gather<'_, '_>,
    row: &mut Row<'_>,
    at: usize,
    history: &[HistoryItem],
) -> Option<Entry> {
    let render = row.render.as_ref()?.clone().unbind();
    let cj = g.cj(at)?;
    let pointer = row.pointer.as_ref().map(|p| p.clone().unbind());
    Entry::new(
        row.item.take()?.unbind(),
        render,
        pointer,
        &cj,
        &history[at],
    )
}

/// 2. Measure everything in the reference's order, fit, and convert back.
#[allow(clippy::too_many_arguments)]
fn measure_and_fit<'py>(
    g: &mut Gather<'_, 'py>,
    blocks: &[BlockIn<'py>],
    limits: &body::BodyLimits,
    pointers: &Bound<'py, PyDict>,
    counting: &Counting<'_>,
    prefixes: Option<&mut PrefixStates>,
    history: &mut [body::HistoryItem<'_>],
    rows: &[Row<'py>],
) -> PyResult<(Bound<'py, PyDict>, Measuring)> {
    let py = pointers.py();
    let (est, model_id) = (counting.est, counting.model_id);
    let n = history.len();
    // Every block's items in body order (a lines block: its whole block).
    let mut block_at: Vec<Vec<usize>> = Vec::with_capacity(blocks.len());
    for b in blocks {
        let mut at = vec![body::UNMEASURED; b.items.len()];
        let whole = b.kind == Kind::Lines;
        for (k, item) in b.items.iter().enumerate() {
            if !whole || k + 1 == b.items.len() {
                at[k] = g.push(item.clone())?;
            }
        }
        block_at.push(at);
    }
    g.finish()?;
    // Every estimate under one lock.
    let mut raws = std::mem::take(&mut g.raws);
    let measured = est.lock().raw_batch_known(
        model_id,
        &g.types.kinds,
        g.facts(),
        counting.known,
        |e: &Entry| e.facts.measured,
        &mut raws,
    );
    let (factor, measuring) = measured.into_py(py)?;
    for (h, &raw) in history.iter_mut().zip(&raws) {
        h.raw = raw;
    }
    let core_blocks: Vec<Block> = blocks
        .iter()
        .zip(&block_at)
        .map(|(b, at)| {
            let ids = b.ids.iter().map(|id| inputs::text(id)).collect();
            let class = inputs::text(&b.class);
            let (len, caps) = (b.items.len(), (b.max_items, b.max_tokens));
            Block::measured(class, b.kind, len, at, &raws, ids, caps.0, caps.1)
        })
        .collect();
    g.raws = raws;
    let mut host = Host {
        g: &mut *g,
        est,
        model_id,
        blocks,
        block_at: &mut block_at,
        known: counting.known,
        rows,
        pointers,
        pointer_at: vec![body::UNMEASURED; n],
        resolved: Resolved::default(),
    };
    let decided = body::fit_body(limits, &core_blocks, history, factor, &mut host);
    let pointer_at = std::mem::take(&mut host.pointer_at);
    let decided = decided.into_py(py)?;
    if !decided.missing.is_empty() {
        return Ok((missing(py, decided.missing)?, measuring));
    }

    // The body, its digest list's SHA-256 and the steps, as Python data.
    let at: Vec<usize> = decided
        .body
        .iter()
        .map(|part| match *part {
            Part::History(i) => i,
            Part::Pointer(i) => pointer_at[i],
            Part::Item { block, item } => block_at[block][item],
        })
        .collect();
    let list = PyList::new(py, at.iter().map(|&i| g.obj(i)))?;
    // The leading summary and history digests repeat from build to build.
    let leading = decided.leading(|b| blocks[b].kind);
    let digests = at.iter().map(|&i| &g.facts()[i].digest);
    let body_sha = body::body_sha256(digests, leading, prefixes);
    let fit = body_fit(py, &decided, list, &body_sha)?;
    Ok((fit, measuring))
}

/// The lookups the ladder asks for, measured through the memo.
struct Host<'a, 'e, 'py> {
    g: &'a mut Gather<'e, 'py>,
    est: &'a TokenEstimator,
    model_id: &'a str,
    blocks: &'a [BlockIn<'py>],
    /// Gather index of each block item measured so far (`UNMEASURED`: not).
    block_at: &'a mut Vec<Vec<usize>>,
    /// The line state's entries served (their pointers).
    known: &'a [Entry],
    /// Where each later history item's render (and pointer) came from.
    rows: &'a [Row<'py>],
    pointers: &'a Bound<'py, PyDict>,
    /// Gather index of each history item's pointer, once measured.
    pointer_at: Vec<usize>,
    resolved: Resolved,
}

impl<'py> Host<'_, '_, 'py> {
    /// History item `index`'s pointer: the line's, else the table's.
    fn pointer_of(&self, index: usize) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Some(row) = index.checked_sub(self.known.len()).map(|i| &self.rows[i]) else {
            let p = self.known[index].pointer.as_ref();
            return Ok(p.map(|p| p.bind(self.pointers.py()).clone()));
        };
        match (&row.pointer, &row.key) {
            (Some(p), _) => Ok(Some(p.clone())),
            (None, Some(key)) => self.pointers.get_item(key),
            (None, None) => Ok(None),
        }
    }

    /// Measure one more value through the memo.
    fn measure(&mut self, i: usize) -> Result<i64, HostError> {
        self.g.finish()?;
        let (kinds, fact) = (&self.g.types.kinds, &self.g.facts()[i]);
        let raw = self
            .est
            .lock()
            .raw_one(&mut self.resolved, self.model_id, kinds, fact);
        Ok(raw?)
    }
}

impl BodyHost for Host<'_, '_, '_> {
    type Error = HostError;

    fn lines_raw(&mut self, block: usize, lines: usize) -> Result<i64, HostError> {
        let item = self.blocks[block].items[lines - 1].clone();
        let i = self.g.push(item)?;
        self.block_at[block][lines - 1] = i;
        self.measure(i)
    }

    fn pointer_raw(&mut self, index: usize) -> Result<Option<i64>, HostError> {
        let Some(pointer) = self.pointer_of(index)? else {
            return Ok(None);
        };
        let i = self.g.push(pointer)?;
        self.pointer_at[index] = i;
        self.measure(i).map(Some)
    }

    fn lacking_pointers(&mut self, results: &[usize]) -> Result<Vec<usize>, HostError> {
        let mut out = Vec::new();
        for &j in results {
            if self.pointer_of(j)?.is_none() {
                out.push(j);
            }
        }
        Ok(out)
    }
}
