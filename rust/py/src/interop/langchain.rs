//! `LangChainCounter` and `langchain_trim`: the trim over each message's
//! facts (`ctxengine_core::interop::trim::Facts`, read by the core through
//! the `PyValue` seam, or by the classes' `count` and `pairing` for other
//! shapes), memoized by message identity and bounded by `max_bytes`.

use std::sync::{Arc, Mutex, Weak};

use ctxengine_core::interop::approximate::{count, Speaker, CLASSES};
use ctxengine_core::interop::generations::Generations;
use ctxengine_core::interop::trim::{pair_safe_trim, Facts, Pairing, Test};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyType, PyWeakrefMethods, PyWeakrefReference};

use super::value::PyValue;
use crate::arguments;
use crate::errors::guard;

struct Entry {
    /// A weak reference (its callback removes the entry), or the message
    /// for a type without weak references.
    message: Py<PyAny>,
    /// `content`, `name` and the speaker's extra attribute, as counted.
    attrs: [Py<PyAny>; 3],
    facts: Facts,
}

impl Entry {
    /// Whether the entry was measured from `m` and these very attributes.
    fn same(&self, m: &Bound<'_, PyAny>, attrs: &[Bound<'_, PyAny>; 3]) -> bool {
        let held = self.message.bind(m.py());
        let alive = match held.cast::<PyWeakrefReference>() {
            Ok(weak) => weak.upgrade().is_some_and(|o| o.is(m)),
            Err(_) => held.is(m),
        };
        alive && self.attrs.iter().zip(attrs).all(|(a, b)| b.is(a))
    }
}

type Memo = Generations<Entry>;

/// An entry's weak-reference callback (a memo busy at that moment keeps the
/// entry until it is pushed out).
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
        let gone =
            (memo.try_lock().ok()).and_then(|mut m| m.remove_if(self.key, |e| e.message.is(weak)));
        drop(gone); // (its references released outside the lock)
    }
}

/// Per-message facts for `trim_messages`, memoized by message identity (an
/// entry is reused only while the message still holds the attribute
/// objects it was counted from).
#[pyclass(frozen, module = "ctxengine._core")]
pub struct LangChainCounter {
    /// `LangChainClasses`, and `count`/`pairing` off the fast path.
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
            kinds: (CLASSES.iter())
                .map(|(n, _)| get(n))
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

/// `m.<name>`, from the instance dict when it holds it (pydantic keeps
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
    unsafe { Bound::from_owned_ptr(py, d) }
        .cast_into_exact()
        .ok()
}

fn new_entry(
    c: &LangChainCounter,
    m: &Bound<'_, PyAny>,
    speaker: Option<Speaker<'static>>,
    attrs: [Bound<'_, PyAny>; 3],
    key: usize,
) -> PyResult<Entry> {
    let py = m.py();
    let classes = c.classes.bind(py);
    let [content, name, extra] = attrs.each_ref().map(|a| PyValue(a.clone()));
    let count = match speaker.and_then(|s| count(&content, &name, s, &extra)) {
        Some(v) => v,
        None => classes
            .call_method1(intern!(py, "count"), (m,))?
            .extract()?,
    };
    let invalid = (speaker == Some(Speaker::Ai))
        .then(|| m.getattr(intern!(py, "invalid_tool_calls")).map(PyValue))
        .transpose()?;
    let pairing = match Pairing::read(speaker, &extra, invalid.as_ref()) {
        Some(p) => p,
        None => {
            let (calls, result): (Option<Vec<_>>, _) = classes
                .call_method1(intern!(py, "pairing"), (m,))?
                .extract()?;
            let calls = calls.unwrap_or_default();
            Some(Arc::new(Pairing { calls, result }))
        }
    };
    let forget = Forget {
        memo: Arc::downgrade(&c.memo),
        key,
    };
    let message = match PyWeakrefReference::new_with(m, forget) {
        Ok(weak) => weak.into_any().unbind(),
        Err(_) => m.clone().unbind(), // (no weak references)
    };
    let system = speaker == Some(Speaker::System);
    Ok(Entry {
        message,
        attrs: attrs.map(Bound::unbind),
        facts: Facts {
            count,
            system,
            pairing,
        },
    })
}

/// `None` when a message is not a `BaseMessage`.
fn facts(
    py: Python<'_>,
    c: &LangChainCounter,
    list: &Bound<'_, PyList>,
) -> PyResult<Option<Vec<Facts>>> {
    let mut out = Vec::with_capacity(list.len());
    // Another thread's trim at the same time: count without the memo rather
    // than wait for it holding the GIL.
    let mut scratch = Memo::empty(0);
    let mut guard = c.memo.try_lock().ok();
    let memo: &mut Memo = guard.as_deref_mut().unwrap_or(&mut scratch);
    let mut types: Vec<(usize, Option<usize>)> = Vec::new();
    let (content_n, name_n) = (intern!(py, "content"), intern!(py, "name"));
    for m in list.iter() {
        let tp = m.get_type().as_ptr() as usize;
        let class = match types.iter().find(|(t, _)| *t == tp) {
            Some(&(_, k)) => k,
            None => {
                if !m.is_instance(c.base.bind(py))? {
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
        let d = instance_dict(py, &m);
        let extra_n = c.extras[class.unwrap_or(CLASSES.len())].bind(py);
        let get = |name| attr(&m, d.as_ref(), name);
        let attrs = [get(content_n)?, get(name_n)?, get(extra_n)?];
        let key = m.as_ptr() as usize;
        if let Some(e) = memo.get(key).filter(|e| e.same(&m, &attrs)) {
            out.push(e.facts.clone());
            continue;
        }
        let entry = match memo.take_old(key) {
            Some((e, _)) if e.same(&m, &attrs) => e,
            _ => new_entry(c, &m, class.map(|k| CLASSES[k].1), attrs, key)?,
        };
        out.push(entry.facts.clone());
        let size = entry.facts.size();
        memo.put(key, entry, size);
    }
    Ok(Some(out))
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
        let include_system = include_system.is_truthy()?; // (as LangChain reads it)
        let Ok(list) = messages.cast_exact::<PyList>() else {
            return Ok(None);
        };
        let Some(facts) = facts(py, counter.get(), list)? else {
            return Ok(None);
        };
        let test = |check: &Option<Bound<'_, PyAny>>, i: usize| -> PyResult<bool> {
            check
                .as_ref()
                .expect("given")
                .call1((list.get_item(i)?,))?
                .is_truthy()
        };
        let (mut end_fn, mut start_fn) = (|i| test(&end_on, i), |i| test(&start_on, i));
        let kept = pair_safe_trim(
            &facts,
            use_len,
            max_tokens,
            strategy == "first",
            include_system,
            end_on.as_ref().map(|_| &mut end_fn as Test<'_, PyErr>),
            start_on.as_ref().map(|_| &mut start_fn as Test<'_, PyErr>),
        )?;
        Ok(Some(kept))
    })
}
