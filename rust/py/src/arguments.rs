//! Python values as the core's checks see them: an argument as
//! `ctxengine_core::arguments::Value`, the estimator's settings, counts and
//! snapshots as `ctxengine_core::estimate::Values` ([`PyValues`]).

use std::fmt::Display;

use ctxengine_core::arguments::{self as check, Arg, Value};
use ctxengine_core::estimate::{Shape, Values};
use ctxengine_core::CoreResult;
use pyo3::exceptions::PyOverflowError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyMapping};
use pyo3::types::{PyString, PyTuple};

use crate::errors::{HostError, IntoPy};
use crate::items::Items;

pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string())
}

pub fn is_int(obj: &Bound<'_, PyAny>) -> bool {
    obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<PyBool>()
}

/// `int.__repr__(obj)` (not a subclass's `__repr__`).
pub fn int_repr(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    let py = obj.py();
    let repr = py.get_type::<PyInt>().getattr(intern!(py, "__repr__"))?;
    Ok(repr.call1((obj,))?.str()?.to_string_lossy().into_owned())
}

fn value_of<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<Value<'a>> {
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(s.to_str().map_or(Value::Surrogate, Value::Str));
    }
    if obj.is_none() {
        return Ok(Value::None);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Ok(Value::Float(f.value()));
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Value::Bytes(b.as_bytes()));
    }
    if !obj.is_instance_of::<PyInt>() {
        return Ok(Value::Other);
    }
    // (`PyLong_AsLong` reads an int's own data, also a subclass's.)
    match obj.extract::<i64>() {
        Ok(v) => Ok(Value::Int(v)),
        Err(e) if !e.is_instance_of::<PyOverflowError>(obj.py()) => Err(e),
        Err(_) => Ok(Value::big_int(int_repr(obj)?)),
    }
}

pub fn checked<'a, T>(
    obj: &'a Bound<'_, PyAny>,
    check: impl FnOnce(&Arg<'a, '_>) -> CoreResult<T>,
) -> PyResult<T> {
    let name = || type_name(obj);
    let arg = Arg {
        value: value_of(obj)?,
        type_name: &name,
    };
    check(&arg).into_py(obj.py())
}

/// `NAME(function, name, obj)`: `obj` checked by the core's check of that name.
macro_rules! checks {
    ($($check:ident -> $out:ty;)*) => {$(
        #[allow(clippy::needless_lifetimes)]
        pub fn $check<'a>(function: &str, name: impl Display, obj: &'a Bound<'_, PyAny>) -> PyResult<$out> {
            checked(obj, |a| check::$check(function, &name, a))
        }
    )*};
}

checks! {
    int64 -> i64;
    optional_int64 -> Option<i64>;
    optional_cap -> Option<i64>;
    ratio -> f64;
    token_limit -> i64;
    string -> &'a str;
    bytes -> &'a [u8];
}

pub struct CutArguments<'a> {
    pub summary_floor: Option<i64>,
    pub history_tokens: i64,
    pub model_id: &'a str,
}

/// As `check_cut_arguments` in the reference.
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

/// Any object with callable `raw_estimates` and `corrected`.
pub fn estimator_like(function: &str, obj: &Bound<'_, PyAny>) -> PyResult<()> {
    let py = obj.py();
    let callable = |name: &Bound<'_, PyString>| -> PyResult<bool> {
        Ok(obj.getattr_opt(name)?.is_some_and(|f| f.is_callable()))
    };
    if callable(intern!(py, "raw_estimates"))? && callable(intern!(py, "corrected"))? {
        return Ok(());
    }
    Err(check::not_an_estimator(function, &type_name(obj))).into_py(py)
}

/// An iterable other than a str, bytes or a mapping.
fn iterable<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Option<Items<'py>>> {
    let sequence = obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>();
    if !sequence
        && (obj.is_instance_of::<PyString>()
            || obj.is_instance_of::<PyBytes>()
            || obj.is_instance_of::<PyByteArray>()
            || obj.cast::<PyMapping>().is_ok()
            || obj.try_iter().is_err())
    {
        return Ok(None);
    }
    Items::new(obj).map(Some)
}

