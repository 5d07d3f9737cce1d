//! The core's plain data (`ctxengine_core::data::Data`) as Python objects:
//! the one builder of whole results the core hands back (a snapshot, the
//! memo's numbers).

use ctxengine_core::data::Data;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// `data` as Python objects: None, bool, int, float, str, list, dict.
pub fn to_py<'py>(py: Python<'py>, data: &Data) -> PyResult<Bound<'py, PyAny>> {
    Ok(match data {
        Data::None => py.None().into_bound(py),
        Data::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        Data::Int(n) => n.into_pyobject(py)?.into_any(),
        Data::Float(f) => f.into_pyobject(py)?.into_any(),
        Data::Str(s) => s.into_pyobject(py)?.into_any(),
        Data::List(values) => {
            let values = values.iter().map(|v| to_py(py, v));
            PyList::new(py, values.collect::<PyResult<Vec<_>>>()?)?.into_any()
        }
        Data::Dict(pairs) => {
            let d = PyDict::new(py);
            for (k, v) in pairs {
                d.set_item(k, to_py(py, v)?)?;
            }
            d.into_any()
        }
    })
}
