//! `LangChainCounter` and `langchain_trim`: `count_tokens_approximately`
//! per message, memoized by message identity, and the trim over it.
//!
//! A message's count is made natively for the common shapes (string
//! content, text/image blocks, tool calls via `repr`:
//! `ctxengine_core::interop::approximate::count`, the message's fields read
//! through the interop value seam, `PyValue`) and
//! through the classes' `count` (the reference's `approximate_count`,
//! handed in with the classes) for anything else, so the number is
//! LangChain's by construction.
//!
//! The memo never keeps a message alive: an entry holds a weak reference
//! to its message, whose callback removes the entry when the message goes
//! (a message type without weak references is held, as before). It is
//! bounded by the bytes its entries are estimated to hold ([`entry_size`]),
//! `max_bytes`, which the Python side sets (`MemoryLimits.trim_bytes`).

use std::sync::{Arc, Mutex, Weak};

use ctxengine_core::interop::approximate::{count, Speaker, CLASSES};
use ctxengine_core::interop::generations::Generations;
use ctxengine_core::interop::trim::{entry_size, pair_safe_trim, Pairing, Test};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyType, PyWeakrefMethods, PyWeakrefReference};

use super::value::PyValue;
use crate::arguments;
use crate::errors::guard;

/// How an entry knows its message.
enum Held {
    /// A weak reference (its callback, a [`Forget`], removes the entry).
    Weak(Py<PyWeakrefReference>),
    /// The message itself, for a type without weak references.
    Strong(Py<PyAny>),
}

struct Entry {
    message: Held,
    /// `content`, `name` and the speaker's extra attribute, as counted.
    attrs: [Py<PyAny>; 3],
    count: i64,
    system: bool,
    pairing: Option<Arc<Pairing>>,
}

impl Entry {
    /// Whether the entry was measured from `m` and these very attributes.
    fn same(&self, py: Python<'_>, m: &Bound<'_, PyAny>, attrs: &[Bound<'_, PyAny>; 3]) -> bool {
        let alive = match &self.message {
            Held::Strong(held) => held.as_ptr() == m.as_ptr(),
            Held::Weak(weak) => (weak.bind(py).upgrade()).is_some_and(|o| o.as_ptr() == m.as_ptr()),
        };
        alive
            && self
                .attrs
                .iter()
                .zip(attrs)
                .all(|(a, b)| a.as_ptr() == b.as_ptr())
    }
}

/// The memo: entries by message address (`ctxengine_core::interop::generations`).
type Memo = Generations<Entry>;

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
        let gone = memo.try_lock().ok().and_then(|mut m| {
            m.remove_if(
                self.key,
                |e| matches!(&e.message, Held::Weak(w) if w.as_ptr() == weak.as_ptr()),
            )
        });
        drop(gone); // (its references released outside the lock)
    }
}

/// Per-message facts for `trim_messages`, memoized by message identity
/// (the entry holds the message and the attribute objects it was counted
/// from, and is reused only while the message still holds those objects).
#[pyclass(frozen, module = "ctxengine._core")]
pub struct LangChainCounter {
    /// `LangChainClasses`: the classes, and `count` for a message off the fast path.
    classes: Py<PyAny>,
    base: Py<PyType>,
    /// The classes of `CLASSES`, in order.
    kinds: Vec<Py<PyType>>,
    /// The extra attribute's name by class (the last: a message of none).
    extras: Vec<Py<PyString>>,
    memo: Arc<Mutex<Memo>>,
}

#[pymethods]
impl LangChainCounter {
    #[new]
    #[pyo3(signature = (classes, max_bytes = 16 << 20))]
    fn new(py: Python<'_>, classes: &Bound<'_, PyAny>, max_bytes: usize) -> PyResult<Self> {
        let get = |name| Ok(classes.getattr(name)?.cast_into::<PyType>()?.unbind());
        let speakers = CLASSES.iter().map(|(_, s)| *s).chain([Speaker::Role("")]);
        Ok(LangChainCounter {
            classes: classes.clone().unbind(),
            base: get("base")?,
            kinds: CLASSES
                .iter()
                .map(|(name, _)| get(name))
                .collect::<PyResult<_>>()?,
            extras: speakers
                .map(|s| PyString::intern(py, s.extra()).unbind())
                .collect(),
            memo: Arc::new(Mutex::new(Memo::empty(max_bytes))),
        })
    }

    fn __len__(&self) -> usize {
        self.memo.try_lock().map_or(0, |m| m.len())
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
        let dropped = self.memo.lock().ok().and_then(|mut m| {
            m.max_bytes = max_bytes;
            (m.bytes() > max_bytes).then(|| std::mem::replace(&mut *m, Memo::empty(max_bytes)))
        });
        drop(dropped); // (its references released outside the lock)
    }
}

