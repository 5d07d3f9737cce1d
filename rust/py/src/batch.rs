//! One pass over a history: for every item its kind, canonical length and
//! digest (from the `_cj` cache when filled), its `seq` and its tool-pair
//! role. Type-level facts are kept per type between calls (re-read when
//! the type's attribute version changes); slotted attributes of plain
//! slotted classes are read straight from the member slot (exactly what
//! `getattr` does for them, without the lookup), and while no Python code
//! can run, without taking references.

use std::os::raw::c_int;
use std::ptr::addr_of_mut;

use ctxengine_core::hash::sha256_spans;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple, PyType};

use ctxengine_core::cut::{PairValidator, ToolRole, CONVERSATION_KINDS};
use ctxengine_core::CoreError;

use crate::arguments::type_name;
use crate::conversions::{has_item_cache, make_cache, store_cache, utf8, walk_error, walker};
use crate::errors::{argument_error, to_pyerr};

/// What an item is to the pairing rules.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Other,
    Call,
    Result,
}

/// How a value of some type is canonicalized and estimated.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sort {
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
pub(crate) enum Attr {
    /// A `__slots__` member: the object pointer at this offset (NULL if unset).
    Slot(isize),
    /// Anything else: a real `getattr`.
    Lookup,
}

pub(crate) struct TypeInfo {
    /// Holds a strong reference while cached (released by `Types::forget`),
    /// so the pointer cannot be reused by another type.
    tp: *mut ffi::PyTypeObject,
    /// The type's attribute version when these facts were read (`None`:
    /// CPython assigned none, so they are re-read on every call).
    version: Option<std::os::raw::c_uint>,
    /// The `Types::generation` that last checked `version`.
    checked: u64,
    pub sort: Sort,
    /// Index into `Types::kinds`.
    pub kind: usize,
    pub role: Role,
    /// The class `kind` is `"tool_result"`.
    pub tool_result: bool,
    /// A conversation item: an item whose class `kind` is one of
    /// [`CONVERSATION_KINDS`].
    pub conversation: bool,
    pub cj: Attr,
    pub seq: Attr,
    pub call_id: Attr,
    /// The builder's render cache.
    pub rc: Attr,
}

/// Type-level facts, cached per type pointer, and the distinct kind names
/// met. The facts are kept between calls (per thread) and trusted while the
/// type's attribute version tag is unchanged: CPython gives a type a new
/// tag whenever an attribute of it or of a base is set or deleted.
pub struct Types {
    pub(crate) infos: Vec<TypeInfo>,
    /// Types checked in this call: (type, index into `infos`), the first
    /// `recent_len` slots (a history alternates between a few types).
    recent: [(*mut ffi::PyTypeObject, usize); RECENT],
    recent_len: usize,
    pub kinds: Vec<String>,
    generation: u64,
}

/// What a `Types` leaves for the next call on this thread.
struct TypeCache {
    infos: Vec<TypeInfo>,
    kinds: Vec<String>,
    generation: u64,
}

thread_local! {
    static TYPE_CACHE: std::cell::Cell<Option<TypeCache>> = const { std::cell::Cell::new(None) };
}

const RECENT: usize = 8;

/// More distinct types than this and the cache starts over.
const MAX_CACHED_TYPES: usize = 128;

/// The valid attribute version tag of a type.
#[inline]
unsafe fn version_of(tp: *mut ffi::PyTypeObject) -> Option<std::os::raw::c_uint> {
    if (*tp).tp_flags & ffi::Py_TPFLAGS_VALID_VERSION_TAG != 0 {
        Some((*tp).tp_version_tag)
    } else {
        None
    }
}

impl Drop for Types {
    fn drop(&mut self) {
        // A re-entrant call (Python code run mid-call) may have left its
        // own cache meanwhile; this one, the outer, replaces it.
        let cache = TypeCache {
            infos: std::mem::take(&mut self.infos),
            kinds: std::mem::take(&mut self.kinds),
            generation: self.generation,
        };
        if let Some(old) = TYPE_CACHE.with(|c| c.replace(Some(cache))) {
            forget_types(old.infos);
        }
    }
}

