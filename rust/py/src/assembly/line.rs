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
use super::line_state::{Entry, LineState};
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
    /// Whether entry `i` holds the very objects of `e` (addresses only).
    pub fn same(&self, i: usize, e: &Entry) -> bool {
        let pointer = e.pointer.as_ref().map_or(self.none, Py::as_ptr);
        self.items.ptr(i) == e.item.as_ptr()
            && self.renders.ptr(i) == e.render.as_ptr()
            && self.pointers.ptr(i) == pointer
    }

    /// Fetch entry `i`'s render and pointer into the CPU's caches.
    pub fn prefetch(&self, i: usize) {
        crate::items::prefetch(self.renders.ptr(i));
        crate::items::prefetch(self.pointers.ptr(i));
    }

    /// What calls read of this line before (`RenderLine.state`).
    pub fn state(&self) -> Option<&Bound<'py, LineState>> {
        self.state.as_ref()
    }

    /// The render and pointer the line holds for history item `i` when its
    /// entry is the very `item` and holds a render (and, for a tool
    /// result, a pointer).
    pub fn held(&self, i: usize, item: &Bound<'py, PyAny>, result: bool) -> Option<Held<'py>> {
        if self.items.ptr(i) != item.as_ptr() {
            return None;
        }
        let render = self.renders.get(i).filter(|r| !r.is_none())?;
        let pointer = self.pointers.get(i).filter(|p| !p.is_none());
        if result && pointer.is_none() {
            return None;
        }
        Some((render, pointer))
    }
}

/// A render and its pointer (`None`: none).
pub type Held<'py> = (Bound<'py, PyAny>, Option<Bound<'py, PyAny>>);

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