/// The call ids an AI message makes (`tool_calls`, then `invalid_tool_calls`),
/// or the call a tool message answers; `str()` of each id.
fn pairing(
    m: &Bound<'_, PyAny>,
    speaker: Option<Speaker<'_>>,
    extra: &Bound<'_, PyAny>,
) -> PyResult<Option<Arc<Pairing>>> {
    let py = m.py();
    match speaker {
        Some(Speaker::Ai) => {
            let mut p = Pairing::default();
            for field in [extra.clone(), m.getattr(intern!(py, "invalid_tool_calls"))?] {
                for call in field.try_iter()? {
                    p.calls.push(match call?.get_item(intern!(py, "id")).ok() {
                        Some(v) if !v.is_none() => Some(v.str()?.to_str()?.to_owned()),
                        _ => None,
                    });
                }
            }
            Ok((!p.calls.is_empty()).then(|| Arc::new(p)))
        }
        Some(Speaker::Tool) => Ok(Some(Arc::new(Pairing {
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
    match dict.map(|d| d.get_item(name)).transpose()?.flatten() {
        Some(v) => Ok(v),
        None => m.getattr(name),
    }
}

fn instance_dict<'py>(py: Python<'py>, m: &Bound<'py, PyAny>) -> Option<Bound<'py, PyDict>> {
    // SAFETY: a new reference or NULL with an exception set (cleared below).
    let d = unsafe { ffi::PyObject_GenericGetDict(m.as_ptr(), std::ptr::null_mut()) };
    if d.is_null() {
        let _ = PyErr::take(py);
        return None;
    }
    // SAFETY: a new reference (not null: checked).
    let d = unsafe { Bound::from_owned_ptr(py, d) };
    d.cast_into_exact::<PyDict>().ok()
}

/// Each message's count and pairing, and whether the first is a system message.
#[derive(Default)]
struct Facts {
    counts: Vec<i64>,
    pairings: Vec<Option<Arc<Pairing>>>,
    first_is_system: bool,
}

impl Facts {
    fn push(&mut self, e: &Entry, use_len: bool) {
        self.counts.push(if use_len { 1 } else { e.count });
        self.first_is_system |= self.pairings.is_empty() && e.system;
        self.pairings.push(e.pairing.clone());
    }
}

/// A new entry for message `m` (at `key`) and its attributes, and its size.
fn new_entry(
    c: &LangChainCounter,
    m: &Bound<'_, PyAny>,
    speaker: Option<Speaker<'static>>,
    attrs: [Bound<'_, PyAny>; 3],
    key: usize,
) -> PyResult<(Entry, usize)> {
    let py = m.py();
    let [content, name, extra] = &attrs;
    let native = speaker.and_then(|s| {
        let (body, who) = (PyValue(content.clone()), PyValue(name.clone()));
        count(&body, &who, s, &PyValue(extra.clone()))
    });
    let count = match native {
        Some(v) => v,
        // (`LangChainClasses.count`: LangChain's own count.)
        None => (c.classes.bind(py))
            .call_method1(intern!(py, "count"), (m,))?
            .extract()?,
    };
    let pairing = pairing(m, speaker, extra)?;
    let forget = Forget {
        memo: Arc::downgrade(&c.memo),
        key,
    };
    let message = match PyWeakrefReference::new_with(m, forget) {
        Ok(weak) => Held::Weak(weak.unbind()),
        Err(_) => Held::Strong(m.clone().unbind()), // (no weak references)
    };
    let size = entry_size(count, pairing.as_deref());
    let entry = Entry {
        message,
        attrs: attrs.map(Bound::unbind),
        count,
        system: speaker == Some(Speaker::System),
        pairing,
    };
    Ok((entry, size))
}

/// The facts of every message; `None` when one is not a `BaseMessage`.
fn facts(
    py: Python<'_>,
    c: &LangChainCounter,
    list: &Bound<'_, PyList>,
    use_len: bool,
) -> PyResult<Option<Facts>> {
    let mut f = Facts::default();
    let mut scratch = Memo::empty(0); // keeps nothing
                                      // Another thread trimming at the same time counts without the memo
                                      // rather than wait for it while holding the GIL.
    let mut guard = c.memo.try_lock().ok();
    let memo: &mut Memo = guard.as_deref_mut().unwrap_or(&mut scratch);
    let base = c.base.bind(py);
    let mut types: Vec<(usize, Option<usize>)> = Vec::new();
    let (content_n, name_n) = (intern!(py, "content"), intern!(py, "name"));
    for m in list.iter() {
        let tp = m.get_type().as_ptr() as usize;
        let class = match types.iter().find(|(t, _)| *t == tp) {
            Some(&(_, k)) => k,
            None => {
                if !m.is_instance(base)? {
                    return Ok(None);
                }
                let mut k = None;
                for (i, cls) in c.kinds.iter().enumerate() {
                    if m.is_instance(cls.bind(py))? {
                        k = Some(i);
                        break;
                    }
                }
                types.push((tp, k));
                k
            }
        };
        let (d, extra_n) = (
            instance_dict(py, &m),
            c.extras[class.unwrap_or(CLASSES.len())].bind(py),
        );
        let attrs = [
            attr(&m, d.as_ref(), content_n)?,
            attr(&m, d.as_ref(), name_n)?,
            attr(&m, d.as_ref(), extra_n)?,
        ];
        let key = m.as_ptr() as usize;
        if let Some(e) = memo.get(key).filter(|e| e.same(py, &m, &attrs)) {
            f.push(e, use_len);
            continue;
        }
        let (entry, size) = match memo.take_old(key) {
            Some((e, size)) if e.same(py, &m, &attrs) => (e, size),
            _ => new_entry(c, &m, class.map(|k| CLASSES[k].1), attrs, key)?,
        };
        f.push(&entry, use_len);
        memo.put(key, entry, size);
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
        let pairings: Vec<Option<&Pairing>> = f.pairings.iter().map(|p| p.as_deref()).collect();
        let kept = pair_safe_trim(
            &f.counts,
            &pairings,
            max_tokens,
            strategy == "first",
            f.first_is_system,
            include_system,
            end_on.as_ref().map(|_| &mut end_fn as Test<'_, PyErr>),
            start_on.as_ref().map(|_| &mut start_fn as Test<'_, PyErr>),
        )?;
        Ok(Some(kept))
    })
}
