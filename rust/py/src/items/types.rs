//! Type-level facts, kept per type between calls (per thread): kind,
//! tool-pair role, conversation item or not, and how to read `_cj`, `seq`
//! and `call_id`. Trusted while the type's attribute version tag is
//! unchanged (CPython gives a type a new tag whenever an attribute of it or
//! of a base is set or deleted); a type without a tag is read once a call.

use std::os::raw::c_uint;

use ctxengine_core::cut::CONVERSATION_KINDS;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyInt, PyList, PyString, PyTuple, PyType};

use super::slots::{read_attr, seq_value, slot_offset, slot_value, version_of, Attr};
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
    /// Held while cached, so the pointer cannot be reused by another type.
    _ty: Py<PyType>,
    tp: *mut ffi::PyTypeObject,
    version: Option<c_uint>,
    /// The `Types::generation` that last checked `version`.
    checked: u64,
    pub sort: Sort,
    /// Index into `Types::kinds`.
    pub kind: usize,
    pub role: Role,
    /// An item whose class `kind` is one of [`CONVERSATION_KINDS`].
    pub conversation: bool,
    pub cj: Attr,
    pub seq: Attr,
    pub call_id: Attr,
}

/// The facts of the types met, and the distinct kind names ("text" and
/// "json" first).
pub struct Types {
    pub infos: Vec<TypeInfo>,
    /// Types checked in this call, `(type, index into infos)`: a history
    /// alternates between a few types.
    recent: Vec<(*mut ffi::PyTypeObject, usize)>,
    pub kinds: Vec<String>,
    generation: u64,
}

/// What the last call left: facts, kinds, generation.
type Kept = (Vec<TypeInfo>, Vec<String>, u64);

thread_local! {
    /// Taken by a call: a re-entrant one starts afresh.
    static TYPE_CACHE: std::cell::Cell<Option<Kept>> = const { std::cell::Cell::new(None) };
}

const RECENT: usize = 8;
/// More distinct types or kinds than this and the cache starts over.
const MAX_CACHED_TYPES: usize = 128;

impl Drop for Types {
    fn drop(&mut self) {
        let infos = std::mem::take(&mut self.infos);
        let kept = (infos, std::mem::take(&mut self.kinds), self.generation);
        TYPE_CACHE.with(|c| c.set(Some(kept)));
    }
}

