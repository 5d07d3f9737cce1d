//! `mappings_cut`: the cut over a history kept as the items' `to_dict()`
//! mappings. A mapping that is exactly an item's dict form has the item's
//! canonical bytes, so it is measured as it stands (by length, no item
//! built); anything else goes to the reference, which decodes each mapping
//! with `item_from_dict` and raises its error.

use ctxengine_core::calibrate::apply;
use ctxengine_core::cut::{self, ToolRole};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyString};

use super::{fast_cut, FastCut};
use crate::canonical::walker;
use crate::errors::{guard, to_pyerr};

const TRUST: [&str; 7] = [
    "platform",
    "trusted_configuration",
    "user",
    "internal_tool",
    "external_untrusted",
    "memory",
    "knowledge",
];

/// The keys of each item kind's dict form.
fn keys_of(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "system_message" | "assistant_message" => &["type", "content", "trust", "seq"],
        "user_message" => &["type", "content", "trust", "principal_id", "seq"],
        "tool_call" => &["type", "call_id", "name", "arguments", "seq"],
        "tool_result" => &["type", "call_id", "content", "is_error", "trust", "seq"],
        "reasoning" => &["type", "provider", "payload", "seq"],
        _ => return None,
    })
}

fn exact_str<'a>(v: &'a Bound<'_, PyAny>) -> Option<&'a str> {
    v.cast_exact::<PyString>().ok()?.to_str().ok()
}

fn is_part(v: &Bound<'_, PyAny>) -> Option<()> {
    let d = v.cast_exact::<PyDict>().ok()?;
    let kind = d.get_item("type").ok()??;
    match exact_str(&kind)? {
        "text_part" if d.len() == 2 => {
            exact_str(&d.get_item("text").ok()??)?;
        }
        "file_ref" if d.len() == 4 => {
            exact_str(&d.get_item("artifact_id").ok()??)?;
            exact_str(&d.get_item("media_type").ok()??)?;
            let f = d.get_item("filename").ok()??;
            if !f.is_none() {
                exact_str(&f)?;
            }
        }
        _ => return None,
    }
    Some(())
}

/// A tool call (`true`) or result (`false`) and its call id.
type PairRole = Option<(bool, String)>;

/// `(role, seq)` of a mapping that is exactly an item's dict form.
fn check(d: &Bound<'_, PyDict>) -> Option<(PairRole, Option<i64>)> {
    let kind = d.get_item("type").ok()??;
    let kind = exact_str(&kind)?;
    let keys = keys_of(kind)?;
    if d.len() != keys.len() {
        return None;
    }
    let get = |k: &str| d.get_item(k).ok().flatten();
    let mut role = None;
    for &k in keys {
        let v = get(k)?;
        match k {
            "type" => {}
            "content" => {
                if v.cast_exact::<PyString>().is_err() {
                    let list = v.cast_exact::<PyList>().ok()?;
                    for part in list.iter() {
                        is_part(&part)?;
                    }
                }
            }
            "trust" => {
                if !TRUST.contains(&exact_str(&v)?) {
                    return None;
                }
            }
            "principal_id" => {
                if !v.is_none() {
                    exact_str(&v)?;
                }
            }
            "seq" => {}
            "call_id" => {
                let id = exact_str(&v)?;
                if id.is_empty() {
                    return None;
                }
                role = Some((kind == "tool_call", id.to_owned()));
            }
            "name" | "provider" => {
                exact_str(&v)?;
            }
            "arguments" | "payload" => {
                v.cast_exact::<PyDict>().ok()?;
            }
            "is_error" => {
                v.cast_exact::<PyBool>().ok()?;
            }
            _ => return None,
        }
    }
    let seq = get("seq")?;
    let seq = if seq.is_none() {
        None
    } else {
        if seq.is_instance_of::<PyBool>() || !seq.is_instance_of::<PyInt>() {
            return None;
        }
        Some(seq.extract::<i64>().ok()?)
    };
    Some((role, seq))
}

/// The cut over item dicts (see `ctxengine.interop.mappings.select_history`);
/// `-1 - i` when mapping `i` needs the reference, `-1` when the input is
/// not taken at all (not a list, another estimator). The cut's arguments
/// are checked as `select_history` checks them, before any mapping is read.
#[pyfunction]
pub fn mappings_cut(
    py: Python<'_>,
    mappings: &Bound<'_, PyAny>,
    summary_floor: &Bound<'_, PyAny>,
    history_tokens: &Bound<'_, PyAny>,
    estimator: &Bound<'_, PyAny>,
    model_id: &Bound<'_, PyAny>,
) -> PyResult<i64> {
    guard(py, || {
        let Some(FastCut {
            list,
            summary_floor,
            history_tokens,
            profile,
            factor,
        }) = fast_cut(mappings, summary_floor, history_tokens, estimator, model_id)?
        else {
            return Ok(-1);
        };
        let n = list.len();
        let mut raws = Vec::with_capacity(n);
        let mut seqs = Vec::with_capacity(n);
        let mut ids: Vec<PairRole> = Vec::with_capacity(n);
        let mut walker = walker(py, Vec::with_capacity(1024));
        for (i, m) in list.iter().enumerate() {
            let back = Ok(-1 - i as i64);
            let Ok(d) = m.cast_exact::<PyDict>() else {
                return back;
            };
            let Some((role, seq)) = check(d) else {
                return back;
            };
            walker.out.clear();
            if walker.write_root(m.as_ptr()).is_err() {
                return back;
            }
            let Ok(raw) = profile.raw(walker.out.len()) else {
                return back;
            };
            raws.push(raw);
            seqs.push(seq);
            ids.push(role);
        }
        let roles: Vec<ToolRole<'_>> = ids
            .iter()
            .map(|r| match r {
                None => ToolRole::Other,
                Some((true, id)) => ToolRole::Call(id),
                Some((false, id)) => ToolRole::Result(id),
            })
            .collect();
        let result_of = cut::validate_tool_pairs(&roles).map_err(|e| to_pyerr(py, e))?;
        let c = cut::cut_after_validation(
            &raws,
            &seqs,
            &result_of,
            summary_floor,
            history_tokens as i128,
            |s| apply(s, factor),
        )
        .map_err(|e| to_pyerr(py, e))?;
        Ok(c as i64)
    })
}
