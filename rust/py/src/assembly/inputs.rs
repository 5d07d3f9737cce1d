//! `BodyInputs` and `BodyLimits` read from Python and checked, in the
//! reference's order (`check_body_inputs`, `check_limits`).

use ctxengine_core::body::{BlockChecks, BodyLimits, HistoryItem, Kind};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyNone, PyString};
use pyo3::Borrowed;

use super::gather::Buffers;
use super::memo::{KeptBlocks, KeptLimits};
use crate::arguments::{self, type_name};
use crate::canonical::read_digest;
use crate::errors::{argument_error, IntoPy};
use crate::items::{read_attr, slot_value, tool_role, Attr, Role, Sort, Types};
pub use ctxengine_core::arguments::Path;

pub const F: &str = "fit_body";

/// The text of a str already checked (by `arguments::string`).
pub fn text<'a>(s: &'a Bound<'_, PyAny>) -> &'a str {
    let s = s.cast::<PyString>().ok().and_then(|s| s.to_str().ok());
    s.unwrap_or_default()
}

/// `owner.<name>`, or an `ArgumentError` naming it.
pub fn field<'py>(
    owner: &Bound<'py, PyAny>,
    path: Path<'_>,
    name: &Bound<'py, PyString>,
) -> PyResult<Bound<'py, PyAny>> {
    match owner.getattr_opt(name)? {
        Some(v) => Ok(v),
        None => Err(argument_error(
            owner.py(),
            F,
            path.to_string(),
            format!("missing from {}", type_name(owner)),
        )),
    }
}

/// How far ahead of the item being read the history scan fetches.
const AHEAD: usize = 8;

/// The history: conversation items, read into the core's form (raws to
/// come), each one's render and pointer from the line where it holds them,
/// else its digest key (`None` for an item not canonicalized yet, listed
/// in the result with the item).
///
/// `cached`: the line's entries a call read before (`line_state`): the
/// leading history items that are, with their renders and pointers, the
/// very objects of an entry are read from it (how many: `from_cache`).
pub fn history<'py>(
    inputs: &Bound<'py, PyAny>,
    line: Option<&super::line::Line<'py>>,
    cached: &[super::line_state::Entry],
    types: &mut Types,
    bufs: &mut Buffers,
) -> PyResult<HistoryRead<'py>> {
    let py = inputs.py();
    let name = "inputs.history";
    let history = field(
        inputs,
        Path::of("inputs", "history"),
        intern!(py, "history"),
    )?;
    let values = arguments::sequence(F, name, &history, "conversation items")?;
    let mut fresh = Vec::new();
    let mut ids: Vec<Bound<'py, PyAny>> = Vec::new();
    bufs.history.reserve(values.len());
    bufs.keys.reserve(values.len());
    bufs.held.reserve(values.len());
    // The fast path reads items, slots and keys without taking references:
    // nothing can free them while no Python code runs. Before a step that
    // may run Python code, `pin` takes references to what was borrowed.
    let mut i = 0;
    if let Some(l) = line {
        let (null, none) = (std::ptr::null_mut(), PyNone::get(py).as_ptr());
        for e in cached.iter().take(values.len()) {
            let (item, render, pointer) = (e.item.as_ptr(), e.render.as_ptr(), e.pointer_ptr(none));
            if values.ptr(i) != item || !l.same(i, item, render, pointer) {
                break;
            }
            bufs.history.push(e.history());
            bufs.keys.push(null);
            bufs.held
                .push((render, e.pointer.as_ref().map_or(null, |p| p.as_ptr())));
            i += 1;
        }
    }
    let from_cache = i;
    // (What the entries hold needs no pin: the caller holds them.)
    let mut pinned = from_cache;
    let pin = |bufs: &mut Buffers, pinned: &mut usize| {
        bufs.pin_borrowed(py, *pinned);
        *pinned = bufs.keys.len();
    };
    loop {
        let p = values.ptr(i);
        if p.is_null() {
            break;
        }
        // The item a few steps ahead, fetched while this one is read (a
        // history read once a turn is mostly out of the CPU's caches).
        crate::items::prefetch(values.ptr(i + AHEAD));
        // SAFETY: an item the sequence holds, borrowed while no Python code
        // runs; a step that may run some first pins what was borrowed and
        // takes a reference to the item (`to_owned`).
        let item = unsafe { Borrowed::from_ptr(py, p) };
        let t = match types.recent(item.get_type_ptr()) {
            Some(t) => t,
            None => {
                pin(bufs, &mut pinned);
                types.info(&item.to_owned())?
            }
        };
        let info = &types.infos[t];
        if !info.conversation {
            return Err(argument_error(
                py,
                F,
                format!("{name}[{i}]"),
                format!("expected a conversation item, got {}", type_name(&item)),
            ));
        }
        let (role, call_id, seq_how, cj_how) = (info.role, info.call_id, info.seq, info.cj);
        let slots = matches!((seq_how, cj_how), (Attr::Slot(_), Attr::Slot(_)))
            && (role == Role::Other || matches!(call_id, Attr::Slot(_)));
        if !slots {
            pin(bufs, &mut pinned);
        }
        // The id's text lives in `ids`, then in the buffers' pins, for the
        // whole call (the role's lifetime is that promise).
        let (tool_role, hash) = match role {
            Role::Other => (ctxengine_core::cut::ToolRole::Other, 0),
            _ => tool_role(&item.to_owned(), role, call_id, &mut ids, (F, name, i))?,
        };
        bufs.history.push(HistoryItem {
            raw: 0,
            seq: types.seq_of(&item, t)?,
            role: tool_role,
            hash,
        });
        let null = std::ptr::null_mut();
        if let Some(held) = line.and_then(|l| l.held(i, p, role == Role::Result)) {
            // The line's entry: no digest key, no table lookup.
            bufs.keys.push(null);
            bufs.held.push(held);
            i += 1;
            continue;
        }
        let cj = match cj_how {
            // SAFETY: a slot of this type's layout: the item holds its `_cj`.
            Attr::Slot(offset) => unsafe { slot_value(p, offset) },
            Attr::Lookup => match read_attr(&item.to_owned(), Attr::Lookup, intern!(py, "_cj"))? {
                Some(cj) => {
                    let ptr = cj.as_ptr();
                    bufs.pins.push(cj.unbind());
                    ptr
                }
                None => null,
            },
        };
        // SAFETY: null or live (held as above); a filled cache (read_digest
        // checks it) holds the digest at 1.
        let key = unsafe { read_digest(cj).map(|_| ffi::PyTuple_GET_ITEM(cj, 1)) };
        let key = key.unwrap_or_else(|| {
            fresh.push((i, item.to_owned()));
            null
        });
        bufs.keys.push(key);
        bufs.held.push((null, null));
        i += 1;
    }
    bufs.pins.extend(ids.into_iter().map(Bound::unbind));
    if !fresh.is_empty() {
        // Python code runs next (canonicalizing): hold every key.
        pin(bufs, &mut pinned);
    }
    Ok(HistoryRead {
        fresh,
        from_cache,
        values,
    })
}

