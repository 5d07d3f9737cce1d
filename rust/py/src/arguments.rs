//! Argument checks of the entry points (ADR 0010), worded as the reference
//! words them (`ctxengine/reference/arguments.py`): every entry point
//! checks its arguments in signature order before any work.

use std::fmt::Display;

use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyMapping, PyString};

use crate::errors::{argument_error, estimator_error};
use crate::items::Items;

pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".to_owned())
}

/// An int that is not a bool.
pub fn is_int(obj: &Bound<'_, PyAny>) -> bool {
    let ptr = obj.as_ptr();
    unsafe { ffi::PyLong_Check(ptr) != 0 && ffi::PyBool_Check(ptr) == 0 }
}

/// `int.__repr__(obj)`: the digits of an int's data, also for subclasses.
pub fn int_repr(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    let py = obj.py();
    // SAFETY: `obj` is an int; int's own repr slot reads its data.
    let text = unsafe {
        let repr = (*std::ptr::addr_of_mut!(ffi::PyLong_Type))
            .tp_repr
            .ok_or_else(|| PyErr::fetch(py))?;
        Bound::from_owned_ptr_or_err(py, repr(obj.as_ptr()))?
    };
    Ok(text.cast_into::<PyString>()?.to_string_lossy().into_owned())
}

/// A signed 64-bit int (not a bool).
pub fn int64(function: &str, name: impl Display, obj: &Bound<'_, PyAny>) -> PyResult<i64> {
    let py = obj.py();
    if !is_int(obj) {
        return Err(argument_error(
            py,
            function,
            name.to_string(),
            format!("expected an int, got {}", type_name(obj)),
        ));
    }
    int64_of(function, &name, obj)
}

fn int64_of(function: &str, name: impl Display, obj: &Bound<'_, PyAny>) -> PyResult<i64> {
    let mut overflow: std::os::raw::c_int = 0;
    // SAFETY: an int.
    let v = unsafe { ffi::PyLong_AsLongLongAndOverflow(obj.as_ptr(), &mut overflow) };
    if overflow != 0 {
        return Err(argument_error(
            obj.py(),
            function,
            name.to_string(),
            format!("out of range, got {}", int_repr(obj)?),
        ));
    }
    if v == -1 {
        if let Some(e) = PyErr::take(obj.py()) {
            return Err(e);
        }
    }
    Ok(v)
}

/// `None`, or a signed 64-bit int (not a bool).
pub fn optional_int64(
    function: &str,
    name: impl Display,
    obj: &Bound<'_, PyAny>,
) -> PyResult<Option<i64>> {
    if obj.is_none() {
        return Ok(None);
    }
    if !is_int(obj) {
        return Err(argument_error(
            obj.py(),
            function,
            name.to_string(),
            format!("expected an int or None, got {}", type_name(obj)),
        ));
    }
    int64_of(function, &name, obj).map(Some)
}

/// An int or a float (not a bool), as a float.
pub fn ratio(function: &str, name: impl Display, obj: &Bound<'_, PyAny>) -> PyResult<f64> {
    let py = obj.py();
    let ptr = obj.as_ptr();
    // SAFETY: type checks and conversions of a live object.
    unsafe {
        if ffi::PyFloat_Check(ptr) != 0 {
            return Ok(ffi::PyFloat_AS_DOUBLE(ptr));
        }
        if is_int(obj) {
            let v = ffi::PyLong_AsDouble(ptr);
            if v == -1.0 {
                if let Some(e) = PyErr::take(py) {
                    if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(py) {
                        return Err(argument_error(
                            py,
                            function,
                            name.to_string(),
                            format!("out of range, got {}", int_repr(obj)?),
                        ));
                    }
                    return Err(e);
                }
            }
            return Ok(v);
        }
    }
    Err(argument_error(
        py,
        function,
        name.to_string(),
        format!("expected a number, got {}", type_name(obj)),
    ))
}

