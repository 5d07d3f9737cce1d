//! One pass over a history: each item's kind, canonical bytes and digest
//! (from a filled `_cj` cache, else canonicalized in one batch) and its
//! tool-pair role.

use ctxengine_core::cut::{PairValidator, ToolRole};
use ctxengine_core::estimate::Fact;
use ctxengine_core::hash::{sha256_spans, span_threads};
use ctxengine_core::CoreError;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use pyo3::Borrowed;

use super::slots::{exact_str_role, read_attr, slot_value, tool_role, Attr};
use super::types::{Role, Sort, Types};
use super::Items;
use crate::arguments::type_name;
use crate::canonical::{bytes_of, digest_of, read_digest, store_cache, walk_error, walker};
use crate::errors::{argument_error, IntoPy};

/// What the estimator needs of one value.
#[derive(Clone, Copy)]
pub struct Facts {
    /// Index into `Types::kinds`.
    pub kind: usize,
    pub digest: [u8; 32],
    /// Null until known, then the canonical `bytes`: borrowed while no
    /// Python code runs; before any may, a reference is taken (`keep`).
    bytes: *mut ffi::PyObject,
}

impl Facts {
    #[inline]
    pub fn of_bytes(kind: usize, digest: [u8; 32], bytes: *mut ffi::PyObject) -> Self {
        Facts {
            kind,
            digest,
            bytes,
        }
    }

    pub fn pending(kind: usize) -> Self {
        Self::of_bytes(kind, [0; 32], std::ptr::null_mut())
    }

    /// The canonical bytes (empty until known).
    #[inline]
    fn bytes(&self) -> &[u8] {
        // SAFETY: null or alive (see the field); its size and data are read
        // once its type is checked.
        unsafe {
            if !self.bytes.is_null() && ffi::PyBytes_Check(self.bytes) != 0 {
                bytes_of(self.bytes)
            } else {
                &[]
            }
        }
    }
}

impl Fact for Facts {
    fn kind(&self) -> usize {
        self.kind
    }
    fn digest(&self) -> &[u8; 32] {
        &self.digest
    }
    fn canonical_len(&self) -> usize {
        self.bytes().len()
    }
    fn canonical(&self) -> Vec<u8> {
        self.bytes().to_vec()
    }
}

/// Per-item results of a pass.
#[derive(Default)]
pub struct Buffers {
    pub facts: Vec<Facts>,
    pub result_of: Vec<usize>,
    pub raws: Vec<i64>,
    /// References to the facts' `bytes`, those before `kept` covered.
    keep: Vec<Py<PyAny>>,
    kept: usize,
}

pub struct Scan<'py> {
    /// References to call ids the validator borrowed.
    pub call_ids: Vec<Bound<'py, PyAny>>,
    pub buf: Box<Buffers>,
    /// (index, value) of the facts still to canonicalize.
    pending: Vec<(usize, Bound<'py, PyAny>)>,
    /// Raised by [`Scan::pairs`] once the other arguments are checked.
    pair_error: Option<CoreError>,
}

#[derive(Clone, Copy)]
pub struct Want {
    /// Check conversation items and their tool pairs (filling `result_of`)
    /// for this function.
    pub pairs: Option<&'static str>,
    pub facts: bool,
}

/// One pass over `items`: an `ArgumentError` for a wrong item now, a
/// pairing error from [`Scan::pairs`]; the facts a cache does not hold wait
/// for [`Scan::finish_facts`] (the contract puts pairing errors before any
/// canonicalization).
pub fn scan<'py>(
    py: Python<'py>,
    types: &mut Types,
    items: &Items<'py>,
    want: Want,
) -> PyResult<Scan<'py>> {
    let n = items.len();
    let mut buf = Box::<Buffers>::default();
    buf.facts.reserve(if want.facts { n } else { 0 });
    let mut result_of = Vec::with_capacity(if want.pairs.is_some() { n } else { 0 });
    let mut s = Scan {
        call_ids: Vec::new(),
        buf,
        pending: Vec::new(),
        pair_error: None,
    };
    let hint = if want.pairs.is_some() { n / 4 + 8 } else { 0 };
    let mut pairs = PairValidator::new(&mut result_of, hint);
    let mut pair_error: Option<CoreError> = None;
    let cj_name = intern!(py, "_cj");
    // Call ids read without references, until `pin`.
    let mut borrowed: Vec<*mut ffi::PyObject> = Vec::new();
    let mut i = 0;
    loop {
        let p = items.ptr(i);
        if p.is_null() {
            break;
        }
        // SAFETY: an item the sequence holds, borrowed while no Python code
        // runs; a step that may run some first takes a reference (`owned`).
        let item = unsafe { Borrowed::from_ptr(py, p) };
        let t = match types.recent(item.get_type_ptr()) {
            Some(t) => t,
            None => {
                s.pin(py, &mut borrowed);
                types.info(&item.to_owned())?
            }
        };
        let info = &types.infos[t];
        let (sort, kind, role) = (info.sort, info.kind, info.role);
        let (cj_how, call_id_how) = (info.cj, info.call_id);
        if let Some(function) = want.pairs {
            if !info.conversation {
                return Err(argument_error(
                    py,
                    function,
                    format!("items[{i}]"),
                    format!("expected a conversation item, got {}", type_name(&item)),
                ));
            }
            let fast = match call_id_how {
                _ if role == Role::Other => Some((ToolRole::Other, 0)),
                // SAFETY: a slot of this type's layout (`Attr::Slot`); the id
                // it holds (null or live) is borrowed until `pin`.
                Attr::Slot(offset) => unsafe {
                    let id = slot_value(p, offset);
                    exact_str_role(id, role).inspect(|_| borrowed.push(id))
                },
                Attr::Lookup => None,
            };
            let (tool_role, hash) = match fast {
                Some(read) => read,
                None => {
                    s.pin(py, &mut borrowed);
                    let item = item.to_owned();
                    tool_role(
                        &item,
                        role,
                        call_id_how,
                        &mut s.call_ids,
                        (function, "items", i),
                    )?
                }
            };
            if pair_error.is_none() {
                if let Err(e) = pairs.push_hashed(tool_role, hash) {
                    pair_error = Some(e);
                }
            }
        }
        if want.facts {
            let cached = match (sort, cj_how) {
                // SAFETY: a slot of this type's layout; read_digest checks the tuple.
                (Sort::Item, Attr::Slot(offset)) => unsafe { read_digest(slot_value(p, offset)) },
                (Sort::Item, Attr::Lookup) => {
                    s.pin(py, &mut borrowed);
                    // (a property's tuple may live no longer than this read)
                    let cj = read_attr(&item.to_owned(), cj_how, cj_name).ok().flatten();
                    let read = cj.as_ref().and_then(digest_of);
                    if let Some(cj) = cj.filter(|_| read.is_some()) {
                        s.buf.keep.push(cj.unbind());
                        s.buf.kept = s.buf.facts.len() + 1; // (the facts pushed next)
                    }
                    read
                }
                _ => None,
            };
            match cached {
                Some((digest, bytes)) => s.buf.facts.push(Facts::of_bytes(kind, digest, bytes)),
                None => {
                    s.buf.facts.push(Facts::pending(kind));
                    s.pending.push((i, item.to_owned()));
                }
            }
        }
        i += 1;
    }
    if want.pairs.is_some() && pair_error.is_none() {
        pair_error = pairs.finish().err();
    }
    s.pair_error = pair_error;
    s.buf.result_of = result_of;
    Ok(s)
}

