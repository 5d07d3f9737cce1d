//! `count_tokens_approximately` of one message, natively for the common
//! shapes: this module reads the message; the count's rules are
//! `ctxengine_core::interop::approximate`.

use ctxengine_core::interop::approximate::{self as approx, repr, Approximate, BlockKind};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyString, PyTuple};

use super::{AI, SYSTEM, TOOL};

/// The approximate count natively, or `None` when a shape needs the reference.
pub(super) fn count_native(
    py: Python<'_>,
    m: &Bound<'_, PyAny>,
    content: &Bound<'_, PyAny>,
    name: &Bound<'_, PyAny>,
    kind: u8,
    role: &str,
    extra: &Bound<'_, PyAny>,
) -> PyResult<Option<i64>> {
    let mut count = if let Ok(s) = content.cast_exact::<PyString>() {
        Approximate::text_content(s.len()?)
    } else if let Ok(list) = content.cast_exact::<PyList>() {
        let mut count = Approximate::list_content();
        for block in list.iter() {
            if let Ok(s) = block.cast_exact::<PyString>() {
                count.text(s.len()?);
                continue;
            }
            let Ok(d) = block.cast_exact::<PyDict>() else {
                return Ok(None);
            };
            let t = d.get_item(intern!(py, "type"))?;
            let Some(Ok(t)) = t.as_ref().map(|t| t.cast_exact::<PyString>()) else {
                return Ok(None);
            };
            match approx::block_kind(t.to_str()?) {
                Some(BlockKind::Image) => count.image(),
                Some(BlockKind::Text) => {
                    if let Some(x) = d.get_item(intern!(py, "text"))? {
                        match x.cast_exact::<PyString>() {
                            Ok(s) => count.text(s.len()?),
                            Err(_) => return Ok(None),
                        }
                    }
                }
                None => return Ok(None),
            }
        }
        count
    } else {
        return Ok(None);
    };
    if kind == AI && count.counts_tool_calls(extra.is_truthy()?) {
        count.chars(match repr_len(extra, 0)? {
            Some(n) => n,
            None => extra.repr()?.len()?,
        });
    }
    if kind == TOOL {
        let Ok(id) = extra.cast_exact::<PyString>() else {
            return Ok(None);
        };
        count.chars(id.len()?);
    }
    if kind == SYSTEM {
        let kwargs = m.getattr(intern!(py, "additional_kwargs"))?;
        let Ok(kw) = kwargs.cast_exact::<PyDict>() else {
            return Ok(None);
        };
        match kw.get_item(intern!(py, "__openai_role__"))? {
            None => count.chars(approx::SYSTEM_ROLE.len()),
            Some(r) => match r.cast_exact::<PyString>() {
                Ok(s) => count.chars(s.len()?),
                Err(_) => return Ok(None),
            },
        }
    } else if role.is_empty() {
        return Ok(None); // ChatMessage: its own role field
    } else {
        count.chars(role.len());
    }
    if !name.is_none() {
        let Ok(n) = name.cast_exact::<PyString>() else {
            return Ok(None);
        };
        count.chars(n.len()?);
    }
    Ok(Some(count.finish()))
}

/// `len(repr(v))` for the JSON-like values tool calls hold, without
/// building the string (`approximate::repr`): ASCII strings, ints, bools,
/// `None`, dicts, lists and tuples natively; a float or a non-ASCII string
/// through its own `repr`; `None` (the caller reprs the whole value) past a
/// nesting depth that only a cycle would reach.
fn repr_len(v: &Bound<'_, PyAny>, depth: usize) -> PyResult<Option<usize>> {
    if depth > 64 {
        return Ok(None);
    }
    if let Ok(s) = v.cast_exact::<PyString>() {
        return Ok(Some(match repr::ascii_str(s.to_str()?) {
            Some(n) => n,
            None => s.repr()?.len()?,
        }));
    }
    if let Ok(b) = v.cast::<PyBool>() {
        return Ok(Some(repr::bool(b.is_true())));
    }
    if v.is_none() {
        return Ok(Some(repr::NONE));
    }
    if v.is_exact_instance_of::<pyo3::types::PyInt>() {
        return Ok(Some(match v.extract::<i64>() {
            Ok(i) => repr::int(i),
            Err(_) => v.repr()?.len()?,
        }));
    }
    if let Ok(d) = v.cast_exact::<PyDict>() {
        let mut parts = 0;
        for (k, x) in d.iter() {
            let (Some(a), Some(b)) = (repr_len(&k, depth + 1)?, repr_len(&x, depth + 1)?) else {
                return Ok(None);
            };
            parts += a + b;
        }
        return Ok(Some(repr::dict(d.len(), parts)));
    }
    let (tuple, items): (bool, Vec<Bound<'_, PyAny>>) = if let Ok(l) = v.cast_exact::<PyList>() {
        (false, l.iter().collect())
    } else if let Ok(t) = v.cast_exact::<PyTuple>() {
        (true, t.iter().collect())
    } else {
        return Ok(Some(v.repr()?.len()?));
    };
    let mut parts = 0;
    for x in &items {
        let Some(a) = repr_len(x, depth + 1)? else {
            return Ok(None);
        };
        parts += a;
    }
    Ok(Some(repr::sequence(tuple, items.len(), parts)))
}