/// A token limit compared with sums of whole-token counts (LangChain's
/// `max_tokens`): an int (a bool counts as one, as in LangChain) or a
/// float, as the 64-bit int that compares alike with every count sum:
/// rounded down and clamped, and NaN (which no sum is at most) as -1.
pub fn token_limit(function: &str, name: impl Display, obj: &Bound<'_, PyAny>) -> PyResult<i64> {
    let ptr = obj.as_ptr();
    // SAFETY: type checks and conversions of a live object.
    unsafe {
        if ffi::PyLong_Check(ptr) != 0 {
            let mut overflow: std::os::raw::c_int = 0;
            let v = ffi::PyLong_AsLongLongAndOverflow(ptr, &mut overflow);
            if v == -1 {
                if let Some(e) = PyErr::take(obj.py()) {
                    return Err(e);
                }
            }
            return Ok(match overflow {
                0 => v,
                o if o > 0 => i64::MAX,
                _ => i64::MIN,
            });
        }
        if ffi::PyFloat_Check(ptr) != 0 {
            let v = ffi::PyFloat_AS_DOUBLE(ptr);
            // `as` saturates: infinities and huge values clamp to the range.
            return Ok(if v.is_nan() { -1 } else { v.floor() as i64 });
        }
    }
    Err(argument_error(
        obj.py(),
        function,
        name.to_string(),
        format!("expected a number, got {}", type_name(obj)),
    ))
}

/// The arguments of a cut after its history (`select_history` and the
/// foreign-history cuts), checked in signature order.
pub struct CutArguments<'a> {
    pub summary_floor: Option<i64>,
    pub history_tokens: i64,
    pub model_id: &'a str,
}

/// `summary_floor` (an int or `None`), `history_tokens` (an int), the
/// estimator and `model_id`, as `check_cut_arguments` in the reference.
pub fn cut_arguments<'a>(
    function: &str,
    summary_floor: &Bound<'_, PyAny>,
    history_tokens: &Bound<'_, PyAny>,
    estimator: &Bound<'_, PyAny>,
    model_id: &'a Bound<'_, PyAny>,
) -> PyResult<CutArguments<'a>> {
    let summary_floor = optional_int64(function, "summary_floor", summary_floor)?;
    let history_tokens = int64(function, "history_tokens", history_tokens)?;
    estimator_like(function, estimator)?;
    let model_id = string(function, "model_id", model_id)?;
    Ok(CutArguments {
        summary_floor,
        history_tokens,
        model_id,
    })
}

/// A str that encodes as UTF-8 (no lone surrogate).
pub fn string<'a>(
    function: &str,
    name: impl Display,
    obj: &'a Bound<'_, PyAny>,
) -> PyResult<&'a str> {
    let py = obj.py();
    let s = obj.cast::<PyString>().map_err(|_| {
        argument_error(
            py,
            function,
            name.to_string(),
            format!("expected a str, got {}", type_name(obj)),
        )
    })?;
    utf8_str(s)
        .ok_or_else(|| argument_error(py, function, name.to_string(), "lone surrogate in string"))
}

/// The UTF-8 of a str, borrowed from it; `None` for a lone surrogate.
fn utf8_str<'a>(s: &'a Bound<'_, PyString>) -> Option<&'a str> {
    // SAFETY: CPython's UTF-8 of a str is valid UTF-8, cached in the str.
    unsafe { crate::canonical::utf8(s.as_ptr()).map(|b| std::str::from_utf8_unchecked(b)) }
}

/// Any object with callable `raw_estimates` and `corrected`.
pub fn estimator_like(function: &str, obj: &Bound<'_, PyAny>) -> PyResult<()> {
    let py = obj.py();
    let callable = |name: &Bound<'_, PyString>| -> PyResult<bool> {
        Ok(obj.getattr_opt(name)?.is_some_and(|f| f.is_callable()))
    };
    if callable(intern!(py, "raw_estimates"))? && callable(intern!(py, "corrected"))? {
        return Ok(());
    }
    Err(argument_error(
        py,
        function,
        "estimator",
        format!("expected a token estimator, got {}", type_name(obj)),
    ))
}

