//! Walking Python objects straight into canonical JSON bytes, and the
//! per-item `_cj` cache.
//!
//! Dispatch is on the exact type first (`str`, `dict`, `list`, `None`,
//! `bool`, `int`, `float`, `tuple`), then on subclasses, then value types:
//! an object with a `_cj` attribute splices its cached item bytes, an
//! object with `to_dict()` is walked through that dict.

use std::ptr::addr_of_mut;

use ctxengine_core::canonical::{
    self, PathError, MAX_DEPTH, REASON_CYCLE, REASON_DEPTH, REASON_ITEM_CYCLE, REASON_SURROGATE,
    REASON_VALUE_CYCLE,
};
use ctxengine_core::hash::{sha256, StreamHasher};
use pyo3::exceptions::{PyAttributeError, PyRuntimeError};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::errors::canonicalization_error;

/// A walk failure: a canonicalization error whose path is still being
/// completed, or a Python error raised by code the walk called.
pub enum WalkError {
    Path(PathError),
    Py(PyErr),
}

impl From<PyErr> for WalkError {
    fn from(e: PyErr) -> Self {
        WalkError::Py(e)
    }
}

impl WalkError {
    fn in_key(self, key: &str) -> Self {
        match self {
            WalkError::Path(p) => WalkError::Path(p.in_key(key)),
            other => other,
        }
    }

    fn in_index(self, index: usize) -> Self {
        match self {
            WalkError::Path(p) => WalkError::Path(p.in_index(index)),
            other => other,
        }
    }

    pub fn into_pyerr(self, py: Python<'_>) -> PyErr {
        match self {
            WalkError::Path(p) => canonicalization_error(py, &p.path(), p.reason),
            WalkError::Py(e) => e,
        }
    }
}

fn fail<T>(reason: impl Into<String>) -> Result<T, WalkError> {
    Err(WalkError::Path(PathError::new(reason)))
}

/// A dict member waiting to be written in key order. Holds strong
/// references so that Python code run mid-walk cannot free them.
struct Entry<'py> {
    key: *const u8,
    key_len: usize,
    _key_obj: Bound<'py, PyAny>,
    value: Bound<'py, PyAny>,
}

impl Entry<'_> {
    #[inline]
    fn key(&self) -> &[u8] {
        // SAFETY: UTF-8 buffer cached inside `_key_obj`, which we own.
        unsafe { std::slice::from_raw_parts(self.key, self.key_len) }
    }
}

/// The member order of a dict's keys: a run of dicts with the same key
/// objects (records in a list) is checked and sorted once. Holds the keys,
/// so a key pointer met again is the same string.
struct KeyOrder<'py> {
    keys: Vec<Bound<'py, PyAny>>,
    /// For each written position, the index of the member in iteration order.
    order: Vec<u32>,
    /// `"key":` of each written position, back to back; `ends` delimits them.
    text: Vec<u8>,
    ends: Vec<u32>,
}

/// Key orders kept per walk.
const KEY_ORDERS: usize = 8;

/// UTF-8 of a `str` (or subclass); `None` for lone surrogates.
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

/// `repr(obj)`.
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

/// The walker: one output buffer, the ancestor stack for cycle detection,
/// and a shared scratch stack of dict members (no allocation per dict).
pub struct Walker<'py> {
    py: Python<'py>,
    pub out: Vec<u8>,
    ancestors: Vec<*mut ffi::PyObject>,
    entries: Vec<Entry<'py>>,
    /// Key orders of recent dicts (see [`KeyOrder`]).
    /// (last use, order), the least recently used replaced first.
    orders: Vec<(u64, std::rc::Rc<KeyOrder<'py>>)>,
    order_clock: u64,
    /// Dicts met with and without a recorded order in this walk: orders
    /// are recorded while that pays (many key sets alternating do not).
    order_hits: u64,
    order_misses: u64,
    /// The last float written and its text (payloads repeat values).
    last_float: Option<(u64, [u8; 32], usize)>,
    /// A buffer for item bytes, reused across items.
    spare: Vec<u8>,
    /// Hand `out` to `stream` whenever it reaches this length.
    flush_at: usize,
    /// Hashes flushed output on a worker thread (payload_hash of a large value).
    stream: Option<StreamHasher>,
}

