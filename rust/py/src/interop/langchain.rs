//! `LangChainCounter` and `langchain_trim`: `count_tokens_approximately`
//! per message, memoized by message identity, and the trim over it.
//!
//! A message's count is read natively for the common shapes (string
//! content, text/image blocks, tool calls via `repr`) and through
//! `ctxengine.reference.interop.approximate_count` for anything else, so
//! the number is LangChain's by construction.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex};

use ctxengine_core::interop::trim::{lc_window, safe_prefix, safe_suffix, NO_ID};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyString, PyTuple, PyType};

use crate::errors::guard;

static APPROXIMATE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

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

struct Entry {
    message: Py<PyAny>,
    content: Py<PyAny>,
    name: Py<PyAny>,
    extra: Py<PyAny>,
    count: i64,
    kind: u8,
    pairing: Option<Arc<Pairing>>,
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
/// fills, it becomes the old one (the previous old one is dropped).
struct Memo {
    new: ByAddress,
    old: ByAddress,
    capacity: usize,
}

impl Memo {
    fn empty(capacity: usize) -> Self {
        Memo {
            new: ByAddress::default(),
            old: ByAddress::default(),
            capacity,
        }
    }

    fn put(&mut self, key: usize, e: Entry) {
        if self.new.len() >= self.capacity / 2 {
            self.old = std::mem::take(&mut self.new);
        }
        self.new.insert(key, e);
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
    memo: Mutex<Memo>,
}

#[pymethods]
impl LangChainCounter {
    #[new]
    #[pyo3(signature = (classes, capacity = 1 << 18))]
    fn new(py: Python<'_>, classes: &Bound<'_, PyAny>, capacity: usize) -> PyResult<Self> {
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
            memo: Mutex::new(Memo::empty(capacity.max(2))),
        })
    }

