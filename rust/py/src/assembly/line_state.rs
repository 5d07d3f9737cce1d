//! `LineState`: what the fit read of one history line, kept between calls
//! by the line's owner (`RenderLine.state`), and dropped with it.
//!
//! A worker builds a session's requests over one line that grows at its
//! end (`inputs.line`). Reading an entry touches the history item (type,
//! `seq`, call id) and its render (`_cj` tuple, digest): five or six
//! objects spread over the heap, out of the CPU's caches by the next turn.
//! The state keeps those readings in one array with strong references to
//! the item, the render, the pointer and the render's canonical bytes, so
//! their addresses stay theirs. A call uses an entry only where the
//! history, the line's items, renders and pointers all hold the very
//! objects the entry holds (pointer compares over four arrays). An entry
//! also keeps its render's count with the way it was counted (estimator
//! state, memo counter, kind): a later call counting the same way takes it
//! instead of looking it up in the memo (counted as a memo hit; the memo's
//! recency of that key is not refreshed). So a fit measures what a call
//! without the state measures, and makes as many memo lookups; while the
//! memo has room its traffic is that call's, hit for hit.
//!
//! Beside the entries: the last blocks and limits read for the line
//! (`memo`), and the SHA-256 states of its body digest list's leading part
//! (summary and history digests, which repeat build to build).
//!
//! A call takes the readings out for its whole length (Python code may run
//! meanwhile, and another thread may call with the same line): a call that
//! finds them taken fits without them. The lock is held only to take and
//! give back, never while Python code runs.

use std::sync::{Mutex, MutexGuard, PoisonError};

use ctxengine_core::body::HistoryItem;
use ctxengine_core::cut::ToolRole;
use ctxengine_core::hash::PrefixStates;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::memo::{KeptBlocks, KeptLimits};
use crate::estimator::Measured;

/// An entry's estimated memory beside its own struct and call id: its
/// references. (The item, render and pointer it holds are the line's too.)
const ENTRY_OBJECTS: usize = 32;

/// The stored prefixes of one line's body digest lists (see `PrefixStates`:
/// 32 bytes a digest; over the bound they start over).
const PREFIX_BYTES: usize = 2 << 20;

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
    /// The render's canonical bytes (of its `_cj` tuple).
    pub bytes: Py<PyAny>,
    pub digest: [u8; 32],
    pub seq: Option<i64>,
    pub role: CachedRole,
    pub hash: u64,
    /// The render's count as the last call measured it (and how).
    pub measured: Measured,
}

impl Entry {
    /// The history item the core reads. The role borrows the entry's call
    /// id: valid while the entry is (the caller holds the readings for the
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

    /// The pointer as the line holds it (`none`, `None`'s address, for none).
    pub fn pointer_ptr(&self, none: *mut ffi::PyObject) -> *mut ffi::PyObject {
        self.pointer.as_ref().map_or(none, Py::as_ptr)
    }

    /// An entry from what a call read: the item, render, pointer (the
    /// line's, `None` for none), the render's `_cj` tuple, and the item's
    /// history reading. `None` when the tuple is not a filled cache.
    pub fn new(
        item: Py<PyAny>,
        render: Py<PyAny>,
        pointer: Option<Py<PyAny>>,
        cj: &Bound<'_, PyAny>,
        read: &HistoryItem<'_>,
    ) -> Option<Entry> {
        let (digest, _) = crate::canonical::digest_of(cj)?;
        let bytes = cj.cast::<PyTuple>().ok()?.get_item(0).ok()?.unbind();
        let role = match read.role {
            ToolRole::Other => CachedRole::Other,
            ToolRole::Call(id) => CachedRole::Call(id.into()),
            ToolRole::Result(id) => CachedRole::Result(id.into()),
        };
        Some(Entry {
            item,
            render,
            pointer,
            bytes,
            digest,
            seq: read.seq,
            role,
            hash: read.hash,
            measured: Measured::default(),
        })
    }

    /// Its estimated memory: the struct, its call id, `ENTRY_OBJECTS`.
    fn size(&self) -> usize {
        let id = match &self.role {
            CachedRole::Other => 0,
            CachedRole::Call(id) | CachedRole::Result(id) => id.len(),
        };
        std::mem::size_of::<Entry>() + id + ENTRY_OBJECTS
    }
}

