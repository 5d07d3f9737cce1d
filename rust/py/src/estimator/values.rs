//! Python values as the core's estimator checks see them
//! (`ctxengine_core::estimate::Values`): the binding says what a value is,
//! the core decides what is wrong with it.

use ctxengine_core::estimate::{Shape, Values};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyList, PyMapping, PyString, PyTuple};

use crate::arguments::{int_repr, is_int, type_name};
use crate::errors::HostError;

/// The values of one call (under the GIL).
pub struct PyValues<'py>(pub Python<'py>);

fn int_shape<'py>(v: &Bound<'py, PyAny>) -> Shape<Bound<'py, PyAny>> {
    let mut overflow: std::os::raw::c_int = 0;
    // SAFETY: an int (checked by the caller); conversions in C.
    unsafe {
        let n = ffi::PyLong_AsLongLongAndOverflow(v.as_ptr(), &mut overflow);
        let value = match overflow {
            0 => Ok(n),
            o => Err(o < 0),
        };
        let mut float = ffi::PyLong_AsDouble(v.as_ptr());
        if float == -1.0 && !ffi::PyErr_Occurred().is_null() {
            // Past the float range (an OverflowError in Python's float()).
            ffi::PyErr_Clear();
            float = if overflow < 0 {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            };
        }
        Shape::Int { value, float }
    }
}

impl<'py> Values for PyValues<'py> {
    type Value = Bound<'py, PyAny>;
    type Error = HostError;

    fn shape(&mut self, v: &Bound<'py, PyAny>) -> Result<Shape<Bound<'py, PyAny>>, HostError> {
        if v.is_none() {
            return Ok(Shape::None);
        }
        if is_int(v) {
            return Ok(int_shape(v));
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
