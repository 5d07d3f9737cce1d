//! What the fit read from a history line's entries, kept between calls.
//!
//! A worker builds a session's requests over one line that grows at its
//! end (`inputs.line`). Reading an entry touches the history item (type,
//! `seq`, call id) and its render (`_cj` tuple, digest): five or six
//! objects spread over the heap, out of the CPU's caches by the next turn.
//! This cache keeps, per line, those readings in one array with strong
//! references to the item, the render, the pointer and the render's `_cj`
//! tuple, so their addresses stay theirs. A call uses an entry only where
//! the history, the line's items, renders and pointers all hold the very
//! objects the entry holds (pointer compares over four arrays). An entry
//! also keeps its render's count with the way it was counted (estimator
//! state, memo counter, kind): a later call counting the same way takes it
//! instead of looking it up in the memo (counted as a memo hit; the memo's
//! recency of that key is not refreshed). So a fit measures what a call
//! without the cache measures, and makes as many memo lookups; while the
//! memo has room its traffic is that call's, hit for hit.
//!
//! Bounded: at most `_set_line_cache_limit` bytes (the entries' estimated
//! memory, [`Entry::size`]; `MemoryLimits.line_bytes` on the Python side)
//! over all lines of a thread, the least recently used lines dropped first;
//! a line its owner drops is forgotten at once (`_forget_line`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use ctxengine_core::body::HistoryItem;
use ctxengine_core::cut::ToolRole;
use pyo3::ffi;
use pyo3::prelude::*;

use crate::estimator::Measured;

/// The estimated bytes of entries kept per thread, over all lines (set from
/// Python: `_set_line_cache_limit`).
static MAX_BYTES: AtomicUsize = AtomicUsize::new(8 << 20);

/// An entry's estimated memory beside its own struct and call id: its
/// references. (The item, render and pointer it holds are their owners'
/// memory, the history window's and the render cache's, which forget the
/// line when they let them go: `_forget_line`.)
const ENTRY_OBJECTS: usize = 32;

/// An entry's tool-pair role with its call id owned.
pub enum CachedRole {
    Other,
    Call(Box<str>),
    Result(Box<str>),
}

/// One line entry as a call read it.
pub struct Entry {
    pub item: Py<PyAny>,
    pub render: Py<PyAny>,
    /// `None` is the line's `None` (no pointer).
    pub pointer: Option<Py<PyAny>>,
    /// The render's `_cj` tuple: holds `bytes`.
    _cj: Py<PyAny>,
    pub bytes: *mut ffi::PyObject,
    pub digest: [u8; 32],
    pub seq: Option<i64>,
    pub role: CachedRole,
    pub hash: u64,
    /// The render's count as the last call measured it (and how).
    pub measured: Measured,
    /// Its estimated memory: the struct, its call id, `ENTRY_OBJECTS`.
    size: usize,
}

impl Entry {
    /// The history item the core reads. The role borrows the entry's call
    /// id: valid while the entry is (the caller holds the cache for the
    /// whole call).
    pub fn history(&self) -> HistoryItem<'static> {
        // SAFETY: the text lives in this entry's box, which the call holds.
        let text = |s: &str| unsafe { &*(s as *const str) };
        let role = match &self.role {
            CachedRole::Other => ToolRole::Other,
            CachedRole::Call(id) => ToolRole::Call(text(id)),
            CachedRole::Result(id) => ToolRole::Result(text(id)),
        };
        HistoryItem {
            raw: 0,
            seq: self.seq,
            role,
            hash: self.hash,
        }
    }

    /// The pointer as the line holds it (`None`'s address for none).
    pub fn pointer_ptr(&self) -> *mut ffi::PyObject {
        match &self.pointer {
            Some(p) => p.as_ptr(),
            // SAFETY: the address of the `None` singleton only.
            None => unsafe { ffi::Py_None() },
        }
    }

    /// An entry from what a call read: the item, render, pointer (the
    /// line's, `None` for none), the render's `_cj` tuple, and the item's
    /// history reading. `None` when the tuple is not a filled cache.
    pub fn new(
        item: Py<PyAny>,
        render: Py<PyAny>,
        pointer: Option<Py<PyAny>>,
        cj: Py<PyAny>,
        read: &HistoryItem<'_>,
    ) -> Option<Entry> {
        // SAFETY: a live object (held); read_digest checks its shape.
        let (digest, bytes) = unsafe { crate::items::read_digest(cj.as_ptr()) }?;
        let id = match read.role {
            ToolRole::Other => 0,
            ToolRole::Call(id) | ToolRole::Result(id) => id.len(),
        };
        let role = match read.role {
            ToolRole::Other => CachedRole::Other,
            ToolRole::Call(id) => CachedRole::Call(id.into()),
            ToolRole::Result(id) => CachedRole::Result(id.into()),
        };
        Some(Entry {
            item,
            render,
            pointer,
            _cj: cj,
            bytes,
            digest,
            seq: read.seq,
            role,
            hash: read.hash,
            measured: Measured::default(),
            size: std::mem::size_of::<Entry>() + id + ENTRY_OBJECTS,
        })
    }
}

