//! `canonical_json`, `payload_hash` and `item_canonical`: Python values
//! through the core's canonical walk ([`source`] says what each object is),
//! and the per-item cache `_cj`: `(canonical_bytes, sha256_digest)` of an
//! item's `to_dict()`, filled on first use (ADR 0001).

mod source;

pub use source::{utf8, PySource};

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

/// `payload_hash` of a value whose canonical bytes pass this size hashes
/// them in chunks as the walk goes on, on a second thread as soon as that
/// is up (`StreamHasher`): a megabyte costs little more than its hashing.
const STREAM_FROM_BYTES: usize = 16 * 1024;
/// Hashing at least this many bytes in one piece releases the GIL.
const DETACH_HASH_BYTES: usize = 512 * 1024;
/// A scratch buffer larger than this is not kept between calls.
const KEEP_BUFFER_BYTES: usize = 16 * 1024 * 1024;

thread_local! {
    /// The output buffer of the last walk, reused to avoid re-faulting pages.
    /// Taken (not borrowed) so that a re-entrant call simply allocates.
    static SCRATCH: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// The walker over Python objects.
pub type PyWalker<'py> = Walker<PySource<'py>>;

pub fn walker(py: Python<'_>, out: Vec<u8>) -> PyWalker<'_> {
    Walker::new(PySource::new(py), out)
}

/// A walk failure as the Python exception.
pub fn walk_error(py: Python<'_>, e: WalkError<PyErr>) -> PyErr {
    match e {
        WalkError::Path(p) => canonicalization_error(py, &p.path(), p.reason),
        WalkError::Host(e) => e,
    }
}

fn give_back(buf: Vec<u8>) {
    if buf.capacity() <= KEEP_BUFFER_BYTES {
        SCRATCH.with(|s| s.set(buf));
    }
}

/// True for the exact JSON-shaped builtins, which never carry `_cj`.
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
        let mut buf = SCRATCH.with(Cell::take);
        buf.clear();
        let mut w = walker(py, buf);
        if let Err(e) = w.write_root(value.as_ptr()) {
            give_back(w.out);
            return Err(walk_error(py, e));
        }
        let out = PyBytes::new(py, &w.out);
        give_back(w.out);
        Ok(out)
    })
}

/// Lowercase SHA-256 hex of the canonical bytes of `value`.
#[pyfunction]
pub fn payload_hash(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<String> {
    guard(py, || {
        if !is_exact_plain(value) && has_item_cache(value)? {
            // An item: its cache already holds the digest.
            let (digest, _) = digest_of(item_cache(value)?.as_any())
                .ok_or_else(|| PyRuntimeError::new_err("malformed item cache"))?;
            return Ok(hex(&digest));
        }
        let mut buf = SCRATCH.with(Cell::take);
        buf.clear();
        let mut w = walker(py, buf).streaming(STREAM_FROM_BYTES);
        if let Err(e) = w.write_root(value.as_ptr()) {
            return Err(walk_error(py, e));
        }
        let (streamed, buf) = w.finish_stream();
        let digest = match streamed {
            Some(Some(digest)) => digest,
            Some(None) => return Err(PyRuntimeError::new_err("the hashing thread failed")),
            None if buf.len() >= DETACH_HASH_BYTES => py.detach(|| sha256(&buf)),
            None => sha256(&buf),
        };
        give_back(buf);
        Ok(hex(&digest))
    })
}

/// `(canonical_bytes, sha256_digest)` of `item.to_dict()`, cached in `item._cj`.
#[pyfunction]
pub fn item_canonical<'py>(
    py: Python<'py>,
    item: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTuple>> {
    guard(py, || item_cache(item))
}

/// The `_cj` tuple `(bytes, digest)`.
pub fn make_cache<'py>(
    py: Python<'py>,
    bytes: &[u8],
    digest: &[u8; 32],
) -> PyResult<Bound<'py, PyTuple>> {
    cache_of(PyBytes::new(py, bytes), digest)
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
pub fn item_cache<'py>(item: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
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
