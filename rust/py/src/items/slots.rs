//! Reading attributes of Python objects: member slots read directly (exactly
//! what `getattr` does for plain slotted classes, without the lookup), an
//! item's `seq`, a tool call's id and its hash.

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
    /// A `__slots__` member: the object pointer at this offset (NULL if unset).
    Slot(isize),
    /// Anything else: a real `getattr`.
    Lookup,
}

/// The valid attribute version tag of a type.
#[inline]
pub unsafe fn version_of(tp: *mut ffi::PyTypeObject) -> Option<std::os::raw::c_uint> {
    if (*tp).tp_flags & ffi::Py_TPFLAGS_VALID_VERSION_TAG != 0 {
        Some((*tp).tp_version_tag)
    } else {
        None
    }
}

/// The member-slot offset of `name` on instances of `tp`, when reading the
/// slot is exactly what `getattr` would do: generic attribute access and a
/// plain object member descriptor.
pub fn slot_offset(ty: &Bound<'_, PyType>, name: &Bound<'_, PyString>) -> PyResult<Attr> {
    // SAFETY: `ty` is a live type; its slots and the descriptor's fields are read only after each
    // one's type is checked.
    unsafe {
        let tp = ty.as_ptr() as *mut ffi::PyTypeObject;
        // libpython's own function: its address is unique.
        let generic = ffi::PyObject_GenericGetAttr as ffi::getattrofunc as usize;
        if (*tp).tp_getattro.map(|f| f as usize) != Some(generic) {
            return Ok(Attr::Lookup);
        }
        let Some(descr) = ty.getattr_opt(name)? else {
            return Ok(Attr::Lookup);
        };
        if ffi::Py_TYPE(descr.as_ptr()) != addr_of_mut!(ffi::PyMemberDescr_Type) {
            return Ok(Attr::Lookup);
        }
        let descr = descr.as_ptr() as *mut ffi::PyMemberDescrObject;
        // The descriptor must describe this layout (a base of the type), as
        // the descriptor's own __get__ would check.
        let owner = (*descr).d_common.d_type;
        if owner.is_null() || ffi::PyType_IsSubtype(tp, owner) == 0 {
            return Ok(Attr::Lookup);
        }
        let member = (*descr).d_member;
        if member.is_null() || (*member).type_code != ffi::Py_T_OBJECT_EX {
            return Ok(Attr::Lookup);
        }
        Ok(Attr::Slot((*member).offset))
    }
}

/// Read an attribute: the slot directly, or `getattr` (None when absent).
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

/// Hint the CPU to fetch the cache line at `p` (null: nothing). A batch
/// of objects read in turn costs one memory wait per object; their lines
/// fetched together first, the waits overlap.
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

#[inline(always)]
pub unsafe fn slot_value(obj: *mut ffi::PyObject, offset: isize) -> *mut ffi::PyObject {
    *((obj as *mut u8).offset(offset) as *mut *mut ffi::PyObject)
}

/// An item's `seq` as the floor comparison sees it: an int (not a bool);
/// `None` for an unset slot, `None` or anything else. Compared only with a
/// 64-bit floor, so an int above the range is `None` (never at or below
/// it) and one below it `i64::MIN` (always): exact, like the reference.
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

/// [`seq_value`] of a held object.
pub fn seq_of(obj: &Bound<'_, PyAny>) -> Option<i64> {
    // SAFETY: a live object.
    unsafe { seq_value(obj.as_ptr()) }
}

/// The tool-pair role of an item and its id's hash: Python's own hash of
/// the id as an exact `str` (cached in the string object after the first
/// use). A `str` subclass counts as its data; any other id is an
/// `ArgumentError` of `function` naming `items[index].call_id`.
/// `keep` takes a reference to each id string: the role borrows its text.
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
        // SAFETY: `id` is a live object; the check reads its type.
        Some(id) if unsafe { ffi::PyUnicode_CheckExact(id.as_ptr()) } != 0 => id,
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
    // SAFETY: an exact str.
    let hash = unsafe { str_hash(id.as_ptr()) };
    // SAFETY: the UTF-8 buffer lives inside the str object, which `keep`
    // owns for as long as the caller's validator lives; CPython's UTF-8 of
    // a str is valid UTF-8.
    let text: &'a str = match unsafe { utf8(id.as_ptr()) } {
        // SAFETY: the UTF-8 buffer lives inside the str object, which `keep` owns for as long as
        // the caller's validator lives; CPython's UTF-8 of a str is valid UTF-8.
        Some(b) => unsafe {
            std::str::from_utf8_unchecked(std::slice::from_raw_parts(b.as_ptr(), b.len()))
        },
        None => "",
    };
    keep.push(id);
    Ok(match role {
        Role::Call => ToolRole::Call(text),
        _ => ToolRole::Result(text),
    })
    .map(|r| (r, hash))
}

/// Python's hash of an exact str: the one cached in the object (computed
/// and cached on first use, running no Python code).
///
/// # Safety
/// `id` must be a live exact str.
#[inline(always)]
pub unsafe fn str_hash(id: *mut ffi::PyObject) -> u64 {
    let cached = (*(id as *mut ffi::PyASCIIObject)).hash;
    (if cached == -1 {
        ffi::PyObject_Hash(id)
    } else {
        cached
    }) as u64
}

/// The UTF-8 text of a str as `&str` of any lifetime (the caller keeps the
/// string alive); "" for lone surrogates.
///
/// # Safety
/// `id` must be a live str.
#[inline(always)]
pub unsafe fn utf8_str<'a>(id: *mut ffi::PyObject) -> &'a str {
    match utf8(id) {
        // CPython's UTF-8 of a str is valid UTF-8.
        Some(b) => std::str::from_utf8_unchecked(std::slice::from_raw_parts(b.as_ptr(), b.len())),
        None => "",
    }
}
