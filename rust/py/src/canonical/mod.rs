//! `canonical_json`, `payload_hash` and `item_canonical`: Python values
//! through the core's canonical walk ([`source`] says what each object is),
//! and the per-item cache ([`cache`]).

mod cache;
mod source;

pub use cache::{
    bytes_of, cache_of, digest_of, has_item_cache, item_canonical as item_cache, make_cache,
    read_digest, store_cache,
};
pub use source::{utf8, PySource};

use std::cell::Cell;

use ctxengine_core::canonical::{WalkError, Walker};
use ctxengine_core::hash::{hex, sha256};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::errors::{canonicalization_error, guard};

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
