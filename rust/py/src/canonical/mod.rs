//! `canonical_json`, `payload_hash` and `item_canonical` through the core's
//! canonical walk ([`source`] says what each object is), and the readers and
//! writers of an item's `_cj` cache: `(canonical_bytes, sha256_digest)` of
//! its `to_dict()`, filled on first use (ADR 0001).

mod source;

pub use source::utf8;

use std::cell::Cell;

use ctxengine_core::canonical::{WalkError, Walker};
use ctxengine_core::hash::{hex, sha256};
use pyo3::exceptions::PyRuntimeError;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::arguments::type_name;
use crate::errors::{canonicalization_error, guard};
use crate::slots::object_setattr;
use source::PySource;

/// `payload_hash` streams canonical bytes past this size to a second thread
/// while the walk goes on (`StreamHasher`): a megabyte costs little more
/// than its hashing when that core is free. (So what is hashed in one piece
/// at the end is small: it keeps the GIL.)
const STREAM_FROM_BYTES: usize = 16 * 1024;
/// A scratch buffer larger than this is not kept between calls.
const KEEP_BUFFER_BYTES: usize = 16 * 1024 * 1024;

thread_local! {
    /// The last walk's output buffer: a fresh `Vec` costs small and medium
    /// values 13-37% (measured 2026-12-03). Taken, so a re-entrant call allocates.
    static SCRATCH: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

pub fn walker(py: Python<'_>, out: Vec<u8>) -> Walker<PySource<'_>> {
    Walker::new(PySource { py }, out)
}

/// A walk failure as the Python exception.
pub fn walk_error(py: Python<'_>, e: WalkError<PyErr>) -> PyErr {
    match e {
        WalkError::Path(p) => canonicalization_error(py, &p.path(), p.reason),
        WalkError::Host(e) => e,
    }
}

fn scratch() -> Vec<u8> {
    let mut buf = SCRATCH.with(Cell::take);
    buf.clear();
    buf
}

fn give_back(buf: Vec<u8>) {
    if buf.capacity() <= KEEP_BUFFER_BYTES {
        SCRATCH.with(|s| s.set(buf));
    }
}

/// The exact JSON builtins, which never carry `_cj` (asking costs a small
/// `payload_hash` 60%).
fn is_exact_plain(value: &Bound<'_, PyAny>) -> bool {
    value.is_none()
        || value.is_exact_instance_of::<PyString>()
        || value.is_exact_instance_of::<PyDict>()
        || value.is_exact_instance_of::<PyList>()
        || value.is_exact_instance_of::<PyTuple>()
        || value.is_exact_instance_of::<PyInt>()
        || value.is_exact_instance_of::<PyFloat>()
        || value.is_instance_of::<PyBool>()
}

/// RFC 8785 canonical JSON bytes of `value`.
#[pyfunction]
pub fn canonical_json<'py>(
    py: Python<'py>,
    value: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    guard(py, || {
        let mut w = walker(py, scratch());
        let out = (w.write_root(value.as_ptr()))
            .map(|()| PyBytes::new(py, &w.out))
            .map_err(|e| walk_error(py, e));
        give_back(w.out);
        out
    })
}

/// Lowercase SHA-256 hex of the canonical bytes of `value`.
#[pyfunction]
pub fn payload_hash(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<String> {
    guard(py, || {
        if !is_exact_plain(value) && has_item_cache(value)? {
            let cached = digest_of(item_canonical(value)?.as_any());
            return cached
                .map(|(digest, _)| hex(&digest))
                .ok_or_else(|| PyRuntimeError::new_err("malformed item cache"));
        }
        let mut w = walker(py, scratch()).streaming(STREAM_FROM_BYTES);
        w.write_root(value.as_ptr())
            .map_err(|e| walk_error(py, e))?;
        let (streamed, buf) = w.finish_stream();
        let digest = match streamed {
            Some(Some(digest)) => digest,
            Some(None) => return Err(PyRuntimeError::new_err("the hashing thread failed")),
            None => sha256(&buf),
        };
        give_back(buf);
        Ok(hex(&digest))
    })
}

/// The `_cj` tuple of canonical bytes already in a `bytes` object, untracked (two `bytes`).
pub fn cache_of<'py>(
    bytes: Bound<'py, PyBytes>,
    digest: &[u8; 32],
) -> PyResult<Bound<'py, PyTuple>> {
    let digest = PyBytes::new(bytes.py(), digest);
    let tuple = PyTuple::new(bytes.py(), [bytes, digest])?.into_any();
    Ok(crate::slots::untracked(tuple).cast_into::<PyTuple>()?)
}

