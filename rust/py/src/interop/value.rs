//! Python objects read as the core's foreign values
//! (`ctxengine_core::interop::value::Value`). Exact types only, as the fast
//! path needs (an int is any int but a bool, as the reference reads a `seq`).

use ctxengine_core::interop::value::Value;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyString, PyTuple};

/// A borrowed Python value.
pub struct PyValue<'py>(pub Bound<'py, PyAny>);

impl<'py> PyValue<'py> {
    fn exact<T: pyo3::PyTypeInfo>(&self) -> Option<&Bound<'py, T>> {
        self.0.cast_exact::<T>().ok()
    }
}

impl Value for PyValue<'_> {
    fn str(&self) -> Option<&str> {
        self.exact::<PyString>()?.to_str().ok()
    }

    fn int(&self) -> Option<i64> {
        let int = self.0.is_instance_of::<PyInt>() && !self.0.is_instance_of::<PyBool>();
        int.then(|| self.0.extract().ok()).flatten()
    }

    fn bool(&self) -> Option<bool> {
        Some(self.exact::<PyBool>()?.is_true())
    }

    fn is_null(&self) -> bool {
        self.0.is_none()
    }

    fn dict_len(&self) -> Option<usize> {
        Some(self.exact::<PyDict>()?.len())
    }

    fn get(&self, key: &str) -> Option<Self> {
        self.exact::<PyDict>()?.get_item(key).ok()?.map(PyValue)
    }

    fn members(&self, mut f: impl FnMut(Option<&str>, Self) -> Option<()>) -> Option<()> {
        for (k, v) in self.exact::<PyDict>()? {
            f(PyValue(k).str(), PyValue(v))?;
        }
        Some(())
    }

    fn elements(&self, f: impl FnMut(Self) -> Option<()>) -> Option<()> {
        self.exact::<PyList>()?.iter().map(PyValue).try_for_each(f)
    }

    fn chars(&self) -> Option<usize> {
        self.exact::<PyString>()?.len().ok()
    }

    fn exact_int(&self) -> Option<i64> {
        self.exact::<PyInt>()?.extract().ok()
    }

    fn truthy(&self) -> Option<bool> {
        self.0.is_truthy().ok()
    }

    fn tuple_elements(&self, f: impl FnMut(Self) -> Option<()>) -> Option<()> {
        self.exact::<PyTuple>()?.iter().map(PyValue).try_for_each(f)
    }

    fn repr_len(&self) -> Option<usize> {
        self.0.repr().ok()?.len().ok()
    }
}