    fn __len__(&self) -> usize {
        match self.memo.try_lock() {
            Ok(m) => m.new.len() + m.old.len(),
            Err(_) => 0,
        }
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

/// The approximate count natively, or `None` when a shape needs the reference.
fn count_native(
    py: Python<'_>,
    m: &Bound<'_, PyAny>,
    content: &Bound<'_, PyAny>,
    name: &Bound<'_, PyAny>,
    kind: u8,
    role: &str,
    extra: &Bound<'_, PyAny>,
) -> PyResult<Option<i64>> {
    let mut chars: usize = 0;
    let mut tokens: i64 = 0;
    let is_list = if let Ok(s) = content.cast_exact::<PyString>() {
        chars += s.len()?;
        false
    } else if let Ok(list) = content.cast_exact::<PyList>() {
        for block in list.iter() {
            if let Ok(s) = block.cast_exact::<PyString>() {
                chars += s.len()?;
                continue;
            }
            let Ok(d) = block.cast_exact::<PyDict>() else {
                return Ok(None);
            };
            let t = d.get_item(intern!(py, "type"))?;
            let Some(t) = t else { return Ok(None) };
            let Ok(t) = t.cast_exact::<PyString>() else {
                return Ok(None);
            };
            match t.to_str()? {
                "image" | "image_url" => tokens += 85,
                "text" => {
                    if let Some(x) = d.get_item(intern!(py, "text"))? {
                        match x.cast_exact::<PyString>() {
                            Ok(s) => chars += s.len()?,
                            Err(_) => return Ok(None),
                        }
                    }
                }
                _ => return Ok(None),
            }
        }
        true
    } else {
        return Ok(None);
    };
    if kind == AI && !is_list && extra.is_truthy()? {
        chars += match repr_len(extra, 0)? {
            Some(n) => n,
            None => extra.repr()?.len()?,
        };
    }
    if kind == TOOL {
        let Ok(id) = extra.cast_exact::<PyString>() else {
            return Ok(None);
        };
        chars += id.len()?;
    }
    if kind == SYSTEM {
        let kwargs = m.getattr(intern!(py, "additional_kwargs"))?;
        let Ok(kw) = kwargs.cast_exact::<PyDict>() else {
            return Ok(None);
        };
        match kw.get_item(intern!(py, "__openai_role__"))? {
            None => chars += "system".len(),
            Some(r) => match r.cast_exact::<PyString>() {
                Ok(s) => chars += s.len()?,
                Err(_) => return Ok(None),
            },
        }
    } else if role.is_empty() {
        return Ok(None); // ChatMessage: its own role field
    } else {
        chars += role.len();
    }
    if !name.is_none() {
        let Ok(n) = name.cast_exact::<PyString>() else {
            return Ok(None);
        };
        chars += n.len()?;
    }
    Ok(Some(tokens + chars.div_ceil(4) as i64 + 3))
}

/// `len(repr(v))` for the JSON-like values tool calls hold, without
/// building the string: ASCII strings, ints, bools, `None`, dicts, lists
/// and tuples natively; a float or a non-ASCII string through its own
/// `repr`; `None` (the caller reprs the whole value) past a nesting depth
/// that only a cycle would reach.
fn repr_len(v: &Bound<'_, PyAny>, depth: usize) -> PyResult<Option<usize>> {
    if depth > 64 {
        return Ok(None);
    }
    let p = v.as_ptr();
    if let Ok(s) = v.cast_exact::<PyString>() {
        let text = s.to_str()?;
        if !text.is_ascii() {
            return Ok(Some(s.repr()?.len()?));
        }
        let bytes = text.as_bytes();
        // Python quotes with ' unless the text holds ' and no ".
        let quote = if bytes.contains(&b'\'') && !bytes.contains(&b'"') {
            b'"'
        } else {
            b'\''
        };
        let mut n = 2;
        for &c in bytes {
            n += match c {
                b'\\' | b'\t' | b'\n' | b'\r' => 2,
                _ if c == quote => 2,
                0..=0x1f | 0x7f => 4,
                _ => 1,
            };
        }
        return Ok(Some(n));
    }
    if unsafe { ffi::PyBool_Check(p) } != 0 {
        return Ok(Some(if v.is_truthy()? { 4 } else { 5 }));
    }
    if v.is_none() {
        return Ok(Some(4));
    }
    if unsafe { ffi::PyLong_CheckExact(p) } != 0 {
        return Ok(Some(match v.extract::<i64>() {
            Ok(i) => {
                i.unsigned_abs()
                    .checked_ilog10()
                    .map_or(1, |d| d as usize + 1)
                    + usize::from(i < 0)
            }
            Err(_) => v.repr()?.len()?,
        }));
    }
    if let Ok(d) = v.cast_exact::<PyDict>() {
        let mut n = 2 + 2 * d.len().saturating_sub(1);
        for (k, x) in d.iter() {
            let (Some(a), Some(b)) = (repr_len(&k, depth + 1)?, repr_len(&x, depth + 1)?) else {
                return Ok(None);
            };
            n += a + 2 + b;
        }
        return Ok(Some(n));
    }
    let (open, items): (usize, Vec<Bound<'_, PyAny>>) = if let Ok(l) = v.cast_exact::<PyList>() {
        (0, l.iter().collect())
    } else if let Ok(t) = v.cast_exact::<PyTuple>() {
        (usize::from(t.len() == 1), t.iter().collect())
    } else {
        return Ok(Some(v.repr()?.len()?));
    };
    let mut n = 2 + open + 2 * items.len().saturating_sub(1);
    for x in &items {
        let Some(a) = repr_len(x, depth + 1)? else {
            return Ok(None);
        };
        n += a;
    }
    Ok(Some(n))
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
    let mut scratch = Memo::empty(usize::MAX);
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
        let same = |e: &Entry| {
            e.message.as_ptr() == m.as_ptr()
                && e.content.as_ptr() == content.as_ptr()
                && e.name.as_ptr() == name.as_ptr()
                && e.extra.as_ptr() == extra.as_ptr()
        };
        if let Some(e) = memo.new.get(&key).filter(|e| same(e)) {
            f.counts.push(if use_len { 1 } else { e.count });
            f.kinds.push(e.kind);
            f.pairings.push(e.pairing.clone());
            continue;
        }
        let entry = match memo.old.remove(&key) {
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
                        let f = APPROXIMATE.import(
                            py,
                            "ctxengine.reference.interop",
                            "approximate_count",
                        )?;
                        f.call1((&m, c.classes.bind(py)))?.extract()?
                    }
                };
                Entry {
                    pairing: pairing(py, &m, kind, &extra)?,
                    message: m.clone().unbind(),
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
    max_tokens: i64,
    strategy: &str,
    use_len: bool,
    include_system: bool,
    end_on: Option<Bound<'_, PyAny>>,
    start_on: Option<Bound<'_, PyAny>>,
) -> PyResult<Option<(bool, usize, usize)>> {
    guard(py, || {
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