impl<'py> Walker<'py> {
    pub fn new(py: Python<'py>, out: Vec<u8>) -> Self {
        Walker {
            py,
            out,
            ancestors: Vec::new(),
            entries: Vec::new(),
            orders: Vec::new(),
            order_clock: 0,
            order_hits: 0,
            order_misses: 0,
            last_float: None,
            spare: Vec::new(),
            flush_at: usize::MAX,
            stream: None,
        }
    }

    /// Hash the output while walking: once it reaches `start_at` bytes, full
    /// chunks are hashed as they are made, on a worker thread once it is up.
    pub fn streaming(mut self, start_at: usize) -> Self {
        self.flush_at = start_at;
        self
    }

    #[cold]
    fn flush(&mut self) {
        let stream = self.stream.get_or_insert_with(StreamHasher::new);
        let full = std::mem::take(&mut self.out);
        // Chunk buffers stay below the allocator's mmap threshold, so they
        // are reused rather than mapped and faulted in each time.
        self.out = stream.push(full, STREAM_CHUNK + STREAM_CHUNK / 4);
        self.flush_at = STREAM_CHUNK;
    }

    #[inline(always)]
    fn maybe_flush(&mut self) {
        if self.out.len() >= self.flush_at {
            self.flush();
        }
    }

    /// The SHA-256 of everything written (streamed or not). Returns the
    /// output buffer (holding only the unflushed tail when streaming).
    pub fn finish_hash(mut self) -> PyResult<([u8; 32], Vec<u8>)> {
        let out = std::mem::take(&mut self.out);
        match self.stream.take() {
            Some(stream) => {
                let (digest, spare) = stream
                    .finish(&out)
                    .ok_or_else(|| PyRuntimeError::new_err("the hashing thread failed"))?;
                // Keep the larger buffer (usually the first, big one).
                Ok((
                    digest,
                    if spare.capacity() > out.capacity() {
                        spare
                    } else {
                        out
                    },
                ))
            }
            None if out.len() >= DETACH_HASH_BYTES => Ok((self.py.detach(|| sha256(&out)), out)),
            None => Ok((sha256(&out), out)),
        }
    }

    /// Append the canonical bytes of `obj` as a root value.
    pub fn write_root(&mut self, obj: &Bound<'py, PyAny>) -> Result<(), WalkError> {
        self.ancestors.clear();
        self.entries.clear();
        self.value(obj.as_ptr(), 0)
    }

    /// Cycle check, then depth check, then push `ptr` as an ancestor.
    #[inline]
    fn enter(&mut self, ptr: *mut ffi::PyObject, depth: usize) -> Result<(), WalkError> {
        if self.ancestors.contains(&ptr) {
            return fail(REASON_CYCLE);
        }
        if depth + 1 > MAX_DEPTH {
            return fail(REASON_DEPTH);
        }
        self.ancestors.push(ptr);
        Ok(())
    }

    /// `ptr` is a borrowed reference kept alive by the caller; `depth` is
    /// the depth of its parent container (0 for the root).
    fn value(&mut self, ptr: *mut ffi::PyObject, depth: usize) -> Result<(), WalkError> {
        unsafe {
            let tp = ffi::Py_TYPE(ptr);
            if tp == addr_of_mut!(ffi::PyUnicode_Type) {
                return self.string(ptr);
            }
            if tp == addr_of_mut!(ffi::PyDict_Type) {
                return self.dict(ptr, depth);
            }
            if tp == addr_of_mut!(ffi::PyList_Type) {
                return self.list(ptr, depth);
            }
            if ptr == ffi::Py_None() {
                self.out.extend_from_slice(b"null");
                return Ok(());
            }
            if tp == addr_of_mut!(ffi::PyBool_Type) {
                if ptr == ffi::Py_True() {
                    self.out.extend_from_slice(b"true");
                } else {
                    self.out.extend_from_slice(b"false");
                }
                return Ok(());
            }
            if tp == addr_of_mut!(ffi::PyLong_Type) {
                return self.int(ptr);
            }
            if tp == addr_of_mut!(ffi::PyFloat_Type) {
                return self.float(ffi::PyFloat_AS_DOUBLE(ptr));
            }
            if tp == addr_of_mut!(ffi::PyTuple_Type) {
                return self.tuple(ptr, depth);
            }
            // subclasses (bool cannot be subclassed)
            if ffi::PyUnicode_Check(ptr) != 0 {
                return self.string(ptr);
            }
            if ffi::PyLong_Check(ptr) != 0 {
                return self.int(ptr);
            }
            if ffi::PyFloat_Check(ptr) != 0 {
                let v = ffi::PyFloat_AsDouble(ptr);
                if v == -1.0 && !ffi::PyErr_Occurred().is_null() {
                    return Err(PyErr::fetch(self.py).into());
                }
                return self.float(v);
            }
            if ffi::PyDict_Check(ptr) != 0 {
                return self.dict(ptr, depth);
            }
            if ffi::PyList_Check(ptr) != 0 {
                return self.list(ptr, depth);
            }
            if ffi::PyTuple_Check(ptr) != 0 {
                return self.tuple(ptr, depth);
            }
            let obj = Bound::from_borrowed_ptr(self.py, ptr);
            self.value_type(&obj, depth)
        }
    }