impl<'py> Scan<'py> {
    /// `OrphanedToolPair` for the first pairing violation, if any.
    pub fn pairs(&mut self, py: Python<'_>) -> PyResult<()> {
        self.pair_error.take().map_or(Ok(()), Err).into_py(py)
    }

    /// Before Python code may run mid-pass: references to what is borrowed.
    #[cold]
    fn pin(&mut self, py: Python<'py>, borrowed: &mut Vec<*mut ffi::PyObject>) {
        for id in borrowed.drain(..) {
            // SAFETY: a live str (no Python code has run since it was read).
            let id = unsafe { Bound::from_borrowed_ptr(py, id) };
            self.call_ids.push(id);
        }
        self.keep_bytes(py);
    }

    fn keep_bytes(&mut self, py: Python<'py>) {
        let buf = &mut *self.buf;
        for f in &buf.facts[buf.kept..] {
            // SAFETY: null or live (no Python code has run since it was read).
            if let Some(b) = unsafe { Bound::from_borrowed_ptr_or_opt(py, f.bytes) } {
                buf.keep.push(b.unbind());
            }
        }
        buf.kept = buf.facts.len();
    }

    pub fn finish_facts(&mut self, py: Python<'py>, types: &mut Types) -> PyResult<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        // Python code runs below: keep the borrowed bytes first.
        self.keep_bytes(py);
        let pending = std::mem::take(&mut self.pending);
        let buf = &mut *self.buf;
        canonicalize_pending(py, types, &mut buf.facts, &mut buf.keep, pending)
    }
}

/// Canonicalize `pending` (fact index, value) into one buffer, hash it,
/// then fill their facts (the bytes held in `keep`) and the items' `_cj`
/// caches in order: after an error, the items before the failing one still
/// get theirs. Python code runs here: `facts` must borrow nothing unheld.
pub fn canonicalize_pending<'py>(
    py: Python<'py>,
    types: &mut Types,
    facts: &mut [Facts],
    keep: &mut Vec<Py<PyAny>>,
    pending: Vec<(usize, Bound<'py, PyAny>)>,
) -> PyResult<()> {
    let mut w = walker(py, Vec::new());
    let mut big = Vec::new();
    // (fact index, the item when its cache is to be stored, span)
    let mut spans: Vec<(usize, Option<Bound<'py, PyAny>>, usize, usize)> =
        Vec::with_capacity(pending.len());
    let mut failure: Option<PyErr> = None;
    for (i, item) in pending {
        let t = types.info(&item)?;
        let start = big.len();
        let result = if types.infos[t].sort == Sort::Item {
            w.item_into(item.as_ptr(), &mut big).map(|()| Some(item))
        } else {
            w.root_into(item.as_ptr(), &mut big).map(|()| None)
        };
        match result {
            Ok(store) => spans.push((i, store, start, big.len())),
            Err(e) => {
                big.truncate(start);
                failure = Some(walk_error(py, e));
                break;
            }
        }
    }
    let ranges: Vec<(usize, usize)> = spans.iter().map(|s| (s.2, s.3)).collect();
    let digests = match span_threads(big.len()) {
        1 => sha256_spans(&big, &ranges, 1),
        threads => py.detach(|| sha256_spans(&big, &ranges, threads)),
    };
    for ((i, store, a, b), digest) in spans.into_iter().zip(digests) {
        let bytes = match store {
            Some(item) => {
                let tuple = store_cache(&item, &big[a..b], &digest)?;
                tuple.get_item(0)?
            }
            None => PyBytes::new(py, &big[a..b]).into_any(),
        };
        let f = &mut facts[i];
        *f = Facts::of_bytes(f.kind, digest, bytes.as_ptr());
        keep.push(bytes.unbind());
    }
    failure.map_or(Ok(()), Err)
}
