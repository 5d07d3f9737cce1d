//! Attributes of Python objects: member slots read directly (what `getattr`
//! does for plain slotted classes), `seq`, call ids.

use std::os::raw::c_int;
use std::ptr::addr_of_mut;

use ctxengine_core::cut::ToolRole;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyType};

use super::types::Role;
use crate::arguments::type_name;
use crate::canonical::utf8;
use crate::errors::argument_error;

/// How to read one attribute of instances of a type.
#[derive(Clone, Copy)]
pub enum Attr {
    /// A `__slots__` member at this offset (null if unset).
    Slot(isize),
    Lookup,
}

pub struct TypeFields {
    /// The valid attribute version tag (a new one whenever an attribute of
    /// the type or a base is set or deleted).
    pub version: Option<std::os::raw::c_uint>,
    pub instance_dict: bool,
    /// No `__getattribute__` or `__getattr__` of its own.
    pub generic_getattr: bool,
}

#[inline]
pub fn type_fields(ty: &Bound<'_, PyType>) -> TypeFields {
    // libpython's own function: its address is unique.
    let generic = ffi::PyObject_GenericGetAttr as ffi::getattrofunc as usize;
    // SAFETY: a live type's fields, read only (no Python code runs while they are).
    let tp = unsafe { &*ty.as_type_ptr() };
    TypeFields {
        version: (tp.tp_flags & ffi::Py_TPFLAGS_VALID_VERSION_TAG != 0)
            .then_some(tp.tp_version_tag),
        instance_dict: tp.tp_dictoffset != 0,
        generic_getattr: tp.tp_getattro.map(|f| f as usize) == Some(generic),
    }
}

#[inline]
pub fn version_of(ty: &Bound<'_, PyType>) -> Option<std::os::raw::c_uint> {
    type_fields(ty).version
}

/// `name`'s member slot, when reading it is exactly what `getattr` does.
pub fn slot_offset(ty: &Bound<'_, PyType>, name: &Bound<'_, PyString>) -> PyResult<Attr> {
    if !type_fields(ty).generic_getattr {
        return Ok(Attr::Lookup);
    }
    Ok(member_offset(ty, name, false)?.map_or(Attr::Lookup, Attr::Slot))
}

/// The offset of `name`'s member slot when it is a plain object member
/// (`T_OBJECT_EX`) of a base of `ty`, writable if asked: its descriptor
/// reads and writes exactly that slot.
pub fn member_offset(
    ty: &Bound<'_, PyType>,
    name: &Bound<'_, PyString>,
    writable: bool,
) -> PyResult<Option<isize>> {
    let Some(descr) = ty.getattr_opt(name)? else {
        return Ok(None);
    };
    if descr.get_type_ptr() != addr_of_mut!(ffi::PyMemberDescr_Type) {
        return Ok(None);
    }
    // SAFETY: `descr` (held) is a member descriptor (checked just above): its
    // fields are read, each pointer checked before it is followed.
    unsafe {
        let descr = descr.as_ptr() as *mut ffi::PyMemberDescrObject;
        let owner = (*descr).d_common.d_type;
        if owner.is_null() || ffi::PyType_IsSubtype(ty.as_type_ptr(), owner) == 0 {
            return Ok(None);
        }
        let member = (*descr).d_member;
        if member.is_null()
            || (*member).type_code != ffi::Py_T_OBJECT_EX
            || (writable && (*member).flags & ffi::Py_READONLY != 0)
        {
            return Ok(None);
        }
        Ok(Some((*member).offset))
    }
}

/// The slot, or `getattr` (`None` when absent).
#[inline]
pub fn read_attr<'py>(
    obj: &Bound<'py, PyAny>,
    how: Attr,
    name: &Bound<'py, PyString>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    match how {
        // SAFETY: `offset` is a plain object member of `obj`'s type (`slot_offset`); the slot holds
        // a reference or null.
        Attr::Slot(offset) => unsafe {
            let p = slot_value(obj.as_ptr(), offset);
            Ok(Bound::from_borrowed_ptr_or_opt(obj.py(), p))
        },
        Attr::Lookup => obj.getattr_opt(name),
    }
}

