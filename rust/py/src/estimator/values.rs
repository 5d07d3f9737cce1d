//! Python values as the core's estimator checks see them
//! (`ctxengine_core::estimate::Values`): the binding says what a value is,
//! the core decides what is wrong with it.

use ctxengine_core::estimate::{Shape, Values};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyList, PyMapping, PyString, PyTuple};

use crate::arguments::{int_repr, int_value, is_int, type_name};
use crate::errors::HostError;

/// The values of one call (under the GIL).
pub struct PyValues<'py>(pub Python<'py>);

/// An int's shape: its value within 64 bits, and its float (infinite past
/// the float range, as Python's `float()` would overflow).
fn int_shape<'py>(v: &Bound<'py, PyAny>) -> PyResult<Shape<Bound<'py, PyAny>>> {
    Ok(match int_value(v)? {
        Ok(n) => Shape::Int {
            value: Ok(n),
            float: n as f64,
        },
        Err((negative, float)) => Shape::Int {
            value: Err(negative),
            float: float.unwrap_or(if negative {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }),
        },
    })
}

impl<'py> Values for PyValues<'py> {
    type Value = Bound<'py, PyAny>;
    type Error = HostError;

    fn shape(&mut self, v: &Bound<'py, PyAny>) -> Result<Shape<Bound<'py, PyAny>>, HostError> {
        if v.is_none() {
            return Ok(Shape::None);
        }
        if is_int(v) {
            return Ok(int_shape(v)?);
        }
        if let Ok(f) = v.cast::<PyFloat>() {
            return Ok(Shape::Float(f.value()));
        }
        if let Ok(s) = v.cast::<PyString>() {
            return Ok(Shape::Str(s.to_str().ok().map(str::to_owned)));
        }
        if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
            let mut out = Vec::new();
            for x in v.try_iter()? {
                out.push(x?);
            }
            return Ok(Shape::Sequence(out));
        }
        if let Ok(d) = v.cast::<PyDict>() {
            return Ok(Shape::Mapping(d.iter().collect()));
        }
        if v.cast::<PyMapping>().is_ok() {
            let mut out = Vec::new();
            for pair in v.call_method0("items")?.try_iter()? {
                out.push(pair?.extract()?);
            }
            return Ok(Shape::Mapping(out));
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
