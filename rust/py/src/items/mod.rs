//! Python items (`Items`), their types' facts (`types`), their attributes
//! (`slots`) and one pass over them (`scan`).

mod scan;
mod slots;
mod types;

pub use scan::{canonicalize_pending, scan, Facts, Scan, Want};
pub use slots::{member_offset, prefetch, read_attr, tool_role, type_fields, version_of};
pub use types::{Role, Sort, Types};

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

/// A list or a tuple (the items of any other iterable in a new list);
/// indexed access that stays safe if Python code run mid-pass changes a list.
pub enum Items<'py> {
    List(Bound<'py, PyList>),
    Tuple(Bound<'py, PyTuple>),
}

impl<'py> Items<'py> {
    pub fn new(items: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(list) = items.cast::<PyList>() {
            return Ok(Items::List(list.clone()));
        }
        if let Ok(tuple) = items.cast::<PyTuple>() {
            return Ok(Items::Tuple(tuple.clone()));
        }
        let values: Vec<_> = items.try_iter()?.collect::<PyResult<_>>()?;
        Ok(Items::List(PyList::new(items.py(), values)?))
    }

    pub fn len(&self) -> usize {
        match self {
            Items::List(l) => l.len(),
            Items::Tuple(t) => t.len(),
        }
    }

    /// The item at `i` without a reference (null past the end): valid while
    /// no Python code runs.
    #[inline(always)]
    pub fn ptr(&self, i: usize) -> *mut ffi::PyObject {
        let seq = match self {
            Items::List(l) => l.as_ptr(),
            Items::Tuple(t) => t.as_ptr(),
        };
        // SAFETY: a live list or tuple; bounds checked against its current size.
        unsafe {
            if (i as ffi::Py_ssize_t) < ffi::PySequence_Fast_GET_SIZE(seq) {
                ffi::PySequence_Fast_GET_ITEM(seq, i as ffi::Py_ssize_t)
            } else {
                std::ptr::null_mut()
            }
        }
    }

    /// The item at `i` with a reference of its own (`None` past the end).
    #[inline]
    pub fn get(&self, i: usize) -> Option<Bound<'py, PyAny>> {
        if i >= self.len() {
            return None;
        }
        match self {
            Items::List(l) => l.get_item(i).ok(),
            Items::Tuple(t) => t.get_item(i).ok(),
        }
    }

    /// As a Python sequence (for estimators outside this module).
    pub fn to_object(&self, _py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(match self {
            Items::List(l) => l.clone().into_any(),
            Items::Tuple(t) => t.clone().into_any(),
        })
    }
}
