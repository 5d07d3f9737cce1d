//! Python objects as a canonical-JSON [`Source`]: this layer only says what
//! each object is (exact types first, then the accepted subclasses, then
//! value types) and hands out members and caches. Every rule — nesting
//! budget, cycles, key order, splicing item bytes — is the core's walk.
//! (The unsafe reads of CPython objects are fenced in this module.)

use std::ptr::addr_of_mut;

use ctxengine_core::canonical::source::{Elem, Member};
use ctxengine_core::canonical::{
    reason_unsupported_subclass, reason_unsupported_type, Cached, KeyProblem, Node, Source,
    REASON_SURROGATE,
};
use pyo3::exceptions::PyAttributeError;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

use super::cache::{bytes_of, has_item_cache, make_cache, read_cache, store_cache};

/// UTF-8 of a `str` (or subclass); `None` for lone surrogates.
///
/// # Safety
/// `ptr` must be a live `str`; the bytes live as long as it does.
#[inline]
pub unsafe fn utf8<'a>(ptr: *mut ffi::PyObject) -> Option<&'a [u8]> {
    let mut size: ffi::Py_ssize_t = 0;
    let data = ffi::PyUnicode_AsUTF8AndSize(ptr, &mut size);
    if data.is_null() {
        ffi::PyErr_Clear();
        None
    } else {
        Some(std::slice::from_raw_parts(data as *const u8, size as usize))
    }
}

fn repr(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    Ok(obj.repr()?.to_string_lossy().into_owned())
}

/// `repr(str.__str__(s))`: the plain string's repr, also for subclasses.
unsafe fn str_repr(py: Python<'_>, s: *mut ffi::PyObject) -> PyResult<String> {
    let plain = Bound::from_owned_ptr_or_err(py, ffi::PyUnicode_FromObject(s))?;
    repr(&plain)
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".to_owned())
}

static ENUM: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static ORDERED_DICT: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static DEFAULT_DICT: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// An enum member (`TrustLevel.USER`, an `IntEnum`): its builtin data is
/// accepted (ADR 0010); any other subclass of a JSON type is refused.
unsafe fn is_enum_member(py: Python<'_>, ptr: *mut ffi::PyObject) -> PyResult<bool> {
    let e = ENUM.import(py, "enum", "Enum")?;
    Ok(ffi::PyType_IsSubtype(ffi::Py_TYPE(ptr), e.as_ptr() as *mut ffi::PyTypeObject) != 0)
}

/// The standard library's dicts that keep their members in the dict itself.
unsafe fn is_plain_dict_subclass(py: Python<'_>, ptr: *mut ffi::PyObject) -> PyResult<bool> {
    let tp = ffi::Py_TYPE(ptr) as *mut ffi::PyObject;
    Ok(tp
        == ORDERED_DICT
            .import(py, "collections", "OrderedDict")?
            .as_ptr()
        || tp
            == DEFAULT_DICT
                .import(py, "collections", "defaultdict")?
                .as_ptr())
}

/// Python objects, borrowed while something holds them.
pub struct PySource<'py> {
    py: Python<'py>,
}

impl<'py> PySource<'py> {
    pub fn new(py: Python<'py>) -> Self {
        PySource { py }
    }

    unsafe fn bound(&self, ptr: *mut ffi::PyObject) -> Bound<'py, PyAny> {
        Bound::from_borrowed_ptr(self.py, ptr)
    }

    #[cold]
    unsafe fn subclass<'a>(&mut self, ptr: *mut ffi::PyObject) -> PyResult<Node<'a>> {
        let py = self.py;
        if ffi::PyUnicode_Check(ptr) != 0 {
            if is_enum_member(py, ptr)? {
                return Ok(match utf8(ptr) {
                    Some(s) => Node::Str(s),
                    None => Node::Reject(REASON_SURROGATE.to_owned()),
                });
            }
            return Ok(self.refuse(ptr, "str"));
        }
        if ffi::PyLong_Check(ptr) != 0 {
            // bool cannot be subclassed: the exact check caught it.
            if is_enum_member(py, ptr)? {
                return int_node(py, ptr);
            }
            return Ok(self.refuse(ptr, "int"));
        }
        if ffi::PyFloat_Check(ptr) != 0 {
            if is_enum_member(py, ptr)? {
                let v = ffi::PyFloat_AsDouble(ptr);
                if v == -1.0 && !ffi::PyErr_Occurred().is_null() {
                    return Err(PyErr::fetch(py));
                }
                return Ok(Node::Float(v));
            }
            return Ok(self.refuse(ptr, "float"));
        }
        if ffi::PyDict_Check(ptr) != 0 {
            if is_plain_dict_subclass(py, ptr)? {
                return Ok(Node::Map);
            }
            return Ok(self.refuse(ptr, "dict"));
        }
        if ffi::PyList_Check(ptr) != 0 {
            return Ok(self.refuse(ptr, "list"));
        }
        if ffi::PyTuple_Check(ptr) != 0 {
            return Ok(self.refuse(ptr, "tuple"));
        }
        let obj = self.bound(ptr);
        if has_item_cache(&obj)? {
            return Ok(Node::Object { item: true });
        }
        match obj.getattr_opt(intern!(py, "to_dict"))? {
            Some(f) if f.is_callable() => Ok(Node::Object { item: false }),
            _ => Ok(Node::Reject(reason_unsupported_type(&type_name(&obj)))),
        }
    }

    unsafe fn refuse<'a>(&self, ptr: *mut ffi::PyObject, base: &str) -> Node<'a> {
        Node::Reject(reason_unsupported_subclass(
            &type_name(&self.bound(ptr)),
            base,
        ))
    }
}

