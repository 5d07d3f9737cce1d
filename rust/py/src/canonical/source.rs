//! Python objects as a canonical-JSON [`Source`]: what each object is (exact
//! types first, then accepted subclasses, then value types), its members and
//! caches. Every rule (nesting, cycles, key order, item bytes) is the core's
//! walk; the unsafe reads of CPython objects are fenced here.

use std::ptr::addr_of_mut;

use ctxengine_core::canonical::source::{Elem, Member};
use ctxengine_core::canonical::{
    reason_unsupported_subclass, reason_unsupported_type, Cached, KeyProblem, Node, Source,
    REASON_SURROGATE,
};
use pyo3::exceptions::{PyAttributeError, PyOverflowError};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyFloat, PyInt, PyList, PyString, PyTuple, PyType};
use pyo3::Borrowed;

use crate::arguments::type_name;

use super::{bytes_of, has_item_cache, read_digest, store_cache};

/// The UTF-8 of a `str` (or subclass), cached in the object by CPython;
/// `None` for lone surrogates.
///
/// # Safety
/// `ptr` must be a live `str`; the text lives as long as it does.
#[inline]
pub unsafe fn utf8<'a>(ptr: *mut ffi::PyObject) -> Option<&'a str> {
    let mut size: ffi::Py_ssize_t = 0;
    let data = ffi::PyUnicode_AsUTF8AndSize(ptr, &mut size);
    if data.is_null() {
        ffi::PyErr_Clear();
        return None;
    }
    // CPython's UTF-8 of a str is valid UTF-8.
    let bytes = std::slice::from_raw_parts(data as *const u8, size as usize);
    Some(std::str::from_utf8_unchecked(bytes))
}

fn repr(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    Ok(obj.repr()?.to_string_lossy().into_owned())
}

static ENUM: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static ORDERED_DICT: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static DEFAULT_DICT: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// An enum member (`TrustLevel.USER`, an `IntEnum`): its builtin data is
/// accepted (ADR 0010); any other subclass of a JSON type is refused.
fn is_enum_member(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    let e = ENUM.import(obj.py(), "enum", "Enum")?;
    obj.get_type().is_subclass(e)
}

/// The standard library's dicts that keep their members in the dict itself.
fn is_plain_dict_subclass(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    let (py, tp) = (obj.py(), obj.get_type());
    Ok(
        tp.is(ORDERED_DICT.import(py, "collections", "OrderedDict")?)
            || tp.is(DEFAULT_DICT.import(py, "collections", "defaultdict")?),
    )
}

/// An int's value, or `BigInt` outside 64 bits.
#[inline]
fn int_node<'a>(obj: &Bound<'_, PyAny>) -> PyResult<Node<'a>> {
    match obj.extract::<i64>() {
        Ok(v) => Ok(Node::Int(v)),
        Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => Ok(Node::BigInt),
        Err(e) => Err(e),
    }
}

/// A str's text as a node (`Reject` for a lone surrogate).
#[inline]
fn str_node<'a>(obj: &Bound<'_, PyAny>) -> Node<'a> {
    // SAFETY: a str (the caller checked), which keeps its UTF-8 as long as it lives.
    match unsafe { utf8(obj.as_ptr()) } {
        Some(s) => Node::Str(s.as_bytes()),
        None => Node::Reject(REASON_SURROGATE.to_owned()),
    }
}

/// An object of no exact JSON type: an accepted subclass (an enum member's
/// builtin data, the standard library's plain dicts), a value type, or refused.
#[cold]
fn subclass<'a>(obj: &Bound<'_, PyAny>) -> PyResult<Node<'a>> {
    let py = obj.py();
    let base = [
        (obj.is_instance_of::<PyString>(), "str"),
        // (bool cannot be subclassed: the exact check caught it.)
        (obj.is_instance_of::<PyInt>(), "int"),
        (obj.is_instance_of::<PyFloat>(), "float"),
        (obj.is_instance_of::<PyDict>(), "dict"),
        (obj.is_instance_of::<PyList>(), "list"),
        (obj.is_instance_of::<PyTuple>(), "tuple"),
    ];
    match base.iter().find(|b| b.0).map(|b| b.1) {
        Some("str") if is_enum_member(obj)? => Ok(str_node(obj)),
        Some("int") if is_enum_member(obj)? => int_node(obj),
        Some("float") if is_enum_member(obj)? => Ok(Node::Float(obj.cast::<PyFloat>()?.value())),
        Some("dict") if is_plain_dict_subclass(obj)? => Ok(Node::Map),
        Some(base) => Ok(Node::Reject(reason_unsupported_subclass(
            &type_name(obj),
            base,
        ))),
        None if has_item_cache(obj)? => Ok(Node::Object { item: true }),
        None => match obj.getattr_opt(intern!(py, "to_dict"))? {
            Some(f) if f.is_callable() => Ok(Node::Object { item: false }),
            _ => Ok(Node::Reject(reason_unsupported_type(&type_name(obj)))),
        },
    }
}

/// Python objects, borrowed while something holds them.
pub struct PySource<'py> {
    pub(super) py: Python<'py>,
}

impl<'py> Source for PySource<'py> {
    type Ref = *mut ffi::PyObject;
    type Owned = Bound<'py, PyAny>;
    type Error = PyErr;

    #[inline(always)]
    fn borrow(owned: &Bound<'py, PyAny>) -> *mut ffi::PyObject {
        owned.as_ptr()
    }