/// What [`history`] read.
pub struct HistoryRead<'py> {
    /// Items not canonicalized yet, with their index.
    pub fresh: Vec<(usize, Bound<'py, PyAny>)>,
    /// The leading items read from the line's cache.
    pub from_cache: usize,
    /// The history as read.
    pub values: crate::items::Items<'py>,
}

/// A render table: a dict (looked up by item digest).
pub fn table<'py>(
    inputs: &Bound<'py, PyAny>,
    name: &'static str,
    interned: &Bound<'py, PyString>,
) -> PyResult<Bound<'py, PyDict>> {
    let value = field(inputs, Path::of("inputs", name), interned)?;
    value.cast_into::<PyDict>().map_err(|e| {
        let value = e.into_inner();
        argument_error(
            value.py(),
            F,
            format!("inputs.{name}"),
            format!("expected a dict, got {}", type_name(&value)),
        )
    })
}

/// One block as read (the strings checked: `text` reads them).
pub struct BlockIn<'py> {
    pub class: Bound<'py, PyAny>,
    pub kind: Kind,
    pub items: Vec<Bound<'py, PyAny>>,
    pub ids: Vec<Bound<'py, PyAny>>,
    pub max_items: Option<i64>,
    pub max_tokens: Option<i64>,
}

/// Every element of a sequence argument.
fn elements<'py>(
    name: Path<'_>,
    value: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let values = arguments::sequence(F, name, value, what)?;
    let mut out = Vec::with_capacity(values.len());
    let mut i = 0;
    while let Some(v) = values.get(i) {
        out.push(v);
        i += 1;
    }
    Ok(out)
}

