//! Type-level facts, kept per type between calls: kind, tool-pair role,
//! conversation item or not, and how to read `_cj`, `seq` and `call_id`.
//! Re-read when the type's attribute version tag changes (CPython gives a
//! type a new tag whenever an attribute of it or of a base is set).

use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use ctxengine_core::cut::CONVERSATION_KINDS;

use super::slots::{read_attr, seq_of, seq_value, slot_offset, slot_value, version_of, Attr};
use super::Items;
use crate::canonical::has_item_cache;

/// What an item is to the pairing rules.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Other,
    Call,
    Result,
}

/// How a value of some type is canonicalized and estimated.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    /// `str` and subclasses: kind "text".
    Text,
    /// dict, list, tuple, numbers, None: kind "json".
    Json,
    /// Conversation items and `ToolSpec`: the `_cj` cache.
    Item,
    /// Any other object (value types walked through `to_dict()`).
    Object,
}

pub struct TypeInfo {
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
    /// A conversation item: an item whose class `kind` is one of
    /// [`CONVERSATION_KINDS`].
    pub conversation: bool,
    pub cj: Attr,
    pub seq: Attr,
    pub call_id: Attr,
}

/// Type-level facts, cached per type pointer, and the distinct kind names
/// met. The facts are kept between calls (per thread) and trusted while the
/// type's attribute version tag is unchanged: CPython gives a type a new
/// tag whenever an attribute of it or of a base is set or deleted.
pub struct Types {
    pub infos: Vec<TypeInfo>,
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

    /// The `seq` of item `i` as the floor scan sees it (see `slots::seq_value`).
    #[inline]
    pub fn seq_at(&mut self, items: &Items<'_>, i: usize) -> PyResult<Option<i64>> {
        let Some(item) = items.get(i) else {
            return Ok(None);
        };
        let t = self.info(&item)?;
        if !matches!(self.infos[t].sort, Sort::Item | Sort::Object) {
            return Ok(None);
        }
        self.seq_of(&item, t)
    }

    /// The `seq` of `item`, whose type's facts are `infos[t]` (see
    /// `slots::seq_value`).
    #[inline(always)]
    pub fn seq_of(&self, item: &Bound<'_, PyAny>, t: usize) -> PyResult<Option<i64>> {
        let info = &self.infos[t];
        match info.seq {
            Attr::Slot(offset) if info.tp == item.get_type_ptr() => {
                // SAFETY: a slot of this item's type's layout; ints convert in C.
                Ok(unsafe { seq_value(slot_value(item.as_ptr(), offset)) })
            }
            _ => {
                let item = item.to_owned(); // (held: `getattr` may run Python code)
                let seq = read_attr(&item, Attr::Lookup, intern!(item.py(), "seq"))?;
                Ok(seq.and_then(|v| seq_of(&v)))
            }
        }
    }

    /// The facts of a type already checked in this call (no Python code).
    #[inline(always)]
    pub fn recent(&self, tp: *mut ffi::PyTypeObject) -> Option<usize> {
        self.recent[..self.recent_len]
            .iter()
            .find(|r| r.0 == tp)
            .map(|r| r.1)
    }

    #[inline(always)]
    pub fn info(&mut self, obj: &Bound<'_, PyAny>) -> PyResult<usize> {
        let tp = obj.get_type_ptr();
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
                match (info.version, version_of(&obj.get_type())) {
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
        let ty = obj.get_type();
        // Read after the lookups above, which assign a tag if none.
        info.version = version_of(&ty);
        let _strong: *mut ffi::PyObject = ty.into_ptr(); // (released by forget_types)
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
        let plain_json = obj.is_none()
            || obj.is_instance_of::<PyDict>()
            || obj.is_instance_of::<PyList>()
            || obj.is_instance_of::<PyTuple>()
            || obj.is_instance_of::<PyInt>()
            || obj.is_instance_of::<PyFloat>();
        let simple = |sort, kind| TypeInfo {
            tp,
            version: None,
            checked: 0,
            sort,
            kind,
            role: Role::Other,
            conversation: false,
            cj: Attr::Lookup,
            seq: Attr::Lookup,
            call_id: Attr::Lookup,
        };
        let info = if obj.is_instance_of::<PyString>() {
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
                conversation,
                cj: slot_offset(&ty, intern!(py, "_cj"))?,
                seq: slot_offset(&ty, intern!(py, "seq"))?,
                call_id: slot_offset(&ty, intern!(py, "call_id"))?,
            }
        };
        Ok(info)
    }
}