    #[inline(always)]
    fn identity(value: *mut ffi::PyObject) -> usize {
        value as usize
    }

    #[inline(always)]
    unsafe fn classify<'a>(&mut self, ptr: *mut ffi::PyObject) -> PyResult<Node<'a>> {
        let obj = Borrowed::from_ptr(self.py, ptr);
        let is = |t: *mut ffi::PyTypeObject| ffi::Py_TYPE(ptr) == t;
        Ok(match () {
            _ if is(addr_of_mut!(ffi::PyUnicode_Type)) => str_node(&obj),
            _ if is(addr_of_mut!(ffi::PyDict_Type)) => Node::Map,
            _ if is(addr_of_mut!(ffi::PyList_Type)) => Node::Seq,
            _ if ptr == ffi::Py_None() => Node::Null,
            _ if is(addr_of_mut!(ffi::PyBool_Type)) => Node::Bool(ptr == ffi::Py_True()),
            _ if is(addr_of_mut!(ffi::PyLong_Type)) => int_node(&obj)?,
            _ if is(addr_of_mut!(ffi::PyFloat_Type)) => Node::Float(ffi::PyFloat_AS_DOUBLE(ptr)),
            _ if is(addr_of_mut!(ffi::PyTuple_Type)) => Node::Seq,
            _ => subclass(&obj)?,
        })
    }

    unsafe fn type_name(&mut self, value: *mut ffi::PyObject) -> String {
        type_name(&Borrowed::from_ptr(self.py, value))
    }

    #[inline(always)]
    unsafe fn seq_item(
        &mut self,
        seq: *mut ffi::PyObject,
        index: usize,
    ) -> Option<Elem<*mut ffi::PyObject, Bound<'py, PyAny>>> {
        let i = index as ffi::Py_ssize_t;
        if ffi::PyTuple_Check(seq) != 0 {
            // Immutable: its elements live as long as it does.
            return (i < ffi::PyTuple_GET_SIZE(seq))
                .then(|| Elem::Borrowed(ffi::PyTuple_GET_ITEM(seq, i)));
        }
        // A list can change under host code run by a nested value: its
        // size is read afresh and the element held.
        (i < ffi::PyList_GET_SIZE(seq)).then(|| {
            Elem::Held(Bound::from_borrowed_ptr(
                self.py,
                ffi::PyList_GET_ITEM(seq, i),
            ))
        })
    }

    unsafe fn map_members(
        &mut self,
        map: *mut ffi::PyObject,
        out: &mut Vec<Member<Bound<'py, PyAny>>>,
    ) -> PyResult<()> {
        let mut pos: ffi::Py_ssize_t = 0;
        let mut k: *mut ffi::PyObject = std::ptr::null_mut();
        let mut v: *mut ffi::PyObject = std::ptr::null_mut();
        while ffi::PyDict_Next(map, &mut pos, &mut k, &mut v) != 0 {
            let (k, v) = (
                Bound::from_borrowed_ptr(self.py, k),
                Bound::from_borrowed_ptr(self.py, v),
            );
            out.push(Member::new(k, v));
        }
        Ok(())
    }

    unsafe fn key_text<'a>(
        &mut self,
        key: *mut ffi::PyObject,
    ) -> PyResult<Result<&'a [u8], KeyProblem>> {
        let key = Borrowed::from_ptr(self.py, key);
        if !key.is_instance_of::<PyString>() {
            return Ok(Err(KeyProblem::NotStr(repr(&key)?)));
        }
        if !key.is_exact_instance_of::<PyString>() && !is_enum_member(&key)? {
            return Ok(Err(KeyProblem::Subclass(type_name(&key))));
        }
        match utf8(key.as_ptr()) {
            Some(text) => Ok(Ok(text.as_bytes())),
            // `repr(str.__str__(key))`: the plain string's repr, also for subclasses.
            None => {
                let plain =
                    Bound::from_owned_ptr_or_err(self.py, ffi::PyUnicode_FromObject(key.as_ptr()))?;
                Ok(Err(KeyProblem::Surrogate(repr(&plain)?)))
            }
        }
    }

    unsafe fn to_dict(&mut self, value: *mut ffi::PyObject) -> PyResult<Bound<'py, PyAny>> {
        Borrowed::from_ptr(self.py, value).call_method0(intern!(self.py, "to_dict"))
    }

    unsafe fn item_cache(
        &mut self,
        item: *mut ffi::PyObject,
    ) -> PyResult<Option<Cached<Bound<'py, PyAny>>>> {
        let py = self.py;
        match Borrowed::from_ptr(py, item).getattr(intern!(py, "_cj")) {
            Ok(cj) => Ok(read_digest(cj.as_ptr())
                .filter(|(_, b)| ffi::PyBytes_CheckExact(*b) != 0)
                .map(|(_, b)| Cached::new(cj, bytes_of(b)))),
            // A slot never set counts as empty.
            Err(e) if e.is_instance_of::<PyAttributeError>(py) => Ok(None),
            Err(e) => Err(e),
        }
    }

    unsafe fn store_item_cache(
        &mut self,
        item: *mut ffi::PyObject,
        bytes: &[u8],
        digest: &[u8; 32],
    ) -> PyResult<Cached<Bound<'py, PyAny>>> {
        let held = store_cache(&Borrowed::from_ptr(self.py, item), bytes, digest)?.into_any();
        let stored = bytes_of(ffi::PyTuple_GET_ITEM(held.as_ptr(), 0));
        Ok(Cached::new(held, stored))
    }
}
