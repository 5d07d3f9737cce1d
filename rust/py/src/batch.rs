//! One pass over a history: for every item its kind, canonical length and
//! digest (from the `_cj` cache when filled), its `seq` and its tool-pair
//! role. Type-level facts are looked up once per type and call; slotted
//! attributes of plain slotted classes are read straight from the member
//! slot (exactly what `getattr` does for them, without the lookup).

use std::os::raw::c_int;
use std::ptr::addr_of_mut;

use ctxengine_core::hash::sha256_spans;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyList, PyString, PyTuple, PyType};

use ctxengine_core::cut::{PairValidator, ToolRole};

use crate::conversions::{has_item_cache, make_cache, store_cache, utf8, Walker};
use crate::errors::to_pyerr;

static TOOL_CALL: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static TOOL_RESULT: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// What an item is to the pairing rules.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Other,
    Call,
    Result,
}

/// How a value of some type is canonicalized and estimated.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sort {
    /// `str` and subclasses: kind "text".
    Text,
    /// dict, list, tuple, numbers, None: kind "json".
    Json,
    /// Conversation items and `ToolSpec`: the `_cj` cache.
    Item,
    /// Any other object (value types walked through `to_dict()`).
    Object,
}

/// How to read one attribute of instances of a type.
#[derive(Clone, Copy)]
enum Attr {
    /// A `__slots__` member: the object pointer at this offset (NULL if unset).
    Slot(isize),
    /// Anything else: a real `getattr`.
    Lookup,
}

struct TypeInfo {
    tp: *mut ffi::PyTypeObject,
    sort: Sort,
    /// Index into `Types::kinds`.
    kind: usize,
    role: Role,
    cj: Attr,
    seq: Attr,
    call_id: Attr,
}

/// Type-level facts, cached per type pointer for one call, and the
/// distinct kind names met.
pub struct Types {
    infos: Vec<TypeInfo>,
    last: usize,
    pub kinds: Vec<String>,
    tool_call: *mut ffi::PyTypeObject,
    tool_result: *mut ffi::PyTypeObject,
}

/// The member-slot offset of `name` on instances of `tp`, when reading the
/// slot is exactly what `getattr` would do: generic attribute access and a
/// plain object member descriptor.
fn slot_offset(ty: &Bound<'_, PyType>, name: &Bound<'_, PyString>) -> PyResult<Attr> {
    unsafe {
        let tp = ty.as_ptr() as *mut ffi::PyTypeObject;
        // libpython's own function: its address is unique.
        let generic = ffi::PyObject_GenericGetAttr as ffi::getattrofunc as usize;
        if (*tp).tp_getattro.map(|f| f as usize) != Some(generic) {
            return Ok(Attr::Lookup);
        }
        let Some(descr) = ty.getattr_opt(name)? else {
            return Ok(Attr::Lookup);
        };
        if ffi::Py_TYPE(descr.as_ptr()) != addr_of_mut!(ffi::PyMemberDescr_Type) {
            return Ok(Attr::Lookup);
        }
        let descr = descr.as_ptr() as *mut ffi::PyMemberDescrObject;
        // The descriptor must describe this layout (a base of the type), as
        // the descriptor's own __get__ would check.
        let owner = (*descr).d_common.d_type;
        if owner.is_null() || ffi::PyType_IsSubtype(tp, owner) == 0 {
            return Ok(Attr::Lookup);
        }
        let member = (*descr).d_member;
        if member.is_null() || (*member).type_code != ffi::Py_T_OBJECT_EX {
            return Ok(Attr::Lookup);
        }
        Ok(Attr::Slot((*member).offset))
    }
}

impl Types {
    pub fn new(py: Python<'_>) -> PyResult<Self> {
        let tool_call = TOOL_CALL
            .import(py, "ctxengine.model", "ToolCall")?
            .as_ptr();
        let tool_result = TOOL_RESULT
            .import(py, "ctxengine.model", "ToolResult")?
            .as_ptr();
        Ok(Types {
            infos: Vec::with_capacity(8),
            last: usize::MAX,
            kinds: vec!["text".to_owned(), "json".to_owned()],
            tool_call: tool_call as *mut ffi::PyTypeObject,
            tool_result: tool_result as *mut ffi::PyTypeObject,
        })
    }