/// Release the type references of dropped facts (the GIL is held: every
/// `Types` lives inside a call from Python).
fn forget_types(infos: Vec<TypeInfo>) {
    for info in infos {
        // SAFETY: the strong reference taken when the facts were cached.
        unsafe { ffi::Py_DECREF(info.tp as *mut ffi::PyObject) };
    }
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
    pub fn new(_py: Python<'_>) -> PyResult<Self> {
        let (infos, kinds, generation) = match TYPE_CACHE.with(|c| c.take()) {
            Some(c) if c.kinds.len() <= MAX_CACHED_TYPES => (c.infos, c.kinds, c.generation + 1),
            Some(c) => {
                // Many kind names met: start over (kind indices are per cache).
                forget_types(c.infos);
                (
                    Vec::with_capacity(8),
                    vec!["text".to_owned(), "json".to_owned()],
                    c.generation + 1,
                )
            }
            None => (
                Vec::with_capacity(8),
                vec!["text".to_owned(), "json".to_owned()],
                1,
            ),
        };
        Ok(Types {
            infos,
            recent: [(std::ptr::null_mut(), 0); RECENT],
            recent_len: 0,
            kinds,
            generation,
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
        py: Python<'_>,
        items: &Items<'_>,
        from: usize,
        count: usize,
        floor: i64,
    ) -> PyResult<usize> {
        let mut i = count;
        while i > from {
            i -= 1;
            let p = items.ptr(i);
            if p.is_null() {
                continue;
            }
            // SAFETY: a live item (the sequence holds it; the fast path
            // runs no Python code).
            let tp = unsafe { ffi::Py_TYPE(p) };
            let t = match self.recent(tp) {
                Some(t) => t,
                None => self.info(&unsafe { Bound::from_borrowed_ptr(py, p) })?,
            };
            let info = &self.infos[t];
            if !matches!(info.sort, Sort::Item | Sort::Object) {
                continue;
            }
            let seq = match info.seq {
                // SAFETY: a slot of this type's layout; ints convert in C.
                Attr::Slot(offset) => unsafe { seq_value(slot_value(p, offset)) },
                Attr::Lookup => {
                    let item = unsafe { Bound::from_borrowed_ptr(py, p) };
                    read_attr(&item, Attr::Lookup, intern!(py, "seq"))?.and_then(|v| seq_of(&v))
                }
            };
            if let Some(v) = seq {
                if v <= floor {
                    return Ok(i + 1);
                }
            }
        }
        Ok(0)
    }

    /// The facts of a type already checked in this call (no Python code).
    #[inline(always)]
    pub(crate) fn recent(&self, tp: *mut ffi::PyTypeObject) -> Option<usize> {
        self.recent[..self.recent_len]
            .iter()
            .find(|r| r.0 == tp)
            .map(|r| r.1)
    }

    #[inline(always)]
    pub(crate) fn info(&mut self, obj: &Bound<'_, PyAny>) -> PyResult<usize> {
        let tp = unsafe { ffi::Py_TYPE(obj.as_ptr()) };
        for &(hit, at) in &self.recent[..self.recent_len] {
            if hit == tp {
                return Ok(at);
            }
        }
        self.info_checked(obj, tp)
    }

    /// A type not met yet in this call: cached facts still valid, or new ones.
    #[inline(never)]
    fn info_checked(
        &mut self,
        obj: &Bound<'_, PyAny>,
        tp: *mut ffi::PyTypeObject,
    ) -> PyResult<usize> {
        let i = match self.infos.iter().position(|t| t.tp == tp) {
            Some(i) if self.infos[i].checked == self.generation => i,
            Some(i) => {
                let info = &mut self.infos[i];
                // SAFETY: a live type (the object's).
                match (info.version, unsafe { version_of(tp) }) {
                    (Some(v), Some(now)) if v == now => {
                        info.checked = self.generation;
                        i
                    }
                    _ => {
                        // Changed since: read the facts again.
                        let old = self.infos.swap_remove(i);
                        forget_types(vec![old]);
                        self.recent_len = 0;
                        self.info_slow(obj, tp)?
                    }
                }
            }
            None => self.info_slow(obj, tp)?,
        };
        if self.recent_len < RECENT {
            self.recent[self.recent_len] = (tp, i);
            self.recent_len += 1;
        }
        Ok(i)
    }

    #[cold]
    fn info_slow(&mut self, obj: &Bound<'_, PyAny>, tp: *mut ffi::PyTypeObject) -> PyResult<usize> {
        if self.infos.len() >= MAX_CACHED_TYPES {
            // (Kinds stay: this call's facts index them.)
            forget_types(std::mem::take(&mut self.infos));
            self.recent_len = 0;
        }
        let mut info = self.read_info(obj, tp)?;
        // SAFETY: a live type; the reference is released by forget_types.
        unsafe {
            ffi::Py_INCREF(tp as *mut ffi::PyObject);
            // Read after the lookups above, which assign a tag if none.
            info.version = version_of(tp);
        }
        info.checked = self.generation;
        self.infos.push(info);
        Ok(self.infos.len() - 1)
    }

    fn read_info(
        &mut self,
        obj: &Bound<'_, PyAny>,
        tp: *mut ffi::PyTypeObject,
    ) -> PyResult<TypeInfo> {
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
            version: None,
            checked: 0,
            sort,
            kind,
            role: Role::Other,
            tool_result: false,
            conversation: false,
            cj: Attr::Lookup,
            seq: Attr::Lookup,
            call_id: Attr::Lookup,
            rc: Attr::Lookup,
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
            // Conversation items by their class `kind` (ADR 0001): the
            // pairing roles are the tool calls' and results'.
            let name = if kind > 1 {
                self.kinds[kind].as_str()
            } else {
                ""
            };
            let conversation = item && CONVERSATION_KINDS.contains(&name);
            let role = match name {
                "tool_call" if conversation => Role::Call,
                "tool_result" if conversation => Role::Result,
                _ => Role::Other,
            };
            TypeInfo {
                tp,
                version: None,
                checked: 0,
                sort: if item { Sort::Item } else { Sort::Object },
                kind,
                role,
                tool_result: role == Role::Result,
                conversation,
                cj: slot_offset(&ty, intern!(py, "_cj"))?,
                seq: slot_offset(&ty, intern!(py, "seq"))?,
                call_id: slot_offset(&ty, intern!(py, "call_id"))?,
                rc: slot_offset(&ty, intern!(py, "_rc"))?,
            }
        };
        Ok(info)
    }
}

/// Read an attribute: the slot directly, or `getattr` (None when absent).
#[inline]
pub(crate) fn read_attr<'py>(
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

/// The tool-pair role of an item and its id's hash: Python's own hash of
/// the id as an exact `str` (cached in the string object after the first
/// use). A `str` subclass counts as its data; any other id is an
/// `ArgumentError` of `function` naming `items[index].call_id`.
/// `keep` takes a reference to each id string: the role borrows its text.
#[inline(always)]
pub(crate) fn tool_role<'a, 'py>(
    item: &Bound<'py, PyAny>,
    role: Role,
    how: Attr,
    keep: &mut Vec<Bound<'py, PyAny>>,
    (function, name, index): (&str, &str, usize),
) -> PyResult<(ToolRole<'a>, u64)> {
    if role == Role::Other {
        return Ok((ToolRole::Other, 0));
    }
    let py = item.py();
    let id = read_attr(item, how, intern!(py, "call_id"))?;
    let id = match id {
        Some(id) if unsafe { ffi::PyUnicode_CheckExact(id.as_ptr()) } != 0 => id,
        // SAFETY: a str subclass: an exact copy of its data.
        Some(id) if id.is_instance_of::<PyString>() => unsafe {
            Bound::from_owned_ptr_or_err(py, ffi::PyUnicode_FromObject(id.as_ptr()))?
        },
        other => {
            let got = other.map_or_else(|| "NoneType".to_owned(), |v| type_name(&v));
            return Err(argument_error(
                py,
                function,
                format!("{name}[{index}].call_id"),
                format!("expected a str, got {got}"),
            ));
        }
    };
    // SAFETY: an exact str.
    let hash = unsafe { str_hash(id.as_ptr()) };
    // SAFETY: the UTF-8 buffer lives inside the str object, which `keep`
    // owns for as long as the caller's validator lives; CPython's UTF-8 of
    // a str is valid UTF-8.
    let text: &'a str = match unsafe { utf8(id.as_ptr()) } {
        Some(b) => unsafe {
            std::str::from_utf8_unchecked(std::slice::from_raw_parts(b.as_ptr(), b.len()))
        },
        None => "",
    };
    keep.push(id);
    Ok(match role {
        Role::Call => ToolRole::Call(text),
        _ => ToolRole::Result(text),
    })
    .map(|r| (r, hash))
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

    /// The item at `i` without a reference (null past the end): valid while
    /// no Python code runs.
    #[inline(always)]
    pub fn ptr(&self, i: usize) -> *mut ffi::PyObject {
        // SAFETY: bounds checked against the current size.
        unsafe {
            match self {
                Items::List(l) => {
                    let p = l.as_ptr();
                    if (i as ffi::Py_ssize_t) < ffi::PyList_GET_SIZE(p) {
                        ffi::PyList_GET_ITEM(p, i as ffi::Py_ssize_t)
                    } else {
                        std::ptr::null_mut()
                    }
                }
                Items::Tuple(t) => {
                    let p = t.as_ptr();
                    if (i as ffi::Py_ssize_t) < ffi::PyTuple_GET_SIZE(p) {
                        ffi::PyTuple_GET_ITEM(p, i as ffi::Py_ssize_t)
                    } else {
                        std::ptr::null_mut()
                    }
                }
                Items::Other(v) => v.get(i).map_or(std::ptr::null_mut(), |b| b.as_ptr()),
            }
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
#[derive(Clone)]
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
    /// The canonical bytes once `bytes` is settled (an exact count on a
    /// memo miss needs them, ADR 0012).
    data: Vec<u8>,
}

impl Facts {
    /// Facts whose length is read from `bytes` when asked: the caller keeps
    /// `bytes` alive (through the `_cj` tuple holding it) while they are used.
    #[inline]
    pub(crate) fn of_bytes(kind: usize, digest: [u8; 32], bytes: *mut ffi::PyObject) -> Self {
        Facts {
            kind,
            digest,
            len: 0,
            bytes,
            data: Vec::new(),
        }
    }

    pub(crate) fn known(kind: usize, len: usize, digest: [u8; 32]) -> Self {
        Facts {
            kind,
            digest,
            len,
            bytes: std::ptr::null_mut(),
            data: Vec::new(),
        }
    }

    /// Known facts with their canonical bytes.
    pub(crate) fn with_data(kind: usize, digest: [u8; 32], data: Vec<u8>) -> Self {
        Facts {
            kind,
            digest,
            len: data.len(),
            bytes: std::ptr::null_mut(),
            data,
        }
    }

    /// The canonical bytes (call with the GIL held, before Python code has
    /// run since the scan, like [`Facts::len`]).
    pub fn canonical(&self) -> Vec<u8> {
        if self.bytes.is_null() {
            return self.data.clone();
        }
        // SAFETY: a live bytes object (see the field).
        unsafe {
            if ffi::PyBytes_Check(self.bytes) != 0 {
                let p = ffi::PyBytes_AsString(self.bytes) as *const u8;
                std::slice::from_raw_parts(p, ffi::Py_SIZE(self.bytes) as usize).to_vec()
            } else {
                Vec::new()
            }
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
pub(crate) unsafe fn read_digest(cj: *mut ffi::PyObject) -> Option<([u8; 32], *mut ffi::PyObject)> {
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

/// Push the facts of a filled `_cj` cache `(bytes, 32-byte bytes)`, the
/// digest copied straight into place; false (nothing pushed) when not
/// filled.
///
/// # Safety
/// `cj` must be a live object; `facts` must have spare capacity.
#[inline(always)]
unsafe fn push_cached(facts: &mut Vec<Facts>, kind: usize, cj: *mut ffi::PyObject) -> bool {
    if ffi::PyTuple_CheckExact(cj) == 0 || ffi::PyTuple_GET_SIZE(cj) != 2 {
        return false;
    }
    let d = ffi::PyTuple_GET_ITEM(cj, 1);
    if ffi::PyBytes_CheckExact(d) == 0 || ffi::Py_SIZE(d) != 32 {
        return false;
    }
    if facts.len() == facts.capacity() {
        facts.reserve(1);
    }
    let slot = facts.as_mut_ptr().add(facts.len());
    std::ptr::addr_of_mut!((*slot).kind).write(kind);
    std::ptr::addr_of_mut!((*slot).len).write(0);
    std::ptr::addr_of_mut!((*slot).bytes).write(ffi::PyTuple_GET_ITEM(cj, 0));
    std::ptr::addr_of_mut!((*slot).data).write(Vec::new());
    std::ptr::copy_nonoverlapping(
        ffi::PyBytes_AS_STRING(d) as *const u8,
        std::ptr::addr_of_mut!((*slot).digest) as *mut u8,
        32,
    );
    facts.set_len(facts.len() + 1);
    true
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
    /// The first pairing error, raised by [`Scan::pairs`] once the other
    /// arguments are checked.
    pair_error: Option<CoreError>,
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

/// An item's `seq` as the floor comparison sees it: an int (not a bool);
/// `None` for an unset slot, `None` or anything else. Compared only with a
/// 64-bit floor, so an int above the range is `None` (never at or below
/// it) and one below it `i64::MIN` (always): exact, like the reference.
///
/// # Safety
/// `v` must be null or a live object.
#[inline(always)]
unsafe fn seq_value(v: *mut ffi::PyObject) -> Option<i64> {
    if v.is_null() || ffi::PyLong_Check(v) == 0 || ffi::PyBool_Check(v) != 0 {
        return None;
    }
    let mut overflow: c_int = 0;
    let n = ffi::PyLong_AsLongLongAndOverflow(v, &mut overflow);
    if overflow > 0 {
        None
    } else if overflow < 0 {
        Some(i64::MIN)
    } else if n == -1 && !ffi::PyErr_Occurred().is_null() {
        ffi::PyErr_Clear();
        None
    } else {
        Some(n)
    }
}

/// [`seq_value`] of a held object.
pub fn seq_of(obj: &Bound<'_, PyAny>) -> Option<i64> {
    // SAFETY: a live object.
    unsafe { seq_value(obj.as_ptr()) }
}

/// `ArgumentError` unless every element of `items` is a conversation item
/// with, for tool calls and results, a `str` call id (`name` names the
/// argument of `function`).
pub fn check_conversation(
    function: &'static str,
    name: &str,
    items: &Items<'_>,
    types: &mut Types,
) -> PyResult<()> {
    let mut keep = Vec::new();
    let mut i = 0;
    while let Some(item) = items.get(i) {
        let t = types.info(&item)?;
        let info = &types.infos[t];
        if !info.conversation {
            return Err(argument_error(
                item.py(),
                function,
                format!("{name}[{i}]"),
                format!("expected a conversation item, got {}", type_name(&item)),
            ));
        }
        let (role, how) = (info.role, info.call_id);
        tool_role(&item, role, how, &mut keep, (function, name, i))?;
        keep.clear();
        i += 1;
    }
    Ok(())
}

/// What a pass collects.
#[derive(Clone, Copy)]
pub struct Want {
    /// Check that every item is a conversation item and validate the tool
    /// pairs (filling `result_of`, one entry per item), for this function.
    pub pairs: Option<&'static str>,
    /// Kind, length and digest per item.
    pub facts: bool,
}

#[inline(always)]
unsafe fn slot_value(obj: *mut ffi::PyObject, offset: isize) -> *mut ffi::PyObject {
    *((obj as *mut u8).offset(offset) as *mut *mut ffi::PyObject)
}

/// One pass over `items`, checking the items (an `ArgumentError`) and
/// validating tool pairs on the way (an `OrphanedToolPair` from
/// [`Scan::pairs`]). Facts of items with a filled
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
        pair_error: None,
    };
    // Calls are typically a quarter of a history.
    let hint = if want.pairs.is_some() { n / 4 + 8 } else { 0 };
    let mut pairs = PairValidator::new(&mut result_of, hint);
    // The first pairing error waits until every item is checked: argument
    // errors come first.
    let mut pair_error: Option<CoreError> = None;
    let cj_name = intern!(py, "_cj");
    // The fast path reads items, slots and call id strings without taking
    // references: nothing can free them while no Python code runs. Before
    // any step that may run Python code, `pin` takes references to the
    // call ids the validator borrows so far and settles the fact lengths.
    let mut borrowed: Vec<*mut ffi::PyObject> = Vec::new();
    let mut i = 0;
    loop {
        let p = items.ptr(i);
        if p.is_null() {
            break;
        }
        // SAFETY: a live object (the sequence holds it, and no Python code
        // has run since it was read).
        let tp = unsafe { ffi::Py_TYPE(p) };
        let t = match types.recent(tp) {
            Some(t) => t,
            None => {
                s.pin(py, &mut borrowed);
                // SAFETY: as above; from here on a reference is held.
                types.info(&unsafe { Bound::from_borrowed_ptr(py, p) })?
            }
        };
        let info = &types.infos[t];
        let (sort, kind, role) = (info.sort, info.kind, info.role);
        let (cj_how, call_id_how) = (info.cj, info.call_id);
        if let Some(function) = want.pairs {
            if !info.conversation {
                // SAFETY: as above.
                let item = unsafe { Bound::from_borrowed_ptr(py, p) };
                return Err(argument_error(
                    py,
                    function,
                    format!("items[{i}]"),
                    format!("expected a conversation item, got {}", type_name(&item)),
                ));
            }
            // SAFETY: a slot of this type's layout; an exact str's hash and
            // UTF-8 run no Python code.
            let fast = match (role, call_id_how) {
                (Role::Other, _) => Some((ToolRole::Other, 0)),
                (_, Attr::Slot(offset)) => unsafe {
                    let id = slot_value(p, offset);
                    if !id.is_null() && ffi::PyUnicode_CheckExact(id) != 0 {
                        let hash = str_hash(id);
                        let text = utf8_str(id);
                        borrowed.push(id);
                        Some((
                            if role == Role::Call {
                                ToolRole::Call(text)
                            } else {
                                ToolRole::Result(text)
                            },
                            hash,
                        ))
                    } else {
                        None
                    }
                },
                _ => None,
            };
            let (tool_role, hash) = match fast {
                Some(r) => r,
                None => {
                    s.pin(py, &mut borrowed);
                    // SAFETY: as above.
                    let item = unsafe { Bound::from_borrowed_ptr(py, p) };
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
                // SAFETY: a slot of this type's layout; push_cached checks.
                (Sort::Item, Attr::Slot(offset)) => unsafe {
                    let cj = slot_value(p, offset);
                    !cj.is_null() && push_cached(&mut s.buf.facts, kind, cj)
                },
                (Sort::Item, Attr::Lookup) => {
                    s.pin(py, &mut borrowed);
                    // SAFETY: as above.
                    let item = unsafe { Bound::from_borrowed_ptr(py, p) };
                    // The tuple may live no longer than this read (a
                    // property): its length is taken while it is held.
                    let cj = read_attr(&item, cj_how, cj_name).ok().flatten();
                    let pushed = cj.as_ref().is_some_and(|cj| unsafe {
                        push_cached(&mut s.buf.facts, kind, cj.as_ptr())
                    });
                    if let Some(f) = s.buf.facts.last_mut().filter(|_| pushed) {
                        f.len = f.len();
                        f.bytes = std::ptr::null_mut();
                    }
                    drop(cj);
                    pushed
                }
                _ => false,
            };
            if !cached {
                s.buf.facts.push(Facts::known(kind, 0, [0; 32]));
                // SAFETY: as above.
                s.pending
                    .push((i, unsafe { Bound::from_borrowed_ptr(py, p) }));
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

/// Python's hash of an exact str: the one cached in the object (computed
/// and cached on first use, running no Python code).
///
/// # Safety
/// `id` must be a live exact str.
#[inline(always)]
unsafe fn str_hash(id: *mut ffi::PyObject) -> u64 {
    let cached = (*(id as *mut ffi::PyASCIIObject)).hash;
    (if cached == -1 {
        ffi::PyObject_Hash(id)
    } else {
        cached
    }) as u64
}

/// The UTF-8 text of a str as `&str` of any lifetime (the caller keeps the
/// string alive); "" for lone surrogates.
///
/// # Safety
/// `id` must be a live str.
#[inline(always)]
unsafe fn utf8_str<'a>(id: *mut ffi::PyObject) -> &'a str {
    match utf8(id) {
        // CPython's UTF-8 of a str is valid UTF-8.
        Some(b) => std::str::from_utf8_unchecked(std::slice::from_raw_parts(b.as_ptr(), b.len())),
        None => "",
    }
}

impl<'py> Scan<'py> {
    /// `OrphanedToolPair` for the first pairing violation, if any.
    pub fn pairs(&mut self, py: Python<'_>) -> PyResult<()> {
        match self.pair_error.take() {
            Some(e) => Err(to_pyerr(py, e)),
            None => Ok(()),
        }
    }

    /// Before Python code may run mid-pass: take references to the call ids
    /// read without one, and settle the borrowed fact lengths.
    #[cold]
    fn pin(&mut self, py: Python<'py>, borrowed: &mut Vec<*mut ffi::PyObject>) {
        for id in borrowed.drain(..) {
            // SAFETY: live strs (no Python code has run since they were read).
            self.call_ids
                .push(unsafe { Bound::from_borrowed_ptr(py, id) });
        }
        for f in &mut self.buf.facts {
            if !f.bytes.is_null() {
                f.len = f.len();
                f.data = f.canonical();
                f.bytes = std::ptr::null_mut();
            }
        }
    }

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
                f.data = f.canonical();
                f.bytes = std::ptr::null_mut();
            }
        }
        let pending = std::mem::take(&mut self.pending);
        canonicalize_pending(py, types, &mut self.buf.facts, pending)
    }
}

/// Canonicalize `pending` values (fact index, value), filling the `_cj`
/// caches of items seen for the first time and their facts. All canonical
/// bytes go to one buffer first; a large batch is then hashed on every core
/// with the GIL released, and the caches are stored in order. (After an
/// error, the items before the failing one still get their caches.) The
/// facts must hold no borrowed lengths: Python code runs here.
pub(crate) fn canonicalize_pending<'py>(
    py: Python<'py>,
    types: &mut Types,
    facts: &mut [Facts],
    pending: Vec<(usize, Bound<'py, PyAny>)>,
) -> PyResult<()> {
    let mut w = walker(py, Vec::new());
    let mut big = BIG.with(|b| b.take());
    big.clear();
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
        let f = &mut facts[i];
        *f = Facts::with_data(f.kind, digest, big[a..b].to_vec());
    }
    if big.capacity() <= KEEP_BIG_BYTES {
        BIG.with(|b| b.set(big));
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(()),
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