/// One line's entries, in line order from its start.
pub struct LineCache {
    /// The line's items sequence (held: its address keys the cache).
    key: Py<PyAny>,
    pub entries: Vec<Entry>,
    used: u64,
}

impl LineCache {
    pub fn new(key: Py<PyAny>) -> Self {
        LineCache {
            key,
            entries: Vec::new(),
            used: 0,
        }
    }

    /// The entries' estimated memory.
    fn size(&self) -> usize {
        self.entries.iter().map(|e| e.size).sum()
    }
}

#[derive(Default)]
struct Lines {
    /// Each line's cache and its size when it was put back.
    by_key: HashMap<usize, (LineCache, usize)>,
    entries: usize,
    bytes: usize,
    clock: u64,
    /// Entries calls took from the cache, in all (for tests).
    served: u64,
}

thread_local! {
    static LINES: RefCell<Lines> = RefCell::new(Lines::default());
}

/// The cache of the line whose items sequence is `key`, taken out for the
/// call (a re-entrant call finds none); `put` gives it back.
pub fn take(key: &Bound<'_, PyAny>) -> LineCache {
    remove(key).unwrap_or_else(|| LineCache::new(key.clone().unbind()))
}

/// The cache of the line whose items sequence is `key`, out of the map.
fn remove(key: &Bound<'_, PyAny>) -> Option<LineCache> {
    LINES.with(|l| {
        let mut l = l.borrow_mut();
        let found = l.by_key.remove(&(key.as_ptr() as usize));
        if let Some((c, size)) = &found {
            l.entries -= c.entries.len();
            l.bytes -= size;
        }
        found.map(|(c, _)| c)
    })
}

/// Give a line's cache back (entries over the bound drop the least
/// recently used lines; a line over the whole bound is dropped). The
/// entries dropped release their references here, under the GIL.
pub fn put(cache: LineCache) {
    let limit = MAX_BYTES.load(Ordering::Relaxed);
    let size = cache.size();
    let dropped = LINES.with(|l| {
        let mut l = l.borrow_mut();
        l.clock += 1;
        let mut cache = cache;
        cache.used = l.clock;
        if size > limit {
            return vec![cache];
        }
        let mut dropped = Vec::new();
        while l.bytes + size > limit {
            let Some(oldest) = l
                .by_key
                .iter()
                .min_by_key(|(_, (c, _))| c.used)
                .map(|(k, _)| *k)
            else {
                break;
            };
            if let Some((c, s)) = l.by_key.remove(&oldest) {
                l.entries -= c.entries.len();
                l.bytes -= s;
                dropped.push(c);
            }
        }
        l.entries += cache.entries.len();
        l.bytes += size;
        let key = cache.key.as_ptr() as usize;
        if let Some((old, s)) = l.by_key.insert(key, (cache, size)) {
            l.entries -= old.entries.len();
            l.bytes -= s;
            dropped.push(old);
        }
        dropped
    });
    drop(dropped);
}

/// Set the bound of each thread's line cache, in estimated bytes (a thread
/// over it drops lines as it next puts one back; 0 keeps none); returns
/// the bound it replaces.
#[pyfunction(name = "_set_line_cache_limit")]
pub fn set_line_cache_limit(max_bytes: usize) -> usize {
    MAX_BYTES.swap(max_bytes, Ordering::Relaxed)
}

/// Drop this thread's cache of the line whose items sequence is `key`, if
/// it holds one: the owner of the line has dropped it (the render cache,
/// when it lets a session go), and the cache would otherwise keep the
/// line's items and renders alive until other lines push it out. The
/// references are released here, under the GIL. (A call in progress has
/// its line's cache taken out: it is not found, and comes back.)
#[pyfunction(name = "_forget_line")]
pub fn forget_line(key: &Bound<'_, PyAny>) {
    drop(remove(key));
}

/// Count `n` entries a call took from the cache.
pub fn served(n: usize) {
    LINES.with(|l| l.borrow_mut().served += n as u64);
}

/// This thread's line cache: lines, entries held, entries served so far
/// and the entries' estimated bytes (a private helper for tests: the cache
/// only ever changes speed).
#[pyfunction(name = "_line_cache_stats")]
pub fn line_cache_stats() -> (usize, usize, u64, usize) {
    LINES.with(|l| {
        let l = l.borrow();
        (l.by_key.len(), l.entries, l.served, l.bytes)
    })
}
