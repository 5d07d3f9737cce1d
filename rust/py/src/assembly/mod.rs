//! `fit_body`: Region B measured, capped, yielded and cut in one call (the
//! contract: `ctxengine.model.body`; the specification: the reference).
//!
//! This layer reads the inputs (`inputs`), looks the history's renders up
//! in the tables by item digest, measures everything under one estimator
//! lock in the reference's order (`gather`), and converts the decisions of
//! `ctxengine_core::body::fit_body` back: no callback into Python runs.

mod gather;
mod inputs;
mod line;
mod line_state;
mod memo;

pub use line_state::LineState;

use ctxengine_core::body::{self, Block, BodyHost, Kind, Part};
use ctxengine_core::estimate::{Measuring, Resolved};
use ctxengine_core::hash::PrefixStates;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::arguments::{self, type_name};
use crate::errors::{argument_error, guard, HostError, IntoPy};
use crate::estimator::TokenEstimator;
use crate::items::{Facts, Types};
use gather::{Buffers, Gather};
use inputs::{BlockIn, F};
use line_state::Taken;

/// How far ahead of a kept entry its render is fetched.
const RENDER_AHEAD: usize = 8;

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
    guard(py, || {
        let mut g = Gather::new(py, Types::new(py)?, Buffers::take());
        // The line's state, taken out for the call: given back after the
        // buffers, whose borrowed pointers it may hold alive.
        let mut state = None;
        let result = fit(py, inputs, limits, estimator, model_id, &mut g, &mut state);
        g.done();
        drop(state);
        result
    })
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

/// The value a table holds for `key` (no Python code runs: the keys are
/// `bytes`, whose hash the object caches).
fn lookup<'py>(
    table: &Bound<'py, PyDict>,
    key: *mut ffi::PyObject,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    // SAFETY: a dict and a live key.
    unsafe {
        let v = ffi::PyDict_GetItemWithError(table.as_ptr(), key);
        if v.is_null() {
            return match PyErr::take(table.py()) {
                Some(e) => Err(e),
                None => Ok(None),
            };
        }
        Ok(Some(Bound::from_borrowed_ptr(table.py(), v)))
    }
}