    fn kind_index(&mut self, kind: &str) -> usize {
        match self.kinds.iter().position(|k| k == kind) {
            Some(i) => i,
            None => {
                self.kinds.push(kind.to_owned());
                self.kinds.len() - 1
            }
        }
    }

    /// `1 +` the last index in `from..count` whose item's `seq` is known and
    /// `<= floor`, read backwards up to the first hit; 0 if none.
    pub fn floor_bound_from(
        &mut self,
        items: &Items<'_>,
        from: usize,
        count: usize,
        floor: i64,
    ) -> PyResult<usize> {
        let mut i = count;
        while i > from {
            i -= 1;
            let Some(item) = items.get(i) else {
                continue;
            };
            let t = self.info(&item)?;
            let info = &self.infos[t];
            if matches!(info.sort, Sort::Item | Sort::Object) {
                let seq = read_attr(&item, info.seq, intern!(item.py(), "seq"))?;
                if let Some(v) = seq.and_then(|v| saturating_i64(&v)) {
                    if v <= floor {
                        return Ok(i + 1);
                    }
                }
            }
        }
        Ok(0)
    }

    #[inline]
    fn info(&mut self, obj: &Bound<'_, PyAny>) -> PyResult<usize> {
        let tp = unsafe { ffi::Py_TYPE(obj.as_ptr()) };
        if let Some(t) = self.infos.get(self.last) {
            if t.tp == tp {
                return Ok(self.last);
            }
        }
        let i = match self.infos.iter().position(|t| t.tp == tp) {
            Some(i) => i,
            None => self.info_slow(obj, tp)?,
        };
        self.last = i;
        Ok(i)
    }

    #[cold]
    fn info_slow(&mut self, obj: &Bound<'_, PyAny>, tp: *mut ffi::PyTypeObject) -> PyResult<usize> {
        let py = obj.py();
        let ptr = obj.as_ptr();
        let plain_json = unsafe {
            ptr == ffi::Py_None()
                || ffi::PyDict_Check(ptr) != 0
                || ffi::PyList_Check(ptr) != 0
                || ffi::PyTuple_Check(ptr) != 0
                || ffi::PyLong_Check(ptr) != 0
                || ffi::PyFloat_Check(ptr) != 0
        };
        let simple = |sort, kind| TypeInfo {
            tp,
            sort,
            kind,
            role: Role::Other,
            cj: Attr::Lookup,
            seq: Attr::Lookup,
            call_id: Attr::Lookup,
        };
        let info = if unsafe { ffi::PyUnicode_Check(ptr) } != 0 {
            simple(Sort::Text, 0)
        } else if plain_json {
            simple(Sort::Json, 1)
        } else {
            let ty = obj.get_type();
            let item = has_item_cache(obj)?;
            // Items use their class `kind`; other value types theirs when
            // they have `to_dict()`; anything else is "json".
            let kind = match ty.getattr_opt(intern!(py, "kind"))? {
                Some(k)
                    if k.is_instance_of::<PyString>()
                        && (item || obj.hasattr(intern!(py, "to_dict"))?) =>
                {
                    let k = k.cast_into::<PyString>()?;
                    let k = k.to_str()?.to_owned();
                    self.kind_index(&k)
                }
                _ => 1,
            };
            let role = unsafe {
                if ffi::PyType_IsSubtype(tp, self.tool_call) != 0 {
                    Role::Call
                } else if ffi::PyType_IsSubtype(tp, self.tool_result) != 0 {
                    Role::Result
                } else {
                    Role::Other
                }
            };
            TypeInfo {
                tp,
                sort: if item { Sort::Item } else { Sort::Object },
                kind,
                role,
                cj: slot_offset(&ty, intern!(py, "_cj"))?,
                seq: slot_offset(&ty, intern!(py, "seq"))?,
                call_id: slot_offset(&ty, intern!(py, "call_id"))?,
            }
        };
        self.infos.push(info);
        Ok(self.infos.len() - 1)
    }
}

/// Read an attribute: the slot directly, or `getattr` (None when absent).
#[inline]
fn read_attr<'py>(
    obj: &Bound<'py, PyAny>,
    how: Attr,
    name: &Bound<'py, PyString>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    match how {
        Attr::Slot(offset) => unsafe {
            let p = slot_value(obj.as_ptr(), offset);
            Ok(Bound::from_borrowed_ptr_or_opt(obj.py(), p))
        },
        Attr::Lookup => obj.getattr_opt(name),
    }
}

