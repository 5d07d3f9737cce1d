//! `LineState`: what the fit read of one history line, kept between calls
//! by the line's owner (`RenderLine.state`), and dropped with it. The
//! bookkeeping (entries, their bytes, the lease to one call at a time, the
//! generation `clear` bumps) is `ctxengine_core::body::line`; this module
//! holds the Python objects of an entry.
//!
//! An entry holds strong references to the item, the render, the pointer
//! and the render's canonical bytes, so their addresses stay theirs: a call
//! uses an entry only where the history, the line's items, renders and
//! pointers all hold the very objects the entry holds (pointer compares
//! over four arrays). An entry also keeps its render's count with the way
//! it was counted: a later call counting the same way takes it instead of
//! looking it up in the memo (counted as a memo hit; the memo's recency of
//! that key is not refreshed). So a fit measures what a call without the
//! state measures, and makes as many memo lookups.

use ctxengine_core::body::line::{self, EntryFacts, Lease, Loan};
use ctxengine_core::body::HistoryItem;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::memo::{KeptBlocks, KeptLimits};

/// One line entry as a call read it.
pub struct Entry {
    pub item: Py<PyAny>,
    pub render: Py<PyAny>,
    /// `None` is the line's `None` (no pointer).
    pub pointer: Option<Py<PyAny>>,
    /// The render's canonical bytes (of its `_cj` tuple).
    pub bytes: Py<PyAny>,
    pub facts: EntryFacts,
}

impl line::Entry for Entry {
    fn facts(&self) -> &EntryFacts {
        &self.facts
    }
    fn facts_mut(&mut self) -> &mut EntryFacts {
        &mut self.facts
    }
}

pub type Readings = line::Readings<Entry, KeptBlocks, KeptLimits>;

impl Entry {
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
        Some(Entry {
            item,
            render,
            pointer,
            bytes,
            facts: EntryFacts::new(digest, read),
        })
    }
}

/// What the fit read of one history line (`RenderLine.state`), owned by
/// whoever owns the line: dropped with it, emptied by `clear()`.
#[pyclass(frozen, module = "ctxengine._core")]
pub struct LineState {
    lease: Lease<Entry, KeptBlocks, KeptLimits>,
}

#[pymethods]
impl LineState {
    #[new]
    fn new() -> Self {
        LineState {
            lease: Lease::default(),
        }
    }

    /// The estimated bytes it holds (as of the last call that gave it back).
    #[getter]
    fn nbytes(&self) -> usize {
        self.lease.nbytes()
    }

    /// Entries calls read from it instead of from the line, in all (for
    /// tests: it only ever changes speed).
    #[getter]
    fn served(&self) -> u64 {
        self.lease.served()
    }

    /// Drop everything it holds (the line was started again). A call that
    /// has the readings out gives them back to be dropped.
    fn clear(&self) {
        self.lease.clear();
    }
}

/// A line's readings taken out for one call; given back when dropped.
pub struct Taken<'py> {
    state: Bound<'py, LineState>,
    loan: Option<Loan<Entry, KeptBlocks, KeptLimits>>,
}

impl<'py> Taken<'py> {
    /// The readings of `state`, unless another call has them out.
    pub fn take(state: &Bound<'py, LineState>) -> Option<Taken<'py>> {
        let loan = state.get().lease.take()?;
        Some(Taken {
            state: state.clone(),
            loan: Some(loan),
        })
    }

    /// The readings (out until this is dropped).
    pub fn readings(&mut self) -> Option<&mut Readings> {
        self.loan.as_mut().map(|l| &mut *l.readings)
    }
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        if let Some(loan) = self.loan.take() {
            self.state.get().lease.give_back(loan);
        }
    }
}