fn fit<'py>(
    py: Python<'py>,
    inputs: &Bound<'py, PyAny>,
    limits: &Bound<'py, PyAny>,
    estimator: &Bound<'py, PyAny>,
    model_id: &Bound<'py, PyAny>,
    g: &mut Gather<'py>,
    state: &mut Option<Taken<'py>>,
) -> PyResult<Bound<'py, PyDict>> {
    // The arguments before any work, the history last: no Python code runs
    // between its scan and the reads of what it borrows (a hostile
    // `inputs` may run some in any other read). Errors are raised in the
    // reference's order.
    let line = line::line(inputs);
    let held = line.as_ref().ok().and_then(Option::as_ref);
    // What calls read of the line before (none when another call has it).
    *state = held.and_then(line::Line::state).and_then(Taken::take);
    let mut readings = state.as_mut().and_then(Taken::readings);
    let renders = inputs::table(inputs, "renders", pyo3::intern!(py, "renders"));
    let pointers = inputs::table(inputs, "pointers", pyo3::intern!(py, "pointers"));
    let kept = readings.as_deref_mut().map(|r| &mut r.blocks);
    let blocks = inputs::blocks(inputs, &mut g.types, kept);
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
    let inputs::HistoryRead {
        fresh,
        from_cache,
        values,
    } = inputs::history(inputs, held, cached, &mut g.types, &mut g.bufs)?;
    let (renders, pointers, line) = (renders?, pointers?, line?);
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
    let est = est.get();

    // 1. The history's digests (canonicalizing fresh items: Python code
    // runs, so the borrowed keys are pinned first), then its renders.
    if !fresh.is_empty() {
        // (The keys read so far are pinned.)
        let b = &mut *g.bufs;
        let mut facts = vec![Facts::pending(0); b.keys.len()];
        let mut keep = Vec::new();
        crate::items::canonicalize_pending(py, &mut g.types, &mut facts, &mut keep, fresh.clone())?;
        for (i, item) in &fresh {
            let key = crate::canonical::item_canonical(item)?.get_item(1)?;
            g.bufs.keys[*i] = key.as_ptr();
            g.bufs.pins.push(key.unbind());
        }
    }
    let mut lacking = Vec::new();
    // (Shaped after the first render the line holds.)
    let first = g.bufs.held.iter().map(|h| h.0).find(|p| !p.is_null());
    let lookahead = first.and_then(|p| g.lookahead(p));
    let mut pinned = !fresh.is_empty();
    for (i, e) in cached.iter().enumerate().take(from_cache) {
        // The render a few entries ahead, fetched while this one is
        // referenced (its header is all a cached entry still touches).
        if let Some(ahead) = cached[..from_cache].get(i + RENDER_AHEAD) {
            crate::items::prefetch(ahead.render.as_ptr());
        }
        // SAFETY: live: the entry holds it (for the whole call; no reference is taken).
        let r = unsafe { Borrowed::from_ptr(py, g.bufs.held[i].0) };
        if !pinned && g.may_run_python(Some(&r)) {
            g.bufs.pin_borrowed(py, i + 1);
            pinned = true;
        }
        g.push_cached(r, e.facts.digest, e.bytes.as_ptr())?;
    }
    for i in from_cache..g.bufs.keys.len() {
        if let Some(l) = lookahead.as_ref().filter(|_| !pinned) {
            let held = &g.bufs.held;
            // SAFETY: null or renders the line holds, and nothing has run
            // Python code since they were read (not `pinned`).
            unsafe { l.ahead(|k| held.get(k).map_or(std::ptr::null_mut(), |h| h.0), i) };
        }
        let held = g.bufs.held[i].0;
        let render = if held.is_null() {
            lookup(&renders, g.bufs.keys[i])?
        } else {
            // SAFETY: live: the line holds it (or the pins, once Python code may run).
            Some(unsafe { Bound::from_borrowed_ptr(py, held) })
        };
        match render {
            Some(r) if lacking.is_empty() => {
                if !pinned && g.may_run_python(Some(&r)) {
                    // Its type is read anew (Python code may run): what is
                    // still to be read is held first (`r` is).
                    g.bufs.pin_borrowed(py, i + 1);
                    pinned = true;
                }
                g.push(r)?;
            }
            Some(_) => {}
            None => lacking.push(i),
        }
    }
    if !lacking.is_empty() {
        return missing(py, lacking);
    }
    let known = &cached[..from_cache];
    let (result, measuring) = measure_and_fit(
        py,
        g,
        &blocks,
        &limits,
        &pointers,
        Counting {
            est,
            model_id,
            known,
        },
        prefixes,
    )?;
    if let (Some(r), Some(line)) = (readings, line.as_ref()) {
        r.keep_served(from_cache);
        extend_entries(r, line, &values, g);
        // Every entry keeps its render's count as this call measured it
        // (those served keep theirs).
        let (facts, raws) = (g.facts(), &g.bufs.raws);
        r.measured_from(measuring.served, |i| measuring.tag(facts[i].kind, raws[i]));
    }
    Ok(result)
}

