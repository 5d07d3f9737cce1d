//! `count_tokens_approximately` of one message, natively for the common
//! shapes.

use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

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
    let mut chars: usize = 0;
    let mut tokens: i64 = 0;
    let is_list = if let Ok(s) = content.cast_exact::<PyString>() {
        chars += s.len()?;
        false
    } else if let Ok(list) = content.cast_exact::<PyList>() {
        for block in list.iter() {
            if let Ok(s) = block.cast_exact::<PyString>() {
                chars += s.len()?;
                continue;
            }
            let Ok(d) = block.cast_exact::<PyDict>() else {
                return Ok(None);
            };
            let t = d.get_item(intern!(py, "type"))?;
            let Some(t) = t else { return Ok(None) };
            let Ok(t) = t.cast_exact::<PyString>() else {
                return Ok(None);
            };
            match t.to_str()? {
                "image" | "image_url" => tokens += 85,
                "text" => {
                    if let Some(x) = d.get_item(intern!(py, "text"))? {
                        match x.cast_exact::<PyString>() {
                            Ok(s) => chars += s.len()?,
                            Err(_) => return Ok(None),
                        }
                    }
                }
                _ => return Ok(None),
            }
        }
        true
    } else {
        return Ok(None);
    };
    if kind == AI && !is_list && extra.is_truthy()? {
        chars += match repr_len(extra, 0)? {
            Some(n) => n,
            None => extra.repr()?.len()?,
        };
    }
    if kind == TOOL {
        let Ok(id) = extra.cast_exact::<PyString>() else {
            return Ok(None);
        };
        chars += id.len()?;
    }
    if kind == SYSTEM {
        let kwargs = m.getattr(intern!(py, "additional_kwargs"))?;
        let Ok(kw) = kwargs.cast_exact::<PyDict>() else {
            return Ok(None);
        };
        match kw.get_item(intern!(py, "__openai_role__"))? {
            None => chars += "system".len(),
            Some(r) => match r.cast_exact::<PyString>() {
                Ok(s) => chars += s.len()?,
                Err(_) => return Ok(None),
            },
        }
    } else if role.is_empty() {
        return Ok(None); // ChatMessage: its own role field
    } else {
        chars += role.len();
    }
    if !name.is_none() {
        let Ok(n) = name.cast_exact::<PyString>() else {
            return Ok(None);
        };
        chars += n.len()?;
    }
    Ok(Some(tokens + chars.div_ceil(4) as i64 + 3))
}

/// `len(repr(v))` for the JSON-like values tool calls hold, without
/// building the string: ASCII strings, ints, bools, `None`, dicts, lists
/// and tuples natively; a float or a non-ASCII string through its own
/// `repr`; `None` (the caller reprs the whole value) past a nesting depth
/// that only a cycle would reach.
fn repr_len(v: &Bound<'_, PyAny>, depth: usize) -> PyResult<Option<usize>> {
    if depth > 64 {
        return Ok(None);
    }
    let p = v.as_ptr();
    if let Ok(s) = v.cast_exact::<PyString>() {
        let text = s.to_str()?;
        if !text.is_ascii() {
            return Ok(Some(s.repr()?.len()?));
        }
        let bytes = text.as_bytes();
        // Python quotes with ' unless the text holds ' and no ".
        let quote = if bytes.contains(&b'\'') && !bytes.contains(&b'"') {
            b'"'
        } else {
            b'\''
        };
        let mut n = 2;
        for &c in bytes {
            n += match c {
                b'\\' | b'\t' | b'\n' | b'\r' => 2,
                _ if c == quote => 2,
                0..=0x1f | 0x7f => 4,
                _ => 1,
            };
        }
        return Ok(Some(n));
    }
    if unsafe { ffi::PyBool_Check(p) } != 0 {
        return Ok(Some(if v.is_truthy()? { 4 } else { 5 }));
    }
    if v.is_none() {
        return Ok(Some(4));
    }
    if unsafe { ffi::PyLong_CheckExact(p) } != 0 {
        return Ok(Some(match v.extract::<i64>() {
            Ok(i) => {
                i.unsigned_abs()
                    .checked_ilog10()
                    .map_or(1, |d| d as usize + 1)
                    + usize::from(i < 0)
            }
            Err(_) => v.repr()?.len()?,
        }));
    }
    if let Ok(d) = v.cast_exact::<PyDict>() {
        let mut n = 2 + 2 * d.len().saturating_sub(1);
        for (k, x) in d.iter() {
            let (Some(a), Some(b)) = (repr_len(&k, depth + 1)?, repr_len(&x, depth + 1)?) else {
                return Ok(None);
            };
            n += a + 2 + b;
        }
        return Ok(Some(n));
    }
    let (open, items): (usize, Vec<Bound<'_, PyAny>>) = if let Ok(l) = v.cast_exact::<PyList>() {
        (0, l.iter().collect())
    } else if let Ok(t) = v.cast_exact::<PyTuple>() {
        (usize::from(t.len() == 1), t.iter().collect())
    } else {
        return Ok(Some(v.repr()?.len()?));
    };
    let mut n = 2 + open + 2 * items.len().saturating_sub(1);
    for x in &items {
        let Some(a) = repr_len(x, depth + 1)? else {
            return Ok(None);
        };
        n += a;
    }
    Ok(Some(n))
}