#[inline]
unsafe fn int_node<'a>(py: Python<'_>, ptr: *mut ffi::PyObject) -> PyResult<Node<'a>> {
    let mut overflow: std::os::raw::c_int = 0;
    let v = ffi::PyLong_AsLongLongAndOverflow(ptr, &mut overflow);
    if overflow != 0 {
        return Ok(Node::BigInt);
    }
    if v == -1 && !ffi::PyErr_Occurred().is_null() {
        return Err(PyErr::fetch(py));
    }
    Ok(Node::Int(v))
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
        let tp = ffi::Py_TYPE(ptr);
        if tp == addr_of_mut!(ffi::PyUnicode_Type) {
            return Ok(match utf8(ptr) {
                Some(s) => Node::Str(s),
                None => Node::Reject(REASON_SURROGATE.to_owned()),
            });
        }
        if tp == addr_of_mut!(ffi::PyDict_Type) {
            return Ok(Node::Map);
        }
        if tp == addr_of_mut!(ffi::PyList_Type) {
            return Ok(Node::Seq);
        }
        if ptr == ffi::Py_None() {
            return Ok(Node::Null);
        }
        if tp == addr_of_mut!(ffi::PyBool_Type) {
            return Ok(Node::Bool(ptr == ffi::Py_True()));
        }
        if tp == addr_of_mut!(ffi::PyLong_Type) {
            return int_node(self.py, ptr);
        }
        if tp == addr_of_mut!(ffi::PyFloat_Type) {
            return Ok(Node::Float(ffi::PyFloat_AS_DOUBLE(ptr)));
        }
        if tp == addr_of_mut!(ffi::PyTuple_Type) {
            return Ok(Node::Seq);
        }
        self.subclass(ptr)
    }

    unsafe fn type_name(&mut self, value: *mut ffi::PyObject) -> String {
        type_name(&self.bound(value))
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
        (i < ffi::PyList_GET_SIZE(seq))
            .then(|| Elem::Held(self.bound(ffi::PyList_GET_ITEM(seq, i))))
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
            out.push(Member::new(self.bound(k), self.bound(v)));
        }
        Ok(())
    }

    unsafe fn key_text<'a>(
        &mut self,
        key: *mut ffi::PyObject,
    ) -> PyResult<Result<&'a [u8], KeyProblem>> {
        if ffi::PyUnicode_Check(key) == 0 {
            return Ok(Err(KeyProblem::NotStr(repr(&self.bound(key))?)));
        }
        if ffi::PyUnicode_CheckExact(key) == 0 && !is_enum_member(self.py, key)? {
            return Ok(Err(KeyProblem::Subclass(type_name(&self.bound(key)))));
        }
        match utf8(key) {
            Some(text) => Ok(Ok(text)),
            None => Ok(Err(KeyProblem::Surrogate(str_repr(self.py, key)?))),
        }
    }

    unsafe fn to_dict(&mut self, value: *mut ffi::PyObject) -> PyResult<Bound<'py, PyAny>> {
        self.bound(value).call_method0(intern!(self.py, "to_dict"))
    }

    unsafe fn item_cache(
        &mut self,
        item: *mut ffi::PyObject,
    ) -> PyResult<Option<Cached<Bound<'py, PyAny>>>> {
        let py = self.py;
        match self.bound(item).getattr(intern!(py, "_cj")) {
            Ok(cj) => Ok(read_cache(cj.as_ptr()).map(|(bytes, _)| Cached::new(cj, bytes))),
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
        let tuple = make_cache(self.py, bytes, digest)?;
        store_cache(&self.bound(item), &tuple)?;
        let held = tuple.into_any();
        let stored = bytes_of(ffi::PyTuple_GET_ITEM(held.as_ptr(), 0));
        Ok(Cached::new(held, stored))
    }
}