/// What the fit keeps of one line.
pub struct Readings {
    /// The line's entries in order from its start.
    entries: Vec<Entry>,
    entry_bytes: usize,
    /// The last blocks and limits read with this line.
    pub blocks: Option<KeptBlocks>,
    pub limits: Option<KeptLimits>,
    /// The body digest lists' leading parts.
    prefixes: PrefixStates,
    /// Entries the call that has them out took from them.
    served: u64,
}

impl Readings {
    fn new() -> Box<Readings> {
        Box::new(Readings {
            entries: Vec::new(),
            entry_bytes: 0,
            blocks: None,
            limits: None,
            prefixes: PrefixStates::new(PREFIX_BYTES),
            served: 0,
        })
    }

    /// The entries, and the prefix states to update beside them.
    pub fn parts(&mut self) -> (&[Entry], &mut PrefixStates) {
        (&self.entries, &mut self.prefixes)
    }

    pub fn entries_mut(&mut self) -> &mut [Entry] {
        &mut self.entries
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn push(&mut self, entry: Entry) {
        self.entry_bytes += entry.size();
        self.entries.push(entry);
    }

    /// Keep the first `n` entries: a call served them (the others no
    /// longer match the line).
    pub fn keep_served(&mut self, n: usize) {
        for e in self.entries.drain(n.min(self.entries.len())..) {
            self.entry_bytes -= e.size();
        }
        self.served += n as u64;
    }

    /// Estimated bytes held: the entries, the stored prefixes and the kept
    /// blocks' references.
    fn nbytes(&self) -> usize {
        let blocks = self.blocks.as_ref().map_or(0, KeptBlocks::nbytes);
        self.entry_bytes + self.prefixes.held_bytes() + blocks
    }
}

#[derive(Default)]
struct Slot {
    /// `None` while a call has them out.
    readings: Option<Box<Readings>>,
    /// Bumped by `clear`: readings given back from before it are dropped.
    generation: u64,
    /// `Readings::nbytes` when last given back.
    nbytes: usize,
    /// Entries calls took from the readings, in all (for tests).
    served: u64,
}

/// What the fit read of one history line (`RenderLine.state`), owned by
/// whoever owns the line: dropped with it, emptied by `clear()`.
#[pyclass(frozen, module = "ctxengine._core")]
pub struct LineState {
    slot: Mutex<Slot>,
}

impl LineState {
    fn lock(&self) -> MutexGuard<'_, Slot> {
        // (Nothing panics under the lock: a poisoned slot is still whole.)
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[pymethods]
impl LineState {
    #[new]
    fn new() -> Self {
        LineState {
            slot: Mutex::new(Slot {
                readings: Some(Readings::new()),
                ..Slot::default()
            }),
        }
    }

    /// The estimated bytes it holds (as of the last call that gave it back).
    #[getter]
    fn nbytes(&self) -> usize {
        self.lock().nbytes
    }

    /// Entries calls read from it instead of from the line, in all (for
    /// tests: it only ever changes speed).
    #[getter]
    fn served(&self) -> u64 {
        self.lock().served
    }

    /// Drop everything it holds (the line was started again). A call that
    /// has the readings out gives them back to be dropped.
    fn clear(&self) {
        let old = {
            let mut slot = self.lock();
            slot.generation += 1;
            slot.nbytes = 0;
            slot.readings.replace(Readings::new())
        };
        drop(old); // (its references released outside the lock)
    }
}

/// A line's readings taken out for one call; given back when dropped.
pub struct Taken<'py> {
    state: Bound<'py, LineState>,
    readings: Option<Box<Readings>>,
    generation: u64,
}

impl<'py> Taken<'py> {
    /// The readings of `state`, unless another call has them out.
    pub fn take(state: &Bound<'py, LineState>) -> Option<Taken<'py>> {
        let mut slot = state.get().lock();
        let readings = slot.readings.take()?;
        Some(Taken {
            state: state.clone(),
            readings: Some(readings),
            generation: slot.generation,
        })
    }

    /// The readings (out until this is dropped).
    pub fn readings(&mut self) -> Option<&mut Readings> {
        self.readings.as_deref_mut()
    }
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        let Some(readings) = self.readings.take() else {
            return;
        };
        let stale = {
            let mut slot = self.state.get().lock();
            if slot.generation == self.generation && slot.readings.is_none() {
                let mut readings = readings;
                slot.nbytes = readings.nbytes();
                slot.served += std::mem::take(&mut readings.served);
                slot.readings = Some(readings);
                None
            } else {
                Some(readings) // cleared meanwhile
            }
        };
        drop(stale); // (outside the lock)
    }
}
