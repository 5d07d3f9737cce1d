//! `inputs.line` (`RenderLine`): a history line's renders and pointers in
//! history order, read and checked as the reference checks them; an entry
//! is taken for history item `i` only when it holds the very item. Its
//! `state`, when a `LineState`, holds what calls read of it before (any
//! other value is not read: the reference ignores it too).

use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyNone, PyString};

use super::inputs::{field, Path, F};
use super::line_state::LineState;
use crate::arguments;
use crate::errors::argument_error;
use crate::items::Items;

/// `inputs.line`: a history line's renders and pointers in history order.
pub struct Line<'py> {
    items: Items<'py>,
    renders: Items<'py>,
    pointers: Items<'py>,
    state: Option<Bound<'py, LineState>>,
    /// `None`'s address (compared only).
    none: *mut ffi::PyObject,
}

impl<'py> Line<'py> {
    /// Whether entry `i` holds the very item, render and pointer given
    /// (addresses only).
    #[inline(always)]
    pub fn same(
        &self,
        i: usize,
        item: *mut ffi::PyObject,
        render: *mut ffi::PyObject,
        pointer: *mut ffi::PyObject,
    ) -> bool {
        self.items.ptr(i) == item
            && self.renders.ptr(i) == render
            && self.pointers.ptr(i) == pointer
    }

    /// What calls read of this line before (`RenderLine.state`).
    pub fn state(&self) -> Option<&Bound<'py, LineState>> {
        self.state.as_ref()
    }

    /// Entry `i` as the line holds it now: item, render, pointer (`None`
    /// for none), with references.
    pub fn entry(&self, i: usize) -> Option<LineEntry<'py>> {
        let (item, render, pointer) = (
            self.items.get(i)?,
            self.renders.get(i)?,
            self.pointers.get(i)?,
        );
        if render.is_none() {
            return None;
        }
        Some(LineEntry {
            item,
            render,
            pointer: (!pointer.is_none()).then_some(pointer),
        })
    }

    /// The render and pointer (null: none) the line holds for item `i`
    /// when its entry is the very item `p` and holds a render (and, for a
    /// tool result, a pointer), borrowed: valid while no Python code runs.
    #[inline(always)]
    pub fn held(
        &self,
        i: usize,
        p: *mut ffi::PyObject,
        result: bool,
    ) -> Option<(*mut ffi::PyObject, *mut ffi::PyObject)> {
        if self.items.ptr(i) != p {
            return None;
        }
        let none = self.none;
        let render = self.renders.ptr(i);
        if render.is_null() || render == none {
            return None;
        }
        let pointer = match self.pointers.ptr(i) {
            q if q == none => std::ptr::null_mut(),
            q => q,
        };
        if result && pointer.is_null() {
            return None;
        }
        Some((render, pointer))
    }
}

/// One line entry with references; `pointer` is `None` for the line's `None`.
pub struct LineEntry<'py> {
    pub item: Bound<'py, PyAny>,
    pub render: Bound<'py, PyAny>,
    pub pointer: Option<Bound<'py, PyAny>>,
}

/// `inputs.line`: absent or `None`, or three sequences of one length.
pub fn line<'py>(inputs: &Bound<'py, PyAny>) -> PyResult<Option<Line<'py>>> {
    let py = inputs.py();
    let value = match inputs.getattr_opt(intern!(py, "line"))? {
        Some(v) if !v.is_none() => v,
        _ => return Ok(None),
    };
    let part = |name: &'static str, interned: &Bound<'py, PyString>| -> PyResult<Items<'py>> {
        let v = field(&value, Path::of("inputs.line", name), interned)?;
        arguments::sequence(F, format_args!("inputs.line.{name}"), &v, name)
    };
    let items = part("items", intern!(py, "items"))?;
    let renders = part("renders", intern!(py, "renders"))?;
    let pointers = part("pointers", intern!(py, "pointers"))?;
    if items.len() != renders.len() || items.len() != pointers.len() {
        return Err(argument_error(
            py,
            F,
            "inputs.line",
            format!(
                "{} items, {} renders and {} pointers",
                items.len(),
                renders.len(),
                pointers.len()
            ),
        ));
    }
    // (Read as the reference reads it: not at all, but for speed.)
    let state = value
        .getattr_opt(intern!(py, "state"))
        .ok()
        .flatten()
        .and_then(|s| s.cast_into::<LineState>().ok());
    Ok(Some(Line {
        items,
        renders,
        pointers,
        state,
        none: PyNone::get(py).as_ptr(),
    }))
}
