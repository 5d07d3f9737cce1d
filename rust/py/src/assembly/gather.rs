//! Values measured in the reference's lookup order, with their facts, in
//! buffers kept per thread between calls (a 10,000-item history needs about
//! a megabyte of them; allocations that size are mapped and faulted in anew
//! on every call otherwise).

use std::cell::Cell;

use ctxengine_core::body::HistoryItem;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::Borrowed;

use crate::canonical::digest_of;
use crate::items::{canonicalize_pending, prefetch, read_attr, slot_value, Facts, Sort, Types};

/// Buffers this large are not kept.
const KEEP_ITEMS: usize = 1 << 20;

/// What one call fills and the next reuses.
#[derive(Default)]
pub struct Buffers {
    /// The history as the core reads it.
    pub history: Vec<HistoryItem<'static>>,
    /// Each history item's digest, the `bytes` object of its `_cj` (held
    /// through `pins` while Python code may run).
    pub keys: Vec<*mut pyo3::ffi::PyObject>,
    /// Each history item's render and pointer from the line (null: look
    /// it up by key), held like the keys.
    pub held: Vec<(*mut pyo3::ffi::PyObject, *mut pyo3::ffi::PyObject)>,
    /// Strong references: call ids the roles borrow, `_cj` tuples.
    pub pins: Vec<Py<PyAny>>,
    /// Each value measured, borrowed: held by `owned`, or by the line cache
    /// the call holds (a cached render: no reference taken and dropped per
    /// item, a pass over every render's header fewer).
    objs: Vec<*mut pyo3::ffi::PyObject>,
    /// References to the values pushed that nothing else holds for the call.
    owned: Vec<Py<PyAny>>,
    facts: Vec<Facts>,
    keep: Vec<Py<PyAny>>,
    pub raws: Vec<i64>,
}

thread_local! {
    static BUFFERS: Cell<Option<Box<Buffers>>> = const { Cell::new(None) };
}

impl Buffers {
    /// Take references to the history keys and line entries from `from`
    /// on (before Python code may run while they are still to be read).
    pub fn pin_borrowed(&mut self, py: Python<'_>, from: usize) {
        let held = self.held[from..].iter().flat_map(|&(r, q)| [r, q]);
        pin(
            py,
            &mut self.pins,
            self.keys[from..].iter().copied().chain(held),
        );
    }

    /// This thread's buffers (a re-entrant call simply allocates).
    pub fn take() -> Box<Buffers> {
        BUFFERS.with(Cell::take).unwrap_or_default()
    }

    /// Back for the next call, emptied (the GIL is held: references drop).
    pub fn give_back(mut self: Box<Self>) {
        if self.facts.capacity() > KEEP_ITEMS || self.history.capacity() > KEEP_ITEMS {
            return;
        }
        self.history.clear();
        self.keys.clear();
        self.held.clear();
        self.pins.clear();
        self.objs.clear();
        self.owned.clear();
        self.facts.clear();
        self.keep.clear();
        self.raws.clear();
        BUFFERS.with(|b| b.set(Some(self)));
    }
}

/// References to borrowed objects (null: none), into `pins`.
pub fn pin(
    py: Python<'_>,
    pins: &mut Vec<Py<PyAny>>,
    objs: impl Iterator<Item = *mut pyo3::ffi::PyObject>,
) {
    for obj in objs {
        if !obj.is_null() {
            // SAFETY: live (no Python code ran since it was read).
            pins.push(unsafe { Bound::from_borrowed_ptr(py, obj) }.unbind());
        }
    }
}

/// Values about to be pushed, fetched ahead in a pipeline: the object a
/// few steps ahead, the `_cj` tuple of a nearer one, the digest and
/// canonical bytes of the next (pushed one by one, each read waits on the
/// last; fetched ahead, the waits overlap).
pub struct Lookahead {
    tp: *mut pyo3::ffi::PyTypeObject,
    offset: isize,
}

impl Lookahead {
    const FAR: usize = 12;
    const NEAR: usize = 6;
    const NEXT: usize = 2;

    /// Before pushing value `i` of `at` (null entries and values of another
    /// type are skipped).
    ///
    /// # Safety
    /// Every value `at` gives must be null or live, and no Python code may
    /// run while this reads them.
    #[inline(always)]
    pub unsafe fn ahead(&self, at: impl Fn(usize) -> *mut pyo3::ffi::PyObject, i: usize) {
        use pyo3::ffi;
        // (Values of the lookahead's type: a slot of their layout.)
        let cj_of = |p: *mut ffi::PyObject| {
            if p.is_null() || ffi::Py_TYPE(p) != self.tp {
                return std::ptr::null_mut();
            }
            slot_value(p, self.offset)
        };
        let far = at(i + Self::FAR);
        prefetch(far);
        if !far.is_null() {
            // The `_cj` slot may lie on the object's next cache line.
            prefetch(far.wrapping_byte_offset(self.offset));
        }
        prefetch(cj_of(at(i + Self::NEAR)));
        let cj = cj_of(at(i + Self::NEXT));
        if !cj.is_null() && ffi::PyTuple_CheckExact(cj) != 0 && ffi::PyTuple_GET_SIZE(cj) == 2 {
            prefetch(ffi::PyTuple_GET_ITEM(cj, 0));
            prefetch(ffi::PyTuple_GET_ITEM(cj, 1));
        }
    }
}