    #[inline]
    unsafe fn string(&mut self, ptr: *mut ffi::PyObject) -> Result<(), WalkError> {
        match utf8(ptr) {
            Some(s) => {
                canonical::write_str(&mut self.out, s);
                Ok(())
            }
            None => fail(REASON_SURROGATE),
        }
    }

    #[inline]
    unsafe fn int(&mut self, ptr: *mut ffi::PyObject) -> Result<(), WalkError> {
        let mut overflow: std::os::raw::c_int = 0;
        let v = ffi::PyLong_AsLongLongAndOverflow(ptr, &mut overflow);
        if overflow != 0 {
            return fail(canonical::REASON_INT_RANGE);
        }
        if v == -1 && !ffi::PyErr_Occurred().is_null() {
            return Err(PyErr::fetch(self.py).into());
        }
        canonical::write_int(&mut self.out, v).or_else(fail)
    }

    #[inline]
    fn float(&mut self, v: f64) -> Result<(), WalkError> {
        if let Some((bits, text, len)) = &self.last_float {
            if v.to_bits() == *bits {
                self.out.extend_from_slice(&text[..*len]);
                return Ok(());
            }
        }
        let start = self.out.len();
        canonical::write_f64(&mut self.out, v).or_else(fail)?;
        let written = &self.out[start..];
        if written.len() <= 32 {
            let mut text = [0u8; 32];
            text[..written.len()].copy_from_slice(written);
            self.last_float = Some((v.to_bits(), text, written.len()));
        }
        Ok(())
    }

    unsafe fn list(&mut self, ptr: *mut ffi::PyObject, depth: usize) -> Result<(), WalkError> {
        self.enter(ptr, depth)?;
        self.out.push(b'[');
        let mut i: ffi::Py_ssize_t = 0;
        // Re-read the size each step: Python code run by a nested value
        // (to_dict) may change the list.
        while i < ffi::PyList_GET_SIZE(ptr) {
            if i > 0 {
                self.out.push(b',');
            }
            let item = Bound::from_borrowed_ptr(self.py, ffi::PyList_GET_ITEM(ptr, i));
            if let Err(e) = self.value(item.as_ptr(), depth + 1) {
                self.ancestors.pop();
                return Err(e.in_index(i as usize));
            }
            self.maybe_flush();
            i += 1;
        }
        self.out.push(b']');
        self.ancestors.pop();
        Ok(())
    }

    unsafe fn tuple(&mut self, ptr: *mut ffi::PyObject, depth: usize) -> Result<(), WalkError> {
        self.enter(ptr, depth)?;
        self.out.push(b'[');
        let n = ffi::PyTuple_GET_SIZE(ptr);
        for i in 0..n {
            if i > 0 {
                self.out.push(b',');
            }
            if let Err(e) = self.value(ffi::PyTuple_GET_ITEM(ptr, i), depth + 1) {
                self.ancestors.pop();
                return Err(e.in_index(i as usize));
            }
            self.maybe_flush();
        }
        self.out.push(b']');
        self.ancestors.pop();
        Ok(())
    }

    unsafe fn dict(&mut self, ptr: *mut ffi::PyObject, depth: usize) -> Result<(), WalkError> {
        self.enter(ptr, depth)?;
        let start = self.entries.len();
        let result = self.dict_members(ptr, depth, start);
        self.entries.truncate(start);
        self.ancestors.pop();
        result
    }

