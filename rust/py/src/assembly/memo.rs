//! The last `inputs.blocks` (and `limits`) read with a line, kept in its
//! state with the object it was read from: the builder hands the very same
//! tuple again while a line's blocks (its limits) do not change, and
//! reading it again would give the same values.
//!
//! Kept only when nothing in it can change: an exact tuple of blocks of one
//! type (a tuple subclass, generic attribute access, no instance dict) whose
//! fields are str, int, None or exact tuples (the limits: such a tuple
//! itself); trusted while that type's attribute version tag is unchanged
//! (CPython gives a type a new tag whenever an attribute of it or of a base
//! is set or deleted). The object is held, so its address names it.

use ctxengine_core::body::{BodyLimits, Kind};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyString, PyTuple, PyType};

use super::inputs::BlockIn;
use crate::items::{type_fields, version_of};

/// What was read from `source`, with the type whose version tag vouches for it.
pub struct Kept<T> {
    source: Py<PyAny>,
    tp: Py<PyType>,
    version: std::os::raw::c_uint,
    value: T,
}

impl<T> Kept<T> {
    /// What was read last time, when `source` is the same object and the type unchanged.
    fn recall<'a>(kept: Option<&'a Self>, source: &Bound<'_, PyAny>) -> Option<&'a T> {
        let (kept, py) = (kept?, source.py());
        let unchanged = version_of(kept.tp.bind(py)) == Some(kept.version);
        (source.is(kept.source.bind(py)) && unchanged).then_some(&kept.value)
    }

    fn new(
        source: &Bound<'_, PyAny>,
        tp: Bound<'_, PyType>,
        version: std::os::raw::c_uint,
        value: T,
    ) -> Self {
        let (source, tp) = (source.clone().unbind(), tp.unbind());
        Kept {
            source,
            tp,
            version,
            value,
        }
    }
}

/// A block as read, held.
pub struct Block {
    class: Py<PyAny>,
    kind: Kind,
    items: Vec<Py<PyAny>>,
    ids: Vec<Py<PyAny>>,
    max_items: Option<i64>,
    max_tokens: Option<i64>,
}

pub type KeptBlocks = Kept<Vec<Block>>;
pub type KeptLimits = Kept<BodyLimits>;

impl ctxengine_core::body::line::Kept for KeptBlocks {
    /// Their estimated memory (references and structs).
    fn nbytes(&self) -> usize {
        let refs: usize = self.value.iter().map(|b| b.items.len() + b.ids.len()).sum();
        std::mem::size_of::<Block>() * self.value.len() + 8 * refs
    }
}

/// The limits read from `source` last time (see [`Kept::recall`]).
pub fn recall_limits(kept: Option<&KeptLimits>, source: &Bound<'_, PyAny>) -> Option<BodyLimits> {
    Kept::recall(kept, source).copied()
}

/// `limits`, read from `source`, to keep when it cannot change.
pub fn keep_limits(source: &Bound<'_, PyAny>, limits: BodyLimits) -> Option<KeptLimits> {
    Some(Kept::new(
        source,
        source.get_type(),
        plain_tuple(source)?,
        limits,
    ))
}

/// The blocks read from `source` last time (see [`Kept::recall`]).
pub fn recall<'py>(
    kept: Option<&KeptBlocks>,
    source: &Bound<'py, PyAny>,
) -> Option<Vec<BlockIn<'py>>> {
    let py = source.py();
    let bind = |v: &[Py<PyAny>]| v.iter().map(|i| i.bind(py).clone()).collect();
    let blocks = Kept::recall(kept, source)?.iter().map(|b| BlockIn {
        class: b.class.bind(py).clone(),
        kind: b.kind,
        items: bind(&b.items),
        ids: bind(&b.ids),
        max_items: b.max_items,
        max_tokens: b.max_tokens,
    });
    Some(blocks.collect())
}

/// `blocks`, read from `source`, to keep when nothing in them can change.
pub fn keep(source: &Bound<'_, PyAny>, blocks: &[BlockIn<'_>]) -> Option<KeptBlocks> {
    let version = unchanging(source)?;
    let tp = source.get_item(0).ok()?.get_type();
    let unbind = |v: &[Bound<'_, PyAny>]| v.iter().map(|i| i.clone().unbind()).collect();
    let value = blocks.iter().map(|b| Block {
        class: b.class.clone().unbind(),
        kind: b.kind,
        items: unbind(&b.items),
        ids: unbind(&b.ids),
        max_items: b.max_items,
        max_tokens: b.max_tokens,
    });
    Some(Kept::new(source, tp, version, value.collect()))
}

/// The blocks' one type's version tag, when the tuple cannot change.
fn unchanging(source: &Bound<'_, PyAny>) -> Option<std::os::raw::c_uint> {
    let all = source.cast_exact::<PyTuple>().ok()?;
    let first = all.iter().next()?;
    let version = plain_tuple(&first)?;
    let tp = first.get_type_ptr();
    all.iter()
        .all(|block| block.get_type_ptr() == tp && plain_tuple(&block).is_some())
        .then_some(version)
}

/// The version tag of the type of a tuple subclass's instance whose
/// attributes cannot change (generic attribute access, no instance dict,
/// fields of immutable values: None, exact str, int or tuple).
fn plain_tuple(obj: &Bound<'_, PyAny>) -> Option<std::os::raw::c_uint> {
    let tuple = obj.cast::<PyTuple>().ok()?;
    let facts = type_fields(&obj.get_type());
    if facts.instance_dict || !facts.generic_getattr {
        return None;
    }
    let plain = |v: Bound<'_, PyAny>| {
        v.is_none()
            || v.is_exact_instance_of::<PyString>()
            || v.is_exact_instance_of::<PyInt>()
            || v.is_instance_of::<PyBool>()
            || v.is_exact_instance_of::<PyTuple>()
    };
    tuple.iter().all(plain).then_some(facts.version).flatten()
}
