//! Building the package's frozen value types without running `__init__`:
//! `object.__new__(cls)`, then every slot written as `object.__setattr__`
//! would write it (the constructor's checks were made by the caller, in the
//! core). Used by the decoder and the renderer (ADR 0011).

use std::ptr;

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple, PyType};

use crate::items::member_offset;

/// How a class's instances are built: its slots' offsets when every one is a
/// plain object member of a class allocated by `object.__new__` (then a
/// fresh instance's slots are written directly), else their names (set
/// through `object.__setattr__`).
pub struct Maker<'py> {
    cls: Bound<'py, PyType>,
    names: Vec<Bound<'py, PyString>>,
    offsets: Option<Vec<isize>>,
}

impl<'py> Maker<'py> {
    /// A maker for `cls` filling `names` in that order.
    pub fn new(cls: &Bound<'py, PyType>, names: &[&str]) -> PyResult<Self> {
        let py = cls.py();
        let object_new = py.get_type::<PyAny>().getattr("__new__")?;
        if !cls.getattr("__new__")?.is(&object_new) {
            return Err(PyTypeError::new_err(format!(
                "{} defines __new__",
                cls.name()?
            )));
        }
        let names: Vec<Bound<'py, PyString>> =
            names.iter().map(|n| PyString::intern(py, n)).collect();
        let mut offsets = Vec::with_capacity(names.len());
        for name in &names {
            match member_offset(cls, name, true)? {
                Some(off) => offsets.push(off),
                None => {
                    return Ok(Maker {
                        cls: cls.clone(),
                        names,
                        offsets: None,
                    })
                }
            }
        }
        Ok(Maker {
            cls: cls.clone(),
            names,
            offsets: Some(offsets),
        })
    }

    /// A new instance holding `values`, untracked by the cyclic collector when
    /// `acyclic`: it holds only strings, numbers, None and such instances or
    /// tuples of them, so it can never be part of a reference cycle (as
    /// CPython untracks a tuple of atoms), and a collection need not visit it.
    pub fn make_acyclic(
        &self,
        values: Vec<Bound<'py, PyAny>>,
        acyclic: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let obj = self.make(values)?;
        Ok(if acyclic { untracked(obj) } else { obj })
    }

    /// A new instance holding `values` (one per name, in order).
    pub fn make(&self, values: Vec<Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
        let py = self.cls.py();
        // SAFETY: `object.__new__` (checked in `new` to be the class's) of a live class with empty
        // arguments returns a new reference or null.
        let obj = unsafe {
            let tp = self.cls.as_ptr() as *mut ffi::PyTypeObject;
            let new = ffi::PyBaseObject_Type.tp_new.expect("object has tp_new");
            Bound::from_owned_ptr_or_err(py, new(tp, PyTuple::empty(py).as_ptr(), ptr::null_mut()))?
        };
        match &self.offsets {
            Some(offsets) => {
                for (off, value) in offsets.iter().zip(values) {
                    // A fresh instance's member slots are NULL: store the new reference.
                    // SAFETY: `off` is a plain object member slot of this class's layout
                    // (`member_offset`), NULL in a fresh instance: it takes over the new reference.
                    unsafe {
                        let slot =
                            (obj.as_ptr() as *mut u8).offset(*off) as *mut *mut ffi::PyObject;
                        *slot = value.into_ptr();
                    }
                }
            }
            None => {
                for (name, value) in self.names.iter().zip(values) {
                    // SAFETY: live objects; the setter takes its own reference to `value`.
                    let rc = unsafe {
                        ffi::PyObject_GenericSetAttr(obj.as_ptr(), name.as_ptr(), value.as_ptr())
                    };
                    if rc != 0 {
                        return Err(PyErr::fetch(py));
                    }
                }
            }
        }
        Ok(obj)
    }
}

/// `value` untracked by the cyclic collector (a tuple of atoms, as CPython untracks
/// one at its first collection): returned as is.
pub fn untracked<'py>(value: Bound<'py, PyAny>) -> Bound<'py, PyAny> {
    // SAFETY: `value` is a live object the caller owns and says can hold no cycle (a tuple of
    // atoms).
    unsafe {
        if ffi::PyObject_IS_GC(value.as_ptr()) != 0
            && ffi::PyObject_GC_IsTracked(value.as_ptr()) != 0
        {
            ffi::PyObject_GC_UnTrack(value.as_ptr().cast());
        }
    }
    value
}