impl Types {
    pub fn new(_py: Python<'_>) -> PyResult<Self> {
        let (infos, kinds, generation) = match TYPE_CACHE.with(|c| c.take()) {
            Some((i, k, g)) if k.len() <= MAX_CACHED_TYPES => (i, k, g),
            other => {
                let g = other.map_or(0, |c| c.2);
                (Vec::new(), vec!["text".to_owned(), "json".to_owned()], g)
            }
        };
        let recent = Vec::with_capacity(RECENT);
        Ok(Types {
            infos,
            recent,
            kinds,
            generation: generation + 1,
        })
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

    /// The `seq` of `item`, whose type's facts are `infos[t]`.
    #[inline(always)]
    pub fn seq_of(&self, item: &Bound<'_, PyAny>, t: usize) -> PyResult<Option<i64>> {
        let info = &self.infos[t];
        if let (Attr::Slot(offset), true) = (info.seq, info.tp == item.get_type_ptr()) {
            // SAFETY: a slot of this item's type's layout, holding null or a live object.
            return Ok(unsafe { seq_value(slot_value(item.as_ptr(), offset)) });
        }
        // (held: `getattr` may run Python code)
        let seq = read_attr(&item.to_owned(), Attr::Lookup, intern!(item.py(), "seq"))?;
        // SAFETY: a live object, held.
        Ok(seq.and_then(|v| unsafe { seq_value(v.as_ptr()) }))
    }

    /// The facts of a type already checked in this call (no Python code).
    #[inline(always)]
    pub fn recent(&self, tp: *mut ffi::PyTypeObject) -> Option<usize> {
        self.recent.iter().find(|r| r.0 == tp).map(|r| r.1)
    }

    #[inline(always)]
    pub fn info(&mut self, obj: &Bound<'_, PyAny>) -> PyResult<usize> {
        match self.recent(obj.get_type_ptr()) {
            Some(t) => Ok(t),
            None => self.info_checked(obj),
        }
    }

    /// The index of `obj`'s type's cached facts, when they are still valid
    /// (reading them runs no Python code).
    fn valid(&self, obj: &Bound<'_, PyAny>) -> Option<usize> {
        let tp = obj.get_type_ptr();
        let now = version_of(&obj.get_type());
        (self.infos.iter()).position(|t| {
            t.tp == tp
                && (t.checked == self.generation || (t.version.is_some() && t.version == now))
        })
    }

    /// Whether reading `obj`'s type runs no Python code: its facts are
    /// cached and still valid (what [`Types::info`] trusts without a read).
    pub fn known(&self, obj: &Bound<'_, PyAny>) -> bool {
        let tp = obj.get_type_ptr();
        self.recent(tp).is_some()
            || self.infos.iter().any(|t| {
                t.tp == tp
                    && (t.checked == self.generation
                        || matches!((t.version, version_of(&obj.get_type())), (Some(v), Some(now)) if v == now))
            })
    }

    /// The `_cj` slot offset of an item type whose facts are known (no
    /// Python code runs), else `None`.
    pub fn cj_slot(&self, obj: &Bound<'_, PyAny>) -> Option<isize> {
        if !self.known(obj) {
            return None;
        }
        let tp = obj.get_type_ptr();
        let info = self.infos.iter().find(|t| t.tp == tp)?;
        match (info.sort, info.cj) {
            (Sort::Item, Attr::Slot(offset)) => Some(offset),
            _ => None,
        }
    }

    /// A type not met yet in this call: cached facts still valid, or new ones.
    #[inline(never)]
    fn info_checked(&mut self, obj: &Bound<'_, PyAny>) -> PyResult<usize> {
        let tp = obj.get_type_ptr();
        let i = match self.valid(obj) {
            Some(i) => i,
            None => {
                // Changed since (or new): read the facts again.
                if let Some(old) = self.infos.iter().position(|t| t.tp == tp) {
                    self.infos.swap_remove(old);
                    self.recent.clear();
                }
                if self.infos.len() >= MAX_CACHED_TYPES {
                    // (Kinds stay: this call's facts index them.)
                    self.infos.clear();
                    self.recent.clear();
                }
                let info = self.read_info(obj)?;
                self.infos.push(info);
                self.infos.len() - 1
            }
        };
        self.infos[i].checked = self.generation;
        if self.recent.len() < RECENT {
            self.recent.push((tp, i));
        }
        Ok(i)
    }

    fn kind_index(&mut self, kind: &str) -> usize {
        self.kinds
            .iter()
            .position(|k| k == kind)
            .unwrap_or_else(|| {
                self.kinds.push(kind.to_owned());
                self.kinds.len() - 1
            })
    }

    #[cold]
    fn read_info(&mut self, obj: &Bound<'_, PyAny>) -> PyResult<TypeInfo> {
        let (py, ty) = (obj.py(), obj.get_type());
        let plain_json = obj.is_none()
            || obj.is_instance_of::<PyDict>()
            || obj.is_instance_of::<PyList>()
            || obj.is_instance_of::<PyTuple>()
            || obj.is_instance_of::<PyInt>()
            || obj.is_instance_of::<PyFloat>();
        let item = !obj.is_instance_of::<PyString>() && !plain_json && has_item_cache(obj)?;
        let (sort, kind) = if obj.is_instance_of::<PyString>() {
            (Sort::Text, 0)
        } else if plain_json {
            (Sort::Json, 1)
        } else {
            // Items use their class `kind`; other value types theirs when
            // they have `to_dict()`; anything else is "json".
            let kind = match ty.getattr_opt(intern!(py, "kind"))? {
                Some(k)
                    if k.is_instance_of::<PyString>()
                        && (item || obj.hasattr(intern!(py, "to_dict"))?) =>
                {
                    self.kind_index(k.cast::<PyString>()?.to_str()?)
                }
                _ => 1,
            };
            (if item { Sort::Item } else { Sort::Object }, kind)
        };
        // Conversation items by their class `kind` (ADR 0001): the pairing
        // roles are the tool calls' and results'.
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
        let slot = |name| match sort {
            Sort::Item | Sort::Object => slot_offset(&ty, name),
            _ => Ok(Attr::Lookup),
        };
        Ok(TypeInfo {
            tp: ty.as_type_ptr(),
            cj: slot(intern!(py, "_cj"))?,
            seq: slot(intern!(py, "seq"))?,
            call_id: slot(intern!(py, "call_id"))?,
            // Read after the lookups above, which assign a tag if none.
            version: version_of(&ty),
            _ty: ty.unbind(),
            checked: 0,
            sort,
            kind,
            role,
            conversation,
        })
    }
}