/// Every item of a block is a rendered item (an item with the `_cj` cache).
fn rendered_items(types: &mut Types, items: &[Bound<'_, PyAny>], path: Path<'_>) -> PyResult<()> {
    for (index, item) in items.iter().enumerate() {
        let t = types.info(item)?;
        if types.infos[t].sort != Sort::Item {
            return Err(argument_error(
                item.py(),
                F,
                format!("{path}[{index}]"),
                format!("expected a rendered item, got {}", type_name(item)),
            ));
        }
    }
    Ok(())
}

/// The blocks, each of a known kind with rendered items; one history block.
/// `kept`: the line's memo of the last blocks read with it (`memo`).
pub fn blocks<'py>(
    inputs: &Bound<'py, PyAny>,
    types: &mut Types,
    kept: Option<&mut Option<KeptBlocks>>,
) -> PyResult<Vec<BlockIn<'py>>> {
    let py = inputs.py();
    let mut out: Vec<BlockIn<'py>> = Vec::new();
    let mut checks = BlockChecks::default();
    let all = field(inputs, Path::of("inputs", "blocks"), intern!(py, "blocks"))?;
    const B: &str = "inputs.blocks";
    let recalled = super::memo::recall(kept.as_ref().and_then(|k| k.as_ref()), &all);
    if let Some(kept) = recalled {
        // The same tuple as last time: its items' types checked again only.
        for (at, block) in kept.iter().enumerate() {
            rendered_items(types, &block.items, Path::at(B, at, "items"))?;
        }
        return Ok(kept);
    }
    for (at, block) in elements(Path::of(B, ""), &all, "blocks")?
        .into_iter()
        .enumerate()
    {
        let (block_at, part) = (Path::at(B, at, ""), |name| Path::at(B, at, name));
        let get = |name: &'static str, interned: &Bound<'py, PyString>| {
            field(&block, part(name), interned)
        };
        let class = get("region_class", intern!(py, "region_class"))?;
        arguments::string(F, part("region_class"), &class)?;
        let kind_obj = get("kind", intern!(py, "kind"))?;
        let kind_name = arguments::string(F, part("kind"), &kind_obj)?;
        let repr = || kind_obj.repr().map(|r| r.to_string()).unwrap_or_default();
        let kind = BlockChecks::kind(F, &block_at, kind_name, repr).into_py(py)?;
        let items = elements(part("items"), &get("items", intern!(py, "items"))?, "items")?;
        rendered_items(types, &items, part("items"))?;
        let ids = elements(part("ids"), &get("ids", intern!(py, "ids"))?, "ids")?;
        BlockChecks::ids(F, &block_at, kind, ids.len(), items.len()).into_py(py)?;
        for (index, id) in ids.iter().enumerate() {
            arguments::string(F, format_args!("{block_at}.ids[{index}]"), id)?;
        }
        let cap = |name, interned| arguments::optional_cap(F, part(name), &get(name, interned)?);
        let max_items = cap("max_items", intern!(py, "max_items"))?;
        let max_tokens = cap("max_tokens", intern!(py, "max_tokens"))?;
        checks.count(F, &block_at, kind).into_py(py)?;
        out.push(BlockIn {
            class,
            kind,
            items,
            ids,
            max_items,
            max_tokens,
        });
    }
    checks.finish(F).into_py(py)?;
    if let Some(kept) = kept {
        *kept = super::memo::keep(&all, &out);
    }
    Ok(out)
}

/// `BodyLimits`; `kept`: the line's memo of the last limits read with it.
pub fn limits(
    limits: &Bound<'_, PyAny>,
    kept: Option<&mut Option<KeptLimits>>,
) -> PyResult<BodyLimits> {
    if let Some(read) = super::memo::recall_limits(kept.as_ref().and_then(|k| k.as_ref()), limits) {
        return Ok(read);
    }
    let read = read_limits(limits)?;
    if let Some(kept) = kept {
        *kept = super::memo::keep_limits(limits, read);
    }
    Ok(read)
}

fn read_limits<'py>(limits: &Bound<'py, PyAny>) -> PyResult<BodyLimits> {
    let py = limits.py();
    let part = |name: &'static str| Path::of("limits", name);
    let get =
        |name: &'static str, interned: &Bound<'py, PyString>| field(limits, part(name), interned);
    let usable = arguments::int64(F, part("usable"), &get("usable", intern!(py, "usable"))?)?;
    let history_cap = get("history_cap", intern!(py, "history_cap"))?;
    let history_cap = arguments::int64(F, part("history_cap"), &history_cap)?;
    let tool_cap = arguments::int64(
        F,
        part("tool_cap"),
        &get("tool_cap", intern!(py, "tool_cap"))?,
    )?;
    let floor = get("summary_floor", intern!(py, "summary_floor"))?;
    let summary_floor = arguments::optional_int64(F, part("summary_floor"), &floor)?;
    let compactable = get("summary_compactable", intern!(py, "summary_compactable"))?;
    if !compactable.is_instance_of::<PyBool>() {
        return Err(argument_error(
            limits.py(),
            F,
            "limits.summary_compactable",
            format!("expected a bool, got {}", type_name(&compactable)),
        ));
    }
    Ok(BodyLimits {
        usable,
        history_cap,
        tool_cap,
        summary_floor,
        summary_compactable: compactable.is_truthy()?,
    })
}