    unsafe fn dict_members(
        &mut self,
        ptr: *mut ffi::PyObject,
        depth: usize,
        start: usize,
    ) -> Result<(), WalkError> {
        let mut pos: ffi::Py_ssize_t = 0;
        let mut k: *mut ffi::PyObject = std::ptr::null_mut();
        let mut v: *mut ffi::PyObject = std::ptr::null_mut();
        while ffi::PyDict_Next(ptr, &mut pos, &mut k, &mut v) != 0 {
            self.entries.push(Entry {
                key: std::ptr::null(),
                key_len: 0,
                _key_obj: Bound::from_borrowed_ptr(self.py, k),
                value: Bound::from_borrowed_ptr(self.py, v),
            });
        }
        let n = self.entries.len() - start;
        // The same key objects as a recent dict: its order and key text.
        let hit = self.orders.iter().position(|(_, o)| {
            o.keys.len() == n
                && o.keys
                    .iter()
                    .zip(&self.entries[start..])
                    .all(|(a, b)| a.as_ptr() == b._key_obj.as_ptr())
        });
        let o = match hit {
            Some(i) => {
                self.order_hits += 1;
                self.order_clock += 1;
                self.orders[i].0 = self.order_clock;
                // (Shared: a nested dict may replace the slot meanwhile.)
                std::rc::Rc::clone(&self.orders[i].1)
            }
            None => {
                self.order_misses += 1;
                if self.order_misses > 64 && self.order_hits < self.order_misses {
                    return self.dict_sorted(start, depth);
                }
                self.key_order(start)?
            }
        };
        self.out.push(b'{');
        for j in 0..n {
            let (at, value) = {
                let at = o.order[j] as usize;
                let text = &o.text[o.ends[j] as usize..o.ends[j + 1] as usize];
                if j > 0 {
                    self.out.push(b',');
                }
                self.out.extend_from_slice(text);
                (at, self.entries[start + at].value.as_ptr())
            };
            if let Err(e) = self.value(value, depth + 1) {
                let key = utf8(self.entries[start + at]._key_obj.as_ptr()).unwrap_or_default();
                return Err(e.in_key(std::str::from_utf8_unchecked(key)));
            }
            self.maybe_flush();
        }
        self.out.push(b'}');
        Ok(())
    }

    /// Check the keys of `entries[start..]` (in iteration order: the first
    /// bad one is the error) and note their UTF-8.
    unsafe fn check_keys(&mut self, start: usize) -> Result<(), WalkError> {
        for e in &mut self.entries[start..] {
            let k = e._key_obj.as_ptr();
            if ffi::PyUnicode_Check(k) == 0 {
                return fail(format!("object key {} is not a string", repr(&e._key_obj)?));
            }
            let Some(key) = utf8(k) else {
                return fail(format!(
                    "lone surrogate in object key {}",
                    str_repr(self.py, k)?
                ));
            };
            e.key = key.as_ptr();
            e.key_len = key.len();
        }
        Ok(())
    }

    /// The members of `entries[start..]` sorted in place and written, no
    /// order recorded.
    unsafe fn dict_sorted(&mut self, start: usize, depth: usize) -> Result<(), WalkError> {
        self.check_keys(start)?;
        let members = &mut self.entries[start..];
        if members.len() > 1 {
            members.sort_unstable_by(|a, b| canonical::cmp_utf16(a.key(), b.key()));
        }
        self.out.push(b'{');
        let end = self.entries.len();
        for i in start..end {
            if i > start {
                self.out.push(b',');
            }
            let (key, value) = {
                let e = &self.entries[i];
                (e.key(), e.value.as_ptr())
            };
            // `key` borrows memory owned by the entry, not by `self`.
            let key: &[u8] = std::slice::from_raw_parts(key.as_ptr(), key.len());
            canonical::write_str(&mut self.out, key);
            self.out.push(b':');
            if let Err(e) = self.value(value, depth + 1) {
                return Err(e.in_key(std::str::from_utf8_unchecked(key)));
            }
            self.maybe_flush();
        }
        self.out.push(b'}');
        Ok(())
    }

