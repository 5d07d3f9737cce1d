//! The per-item cache `_cj`: `(canonical_bytes, sha256_digest)` of an
//! item's `to_dict()`, filled on first use (ADR 0001).

use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use super::{walk_error, walker};
use crate::arguments::type_name;
use crate::errors::canonicalization_error;
use crate::slots::object_setattr;

/// The `_cj` tuple `(bytes, digest)`.
pub fn make_cache<'py>(
    py: Python<'py>,
    bytes: &[u8],
    digest: &[u8; 32],
) -> PyResult<Bound<'py, PyTuple>> {
    cache_of(PyBytes::new(py, bytes), digest)
}

/// The `_cj` tuple of canonical bytes already in a `bytes` object.
pub fn cache_of<'py>(
    bytes: Bound<'py, PyBytes>,
    digest: &[u8; 32],
) -> PyResult<Bound<'py, PyTuple>> {
    let digest = PyBytes::new(bytes.py(), digest);
    PyTuple::new(bytes.py(), [bytes, digest])
}

/// `hasattr(type(value), "_cj") and hasattr(value, "to_dict")`: conversation
/// items and `ToolSpec`.
pub fn has_item_cache(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    let py = obj.py();
    Ok(obj.get_type().hasattr(intern!(py, "_cj"))? && obj.hasattr(intern!(py, "to_dict"))?)
}

// ---------------------------------------------------------------------------
// the per-item cache

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
/// canonical bytes object, not read here (its header is another cache miss:
/// `Facts::len` checks and reads it on a memo miss only); `None` when not
/// filled (null included).
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
    let mut digest = [0u8; 32];
    digest.copy_from_slice(bytes_of(d));
    Some((digest, ffi::PyTuple_GET_ITEM(cj, 0)))
}

/// [`read_digest`] of a held object.
#[inline]
pub fn digest_of(cj: &Bound<'_, PyAny>) -> Option<([u8; 32], *mut ffi::PyObject)> {
    // SAFETY: a live object (held by the caller).
    unsafe { read_digest(cj.as_ptr()) }
}

/// A well-formed `_cj` value `(bytes, 32-byte bytes)`: its canonical bytes
/// and digest.
///
/// # Safety
/// `cj` must be a live object; the slice lives as long as it does.
#[inline]
pub unsafe fn read_cache<'a>(cj: *mut ffi::PyObject) -> Option<(&'a [u8], [u8; 32])> {
    let (digest, b) = read_digest(cj)?;
    (ffi::PyBytes_CheckExact(b) != 0).then(|| (bytes_of(b), digest))
}

/// Store `value` in the frozen item's `_cj` slot (`object.__setattr__`).
pub fn store_cache(item: &Bound<'_, PyAny>, value: &Bound<'_, PyTuple>) -> PyResult<()> {
    object_setattr(item, intern!(item.py(), "_cj"), value.clone().into_any())
}

/// `item_canonical(item)`: the cached pair, computed and stored on first use.
pub fn item_canonical<'py>(item: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
    let py = item.py();
    if !has_item_cache(item)? {
        return Err(canonicalization_error(
            py,
            "$",
            format!("{} has no canonical cache slot", type_name(item)),
        ));
    }
    let mut w = walker(py, Vec::new());
    let cached = w.item_cache(item.as_ptr()).map_err(|e| walk_error(py, e))?;
    Ok(cached.into_keep().cast_into::<PyTuple>()?)
}
