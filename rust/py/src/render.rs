//! `render_items` and `render_pointers`: the native half of
//! `ctxengine.assembly.render` (ADR 0011). The core renders (`ctxengine_core::render`:
//! roles, content text, envelope, canonical bytes, `render::plan`); this module reads
//! each item's fields into the core's values and builds the `RenderedItem` without
//! `__init__`, its `_cj` filled. Other kinds come back as `None` for the caller.

use std::borrow::Cow;

use ctxengine_core::decode::item::{Content, Part};
use ctxengine_core::envelope::rendered_call_canonical;
use ctxengine_core::hash::sha256;
use ctxengine_core::render::{self, Fill, Made, Seq, Shape, TextItem, TextRender};
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyList, PyString, PyType};

use crate::canonical::{cache_of, item_canonical, walker};
use crate::errors::guard;
use crate::slots::Maker;

/// A message's content as the core's value: a str, or its parts (text parts
/// and file references, told apart by their class `kind`), borrowed.
fn content_of<'a>(content: &'a Bound<'_, PyAny>) -> PyResult<Content<'a>> {
    if let Ok(s) = content.cast::<PyString>() {
        return Ok(Content::Text(Cow::Borrowed(s.to_str()?)));
    }
    let py = content.py();
    let text = |part: &Bound<'_, PyAny>, name| -> PyResult<Cow<'a, str>> {
        let value = part.getattr(name)?;
        Ok(Cow::Owned(value.cast::<PyString>()?.to_str()?.to_owned()))
    };
    let mut parts = Vec::new();
    for part in content.try_iter()? {
        let part = part?;
        let kind: String = part.get_type().getattr(intern!(py, "kind"))?.extract()?;
        parts.push(if kind == "text_part" {
            Part::Text(text(&part, intern!(py, "text"))?)
        } else {
            // A file reference's name is not part of its content text.
            Part::File {
                artifact_id: text(&part, intern!(py, "artifact_id"))?,
                media_type: text(&part, intern!(py, "media_type"))?,
                filename: None,
            }
        });
    }
    Ok(Content::Parts(parts))
}

/// An item's `seq` as a 64-bit int or `None`; `None` for anything else.
fn seq_i64(seq: &Bound<'_, PyAny>) -> Option<Option<i64>> {
    if seq.is_none() {
        return Some(None);
    }
    seq.extract().ok().map(Some)
}

/// The item's 32-byte canonical digest (filling `_cj` when it is empty).
fn digest_of(item: &Bound<'_, PyAny>) -> PyResult<[u8; 32]> {
    let read = crate::canonical::digest_of(item_canonical(item)?.as_any()).map(|(d, _)| d);
    read.ok_or_else(|| PyTypeError::new_err("an item's _cj digest is not 32 bytes"))
}

/// A maker of `rendered_cls` (`RenderedItem`), checked to have the slots
/// the schema declares (`render::slots`).
fn rendered_maker<'py>(function: &str, rendered_cls: &Bound<'py, PyType>) -> PyResult<Maker<'py>> {
    let expected = render::slots();
    let slots: Vec<String> = rendered_cls.getattr("__slots__")?.extract()?;
    if slots != expected {
        return Err(PyTypeError::new_err(format!(
            "{function}: {} does not have the slots {expected:?}",
            rendered_cls.name()?
        )));
    }
    Maker::new(rendered_cls, &expected)
}

/// A slot as a template fills it: a value every render shares, or one read
/// per item (the field's name interned once).
enum Slot<'py> {
    Fixed(Bound<'py, PyAny>),
    Text,
    Field(&'static str, Bound<'py, PyString>),
    Truth(&'static str, Bound<'py, PyString>),
}

/// A plan with the values every render of it shares made once (the region,
/// the role, the constants): per item only the text and its fields are read.
struct Template<'py> {
    plan: Vec<Fill>,
    slots: Vec<Slot<'py>>,
    /// The slot of the canonical cache.
    cache: usize,
}

impl<'py> Template<'py> {
    fn new(region: &Bound<'py, PyAny>, made: Made) -> Self {
        let py = region.py();
        let plan = render::plan(made);
        let slots = (plan.iter())
            .map(|f| match *f {
                Fill::Region => Slot::Fixed(region.clone()),
                // (Interned: a window of renders holds one string per role.)
                Fill::Role(role) => Slot::Fixed(PyString::intern(py, role).into_any()),
                Fill::False => Slot::Fixed(PyBool::new(py, false).to_owned().into_any()),
                Fill::None | Fill::Cache => Slot::Fixed(py.None().into_bound(py)),
                Fill::Text => Slot::Text,
                Fill::Field(name) => Slot::Field(name, PyString::intern(py, name)),
                Fill::Truth(name) => Slot::Truth(name, PyString::intern(py, name)),
            })
            .collect();
        let cache = slot(&plan, Fill::Cache);
        Template { plan, slots, cache }
    }

