//! Python objects read as the core's foreign values
//! (`ctxengine_core::interop::value::Value`): the one place the interop
//! conversions touch a Python object. Exact types only, as the fast path
//! needs (an int is any int but a bool, as the reference reads a `seq`).

use ctxengine_core::interop::value::Value;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyString, PyTuple};

/// A borrowed Python value.
pub struct PyValue<'py>(pub Bound<'py, PyAny>);

impl Value for PyValue<'_> {
    fn str(&self) -> Option<&str> {
        self.0.cast_exact::<PyString>().ok()?.to_str().ok()
    }

    fn int(&self) -> Option<i64> {
        let v = &self.0;
        if v.is_instance_of::<PyBool>() || !v.is_instance_of::<PyInt>() {
            return None;
        }
        v.extract::<i64>().ok()
    }

    fn bool(&self) -> Option<bool> {
        self.0.cast_exact::<PyBool>().ok().map(|b| b.is_true())
    }

    fn is_null(&self) -> bool {
        self.0.is_none()
    }

    fn dict_len(&self) -> Option<usize> {
        self.0.cast_exact::<PyDict>().ok().map(|d| d.len())
    }

    fn get(&self, key: &str) -> Option<Self> {
        let d = self.0.cast_exact::<PyDict>().ok()?;
        d.get_item(key).ok()?.map(PyValue)
    }

    fn members(&self, mut f: impl FnMut(Option<&str>, Self) -> Option<()>) -> Option<()> {
        let d = self.0.cast_exact::<PyDict>().ok()?;
        for (k, v) in d.iter() {
            let key = k
                .cast_exact::<PyString>()
                .ok()
                .and_then(|s| s.to_str().ok());
            f(key, PyValue(v))?;
        }
        Some(())
    }

    fn elements(&self, mut f: impl FnMut(Self) -> Option<()>) -> Option<()> {
        let list = self.0.cast_exact::<PyList>().ok()?;
        for v in list.iter() {
            f(PyValue(v))?;
        }
        Some(())
    }

    fn chars(&self) -> Option<usize> {
        self.0.cast_exact::<PyString>().ok()?.len().ok()
    }

    fn exact_int(&self) -> Option<i64> {
        let v = self.0.cast_exact::<PyInt>().ok()?;
        v.extract::<i64>().ok()
    }

    fn truthy(&self) -> Option<bool> {
        self.0.is_truthy().ok()
    }

    fn tuple_elements(&self, mut f: impl FnMut(Self) -> Option<()>) -> Option<()> {
        let tuple = self.0.cast_exact::<PyTuple>().ok()?;
        for v in tuple.iter() {
            f(PyValue(v))?;
        }
        Some(())
    }

    fn repr_len(&self) -> Option<usize> {
        self.0.repr().ok()?.len().ok()
    }
}