/// Fetch the cache line at `p` ahead (null: nothing): the memory waits of
/// objects read in turn overlap.
#[inline(always)]
pub fn prefetch(p: *const ffi::PyObject) {
    #[cfg(target_arch = "x86_64")]
    if !p.is_null() {
        // SAFETY: a prefetch never faults, whatever the address.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// # Safety
/// `offset` must be an object slot of `obj`'s (live) layout.
#[inline(always)]
pub unsafe fn slot_value(obj: *mut ffi::PyObject, offset: isize) -> *mut ffi::PyObject {
    *((obj as *mut u8).offset(offset) as *mut *mut ffi::PyObject)
}

/// An item's `seq` as the floor comparison sees it: an int (not a bool),
/// else `None`; an int above the 64-bit range is `None` (never at or below
/// the floor), one below it `i64::MIN`: exact, like the reference.
///
/// # Safety
/// `v` must be null or a live object.
#[inline(always)]
pub unsafe fn seq_value(v: *mut ffi::PyObject) -> Option<i64> {
    if v.is_null() || ffi::PyLong_Check(v) == 0 || ffi::PyBool_Check(v) != 0 {
        return None;
    }
    let mut overflow: c_int = 0;
    let n = ffi::PyLong_AsLongLongAndOverflow(v, &mut overflow);
    if overflow > 0 {
        None
    } else if overflow < 0 {
        Some(i64::MIN)
    } else if n == -1 && !ffi::PyErr_Occurred().is_null() {
        ffi::PyErr_Clear();
        None
    } else {
        Some(n)
    }
}

/// The tool-pair role of an item and its id's hash; a `str` subclass counts
/// as its data, any other id is an `ArgumentError` naming
/// `name[index].call_id`. `keep` holds each id: the role borrows its text.
#[inline(always)]
pub fn tool_role<'a, 'py>(
    item: &Bound<'py, PyAny>,
    role: Role,
    how: Attr,
    keep: &mut Vec<Bound<'py, PyAny>>,
    (function, name, index): (&str, &str, usize),
) -> PyResult<(ToolRole<'a>, u64)> {
    if role == Role::Other {
        return Ok((ToolRole::Other, 0));
    }
    let py = item.py();
    let id = read_attr(item, how, intern!(py, "call_id"))?;
    let id = match id {
        Some(id) if id.is_exact_instance_of::<PyString>() => id,
        // SAFETY: a str subclass: an exact copy of its data.
        Some(id) if id.is_instance_of::<PyString>() => unsafe {
            Bound::from_owned_ptr_or_err(py, ffi::PyUnicode_FromObject(id.as_ptr()))?
        },
        other => {
            let got = other.map_or_else(|| "NoneType".to_owned(), |v| type_name(&v));
            return Err(argument_error(
                py,
                function,
                format!("{name}[{index}].call_id"),
                format!("expected a str, got {got}"),
            ));
        }
    };
    // SAFETY: `id` is an exact str, held by `keep` for as long as the
    // caller's validator lives (the role borrows its text).
    let read = unsafe { exact_str_role(id.as_ptr(), role) };
    keep.push(id);
    Ok(read.unwrap_or((ToolRole::Other, 0)))
}

/// When `id` is an exact `str`: the role with its text, and its hash
/// (computed without running Python code).
///
/// # Safety
/// `id` must be null or a live object, which the caller keeps alive as long
/// as the role is used.
#[inline(always)]
pub unsafe fn exact_str_role<'a>(
    id: *mut ffi::PyObject,
    role: Role,
) -> Option<(ToolRole<'a>, u64)> {
    if id.is_null() || ffi::PyUnicode_CheckExact(id) == 0 {
        return None;
    }
    let text = utf8(id).unwrap_or("");
    let hash = match (*(id as *mut ffi::PyASCIIObject)).hash {
        -1 => ffi::PyObject_Hash(id),
        cached => cached,
    } as u64;
    Some(match role {
        Role::Call => (ToolRole::Call(text), hash),
        _ => (ToolRole::Result(text), hash),
    })
}