    /// The slots' values: `text` for the render's text, `read` for the
    /// item's fields (name, interned name; in slot order); the cache slot `None`.
    fn fill(
        &self,
        py: Python<'py>,
        text: &str,
        mut read: impl FnMut(&str, &Bound<'py, PyString>) -> PyResult<Bound<'py, PyAny>>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let mut values = Vec::with_capacity(self.slots.len());
        for slot in &self.slots {
            values.push(match slot {
                Slot::Fixed(v) => v.clone(),
                Slot::Text => PyString::new(py, text).into_any(),
                Slot::Field(name, interned) => read(name, interned)?,
                Slot::Truth(name, interned) => {
                    let truth = read(name, interned)?.is_truthy()?;
                    PyBool::new(py, truth).to_owned().into_any()
                }
            });
        }
        Ok(values)
    }
}

/// The slot `plan` fills with `fill`.
fn slot(plan: &[Fill], fill: Fill) -> usize {
    plan.iter().position(|f| *f == fill).unwrap_or(plan.len())
}

/// A kind's shape and how its render fills the slots.
type Planned<'py> = (Shape, Template<'py>);

/// Each item's rendered form for `region_class`, made here (messages, tool
/// results, tool calls, reasoning) or `None` (the caller renders it).
/// `rendered_cls` is `RenderedItem`.
#[pyfunction]
pub fn render_items<'py>(
    py: Python<'py>,
    items: &Bound<'py, PyAny>,
    region_class: &Bound<'py, PyString>,
    rendered_cls: &Bound<'py, PyType>,
) -> PyResult<Bound<'py, PyList>> {
    guard(py, || {
        let maker = rendered_maker("render_items", rendered_cls)?;
        let region = region_class.to_str()?;
        let region_obj = region_class.as_any();
        let out = PyList::empty(py);
        // The shape of type(item).kind and its plan, looked up once per class.
        let mut shapes: Vec<(usize, Option<Planned<'py>>)> = Vec::new();
        // The buffers every item's render is written into (then copied into its objects).
        let mut render = TextRender::default();
        for item in items.try_iter()? {
            let item = item?;
            let tp = item.get_type();
            let key = tp.as_ptr() as usize;
            let at = match shapes.iter().position(|(k, _)| *k == key) {
                Some(at) => at,
                None => {
                    let kind: String = tp.getattr(intern!(py, "kind"))?.extract()?;
                    let shape = render::shape(&kind);
                    let made = |s| (s, Template::new(region_obj, Made::Shape(s)));
                    shapes.push((key, shape.map(made)));
                    shapes.len() - 1
                }
            };
            let Some((shape, template)) = &shapes[at].1 else {
                out.append(py.None())?;
                continue;
            };
            let Shape::Text(role) = *shape else {
                // A tool call or a reasoning item: no text, the call (or the
                // provider's continuation) as it is.
                let mut values = template.fill(py, "", |_, name| item.getattr(name))?;
                if *shape == Shape::Call {
                    values[template.cache] = call_canonical(py, region, &template.plan, &values)?;
                }
                // It shares the call's arguments (a dict): the collector keeps seeing it.
                out.append(maker.make_acyclic(values, false)?)?;
                continue;
            };
            let digest = digest_of(&item)?;
            let made = read_text(&item, role, &digest, |t, seq, call_id| {
                let made = render.render(region, t);
                let values = template.fill(py, &render.text, |name, interned| match name {
                    "call_id" => Ok(call_id.map_or_else(|| py.None().into_bound(py), Bound::clone)),
                    "seq" => Ok(seq.clone()),
                    "is_error" => Ok(PyBool::new(py, t.is_error).to_owned().into_any()),
                    _ => item.getattr(interned),
                })?;
                Ok((made, values))
            });
            let (made, mut values) = made?;
            if made {
                values[template.cache] = cache_tuple(py, &render.canonical)?;
            }
            // Strings, a bool, an int and a tuple of bytes: it can hold no cycle.
            out.append(maker.make_acyclic(values, true)?)?;
        }
        Ok(out)
    })
}