/// The line's entries extended by those this call read past them, while
/// they are still the history's items and the line still holds them (a
/// tuple history only: what was read of it cannot have changed since).
fn extend_entries<'py>(
    r: &mut line_state::Readings,
    line: &line::Line<'py>,
    values: &crate::items::Items<'py>,
    g: &mut Gather<'py>,
) {
    let crate::items::Items::Tuple(values) = values else {
        return;
    };
    let py = values.py();
    let n = g.bufs.history.len().min(values.len());
    for i in r.len()..n {
        if g.bufs.held[i].0.is_null() {
            break;
        }
        let Some(line::LineEntry {
            item,
            render,
            pointer,
        }) = line.entry(i)
        else {
            break;
        };
        let result = matches!(
            g.bufs.history[i].role,
            ctxengine_core::cut::ToolRole::Result(_)
        );
        if values.get_item(i).map_or(true, |v| !v.is(&item)) || (result && pointer.is_none()) {
            break; // (as `Line::held`: a tool result's entry holds its pointer)
        }
        let Ok(t) = g.types.info(&render) else {
            break;
        };
        let crate::items::Attr::Slot(offset) = g.types.infos[t].cj else {
            break;
        };
        let slot = crate::items::Attr::Slot(offset);
        let Ok(Some(cj)) = crate::items::read_attr(&render, slot, pyo3::intern!(py, "_cj")) else {
            break;
        };
        let history = &g.bufs.history[i];
        let Some(entry) = line_state::Entry::new(
            item.unbind(),
            render.unbind(),
            pointer.map(Bound::unbind),
            &cj,
            history,
        ) else {
            break;
        };
        r.push(entry);
    }
}

/// How the fit counts: the estimator, the key, and what the line state's
/// entries measured before (one per leading history item it served).
struct Counting<'a> {
    est: &'a TokenEstimator,
    model_id: &'a str,
    known: &'a [line_state::Entry],
}

/// 2. Measure everything in the reference's order, fit, and convert back.
fn measure_and_fit<'py>(
    py: Python<'py>,
    g: &mut Gather<'py>,
    blocks: &[BlockIn<'py>],
    limits: &body::BodyLimits,
    pointers: &Bound<'py, PyDict>,
    counting: Counting<'_>,
    prefixes: Option<&mut PrefixStates>,
) -> PyResult<(Bound<'py, PyDict>, Measuring)> {
    let Counting {
        est,
        model_id,
        known,
    } = counting;
    let n = g.bufs.history.len();
    // The keys and line pointers the ladder may read stay borrowed until a
    // step may run Python code (`Pins`). (The renders are held: gathered.)
    let mut pins = Pins(false);
    // Every block's items in body order (a lines block: its whole block).
    let mut block_at: Vec<Vec<usize>> = Vec::with_capacity(blocks.len());
    for b in blocks {
        let mut at = vec![body::UNMEASURED; b.items.len()];
        if b.kind == Kind::Lines {
            if let Some(last) = b.items.last() {
                pins.before_push(g, Some(last));
                at[b.items.len() - 1] = g.push(last.clone())?;
            }
        } else {
            for (k, item) in b.items.iter().enumerate() {
                pins.before_push(g, Some(item));
                at[k] = g.push(item.clone())?;
            }
        }
        block_at.push(at);
    }
    pins.before_push(g, None);
    g.finish()?;
    // Every estimate under one lock.
    let mut raws = std::mem::take(&mut g.bufs.raws);
    let measured = est.lock().raw_batch_known(
        model_id,
        &g.types.kinds,
        g.facts(),
        known,
        |e| e.facts.measured,
        &mut raws,
    );
    let (factor, measuring) = measured.into_py(py)?;
    for (h, &raw) in g.bufs.history.iter_mut().zip(&raws) {
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
    g.bufs.raws = raws;

    let history = std::mem::take(&mut g.bufs.history);
    let keys = std::mem::take(&mut g.bufs.keys);
    let held = std::mem::take(&mut g.bufs.held);
    let mut host = Host {
        g: &mut *g,
        est,
        model_id,
        blocks,
        block_at: &mut block_at,
        keys: &keys,
        held: &held,
        pins,
        pointers,
        pointer_at: vec![body::UNMEASURED; n],
        resolved: Resolved::default(),
    };
    let decided = body::fit_body(limits, &core_blocks, &history, factor, &mut host);
    let pointer_at = std::mem::take(&mut host.pointer_at);
    g.bufs.history = history;
    g.bufs.keys = keys;
    g.bufs.held = held;
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

/// Whether the history keys and line pointers are pinned (before any step
/// that may run Python code, for the lookups after it).
struct Pins(bool);

type Held = (*mut ffi::PyObject, *mut ffi::PyObject);

impl Pins {
    /// Pin `keys` and the pointers of `held` into `into`, once, if the next
    /// step `may_run` Python code.
    fn before(
        &mut self,
        py: Python<'_>,
        may_run: bool,
        into: &mut Vec<Py<PyAny>>,
        keys: &[*mut ffi::PyObject],
        held: &[Held],
    ) {
        if !self.0 && may_run {
            let pointers = held.iter().map(|&(_, q)| q);
            gather::pin(py, into, keys.iter().copied().chain(pointers));
            self.0 = true;
        }
    }

    /// [`Pins::before`] pushing `obj` into `g` (`None`: finishing it), the
    /// keys and line entries still in its buffers.
    fn before_push<'py>(&mut self, g: &mut Gather<'py>, obj: Option<&Bound<'py, PyAny>>) {
        let (may_run, py) = (g.may_run_python(obj), g.py());
        let b = &mut *g.bufs;
        self.before(py, may_run, &mut b.pins, &b.keys, &b.held);
    }
}

/// The lookups the ladder asks for, measured through the memo.
struct Host<'a, 'py> {
    g: &'a mut Gather<'py>,
    est: &'a TokenEstimator,
    model_id: &'a str,
    blocks: &'a [BlockIn<'py>],
    /// Gather index of each block item measured so far (`UNMEASURED`: not).
    block_at: &'a mut Vec<Vec<usize>>,
    /// The history items' digests (the tables' keys; null where the line
    /// holds the item).
    keys: &'a [*mut ffi::PyObject],
    /// The line's render and pointer of each history item (null: none).
    held: &'a [Held],
    pins: Pins,
    pointers: &'a Bound<'py, PyDict>,
    /// Gather index of each history item's pointer, once measured.
    pointer_at: Vec<usize>,
    resolved: Resolved,
}