/// A list, a tuple, or the items of any other iterable; indexed access that
/// stays safe if Python code run mid-pass changes a list.
pub enum Items<'py> {
    List(Bound<'py, PyList>),
    Tuple(Bound<'py, PyTuple>),
    Other(Vec<Bound<'py, PyAny>>),
}

impl<'py> Items<'py> {
    pub fn new(items: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(list) = items.cast::<PyList>() {
            return Ok(Items::List(list.clone()));
        }
        if let Ok(tuple) = items.cast::<PyTuple>() {
            return Ok(Items::Tuple(tuple.clone()));
        }
        Ok(Items::Other(items.try_iter()?.collect::<PyResult<_>>()?))
    }

    pub fn len(&self) -> usize {
        match self {
            Items::List(l) => l.len(),
            Items::Tuple(t) => t.len(),
            Items::Other(v) => v.len(),
        }
    }

    #[inline]
    pub fn get(&self, i: usize) -> Option<Bound<'py, PyAny>> {
        unsafe {
            match self {
                Items::List(l) => {
                    let p = l.as_ptr();
                    if (i as ffi::Py_ssize_t) < ffi::PyList_GET_SIZE(p) {
                        Some(Bound::from_borrowed_ptr(
                            l.py(),
                            ffi::PyList_GET_ITEM(p, i as ffi::Py_ssize_t),
                        ))
                    } else {
                        None
                    }
                }
                Items::Tuple(t) => {
                    let p = t.as_ptr();
                    if (i as ffi::Py_ssize_t) < ffi::PyTuple_GET_SIZE(p) {
                        Some(Bound::from_borrowed_ptr(
                            t.py(),
                            ffi::PyTuple_GET_ITEM(p, i as ffi::Py_ssize_t),
                        ))
                    } else {
                        None
                    }
                }
                Items::Other(v) => v.get(i).cloned(),
            }
        }
    }

    /// As a Python sequence (for estimators outside this module).
    pub fn to_object(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(match self {
            Items::List(l) => l.clone().into_any(),
            Items::Tuple(t) => t.clone().into_any(),
            Items::Other(v) => PyList::new(py, v)?.into_any(),
        })
    }
}

/// What the estimator needs of one value.
#[derive(Clone, Copy)]
pub struct Facts {
    /// Index into `Types::kinds`.
    pub kind: usize,
    pub digest: [u8; 32],
    /// The canonical length, unless `bytes` is set.
    len: usize,
    /// A borrowed `bytes` object whose size is the canonical length: the
    /// warm path reads it only on a memo miss (it is the one object of an
    /// item the memo does not need). Valid while no Python code runs.
    bytes: *mut ffi::PyObject,
}

impl Facts {
    fn known(kind: usize, len: usize, digest: [u8; 32]) -> Self {
        Facts {
            kind,
            digest,
            len,
            bytes: std::ptr::null_mut(),
        }
    }

    /// The canonical length (call with the GIL held, before Python code
    /// has run since the scan).
    #[inline]
    pub fn len(&self) -> usize {
        if self.bytes.is_null() {
            self.len
        } else {
            unsafe {
                if ffi::PyBytes_Check(self.bytes) != 0 {
                    ffi::Py_SIZE(self.bytes) as usize
                } else {
                    0
                }
            }
        }
    }
}

/// The digest of a filled `_cj` cache `(bytes, 32-byte bytes)` and its
/// (unchecked) canonical bytes object; `None` when not filled.
#[inline]
unsafe fn read_digest(cj: *mut ffi::PyObject) -> Option<([u8; 32], *mut ffi::PyObject)> {
    if ffi::PyTuple_CheckExact(cj) == 0 || ffi::PyTuple_GET_SIZE(cj) != 2 {
        return None;
    }
    let d = ffi::PyTuple_GET_ITEM(cj, 1);
    if ffi::PyBytes_CheckExact(d) == 0 || ffi::Py_SIZE(d) != 32 {
        return None;
    }
    let mut digest = [0u8; 32];
    std::ptr::copy_nonoverlapping(
        ffi::PyBytes_AS_STRING(d) as *const u8,
        digest.as_mut_ptr(),
        32,
    );
    Some((digest, ffi::PyTuple_GET_ITEM(cj, 0)))
}

/// Per-item buffers, kept per thread between calls: a 10,000-item history
/// needs about a megabyte of them, and fresh allocations that size are
/// mapped and faulted in anew on every call.
#[derive(Default)]
pub struct Buffers {
    pub facts: Vec<Facts>,
    pub result_of: Vec<usize>,
    pub raws: Vec<i64>,
}

thread_local! {
    static BUFFERS: std::cell::Cell<Option<Box<Buffers>>> = const { std::cell::Cell::new(None) };
}

/// Buffers this large are not kept.
const KEEP_ITEMS: usize = 1 << 20;

/// Everything one pass learns about a history.
pub struct Scan<'py> {
    /// The call ids of the items whose role is not `Other`, in order (owned,
    /// so the cut can borrow `&str`s).
    pub call_ids: Vec<Bound<'py, PyAny>>,
    pub buf: Box<Buffers>,
    /// Values whose facts still need canonicalization: (index, value).
    pending: Vec<(usize, Bound<'py, PyAny>)>,
}

impl Drop for Scan<'_> {
    fn drop(&mut self) {
        let mut buf = std::mem::take(&mut self.buf);
        if buf.facts.capacity() <= KEEP_ITEMS {
            buf.facts.clear();
            buf.result_of.clear();
            buf.raws.clear();
            // Re-entrant calls (Python code run mid-scan) simply allocate.
            BUFFERS.with(|b| b.set(Some(buf)));
        }
    }
}