/// `what` names the elements.
pub fn sequence<'py>(
    function: &str,
    name: impl Display,
    obj: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<Items<'py>> {
    iterable(obj)?
        .ok_or_else(|| check::not_a_sequence(function, &name, what, &type_name(obj)))
        .into_py(obj.py())
}

pub fn raw_estimates(function: &str, obj: &Bound<'_, PyAny>, count: usize) -> PyResult<Vec<i64>> {
    let py = obj.py();
    let values = sequence(function, "raw", obj, "raw estimates")?;
    check::raw_count(function, values.len(), count).into_py(py)?;
    let mut out = Vec::with_capacity(count);
    while let Some(v) = values.get(out.len()) {
        let index = out.len();
        out.push(checked(&v, |a| check::raw_estimate(function, index, a))?);
    }
    Ok(out)
}

/// What a foreign estimator's `raw_estimates` returned.
pub fn foreign_raws(obj: &Bound<'_, PyAny>, count: usize) -> PyResult<Vec<i64>> {
    let py = obj.py();
    if !(obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>()) {
        return Err(check::foreign_raw_count(&type_name(obj), count)).into_py(py);
    }
    if obj.len()? != count {
        return Err(check::foreign_raw_count(&obj.len()?.to_string(), count)).into_py(py);
    }
    let raw = |v: PyResult<Bound<'_, PyAny>>| {
        let v = v?;
        let repr = || PyResult::Ok(v.repr()?.to_string_lossy().into_owned());
        check::foreign_raw(&value_of(&v)?, repr)?.into_py(py)
    };
    obj.try_iter()?.map(raw).collect()
}

/// What a foreign estimator's `corrected` returned.
pub fn foreign_int(obj: &Bound<'_, PyAny>, method: &str) -> PyResult<i128> {
    if !is_int(obj) {
        return Err(check::foreign_not_int(method, &type_name(obj))).into_py(obj.py());
    }
    obj.extract::<i128>()
}

pub fn values<'py>(name: &str, obj: &Bound<'py, PyAny>) -> PyResult<Items<'py>> {
    iterable(obj)?
        .ok_or_else(|| check::not_values(name, &type_name(obj)))
        .into_py(obj.py())
}

pub struct PyValues<'py>(pub Python<'py>);

impl<'py> Values for PyValues<'py> {
    type Value = Bound<'py, PyAny>;
    type Error = HostError;

    fn shape(&mut self, v: &Bound<'py, PyAny>) -> Result<Shape<Bound<'py, PyAny>>, HostError> {
        let scalar = value_of(v)?;
        if !matches!(scalar, Value::Other) {
            return Ok(scalar.into());
        }
        if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
            return Ok(Shape::Sequence(v.try_iter()?.collect::<PyResult<_>>()?));
        }
        if let Ok(d) = v.cast::<PyDict>() {
            return Ok(Shape::Mapping(d.iter().collect()));
        }
        if v.cast::<PyMapping>().is_ok() {
            let items = v.call_method0(intern!(v.py(), "items"))?.try_iter()?;
            return Ok(Shape::Mapping(
                items.map(|p| p?.extract()).collect::<PyResult<_>>()?,
            ));
        }
        Ok(Shape::Other)
    }

    fn repr(&mut self, v: &Bound<'py, PyAny>) -> Result<String, HostError> {
        if is_int(v) {
            return Ok(int_repr(v)?);
        }
        Ok(v.repr()?.to_string_lossy().into_owned())
    }

    fn text(&mut self, v: &Bound<'py, PyAny>) -> Result<String, HostError> {
        Ok(v.str()?.to_string_lossy().into_owned())
    }

    fn type_name(&mut self, v: &Bound<'py, PyAny>) -> String {
        type_name(v)
    }
}