/// Every value the fit measures, in the order the reference measures it.
pub struct Gather<'py> {
    py: Python<'py>,
    pub types: Types,
    pub bufs: Box<Buffers>,
    /// Values whose facts still need canonicalization: (index, value).
    pending: Vec<(usize, Bound<'py, PyAny>)>,
}

impl<'py> Gather<'py> {
    pub fn new(py: Python<'py>, types: Types, bufs: Box<Buffers>) -> Self {
        Gather {
            py,
            types,
            bufs,
            pending: Vec::new(),
        }
    }

    pub fn py(&self) -> Python<'py> {
        self.py
    }

    pub fn facts(&self) -> &[Facts] {
        &self.bufs.facts
    }

    pub fn obj(&self, i: usize) -> Borrowed<'_, 'py, PyAny> {
        // SAFETY: live for the call: `owned` or the caller's line cache holds it.
        unsafe { Borrowed::from_ptr(self.py, self.bufs.objs[i]) }
    }

    /// Add a value to measure; returns its index.
    #[inline(always)]
    pub fn push(&mut self, obj: Bound<'py, PyAny>) -> PyResult<usize> {
        let t = self.types.info(&obj)?;
        let info = &self.types.infos[t];
        let kind = info.kind;
        let cj = if info.sort == Sort::Item {
            read_attr(&obj, info.cj, intern!(self.py, "_cj"))
                .ok()
                .flatten()
        } else {
            None
        };
        let cached = cj.as_ref().and_then(digest_of);
        let b = &mut *self.bufs;
        let i = b.facts.len();
        match cached {
            Some((digest, bytes)) => {
                // The length is read on a memo miss only: `keep` holds the
                // tuple, and so its canonical bytes, until then.
                b.facts.push(Facts::of_bytes(kind, digest, bytes));
                if let Some(cj) = cj {
                    b.keep.push(cj.unbind());
                }
            }
            None => {
                b.facts.push(Facts::pending(kind));
                self.pending.push((i, obj.clone()));
            }
        }
        b.objs.push(obj.as_ptr());
        b.owned.push(obj.unbind());
        Ok(i)
    }

    /// Add a render whose `_cj` facts a line cache holds (it holds the
    /// render and the `_cj` tuple, so `bytes` stays alive, for the call:
    /// the render is kept borrowed); returns its index.
    #[inline(always)]
    pub fn push_cached(
        &mut self,
        obj: Borrowed<'_, 'py, PyAny>,
        digest: [u8; 32],
        bytes: *mut pyo3::ffi::PyObject,
    ) -> PyResult<usize> {
        let t = self.types.info(&obj)?;
        let kind = self.types.infos[t].kind;
        let b = &mut *self.bufs;
        let i = b.facts.len();
        b.facts.push(Facts::of_bytes(kind, digest, bytes));
        b.objs.push(obj.as_ptr());
        Ok(i)
    }

    /// A [`Lookahead`] for values like `first` (`None` unless its type is an
    /// item type whose facts are known: nothing it does runs Python code).
    pub fn lookahead(&self, first: *mut pyo3::ffi::PyObject) -> Option<Lookahead> {
        // SAFETY: null or a live object (held by the caller).
        let obj = unsafe { Borrowed::from_ptr_or_opt(self.py, first) }?;
        let offset = self.types.cj_slot(&obj)?;
        Some(Lookahead {
            tp: obj.get_type_ptr(),
            offset,
        })
    }

    /// Whether pushing `obj` (`None`: finishing) may run Python code: a
    /// type read anew, or values to canonicalize.
    pub fn may_run_python(&self, obj: Option<&Bound<'py, PyAny>>) -> bool {
        match obj {
            Some(obj) => !self.types.known(obj),
            None => !self.pending.is_empty(),
        }
    }

    /// Canonicalize what no cache held (the reference's `raw_estimates`
    /// does it at the same point).
    pub fn finish(&mut self) -> PyResult<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut self.pending);
        let b = &mut *self.bufs;
        canonicalize_pending(self.py, &mut self.types, &mut b.facts, &mut b.keep, pending)
    }

    /// The buffers back, and the facts' kinds' table.
    pub fn done(self) {
        self.bufs.give_back();
    }
}