    /// Check and sort the keys of `entries[start..]`, recording the order
    /// (replacing the least recently used one).
    unsafe fn key_order(&mut self, start: usize) -> Result<std::rc::Rc<KeyOrder<'py>>, WalkError> {
        self.check_keys(start)?;
        let n = self.entries.len() - start;
        let mut order: Vec<u32> = (0..n as u32).collect();
        let members = &self.entries[start..];
        if n > 1 {
            order.sort_unstable_by(|&a, &b| {
                canonical::cmp_utf16(members[a as usize].key(), members[b as usize].key())
            });
        }
        let mut text = Vec::new();
        let mut ends = Vec::with_capacity(n + 1);
        ends.push(0u32);
        for &i in &order {
            canonical::write_str(&mut text, members[i as usize].key());
            text.push(b':');
            ends.push(text.len() as u32);
        }
        let recorded = std::rc::Rc::new(KeyOrder {
            keys: members.iter().map(|e| e._key_obj.clone()).collect(),
            order,
            text,
            ends,
        });
        self.order_clock += 1;
        let entry = (self.order_clock, std::rc::Rc::clone(&recorded));
        if self.orders.len() < KEY_ORDERS {
            self.orders.push(entry);
        } else if let Some(oldest) = self.orders.iter_mut().min_by_key(|(used, _)| *used) {
            *oldest = entry;
        }
        Ok(recorded)
    }

    /// Value types: items splice their cached bytes, others walk `to_dict()`.
    fn value_type(&mut self, obj: &Bound<'py, PyAny>, depth: usize) -> Result<(), WalkError> {
        let py = self.py;
        if has_item_cache(obj)? {
            let tuple = self.item_tuple(obj)?;
            // SAFETY: item_tuple returns a checked `(bytes, bytes)` tuple.
            let bytes = unsafe { bytes_of(ffi::PyTuple_GET_ITEM(tuple.as_ptr(), 0)) };
            self.out.extend_from_slice(bytes);
            return Ok(());
        }
        match obj.getattr_opt(intern!(py, "to_dict"))? {
            Some(to_dict) if to_dict.is_callable() => {
                let ptr = obj.as_ptr();
                if self.ancestors.contains(&ptr) {
                    return fail(REASON_VALUE_CYCLE);
                }
                self.ancestors.push(ptr);
                let result = match to_dict.call0() {
                    Ok(d) => self.value(d.as_ptr(), depth),
                    Err(e) => Err(e.into()),
                };
                self.ancestors.pop();
                result
            }
            _ => fail(format!("unsupported type {}", type_name(obj))),
        }
    }

    /// The item's `(canonical_bytes, sha256_digest)`, filling `_cj` on first
    /// use. The item is canonicalized as a root of its own (depth restarts),
    /// sharing the ancestor stack so cycles through items are caught; error
    /// paths continue those of the enclosing walk.
    pub fn item_tuple(
        &mut self,
        item: &Bound<'py, PyAny>,
    ) -> Result<Bound<'py, PyTuple>, WalkError> {
        let py = self.py;
        match item.getattr(intern!(py, "_cj")) {
            Ok(cj) => {
                if unsafe { read_cache(cj.as_ptr()) }.is_some() {
                    return Ok(cj.cast_into::<PyTuple>().map_err(PyErr::from)?);
                }
            }
            // A slot never set counts as empty.
            Err(e) if e.is_instance_of::<PyAttributeError>(py) => {}
            Err(e) => return Err(e.into()),
        }
        let mut bytes = std::mem::take(&mut self.spare);
        bytes.clear();
        let result = self.item_bytes_into(item, &mut bytes).and_then(|()| {
            let tuple = make_cache(py, &bytes, &sha256(&bytes))?;
            store_cache(item, &tuple)?;
            Ok(tuple)
        });
        if bytes.capacity() <= SPARE_LIMIT {
            self.spare = bytes;
        }
        result
    }

    /// Append the canonical bytes of `item.to_dict()` to `out`, the item a
    /// root of its own (see [`Walker::item_tuple`]). On error `out` may hold
    /// a partial tail.
    pub fn item_bytes_into(
        &mut self,
        item: &Bound<'py, PyAny>,
        out: &mut Vec<u8>,
    ) -> Result<(), WalkError> {
        let ptr = item.as_ptr();
        if self.ancestors.contains(&ptr) {
            return fail(REASON_ITEM_CYCLE);
        }
        self.ancestors.push(ptr);
        // `out` is not the stream: no flushing while it stands in.
        let flush_at = std::mem::replace(&mut self.flush_at, usize::MAX);
        let saved = std::mem::replace(&mut self.out, std::mem::take(out));
        let result = match item.call_method0(intern!(self.py, "to_dict")) {
            Ok(d) => self.value(d.as_ptr(), 0),
            Err(e) => Err(e.into()),
        };
        *out = std::mem::replace(&mut self.out, saved);
        self.flush_at = flush_at;
        self.ancestors.pop();
        result
    }

    /// Append the canonical bytes of a root value to `out`.
    pub fn root_into(
        &mut self,
        value: &Bound<'py, PyAny>,
        out: &mut Vec<u8>,
    ) -> Result<(), WalkError> {
        let flush_at = std::mem::replace(&mut self.flush_at, usize::MAX);
        let saved = std::mem::replace(&mut self.out, std::mem::take(out));
        let result = self.write_root(value);
        *out = std::mem::replace(&mut self.out, saved);
        self.flush_at = flush_at;
        result
    }
}

