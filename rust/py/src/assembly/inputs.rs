//! `BodyInputs` and `BodyLimits` read from Python and checked, in the
//! reference's order (`check_body_inputs`, `check_limits`).

use ctxengine_core::body::{BlockChecks, BodyLimits, HistoryItem, Kind};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyString};

use super::line::Line;
use super::line_state::Entry;
use super::memo::{KeptBlocks, KeptLimits};
use crate::arguments::{self, type_name};
use crate::canonical::digest_of;
use crate::errors::{argument_error, IntoPy};
use crate::items::{read_attr, tool_role, Role, Sort, Types};
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

/// How far ahead of the item being read its successors are fetched.
const AHEAD: usize = 8;

/// One history item's render past the line state's entries, as read: the
/// line's (`item` set: an entry to keep), or the tables' by digest (`key`).
#[derive(Default)]
pub struct Row<'py> {
    pub render: Option<Bound<'py, PyAny>>,
    pub pointer: Option<Bound<'py, PyAny>>,
    pub key: Option<Bound<'py, PyAny>>,
    pub item: Option<Bound<'py, PyAny>>,
}

/// What [`history`] read: the history as the core reads it (its roles
/// borrow the entries' ids and `ids`), how many leading items the line
/// state served, each later item's [`Row`] and those not canonicalized yet
/// (indices from `from_cache` on).
pub struct HistoryRead<'py, 'e> {
    pub history: Vec<HistoryItem<'e>>,
    pub rows: Vec<Row<'py>>,
    pub fresh: Vec<(usize, Bound<'py, PyAny>)>,
    pub from_cache: usize,
    /// The call ids the roles borrow.
    pub ids: Vec<Bound<'py, PyAny>>,
}

/// The history: conversation items, read into the core's form, each with
/// where its render comes from. `cached`: the line state's entries; the
/// leading items that are, with the line's renders and pointers, the very
/// objects of an entry are read from it.
pub fn history<'py, 'e>(
    inputs: &Bound<'py, PyAny>,
    line: Option<&Line<'py>>,
    cached: &'e [Entry],
    types: &mut Types,
) -> PyResult<HistoryRead<'py, 'e>> {
    let py = inputs.py();
    let name = "inputs.history";
    let path = Path::of("inputs", "history");
    let history = field(inputs, path, intern!(py, "history"))?;
    let values = arguments::sequence(F, name, &history, "conversation items")?;
    let n = values.len();
    let mut read = HistoryRead {
        history: Vec::with_capacity(n),
        rows: Vec::new(),
        fresh: Vec::new(),
        from_cache: 0,
        ids: Vec::new(),
    };
    if let Some(l) = line {
        for (i, e) in cached.iter().enumerate().take(n) {
            if values.ptr(i) != e.item.as_ptr() || !l.same(i, e) {
                break;
            }
            read.history.push(e.facts.history());
        }
    }
    read.from_cache = read.history.len();
    let mut i = read.from_cache;
    while let Some(item) = values.get(i) {
        // What the next items' reads wait on, fetched while this one is read.
        crate::items::prefetch(values.ptr(i + AHEAD));
        if let Some(l) = line {
            l.prefetch(i + AHEAD);
        }
        let t = types.info(&item)?;
        let info = &types.infos[t];
        if !info.conversation {
            return Err(argument_error(
                py,
                F,
                format!("{name}[{i}]"),
                format!("expected a conversation item, got {}", type_name(&item)),
            ));
        }
        let (role, call_id, cj_how) = (info.role, info.call_id, info.cj);
        let (tool_role, hash) = tool_role(&item, role, call_id, &mut read.ids, (F, name, i))?;
        let seq = types.seq_of(&item, t)?;
        read.history.push(HistoryItem {
            raw: 0,
            seq,
            role: tool_role,
            hash,
        });
        let row = match line.and_then(|l| l.held(i, &item, role == Role::Result)) {
            Some((render, pointer)) => Row {
                render: Some(render),
                pointer,
                key: None,
                item: Some(item),
            },
            None => {
                let cj = read_attr(&item, cj_how, intern!(py, "_cj"))?;
                let key = match cj {
                    Some(cj) if digest_of(&cj).is_some() => Some(cj.get_item(1)?),
                    _ => {
                        read.fresh.push((i, item));
                        None
                    }
                };
                Row {
                    key,
                    ..Row::default()
                }
            }
        };
        read.rows.push(row);
        i += 1;
    }
    Ok(read)
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
    Ok((0..values.len()).map_while(|i| values.get(i)).collect())
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
    let int = |name, interned| arguments::int64(F, part(name), &get(name, interned)?);
    let usable = int("usable", intern!(py, "usable"))?;
    let history_cap = int("history_cap", intern!(py, "history_cap"))?;
    let tool_cap = int("tool_cap", intern!(py, "tool_cap"))?;
    let floor = get("summary_floor", intern!(py, "summary_floor"))?;
    let summary_floor = arguments::optional_int64(F, part("summary_floor"), &floor)?;
    let compactable = get("summary_compactable", intern!(py, "summary_compactable"))?;
    if !compactable.is_instance_of::<PyBool>() {
        return Err(argument_error(
            py,
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
