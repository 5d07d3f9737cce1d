//! The one writer of the package's frozen value types (ADR 0011):
//! `object.__new__(cls)`, then every slot written as `object.__setattr__`
//! would (the core made the constructor's checks).

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple, PyType};

use crate::items::member_offset;

/// How a class's instances are built: the named slots in order, then the
/// class's other slots with fixed values, written at their offsets when every
/// one is a plain object member, else through `object.__setattr__`.
pub struct Maker<'py> {
    cls: Bound<'py, PyType>,
    names: Vec<Bound<'py, PyString>>,
    offsets: Option<Vec<isize>>,
    others: Vec<Bound<'py, PyAny>>,
}

impl<'py> Maker<'py> {
    /// A maker for `cls` filling `names` in that order.
    pub fn new(cls: &Bound<'py, PyType>, names: &[&str]) -> PyResult<Self> {
        let py = cls.py();
        if !(cls.getattr("__new__")?).is(py.get_type::<PyAny>().getattr("__new__")?) {
            return Err(PyTypeError::new_err(format!(
                "{} defines __new__",
                cls.name()?
            )));
        }
        let names: Vec<_> = names.iter().map(|n| PyString::intern(py, n)).collect();
        let offsets =
            (names.iter().map(|n| member_offset(cls, n, true))).collect::<PyResult<_>>()?;
        let (cls, others) = (cls.clone(), Vec::new());
        Ok(Maker {
            cls,
            names,
            offsets,
            others,
        })
    }

    /// A maker filling `fields` (each a slot of `cls`), then every other slot
    /// of `cls.__slots__` with its value in `extra` (default None).
    pub fn filling(
        cls: &Bound<'py, PyAny>,
        fields: &[&str],
        extra: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Self> {
        let (py, cls) = (cls.py(), cls.cast::<PyType>()?);
        let slots: Vec<String> = cls.getattr("__slots__")?.extract()?;
        if let Some(f) = fields.iter().find(|f| !slots.iter().any(|s| s == *f)) {
            return Err(PyTypeError::new_err(format!(
                "{} has no slot {f:?}",
                cls.name()?
            )));
        }
        let rest: Vec<&str> = (slots.iter().map(String::as_str))
            .filter(|s| !fields.contains(s))
            .collect();
        let mut maker = Maker::new(cls, &[fields, &rest].concat())?;
        for s in rest {
            let value = extra.map(|d| d.get_item(s)).transpose()?.flatten();
            maker
                .others
                .push(value.unwrap_or_else(|| py.None().into_bound(py)));
        }
        Ok(maker)
    }

    /// A new instance holding `values` (then the other slots' values),
    /// untracked by the cyclic collector when `acyclic`: it holds only
    /// strings, numbers, None and such instances or tuples of them, so it is
    /// never part of a cycle (as CPython untracks a tuple of atoms).
    pub fn make_acyclic(
        &self,
        mut values: Vec<Bound<'py, PyAny>>,
        acyclic: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = self.cls.py();
        let acyclic = acyclic && self.others.iter().all(atomic);
        values.extend(self.others.iter().cloned());
        // SAFETY: `object.__new__` (checked in `new` to be the class's) of a live class with empty
        // arguments returns a new reference or null.
        let obj = unsafe {
            let new = ffi::PyBaseObject_Type.tp_new.expect("object has tp_new");
            let made = new(
                self.cls.as_type_ptr(),
                PyTuple::empty(py).as_ptr(),
                std::ptr::null_mut(),
            );
            Bound::from_owned_ptr_or_err(py, made)?
        };
        for (k, value) in values.into_iter().enumerate() {
            match &self.offsets {
                // SAFETY: `off` is a plain object member slot of this class's layout
                // (`member_offset`), NULL in a fresh instance: it takes over the new reference.
                Some(offsets) => unsafe {
                    *((obj.as_ptr() as *mut u8).offset(offsets[k]) as *mut *mut ffi::PyObject) =
                        value.into_ptr();
                },
                None => object_setattr(&obj, &self.names[k], value)?,
            }
        }
        Ok(if acyclic { untracked(obj) } else { obj })
    }
}

/// `object.__setattr__(obj, name, value)` (a frozen class's own refuses).
pub fn object_setattr(
    obj: &Bound<'_, PyAny>,
    name: &Bound<'_, PyString>,
    value: Bound<'_, PyAny>,
) -> PyResult<()> {
    // SAFETY: live objects the caller holds; the setter takes its own reference to `value`.
    match unsafe { ffi::PyObject_GenericSetAttr(obj.as_ptr(), name.as_ptr(), value.as_ptr()) } {
        0 => Ok(()),
        _ => Err(PyErr::fetch(obj.py())),
    }
}

/// A value that cannot lead back to its holder: a str (a trust member too:
/// module-level and immutable) or int, an object the collector does not track
/// (None, floats, bytes, what this module untracked), or an exact tuple of such.
pub fn atomic(value: &Bound<'_, PyAny>) -> bool {
    if let Ok(t) = value.cast_exact::<PyTuple>() {
        return t.iter().all(|v| atomic(&v));
    }
    let p = value.as_ptr();
    // SAFETY: `p` is borrowed from `value`, alive for the call; the checks read its type's flags.
    unsafe {
        ffi::PyUnicode_Check(p) != 0
            || ffi::PyLong_Check(p) != 0
            || ffi::PyObject_IS_GC(p) == 0
            || ffi::PyObject_GC_IsTracked(p) == 0
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