impl<'py> Host<'_, 'py> {
    /// History item `index`'s pointer: the line's, else the table's.
    fn pointer_of(&self, index: usize) -> PyResult<Option<Bound<'py, PyAny>>> {
        let held = self.held[index].1;
        if !held.is_null() {
            // SAFETY: live (the line or the pins hold it).
            return Ok(Some(unsafe {
                Bound::from_borrowed_ptr(self.pointers.py(), held)
            }));
        }
        match self.keys[index] {
            key if key.is_null() => Ok(None),
            key => lookup(self.pointers, key),
        }
    }

    /// Before pushing `obj` (`None`: finishing): pin what is borrowed if
    /// Python code may run.
    fn guard(&mut self, obj: Option<&Bound<'py, PyAny>>) {
        let may_run = self.g.may_run_python(obj);
        let py = self.g.py();
        self.pins
            .before(py, may_run, &mut self.g.bufs.pins, self.keys, self.held);
    }

    /// Measure one more value through the memo.
    fn measure(&mut self, i: usize) -> Result<i64, HostError> {
        self.guard(None);
        self.g.finish()?;
        let (kinds, fact) = (&self.g.types.kinds, &self.g.facts()[i]);
        let raw = self
            .est
            .lock()
            .raw_one(&mut self.resolved, self.model_id, kinds, fact);
        Ok(raw?)
    }
}

impl BodyHost for Host<'_, '_> {
    type Error = HostError;

    fn lines_raw(&mut self, block: usize, lines: usize) -> Result<i64, HostError> {
        let item = self.blocks[block].items[lines - 1].clone();
        self.guard(Some(&item));
        let i = self.g.push(item)?;
        self.block_at[block][lines - 1] = i;
        self.measure(i)
    }

    fn pointer_raw(&mut self, index: usize) -> Result<Option<i64>, HostError> {
        let Some(pointer) = self.pointer_of(index)? else {
            return Ok(None);
        };
        self.guard(Some(&pointer));
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