/// An iterable other than a str, bytes or a mapping.
fn iterable<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Option<Items<'py>>> {
    // Lists and tuples first: no abc check for the common case.
    if obj.is_instance_of::<pyo3::types::PyList>() || obj.is_instance_of::<pyo3::types::PyTuple>() {
        return Items::new(obj).map(Some);
    }
    if obj.is_instance_of::<PyString>()
        || obj.is_instance_of::<PyBytes>()
        || obj.is_instance_of::<PyByteArray>()
        || obj.cast::<PyMapping>().is_ok()
    {
        return Ok(None);
    }
    match obj.try_iter() {
        Ok(_) => Items::new(obj).map(Some),
        Err(_) => Ok(None),
    }
}

/// A sequence argument (`what` names its elements).
pub fn sequence<'py>(
    function: &str,
    name: impl Display,
    obj: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<Items<'py>> {
    iterable(obj)?.ok_or_else(|| {
        argument_error(
            obj.py(),
            function,
            name.to_string(),
            format!("expected a sequence of {what}, got {}", type_name(obj)),
        )
    })
}

/// Measured raw estimates: one non-negative 64-bit int per item.
pub fn raw_estimates(function: &str, obj: &Bound<'_, PyAny>, count: usize) -> PyResult<Vec<i64>> {
    let py = obj.py();
    let values = sequence(function, "raw", obj, "raw estimates")?;
    if values.len() != count {
        return Err(argument_error(
            py,
            function,
            "raw",
            format!("{} estimates for {count} items", values.len()),
        ));
    }
    let mut out = Vec::with_capacity(count);
    let mut i = 0;
    while let Some(v) = values.get(i) {
        let name = format!("raw[{i}]");
        let n = int64(function, &name, &v)?;
        if n < 0 {
            return Err(argument_error(
                py,
                function,
                name.to_string(),
                format!("must not be negative, got {n}"),
            ));
        }
        out.push(n);
        i += 1;
    }
    Ok(out)
}

/// What a foreign estimator's `raw_estimates` returned.
pub fn foreign_raws(obj: &Bound<'_, PyAny>, count: usize) -> PyResult<Vec<i64>> {
    let py = obj.py();
    let seq =
        obj.cast::<pyo3::types::PyList>().is_ok() || obj.cast::<pyo3::types::PyTuple>().is_ok();
    if !seq || obj.len()? != count {
        let got = if seq {
            obj.len()?.to_string()
        } else {
            type_name(obj)
        };
        return Err(estimator_error(
            py,
            format!("estimator.raw_estimates returned {got} estimates for {count} items"),
        ));
    }
    let mut out = Vec::with_capacity(count);
    for v in obj.try_iter()? {
        let v = v?;
        let n = if is_int(&v) {
            v.extract::<i64>().ok().filter(|n| *n >= 0)
        } else {
            None
        };
        match n {
            Some(n) => out.push(n),
            None => {
                return Err(estimator_error(
                    py,
                    format!(
                        "estimator.raw_estimates returned {}, not a count",
                        v.repr()?.to_string_lossy()
                    ),
                ))
            }
        }
    }
    Ok(out)
}

/// What a foreign estimator's `corrected` returned.
pub fn foreign_int(obj: &Bound<'_, PyAny>, method: &str) -> PyResult<i128> {
    if !is_int(obj) {
        return Err(estimator_error(
            obj.py(),
            format!("estimator.{method} returned {}, not an int", type_name(obj)),
        ));
    }
    obj.extract::<i128>()
}

/// The estimator methods' `model_id`.
pub fn model_id<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<&'a str> {
    let py = obj.py();
    let s = obj.cast::<PyString>().map_err(|_| {
        estimator_error(
            py,
            format!("model_id: expected a str, got {}", type_name(obj)),
        )
    })?;
    utf8_str(s).ok_or_else(|| estimator_error(py, "model_id: lone surrogate in string"))
}

/// The estimator methods' sequences of values.
pub fn values<'py>(name: &str, obj: &Bound<'py, PyAny>) -> PyResult<Items<'py>> {
    iterable(obj)?.ok_or_else(|| {
        estimator_error(
            obj.py(),
            format!(
                "{name}: expected a sequence of values, got {}",
                type_name(obj)
            ),
        )
    })
}
