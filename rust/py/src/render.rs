//! `render_items`: conversation items rendered for one region class in one
//! call, the native half of `ctxengine.assembly.render.render_item` (ADR 0011).
//!
//! Messages, tool results and tool calls (the bulk of any history) are
//! rendered by the core (`ctxengine_core::render`: the role of each kind, the
//! content text, the envelope, the canonical render bytes, and which field
//! fills each slot, `render::plan`); this module reads each item's fields
//! into the core's values and builds the `RenderedItem` without running
//! `__init__` (as `decode_items` builds items) with its canonical cache
//! filled. Anything else comes back as `None` for the caller
//! to render (data in, data out: no callback). The native module imports
//! nothing from `ctxengine`: the caller passes the class.

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

/// The text of a str, owned (`None`: not a str, or a lone surrogate).
fn owned_str(value: &Bound<'_, PyAny>) -> Option<String> {
    Some(value.cast::<PyString>().ok()?.to_str().ok()?.to_owned())
}

/// The item's 32-byte canonical digest (filling `_cj` when it is empty).
fn digest_of(item: &Bound<'_, PyAny>) -> PyResult<[u8; 32]> {
    let read = crate::canonical::digest_of(item_canonical(item)?.as_any()).map(|(d, _)| d);
    read.ok_or_else(|| PyTypeError::new_err("an item's _cj digest is not 32 bytes"))
}

/// A render's role as one shared string per role (a render holds it; its value is all that
/// counts, and a window of renders then holds four strings, not one per item).
fn role_str<'py>(py: Python<'py>, role: &str) -> Bound<'py, PyString> {
    match role {
        "user" => intern!(py, "user").clone(),
        "assistant" => intern!(py, "assistant").clone(),
        "system" => intern!(py, "system").clone(),
        "tool" => intern!(py, "tool").clone(),
        other => PyString::new(py, other),
    }
}

/// A maker of `rendered_cls` (`RenderedItem`), checked to have the slots
/// the schema declares (`render::slots`).
fn rendered_maker<'py>(function: &str, rendered_cls: &Bound<'py, PyType>) -> PyResult<Maker<'py>> {
    let expected = render::slots();
    let slots: Vec<String> = rendered_cls.getattr("__slots__")?.extract()?;
    if slots
        .iter()
        .map(String::as_str)
        .ne(expected.iter().copied())
    {
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
                Fill::Role(role) => Slot::Fixed(role_str(py, role).into_any()),
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
            let call_id = match role {
                "tool" => Some(item.getattr(intern!(py, "call_id"))?),
                _ => None,
            };
            let call_id_str = match &call_id {
                Some(c) => Some(c.cast::<PyString>()?.to_str()?),
                None => None,
            };
            let trust_obj = item.getattr(intern!(py, "trust"))?;
            let trust = trust_obj.cast::<PyString>()?.to_str()?;
            let content = item.getattr(intern!(py, "content"))?;
            let content = content_of(&content)?;
            let text = render::content_text(&content);
            let digest = digest_of(&item)?;
            let seq_obj = item.getattr(intern!(py, "seq"))?;
            let is_error =
                call_id.is_some() && item.getattr(intern!(py, "is_error"))?.is_truthy()?;
            let made = render.render(
                region,
                &TextItem {
                    role,
                    text: &text,
                    trust,
                    call_id: call_id_str,
                    is_error,
                    seq: Seq::from(seq_i64(&seq_obj)),
                    digest: &digest,
                },
            );
            let mut values = template.fill(py, &render.text, |name, interned| match name {
                "call_id" => Ok(call_id.clone().unwrap_or_else(|| py.None().into_bound(py))),
                "seq" => Ok(seq_obj.clone()),
                "is_error" => Ok(PyBool::new(py, is_error).to_owned().into_any()),
                _ => item.getattr(interned),
            })?;
            if made {
                values[template.cache] = cache_tuple(py, &render.canonical)?;
            }
            // Strings, a bool, an int and a tuple of bytes: it can hold no cycle.
            out.append(maker.make_acyclic(values, true)?)?;
        }
        Ok(out)
    })
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
    let content = item.getattr(intern!(py, "content"))?;
    let Ok(content) = content_of(&content) else {
        return Ok(None);
    };
    let call_id = item.getattr(intern!(py, "call_id"))?;
    let Some(call) = owned_str(&call_id) else {
        return Ok(None);
    };
    let trust = item.getattr(intern!(py, "trust"))?;
    let Some(trust) = owned_str(&trust.getattr(intern!(py, "value"))?) else {
        return Ok(None);
    };
    let seq_obj = item.getattr(intern!(py, "seq"))?;
    let Some(seq) = seq_i64(&seq_obj) else {
        return Ok(None);
    };
    let is_error = item.getattr(intern!(py, "is_error"))?;
    let text = render::pointer(&content, &call, seq, is_error.is_truthy()?, &trust);
    let values = template.fill(py, &text, |name, _| {
        Ok(match name {
            "call_id" => call_id.clone(),
            "is_error" => is_error.clone(),
            _ => seq_obj.clone(),
        })
    })?;
    // Strings, a bool, an int (and later its `_cj`, two bytes): it can hold no cycle.
    Ok(Some(maker.make_acyclic(values, true)?))
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
