//! `LangChainCounter` and `langchain_trim`: `count_tokens_approximately`
//! per message, memoized by message identity, and the trim over it.
//!
//! A message's count is read natively for the common shapes (string
//! content, text/image blocks, tool calls via `repr`: [`count`]) and
//! through the classes' `count` (the reference's `approximate_count`,
//! handed in with the classes) for anything else, so the number is
//! LangChain's by construction.
//!
//! The memo never keeps a message alive: an entry holds a weak reference
//! to its message, whose callback removes the entry when the message goes
//! (a message type without weak references is held, as before). It is
//! bounded by the bytes its entries are estimated to hold ([`entry_size`]),
//! `max_bytes`, which the Python side sets (`MemoryLimits.trim_bytes`).

mod count;

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex, Weak};

use ctxengine_core::interop::trim::{lc_window, safe_prefix, safe_suffix, NO_ID};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyType, PyWeakrefMethods, PyWeakrefReference};

use crate::arguments;
use crate::errors::guard;
use count::count_native;

const OTHER: u8 = 0;
const SYSTEM: u8 = 1;
const AI: u8 = 2;
const TOOL: u8 = 3;

/// Call ids a message makes, and the call it answers.
#[derive(Debug, Default)]
struct Pairing {
    calls: Vec<Option<String>>,
    result: Option<String>,
}

/// How an entry knows its message.
enum Held {
    /// A weak reference (its callback, a [`Forget`], removes the entry).
    Weak(Py<PyWeakrefReference>),
    /// The message itself, for a type without weak references.
    Strong(Py<PyAny>),
}

struct Entry {
    message: Held,
    content: Py<PyAny>,
    name: Py<PyAny>,
    extra: Py<PyAny>,
    count: i64,
    kind: u8,
    pairing: Option<Arc<Pairing>>,
    size: usize,
}

/// An entry's estimated memory beside what its count measures: the entry,
/// its weak reference and callback, the pairing.
const ENTRY_OBJECTS: usize = 256;

/// The memory an entry is estimated to hold: `ENTRY_OBJECTS`, its call ids,
/// and four bytes a token of its count (the text the approximate count
/// measured; held only while the message is, unless the message is held).
fn entry_size(count: i64, pairing: Option<&Pairing>) -> usize {
    let ids = pairing.map_or(0, |p| {
        p.calls
            .iter()
            .map(|c| c.as_ref().map_or(8, |s| s.len() + 24))
            .sum::<usize>()
            + p.result.as_ref().map_or(0, |s| s.len() + 24)
    });
    ENTRY_OBJECTS + ids + 4 * count.max(0) as usize
}

impl Entry {
    /// Whether the entry was measured from `m` and these very attributes.
    fn same(
        &self,
        py: Python<'_>,
        m: &Bound<'_, PyAny>,
        content: &Bound<'_, PyAny>,
        name: &Bound<'_, PyAny>,
        extra: &Bound<'_, PyAny>,
    ) -> bool {
        let alive = match &self.message {
            Held::Strong(held) => held.as_ptr() == m.as_ptr(),
            Held::Weak(weak) => weak
                .bind(py)
                .upgrade()
                .is_some_and(|o| o.as_ptr() == m.as_ptr()),
        };
        alive
            && self.content.as_ptr() == content.as_ptr()
            && self.name.as_ptr() == name.as_ptr()
            && self.extra.as_ptr() == extra.as_ptr()
    }
}