/// An int as i64, saturating beyond the range (only comparisons use it).
pub fn saturating_i64(obj: &Bound<'_, PyAny>) -> Option<i64> {
    let ptr = obj.as_ptr();
    unsafe {
        if ffi::PyLong_Check(ptr) == 0 || ffi::PyBool_Check(ptr) != 0 {
            return None;
        }
        let mut overflow: c_int = 0;
        let v = ffi::PyLong_AsLongLongAndOverflow(ptr, &mut overflow);
        if overflow > 0 {
            Some(i64::MAX)
        } else if overflow < 0 {
            Some(i64::MIN)
        } else if v == -1 && !ffi::PyErr_Occurred().is_null() {
            ffi::PyErr_Clear();
            None
        } else {
            Some(v)
        }
    }
}

/// What a pass collects.
#[derive(Clone, Copy)]
pub struct Want {
    /// Validate tool pairs (and fill `result_of`, one entry per item).
    pub pairs: bool,
    /// Kind, length and digest per item.
    pub facts: bool,
}

#[inline(always)]
unsafe fn slot_value(obj: *mut ffi::PyObject, offset: isize) -> *mut ffi::PyObject {
    *((obj as *mut u8).offset(offset) as *mut *mut ffi::PyObject)
}

/// One pass over `items`, validating tool pairs on the way (an
/// `OrphanedToolPair` is raised from here). Facts of items with a filled
/// cache are read here; the rest wait for [`Scan::finish_facts`], so a
/// pairing error comes before any canonicalization, as the contract orders.
pub fn scan<'py>(
    py: Python<'py>,
    types: &mut Types,
    items: &Items<'py>,
    want: Want,
) -> PyResult<Scan<'py>> {
    let n = items.len();
    let mut buf = BUFFERS.with(|b| b.take()).unwrap_or_default();
    if want.facts {
        buf.facts.reserve(n);
    }
    let mut result_of = std::mem::take(&mut buf.result_of);
    let mut s = Scan {
        call_ids: Vec::new(),
        buf,
        pending: Vec::new(),
    };
    // Calls are typically a quarter of a history.
    let mut pairs = PairValidator::new(&mut result_of, if want.pairs { n / 4 + 8 } else { 0 });
    let cj_name = intern!(py, "_cj");
    let call_id_name = intern!(py, "call_id");
    let mut i = 0;
    while let Some(item) = items.get(i) {
        let t = types.info(&item)?;
        let info = &types.infos[t];
        let (sort, kind, role) = (info.sort, info.kind, info.role);
        let (cj_how, call_id_how) = (info.cj, info.call_id);
        if want.pairs {
            let tool_role = if role == Role::Other {
                ToolRole::Other
            } else {
                let id = read_attr(&item, call_id_how, call_id_name)?
                    .ok_or_else(|| pyo3::exceptions::PyAttributeError::new_err("call_id"))?;
                let id = if id.is_instance_of::<PyString>() {
                    id
                } else {
                    id.str()?.into_any()
                };
                // SAFETY: the UTF-8 buffer lives inside the str object, which
                // `call_ids` owns for as long as the Scan (and the validator,
                // dropped at the end of this function) lives; CPython's
                // UTF-8 of a str is valid UTF-8.
                let text: &str = match unsafe { utf8(id.as_ptr()) } {
                    Some(b) => unsafe {
                        std::str::from_utf8_unchecked(std::slice::from_raw_parts(
                            b.as_ptr(),
                            b.len(),
                        ))
                    },
                    None => "",
                };
                s.call_ids.push(id);
                if role == Role::Call {
                    ToolRole::Call(text)
                } else {
                    ToolRole::Result(text)
                }
            };
            pairs.push(tool_role).map_err(|e| to_pyerr(py, e))?;
        }
        if want.facts {
            let cached = if sort == Sort::Item {
                read_attr(&item, cj_how, cj_name)
                    .ok()
                    .flatten()
                    .and_then(|cj| unsafe { read_digest(cj.as_ptr()) })
            } else {
                None
            };
            match cached {
                Some((digest, bytes)) => s.buf.facts.push(Facts {
                    kind,
                    digest,
                    len: 0,
                    bytes,
                }),
                None => {
                    s.buf.facts.push(Facts::known(kind, 0, [0; 32]));
                    s.pending.push((i, item));
                }
            }
        }
        i += 1;
    }
    if want.pairs {
        pairs.finish().map_err(|e| to_pyerr(py, e))?;
    }
    s.buf.result_of = result_of;
    Ok(s)
}

