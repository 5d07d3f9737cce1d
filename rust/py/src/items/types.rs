//! Type-level facts: kind, tool-pair role, conversation item or not, and
//! how to read `_cj`, `seq` and `call_id`. Kept per thread between calls
//! while the type's attribute version tag is unchanged (checked when a call
//! starts, trusted for the rest of it).

use std::cell::Cell;
use std::os::raw::c_uint;

use ctxengine_core::cut::CONVERSATION_KINDS;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyInt, PyList, PyString, PyTuple, PyType};

use super::slots::{read_attr, seq_value, slot_offset, slot_value, version_of, Attr};
use super::Items;
use crate::canonical::has_item_cache;

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
    /// Items with the `_cj` cache.
    Item,
    Object,
}

pub struct TypeInfo {
    /// Held, so its pointer cannot be reused by another type.
    ty: Py<PyType>,
    version: Option<c_uint>,
    pub sort: Sort,
    /// Index into `Types::kinds`.
    pub kind: usize,
    pub role: Role,
    pub conversation: bool,
    pub cj: Attr,
    pub seq: Attr,
    pub call_id: Attr,
}

/// The facts of the types met, and the kind names ("text", "json" first).
pub struct Types {
    /// The types of `infos`, searched in turn.
    tps: Vec<*mut ffi::PyTypeObject>,
    pub infos: Vec<TypeInfo>,
    pub kinds: Vec<String>,
}

thread_local! {
    /// The last call's facts and kinds (not a `Types`: dropped here, it
    /// would store itself again); a re-entrant call starts afresh.
    static KEPT: Cell<Option<(Vec<TypeInfo>, Vec<String>)>> = const { Cell::new(None) };
}

const MAX_TYPES: usize = 64;

impl Drop for Types {
    fn drop(&mut self) {
        let kept = (
            std::mem::take(&mut self.infos),
            std::mem::take(&mut self.kinds),
        );
        let _ = KEPT.try_with(|k| k.set(Some(kept)));
    }
}

impl Types {
    pub fn new(py: Python<'_>) -> PyResult<Self> {
        let (mut infos, kinds) = match KEPT.with(Cell::take) {
            Some(kept) if kept.1.len() <= MAX_TYPES => kept,
            _ => (Vec::new(), vec!["text".to_owned(), "json".to_owned()]),
        };
        // Facts of types changed since (or without a tag) are read again.
        infos.retain(|i| i.version.is_some() && version_of(i.ty.bind(py)) == i.version);
        let tps = infos.iter().map(|i| i.ty.bind(py).as_type_ptr()).collect();
        Ok(Types { tps, infos, kinds })
    }

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

    #[inline(always)]
    pub fn seq_of(&self, item: &Bound<'_, PyAny>, t: usize) -> PyResult<Option<i64>> {
        let info = &self.infos[t];
        if let (Attr::Slot(offset), true) = (info.seq, self.tps[t] == item.get_type_ptr()) {
            // SAFETY: a slot of this item's type's layout, holding null or a live object.
            return Ok(unsafe { seq_value(slot_value(item.as_ptr(), offset)) });
        }
        // (held: `getattr` may run Python code)
        let seq = read_attr(&item.to_owned(), Attr::Lookup, intern!(item.py(), "seq"))?;
        // SAFETY: a live object, held.
        Ok(seq.and_then(|v| unsafe { seq_value(v.as_ptr()) }))
    }

    /// The facts of a type already known (no Python code runs).
    #[inline(always)]
    pub fn recent(&self, tp: *mut ffi::PyTypeObject) -> Option<usize> {
        self.tps.iter().position(|&t| t == tp)
    }

    #[inline(always)]
    pub fn info(&mut self, obj: &Bound<'_, PyAny>) -> PyResult<usize> {
        match self.recent(obj.get_type_ptr()) {
            Some(t) => Ok(t),
            None => self.read(obj),
        }
    }

    #[inline(never)]
    fn read(&mut self, obj: &Bound<'_, PyAny>) -> PyResult<usize> {
        if self.infos.len() >= MAX_TYPES {
            self.infos.clear();
            self.tps.clear();
        }
        let info = self.read_info(obj)?;
        self.tps.push(obj.get_type_ptr());
        self.infos.push(info);
        Ok(self.infos.len() - 1)
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
            // Value types other than items: their `kind` with `to_dict()`.
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
        let name = self.kinds[kind].as_str(); // ("text" and "json": no item's)
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
            cj: slot(intern!(py, "_cj"))?,
            seq: slot(intern!(py, "seq"))?,
            call_id: slot(intern!(py, "call_id"))?,
            // Read after the lookups above, which assign a tag if none.
            version: version_of(&ty),
            ty: ty.unbind(),
            sort,
            kind,
            role,
            conversation,
        })
    }
}