/// Object addresses are distinct and aligned: a multiply spreads them.
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_usize(&mut self, v: usize) {
        self.0 = ((v as u64) >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type ByAddress = HashMap<usize, Entry, BuildHasherDefault<AddressHasher>>;

/// Two generations: lookups promote from the old one; when the new one
/// holds half of `max_bytes`, it becomes the old one (the previous old one
/// is dropped), so both together hold at most `max_bytes`.
struct Memo {
    new: ByAddress,
    old: ByAddress,
    new_bytes: usize,
    old_bytes: usize,
    max_bytes: usize,
}

impl Memo {
    fn empty(max_bytes: usize) -> Self {
        Memo {
            new: ByAddress::default(),
            old: ByAddress::default(),
            new_bytes: 0,
            old_bytes: 0,
            max_bytes,
        }
    }

    /// Keep `e` (an entry over half the bound is not kept).
    fn put(&mut self, key: usize, e: Entry) {
        let half = self.max_bytes / 2;
        if e.size > half {
            return;
        }
        if self.new_bytes + e.size > half {
            self.old = std::mem::take(&mut self.new);
            self.old_bytes = std::mem::replace(&mut self.new_bytes, 0);
        }
        self.new_bytes += e.size;
        if let Some(old) = self.new.insert(key, e) {
            self.new_bytes -= old.size;
        }
    }

    fn take_old(&mut self, key: usize) -> Option<Entry> {
        let e = self.old.remove(&key)?;
        self.old_bytes -= e.size;
        Some(e)
    }

    /// Remove the entry at `key` whose weak reference is `weak` (the message
    /// it names is gone).
    fn forget(&mut self, key: usize, weak: *mut ffi::PyObject) -> Option<Entry> {
        let held = |e: &Entry| matches!(&e.message, Held::Weak(w) if w.as_ptr() == weak);
        if self.new.get(&key).is_some_and(held) {
            let e = self.new.remove(&key)?;
            self.new_bytes -= e.size;
            return Some(e);
        }
        if self.old.get(&key).is_some_and(held) {
            return self.take_old(key);
        }
        None
    }

    fn bytes(&self) -> usize {
        self.new_bytes + self.old_bytes
    }
}

/// The callback of an entry's weak reference: removes the entry when its
/// message goes. (A memo busy at that moment keeps the entry, which no
/// message matches any more, until it is pushed out.)
#[pyclass(frozen, module = "ctxengine._core")]
struct Forget {
    memo: Weak<Mutex<Memo>>,
    key: usize,
}

#[pymethods]
impl Forget {
    fn __call__(&self, weak: &Bound<'_, PyAny>) {
        let Some(memo) = self.memo.upgrade() else {
            return;
        };
        let gone = match memo.try_lock() {
            Ok(mut m) => m.forget(self.key, weak.as_ptr()),
            Err(_) => None,
        };
        drop(gone); // (its references released outside the lock)
    }
}

/// Per-message facts for `trim_messages`, memoized by message identity
/// (the entry holds the message and the attribute objects it was counted
/// from, and is reused only while the message still holds those objects).
#[pyclass(frozen, module = "ctxengine._core")]
pub struct LangChainCounter {
    classes: Py<PyAny>,
    base: Py<PyType>,
    kinds: [(Py<PyType>, u8, &'static str); 6],
    memo: Arc<Mutex<Memo>>,
}

#[pymethods]
impl LangChainCounter {
    #[new]
    #[pyo3(signature = (classes, max_bytes = 16 << 20))]
    fn new(py: Python<'_>, classes: &Bound<'_, PyAny>, max_bytes: usize) -> PyResult<Self> {
        let get = |name: &str| -> PyResult<Py<PyType>> {
            Ok(classes.getattr(name)?.cast_into::<PyType>()?.unbind())
        };
        let _ = py;
        Ok(LangChainCounter {
            classes: classes.clone().unbind(),
            base: get("base")?,
            kinds: [
                (get("ai")?, AI, "assistant"),
                (get("human")?, OTHER, "user"),
                (get("tool")?, TOOL, "tool"),
                (get("system")?, SYSTEM, ""),
                (get("function")?, OTHER, "function"),
                (get("chat")?, OTHER, ""),
            ],
            memo: Arc::new(Mutex::new(Memo::empty(max_bytes))),
        })
    }

    fn __len__(&self) -> usize {
        match self.memo.try_lock() {
            Ok(m) => m.new.len() + m.old.len(),
            Err(_) => 0,
        }
    }

    /// The estimated bytes the memo's entries hold.
    #[getter]
    fn nbytes(&self) -> usize {
        self.memo.try_lock().map_or(0, |m| m.bytes())
    }

    /// The bound of `nbytes`; setting it lower drops entries to keep within it.
    #[getter]
    fn get_max_bytes(&self) -> usize {
        self.memo.lock().map_or(0, |m| m.max_bytes)
    }

    #[setter]
    fn set_max_bytes(&self, max_bytes: usize) {
        let dropped = match self.memo.lock() {
            Ok(mut m) => {
                m.max_bytes = max_bytes;
                if m.bytes() > max_bytes {
                    let old = std::mem::replace(&mut *m, Memo::empty(max_bytes));
                    Some(old)
                } else {
                    None
                }
            }
            Err(_) => None,
        };
        drop(dropped);
    }
}

/// `(kind index into LangChainCounter::kinds)` of a message type, or `None`.
fn classify(c: &LangChainCounter, py: Python<'_>, m: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
    for (k, (cls, _, _)) in c.kinds.iter().enumerate() {
        if m.is_instance(cls.bind(py))? {
            return Ok(Some(k));
        }
    }
    Ok(None)
}

fn pairing(
    py: Python<'_>,
    m: &Bound<'_, PyAny>,
    kind: u8,
    extra: &Bound<'_, PyAny>,
) -> PyResult<Option<Arc<Pairing>>> {
    match kind {
        AI => {
            let mut p = Pairing::default();
            for field in [extra.clone(), m.getattr(intern!(py, "invalid_tool_calls"))?] {
                for call in field.try_iter()? {
                    let id = call?.get_item(intern!(py, "id")).ok();
                    p.calls.push(match id {
                        Some(v) if !v.is_none() => Some(v.str()?.to_str()?.to_owned()),
                        _ => None,
                    });
                }
            }
            Ok((!p.calls.is_empty()).then(|| Arc::new(p)))
        }
        TOOL => Ok(Some(Arc::new(Pairing {
            calls: Vec::new(),
            result: Some(extra.str()?.to_str()?.to_owned()),
        }))),
        _ => Ok(None),
    }
}

/// `m.<name>`, read from the instance dict when it holds it (pydantic keeps
/// fields there), else through ordinary attribute lookup.
fn attr<'py>(
    m: &Bound<'py, PyAny>,
    dict: Option<&Bound<'py, PyDict>>,
    name: &Bound<'py, PyString>,
) -> PyResult<Bound<'py, PyAny>> {
    if let Some(d) = dict {
        if let Some(v) = d.get_item(name)? {
            return Ok(v);
        }
    }
    m.getattr(name)
}

fn instance_dict<'py>(py: Python<'py>, m: &Bound<'py, PyAny>) -> Option<Bound<'py, PyDict>> {
    // SAFETY: a new reference or NULL with an exception set (cleared below).
    let d = unsafe { ffi::PyObject_GenericGetDict(m.as_ptr(), std::ptr::null_mut()) };
    if d.is_null() {
        let _ = PyErr::take(py);
        return None;
    }
    let d = unsafe { Bound::from_owned_ptr(py, d) };
    d.cast_into_exact::<PyDict>().ok()
}

struct Facts {
    counts: Vec<i64>,
    kinds: Vec<u8>,
    pairings: Vec<Option<Arc<Pairing>>>,
}

/// Facts of every message; `None` when one is not a `BaseMessage`.
fn facts(
    py: Python<'_>,
    c: &LangChainCounter,
    list: &Bound<'_, PyList>,
    use_len: bool,
) -> PyResult<Option<Facts>> {
    let n = list.len();
    let mut f = Facts {
        counts: Vec::with_capacity(n),
        kinds: Vec::with_capacity(n),
        pairings: Vec::with_capacity(n),
    };
    let mut scratch = Memo::empty(0); // keeps nothing
                                      // Another thread trimming at the same time counts without the memo
                                      // rather than wait for it while holding the GIL.
    let mut guard = c.memo.try_lock().ok();
    let memo: &mut Memo = match guard.as_deref_mut() {
        Some(m) => m,
        None => &mut scratch,
    };
    let base = c.base.bind(py);
    let mut types: Vec<(usize, Option<usize>)> = Vec::new();
    let (content_n, name_n) = (intern!(py, "content"), intern!(py, "name"));
    let (tool_calls_n, tool_call_id_n) = (intern!(py, "tool_calls"), intern!(py, "tool_call_id"));
    let kwargs_n = intern!(py, "additional_kwargs");
    for m in list.iter() {
        let tp = m.get_type().as_ptr() as usize;
        let class = match types.iter().find(|(t, _)| *t == tp) {
            Some(&(_, k)) => k,
            None => {
                if !m.is_instance(base)? {
                    return Ok(None);
                }
                let k = classify(c, py, &m)?;
                types.push((tp, k));
                k
            }
        };
        let kind = class.map_or(OTHER, |k| c.kinds[k].1);
        let dict = instance_dict(py, &m);
        let content = attr(&m, dict.as_ref(), content_n)?;
        let name = attr(&m, dict.as_ref(), name_n)?;
        let extra = match kind {
            AI => attr(&m, dict.as_ref(), tool_calls_n)?,
            TOOL => attr(&m, dict.as_ref(), tool_call_id_n)?,
            _ => attr(&m, dict.as_ref(), kwargs_n)?,
        };
        let key = m.as_ptr() as usize;
        let same = |e: &Entry| e.same(py, &m, &content, &name, &extra);
        if let Some(e) = memo.new.get(&key).filter(|e| same(e)) {
            f.counts.push(if use_len { 1 } else { e.count });
            f.kinds.push(e.kind);
            f.pairings.push(e.pairing.clone());
            continue;
        }
        let entry = match memo.take_old(key) {
            Some(e) if same(&e) => e,
            _ => {
                let role = class.map_or("", |k| c.kinds[k].2);
                let count = match class {
                    Some(_) => count_native(py, &m, &content, &name, kind, role, &extra)?,
                    None => None,
                };
                let count = match count {
                    Some(v) => v,
                    None => {
                        // (`LangChainClasses.count`: LangChain's own count.)
                        let classes = c.classes.bind(py);
                        classes
                            .call_method1(intern!(py, "count"), (&m,))?
                            .extract()?
                    }
                };
                let pairing = pairing(py, &m, kind, &extra)?;
                let forget = Forget {
                    memo: Arc::downgrade(&c.memo),
                    key,
                };
                let message = match PyWeakrefReference::new_with(&m, forget) {
                    Ok(weak) => Held::Weak(weak.unbind()),
                    Err(_) => Held::Strong(m.clone().unbind()), // (no weak references)
                };
                Entry {
                    size: entry_size(count, pairing.as_deref()),
                    pairing,
                    message,
                    content: content.unbind(),
                    name: name.unbind(),
                    extra: extra.unbind(),
                    count,
                    kind,
                }
            }
        };
        f.counts.push(if use_len { 1 } else { entry.count });
        f.kinds.push(entry.kind);
        f.pairings.push(entry.pairing.clone());
        memo.put(key, entry);
    }
    Ok(Some(f))
}

/// `ctxengine.reference.interop.trim` natively: `(system_kept, start, end)`,
/// or `None` when a message is not a `BaseMessage` (the caller converts).
#[pyfunction]
#[pyo3(signature = (counter, messages, max_tokens, strategy, use_len, include_system, end_on, start_on))]
#[allow(clippy::too_many_arguments)]
pub fn langchain_trim(
    py: Python<'_>,
    counter: &Bound<'_, LangChainCounter>,
    messages: &Bound<'_, PyAny>,
    max_tokens: &Bound<'_, PyAny>,
    strategy: &str,
    use_len: bool,
    include_system: &Bound<'_, PyAny>,
    end_on: Option<Bound<'_, PyAny>>,
    start_on: Option<Bound<'_, PyAny>>,
) -> PyResult<Option<(bool, usize, usize)>> {
    guard(py, || {
        let max_tokens = arguments::token_limit("trim_messages", "max_tokens", max_tokens)?;
        // LangChain reads `include_system` for its truth.
        let include_system = include_system.is_truthy()?;
        let Ok(list) = messages.cast_exact::<PyList>() else {
            return Ok(None);
        };
        let Some(f) = facts(py, counter.get(), list, use_len)? else {
            return Ok(None);
        };
        let test = |check: &Bound<'_, PyAny>, i: usize| -> PyResult<bool> {
            check.call1((list.get_item(i)?,))?.is_truthy()
        };
        let mut end_fn = |i: usize| test(end_on.as_ref().expect("end_on"), i);
        let mut start_fn = |i: usize| test(start_on.as_ref().expect("start_on"), i);
        let first = strategy == "first";
        let (system, a, b) = lc_window(
            &f.counts,
            max_tokens,
            first,
            f.kinds.first() == Some(&SYSTEM),
            include_system,
            end_on
                .as_ref()
                .map(|_| &mut end_fn as &mut dyn FnMut(usize) -> PyResult<bool>),
            start_on
                .as_ref()
                .map(|_| &mut start_fn as &mut dyn FnMut(usize) -> PyResult<bool>),
        )?;
        // Intern the window's ids; a message without pairing has none.
        let (lo, hi) = if first { (0, b) } else { (a, b) };
        let mut ids: HashMap<&str, u32> = HashMap::new();
        let mut flat: Vec<u32> = Vec::new();
        let mut spans: Vec<(usize, usize)> = Vec::with_capacity(hi - lo);
        let mut results: Vec<Option<u32>> = vec![None; hi];
        for (i, pairing) in f.pairings.iter().enumerate().take(hi).skip(lo) {
            let start = flat.len();
            if let Some(p) = pairing.as_deref() {
                for id in &p.calls {
                    let v = match id {
                        Some(s) => {
                            let next = ids.len() as u32;
                            *ids.entry(s.as_str()).or_insert(next)
                        }
                        None => NO_ID,
                    };
                    flat.push(v);
                }
                if let Some(r) = &p.result {
                    let next = ids.len() as u32;
                    results[i] = Some(*ids.entry(r.as_str()).or_insert(next));
                }
            }
            spans.push((start, flat.len()));
        }
        let mut calls: Vec<&[u32]> = vec![&[]; hi];
        for (k, &(s, e)) in spans.iter().enumerate() {
            calls[lo + k] = &flat[s..e];
        }
        if first {
            let e = safe_prefix(
                &calls,
                &results,
                b,
                end_on
                    .as_ref()
                    .map(|_| &mut end_fn as &mut dyn FnMut(usize) -> PyResult<bool>),
            )?;
            return Ok(Some((false, 0, e)));
        }
        let s = safe_suffix(
            &calls,
            &results,
            a,
            b,
            start_on
                .as_ref()
                .map(|_| &mut start_fn as &mut dyn FnMut(usize) -> PyResult<bool>),
        )?;
        Ok(Some((system, s, b)))
    })
}