/// A message's or tool result's fields read into the core's [`TextItem`]
/// (with `role`, the item's `digest`), handed to `f` with the `seq` and call
/// id objects as read.
fn read_text<'py, R>(
    item: &Bound<'py, PyAny>,
    role: &str,
    digest: &[u8; 32],
    f: impl FnOnce(&TextItem<'_>, &Bound<'py, PyAny>, Option<&Bound<'py, PyAny>>) -> PyResult<R>,
) -> PyResult<R> {
    let py = item.py();
    let call_id = match role {
        "tool" => Some(item.getattr(intern!(py, "call_id"))?),
        _ => None,
    };
    let call_id_str = match &call_id {
        Some(c) => Some(c.cast::<PyString>()?.to_str()?),
        None => None,
    };
    let trust = item.getattr(intern!(py, "trust"))?;
    let content = item.getattr(intern!(py, "content"))?;
    let content = content_of(&content)?;
    let text = render::content_text(&content);
    let seq = item.getattr(intern!(py, "seq"))?;
    let is_error = call_id.is_some() && item.getattr(intern!(py, "is_error"))?.is_truthy()?;
    let read = TextItem {
        role,
        text: &text,
        trust: trust.cast::<PyString>()?.to_str()?,
        call_id: call_id_str,
        is_error,
        seq: Seq::from(seq_i64(&seq)),
        digest,
    };
    f(&read, &seq, call_id.as_ref())
}

/// `(canonical, sha256(canonical))`, a render's `_cj` (untracked: `cache_of`).
fn cache_tuple<'py>(py: Python<'py>, canonical: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    Ok(cache_of(PyBytes::new(py, canonical), &sha256(canonical))?.into_any())
}

/// A tool call render's `_cj` (canonical bytes and digest), made here as a text
/// render's is, or `None` (left for first use: an argument the walk refuses,
/// a sequence outside the canonical range). `values` as `plan` filled them.
fn call_canonical<'py>(
    py: Python<'py>,
    region: &str,
    plan: &[Fill],
    values: &[Bound<'py, PyAny>],
) -> PyResult<Bound<'py, PyAny>> {
    let none = py.None().into_bound(py);
    let value = |name| &values[slot(plan, Fill::Field(name))];
    let (Ok(call_id), Ok(name)) = (
        value("call_id").cast::<PyString>(),
        value("name").cast::<PyString>(),
    ) else {
        return Ok(none);
    };
    let Some(seq) = seq_i64(value("seq")) else {
        return Ok(none);
    };
    let mut w = walker(py, Vec::new());
    if w.write_root(value("arguments").as_ptr()).is_err() {
        return Ok(none);
    }
    let Some(bytes) =
        rendered_call_canonical(region, call_id.to_str()?, name.to_str()?, &w.out, seq)
    else {
        return Ok(none);
    };
    cache_tuple(py, &bytes)
}

/// The pointer render of one tool result, or `None` when it is not one or
/// holds what only the caller renders (a lone surrogate, a huge sequence).
fn pointer<'py>(
    item: &Bound<'py, PyAny>,
    maker: &Maker<'py>,
    template: &Template<'py>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let py = item.py();
    let kind: String = item.get_type().getattr(intern!(py, "kind"))?.extract()?;
    if kind != "tool_result" {
        return Ok(None);
    }
    let made = read_text(item, "tool", &[0; 32], |t, seq, call_id| {
        let Some(text) = render::pointer(t) else {
            return Ok(None);
        };
        let values = template.fill(py, &text, |name, _| {
            Ok(match (name, call_id) {
                ("call_id", Some(id)) => id.clone(),
                ("is_error", _) => PyBool::new(py, t.is_error).to_owned().into_any(),
                _ => seq.clone(),
            })
        })?;
        // Strings, a bool, an int (and later its `_cj`, two bytes): it can hold no cycle.
        maker.make_acyclic(values, true).map(Some)
    });
    Ok(made.unwrap_or(None))
}

/// Each tool result's pointer render (`render_pointer`: the render a history
/// falls back to under context pressure), or `None` for the caller to make.
/// `rendered_cls` is `RenderedItem`.
#[pyfunction]
pub fn render_pointers<'py>(
    py: Python<'py>,
    items: &Bound<'py, PyAny>,
    rendered_cls: &Bound<'py, PyType>,
) -> PyResult<Bound<'py, PyList>> {
    guard(py, || {
        let maker = rendered_maker("render_pointers", rendered_cls)?;
        let region = PyString::new(py, "history").into_any();
        let template = Template::new(&region, Made::Pointer);
        let out = PyList::empty(py);
        for item in items.try_iter()? {
            match pointer(&item?, &maker, &template)? {
                Some(rendered) => out.append(rendered)?,
                None => out.append(py.None())?,
            }
        }
        Ok(out)
    })
}