impl<'py> Scan<'py> {
    /// Canonicalize what the pass could not read from a cache, filling the
    /// `_cj` caches of items seen for the first time. All canonical bytes go
    /// to one buffer first; a large batch is then hashed on every core with
    /// the GIL released, and the caches are stored in order. (After an
    /// error, the items before the failing one still get their caches.)
    pub fn finish_facts(&mut self, py: Python<'py>, types: &mut Types) -> PyResult<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        // Python code runs below: settle the borrowed lengths first.
        for f in &mut self.buf.facts {
            if !f.bytes.is_null() {
                f.len = f.len();
                f.bytes = std::ptr::null_mut();
            }
        }
        let mut walker = Walker::new(py, Vec::new());
        let mut big = BIG.with(|b| b.take());
        big.clear();
        // (fact index, the item when its cache is to be stored, span)
        let mut spans: Vec<(usize, Option<Bound<'py, PyAny>>, usize, usize)> =
            Vec::with_capacity(self.pending.len());
        let mut failure: Option<PyErr> = None;
        for (i, item) in std::mem::take(&mut self.pending) {
            let t = types.info(&item)?;
            let start = big.len();
            let result = if types.infos[t].sort == Sort::Item {
                walker.item_bytes_into(&item, &mut big).map(|()| Some(item))
            } else {
                walker.root_into(&item, &mut big).map(|()| None)
            };
            match result {
                Ok(store) => spans.push((i, store, start, big.len())),
                Err(e) => {
                    big.truncate(start);
                    failure = Some(e.into_pyerr(py));
                    break;
                }
            }
        }
        let ranges: Vec<(usize, usize)> = spans.iter().map(|s| (s.2, s.3)).collect();
        let digests = if big.len() >= PARALLEL_HASH_BYTES {
            let threads = hash_threads();
            py.detach(|| sha256_spans(&big, &ranges, threads))
        } else {
            sha256_spans(&big, &ranges, 1)
        };
        for ((i, store, a, b), digest) in spans.into_iter().zip(digests) {
            if let Some(item) = store {
                let tuple = make_cache(py, &big[a..b], &digest)?;
                store_cache(&item, &tuple)?;
            }
            let f = &mut self.buf.facts[i];
            *f = Facts::known(f.kind, b - a, digest);
        }
        if big.capacity() <= KEEP_BIG_BYTES {
            BIG.with(|b| b.set(big));
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// A batch of fresh canonical bytes at least this large is hashed in parallel.
const PARALLEL_HASH_BYTES: usize = 256 * 1024;
/// The fresh-bytes buffer is kept between calls up to this size.
const KEEP_BIG_BYTES: usize = 64 * 1024 * 1024;

thread_local! {
    static BIG: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Threads for parallel hashing: the machine's cores, at most four.
fn hash_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(4)))
}