/// The `_cj` tuple of `bytes` and `digest`, stored in the frozen item's slot.
pub fn store_cache<'py>(
    item: &Bound<'py, PyAny>,
    bytes: &[u8],
    digest: &[u8; 32],
) -> PyResult<Bound<'py, PyTuple>> {
    let tuple = cache_of(PyBytes::new(item.py(), bytes), digest)?;
    object_setattr(item, intern!(item.py(), "_cj"), tuple.clone().into_any())?;
    Ok(tuple)
}

/// `hasattr(type(value), "_cj") and hasattr(value, "to_dict")`: conversation
/// items and `ToolSpec`.
pub fn has_item_cache(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    let py = obj.py();
    Ok(obj.get_type().hasattr(intern!(py, "_cj"))? && obj.hasattr(intern!(py, "to_dict"))?)
}

/// The bytes of a `bytes` object.
///
/// # Safety
/// `ptr` must be a live `bytes`; the slice lives as long as it does.
#[inline]
pub unsafe fn bytes_of<'a>(ptr: *mut ffi::PyObject) -> &'a [u8] {
    let data = ffi::PyBytes_AS_STRING(ptr) as *const u8;
    std::slice::from_raw_parts(data, ffi::Py_SIZE(ptr) as usize)
}

/// The digest of a filled `_cj` cache `(bytes, 32-byte bytes)` and its
/// canonical bytes object, unchecked (its header is one more cache miss,
/// which the scan pays on a memo miss only); `None` when not filled.
///
/// # Safety
/// `cj` must be null or a live object.
#[inline(always)]
pub unsafe fn read_digest(cj: *mut ffi::PyObject) -> Option<([u8; 32], *mut ffi::PyObject)> {
    if cj.is_null() || ffi::PyTuple_CheckExact(cj) == 0 || ffi::PyTuple_GET_SIZE(cj) != 2 {
        return None;
    }
    let d = ffi::PyTuple_GET_ITEM(cj, 1);
    if ffi::PyBytes_CheckExact(d) == 0 || ffi::Py_SIZE(d) != 32 {
        return None;
    }
    Some((bytes_of(d).try_into().ok()?, ffi::PyTuple_GET_ITEM(cj, 0)))
}

/// [`read_digest`] of a held object.
#[inline]
pub fn digest_of(cj: &Bound<'_, PyAny>) -> Option<([u8; 32], *mut ffi::PyObject)> {
    // SAFETY: a live object (held by the caller).
    unsafe { read_digest(cj.as_ptr()) }
}

/// `(canonical_bytes, sha256_digest)` of `item.to_dict()`, cached in `item._cj`.
#[pyfunction]
pub fn item_canonical<'py>(item: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
    let py = item.py();
    guard(py, || {
        if !has_item_cache(item)? {
            let reason = format!("{} has no canonical cache slot", type_name(item));
            return Err(canonicalization_error(py, "$", reason));
        }
        let cached = walker(py, Vec::new()).item_cache(item.as_ptr());
        Ok(cached
            .map_err(|e| walk_error(py, e))?
            .into_keep()
            .cast_into::<PyTuple>()?)
    })
}