/// The `_cj` tuple `(bytes, digest)`.
pub fn make_cache<'py>(
    py: Python<'py>,
    bytes: &[u8],
    digest: &[u8; 32],
) -> PyResult<Bound<'py, PyTuple>> {
    let b = PyBytes::new(py, bytes);
    let h = PyBytes::new(py, digest);
    PyTuple::new(py, [b.into_any(), h.into_any()])
}

/// Streamed hashing sends chunks of this size after the first.
const STREAM_CHUNK: usize = 64 * 1024;
/// Hashing at least this many bytes in one piece releases the GIL.
const DETACH_HASH_BYTES: usize = 512 * 1024;

/// A spare item buffer larger than this is dropped rather than kept.
const SPARE_LIMIT: usize = 1 << 20;

/// `hasattr(type(value), "_cj") and hasattr(value, "to_dict")`: conversation
/// items and `ToolSpec`.
pub fn has_item_cache(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    let py = obj.py();
    Ok(obj.get_type().hasattr(intern!(py, "_cj"))? && obj.hasattr(intern!(py, "to_dict"))?)
}

// ---------------------------------------------------------------------------
// the per-item cache

/// An item's `(canonical_bytes, sha256_digest)` pair.
#[inline]
pub unsafe fn bytes_of<'a>(ptr: *mut ffi::PyObject) -> &'a [u8] {
    let data = ffi::PyBytes_AS_STRING(ptr) as *const u8;
    std::slice::from_raw_parts(data, ffi::Py_SIZE(ptr) as usize)
}

/// A well-formed `_cj` value: `(bytes, 32-byte bytes)`; returns the
/// canonical length and the digest.
#[inline]
pub unsafe fn read_cache(ptr: *mut ffi::PyObject) -> Option<(usize, [u8; 32])> {
    if ffi::PyTuple_CheckExact(ptr) == 0 || ffi::PyTuple_GET_SIZE(ptr) != 2 {
        return None;
    }
    let b = ffi::PyTuple_GET_ITEM(ptr, 0);
    let d = ffi::PyTuple_GET_ITEM(ptr, 1);
    if ffi::PyBytes_CheckExact(b) == 0 || ffi::PyBytes_CheckExact(d) == 0 {
        return None;
    }
    let digest = bytes_of(d);
    if digest.len() != 32 {
        return None;
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(digest);
    Some((ffi::Py_SIZE(b) as usize, out))
}

/// Store `value` in the frozen item's `_cj` slot (`object.__setattr__`).
pub fn store_cache(item: &Bound<'_, PyAny>, value: &Bound<'_, PyTuple>) -> PyResult<()> {
    let py = item.py();
    let name = intern!(py, "_cj");
    let rc = unsafe { ffi::PyObject_GenericSetAttr(item.as_ptr(), name.as_ptr(), value.as_ptr()) };
    if rc < 0 {
        Err(PyErr::fetch(py))
    } else {
        Ok(())
    }
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
    let mut walker = Walker::new(py, Vec::new());
    walker.item_tuple(item).map_err(|e| e.into_pyerr(py))
}
