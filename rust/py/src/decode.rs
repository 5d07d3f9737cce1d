//! `decode_items`: stored conversation-item payloads into the package's own
//! frozen item objects, in one call (ADR 0011).
//!
//! The core parses and checks each payload and writes the item's canonical
//! bytes; this file only builds Python values. It imports nothing from
//! `ctxengine`: the caller passes the item classes, the content part classes
//! and the trust members. An instance is allocated without running its
//! `__init__` (the core has already made every check the constructor makes)
//! and each slot is set as `object.__setattr__` would.

use ctxengine_core::decode::item::Value;
use ctxengine_core::decode::{
    decode_item, Canonical, Content, Item, Json, Members, Names, Part, TRUST_LEVELS,
};
use ctxengine_core::schema::{self, Record};
use pyo3::exceptions::{PyTypeError, PyValueError};
use std::cell::RefCell;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyList, PyString, PyTuple, PyType};

use crate::canonical::cache_of;
use crate::errors::guard;
use crate::slots::{untracked, Maker};

/// One class: the fields the core fills, then every other slot with its value
/// from `extra` (or None).
struct Class<'py> {
    maker: Maker<'py>,
    others: Vec<Bound<'py, PyAny>>,
}

impl<'py> Class<'py> {
    fn new(
        cls: &Bound<'py, PyAny>,
        fields: &[&str],
        extra: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Self> {
        let py = cls.py();
        let cls = cls.cast::<PyType>()?;
        let slots: Vec<String> = cls.getattr("__slots__")?.extract()?;
        for f in fields {
            if !slots.iter().any(|s| s == f) {
                return Err(PyTypeError::new_err(format!(
                    "{} has no slot {f:?}",
                    cls.name()?
                )));
            }
        }
        let mut names: Vec<&str> = fields.to_vec();
        let mut others = Vec::new();
        for s in slots.iter().filter(|s| !fields.contains(&s.as_str())) {
            names.push(s);
            others.push(match extra {
                Some(d) => d.get_item(s)?.unwrap_or_else(|| py.None().into_bound(py)),
                None => py.None().into_bound(py),
            });
        }
        Ok(Class {
            maker: Maker::new(cls, &names)?,
            others,
        })
    }

    /// A new instance with `values` in `fields` order and the other slots set
    /// (untracked by the collector when it can hold no cycle: see `Maker`).
    fn make(&self, mut values: Vec<Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
        values.extend(self.others.iter().cloned());
        let acyclic = values.iter().all(atomic);
        self.maker.make_acyclic(values, acyclic)
    }
}

/// A value that cannot lead back to its holder: a str, int, float, bool or None,
/// bytes, a tuple of such, or an instance this module made untracked.
fn atomic(value: &Bound<'_, PyAny>) -> bool {
    let p = value.as_ptr();
    // SAFETY: `p` is borrowed from `value`, alive for the call; the checks read its type's flags.
    unsafe {
        if ffi::PyUnicode_CheckExact(p) != 0
            || ffi::PyLong_Check(p) != 0
            || ffi::PyFloat_CheckExact(p) != 0
            || ffi::PyBytes_CheckExact(p) != 0
            || p == ffi::Py_None()
        {
            return true;
        }
        if ffi::PyTuple_CheckExact(p) != 0 {
            return value
                .cast::<PyTuple>()
                .is_ok_and(|t| t.iter().all(|v| atomic(&v)));
        }
        // A trust member (an enum, tracked but module-level and immutable) or an
        // instance made untracked here.
        ffi::PyUnicode_Check(p) != 0
            || ffi::PyObject_IS_GC(p) == 0
            || ffi::PyObject_GC_IsTracked(p) == 0
    }
}

/// Short strings that recur across a batch, each made once (`Names`).
struct Memo<'py>(RefCell<Names<Bound<'py, PyString>>>);

impl<'py> Memo<'py> {
    fn get(&self, py: Python<'py>, s: &str) -> Bound<'py, PyAny> {
        let made = self.0.borrow_mut().get(s, |s| PyString::new(py, s));
        made.into_any()
    }
}

struct Builder<'py> {
    py: Python<'py>,
    items: Vec<Class<'py>>,
    text_part: Class<'py>,
    file_ref: Class<'py>,
    trust: Vec<Bound<'py, PyAny>>,
    memo: Memo<'py>,
}

impl<'py> Builder<'py> {
    fn str(&self, s: &str) -> Bound<'py, PyAny> {
        PyString::new(self.py, s).into_any()
    }

    /// A string likely to recur in the batch (a name, not a text).
    fn name(&self, s: &str) -> Bound<'py, PyAny> {
        self.memo.get(self.py, s)
    }

    fn opt_name(&self, s: &Option<impl AsRef<str>>) -> Bound<'py, PyAny> {
        match s {
            Some(s) => self.name(s.as_ref()),
            None => self.py.None().into_bound(self.py),
        }
    }

    fn json(&self, v: &Json<'_>) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        Ok(match v {
            Json::Null => py.None().into_bound(py),
            Json::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
            Json::Int(i) => i.into_pyobject(py)?.into_any(),
            Json::Float(f) => f.into_pyobject(py)?.into_any(),
            Json::Str(s) => self.name(s),
            Json::Array(values) => {
                let list = PyList::empty(py);
                for value in values {
                    list.append(self.json(value)?)?;
                }
                list.into_any()
            }
            Json::Object(members) => self.dict(members)?.into_any(),
        })
    }

    fn dict(&self, members: &Members<'_>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(self.py);
        for (k, v) in members {
            d.set_item(self.name(k), self.json(v)?)?;
        }
        Ok(d)
    }

    fn content(&self, c: &Content<'_>) -> PyResult<Bound<'py, PyAny>> {
        match c {
            Content::Text(s) => Ok(self.str(s)),
            Content::Parts(parts) => {
                let mut out = Vec::with_capacity(parts.len());
                for p in parts {
                    out.push(match p {
                        Part::Text(t) => self.text_part.make(vec![self.str(t)])?,
                        Part::File {
                            artifact_id,
                            media_type,
                            filename,
                        } => self.file_ref.make(vec![
                            self.str(artifact_id),
                            self.name(media_type),
                            self.opt_name(filename),
                        ])?,
                    });
                }
                let parts = PyTuple::new(self.py, out)?.into_any();
                // Parts of text and file references: atoms all the way down.
                Ok(if atomic(&parts) {
                    untracked(parts)
                } else {
                    parts
                })
            }
        }
    }

    fn item(
        &self,
        item: &Item<'_>,
        seq: &Bound<'py, PyAny>,
        cache: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // The values in the schema's field order (`Item::fields`).
        let mut values = Vec::with_capacity(8);
        for v in item.fields() {
            values.push(match v {
                Value::Text(s) => self.str(s),
                Value::Name(s) => self.name(s),
                Value::OptName(s) => self.opt_name(&s),
                Value::Content(c) => self.content(c)?,
                Value::Trust(t) => self.trust[t as usize].clone(),
                Value::Members(m) => self.dict(m)?.into_any(),
                Value::Bool(b) => PyBool::new(self.py, b).to_owned().into_any(),
            });
        }
        values.push(seq.clone());
        values.push(cache);
        let kind = item.kind();
        let index = schema::ITEMS
            .iter()
            .position(|r| r.kind == kind)
            .unwrap_or_default();
        self.items[index].make(values)
    }
}

/// The slots the decoder fills: the record's fields in constructor order
/// (the schema's), then `_cj` for an item.
fn fields_of(r: &Record, item: bool) -> Vec<&'static str> {
    r.names().chain(item.then_some("_cj")).collect()
}

/// A batch decoder: the classes looked up once, names shared across the batch.
pub struct Decoder<'py> {
    b: Builder<'py>,
}

impl<'py> Decoder<'py> {
    /// `classes` maps each item kind to its class; `parts` is `(TextPart,
    /// FileRef)`; `trust` the seven trust members in declaration order;
    /// `extra` values for the item slots the decoder does not fill (default None).
    pub fn new(
        py: Python<'py>,
        classes: &Bound<'py, PyDict>,
        parts: &(Bound<'py, PyAny>, Bound<'py, PyAny>),
        trust: &Bound<'py, PyAny>,
        extra: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Self> {
        let trust: Vec<Bound<'py, PyAny>> = trust.extract()?;
        if trust.len() != TRUST_LEVELS.len() {
            return Err(PyValueError::new_err(format!(
                "trust: expected the {} trust levels, got {}",
                TRUST_LEVELS.len(),
                trust.len()
            )));
        }
        let mut items = Vec::with_capacity(schema::ITEMS.len());
        for r in schema::ITEMS.iter() {
            let cls = classes.get_item(r.kind)?.ok_or_else(|| {
                PyValueError::new_err(format!("classes: no class for {:?}", r.kind))
            })?;
            items.push(Class::new(&cls, &fields_of(r, true), extra)?);
        }
        Ok(Decoder {
            b: Builder {
                py,
                items,
                text_part: Class::new(&parts.0, &fields_of(&schema::PARTS[0], false), None)?,
                file_ref: Class::new(&parts.1, &fields_of(&schema::PARTS[1], false), None)?,
                trust,
                memo: Memo(RefCell::default()),
            },
        })
    }

    /// The item of event `seq` (`seq_obj`, the same int) from its stored payload
    /// text: `Ok(Err(reason))` when the text does not decode.
    pub fn item(
        &self,
        text: &str,
        seq: i64,
        seq_obj: &Bound<'py, PyAny>,
    ) -> PyResult<Result<Bound<'py, PyAny>, String>> {
        let py = self.b.py;
        let decoded = match decode_item(text, seq) {
            Ok(d) => d,
            Err(reason) => return Ok(Err(reason)),
        };
        let cache = match &decoded.cache {
            Some((bytes, digest)) => cache_of(joined(py, bytes)?, digest)?.into_any(),
            None => py.None().into_bound(py),
        };
        self.b.item(&decoded.item, seq_obj, cache).map(Ok)
    }
}

/// Decode stored item payloads (`{"item": {...}}`, canonical JSON text) as
/// the items of events `seqs`. Returns `(items, None, None)`, or at the
/// first payload that does not decode, `(the items before it, its index,
/// the reason)`. `classes`, `parts`, `trust` and `extra` as [`Decoder::new`].
#[pyfunction]
#[pyo3(signature = (payloads, seqs, classes, parts, trust, extra = None))]
pub fn decode_items<'py>(
    py: Python<'py>,
    payloads: &Bound<'py, PyAny>,
    seqs: &Bound<'py, PyAny>,
    classes: &Bound<'py, PyDict>,
    parts: (Bound<'py, PyAny>, Bound<'py, PyAny>),
    trust: &Bound<'py, PyAny>,
    extra: Option<&Bound<'py, PyDict>>,
) -> PyResult<(Bound<'py, PyList>, Option<usize>, Option<String>)> {
    guard(py, || {
        let decoder = Decoder::new(py, classes, &parts, trust, extra)?;
        let payloads = payloads.cast::<PyList>()?;
        let seqs = seqs.cast::<PyList>()?;
        if payloads.len() != seqs.len() {
            return Err(PyValueError::new_err(format!(
                "{} payloads for {} sequences",
                payloads.len(),
                seqs.len()
            )));
        }
        let out = PyList::empty(py);
        for (i, (payload, seq_obj)) in payloads.iter().zip(seqs.iter()).enumerate() {
            let seq: i64 = seq_obj.extract()?;
            let text = match payload.cast::<PyString>().map(|s| s.to_str()) {
                Ok(Ok(t)) => t,
                _ => return Ok((out, Some(i), Some(not_canonical()))),
            };
            match decoder.item(text, seq, &seq_obj)? {
                Ok(item) => out.append(item)?,
                Err(reason) => return Ok((out, Some(i), Some(reason))),
            }
        }
        Ok((out, None, None))
    })
}

/// A bytes object holding the pieces joined, written in place (no copy in between).
fn joined<'py>(py: Python<'py>, bytes: &Canonical<'_>) -> PyResult<Bound<'py, PyBytes>> {
    let n = bytes.len();
    // SAFETY: a new bytes object of `n` uninitialized bytes, filled below before anyone sees it.
    unsafe {
        let obj = ffi::PyBytes_FromStringAndSize(std::ptr::null(), n as ffi::Py_ssize_t);
        let obj = Bound::from_owned_ptr_or_err(py, obj)?;
        let mut at = ffi::PyBytes_AsString(obj.as_ptr()) as *mut u8;
        for piece in bytes.pieces() {
            // SAFETY: the object holds exactly `n` bytes, the pieces' total.
            std::ptr::copy_nonoverlapping(piece.as_ptr(), at, piece.len());
            at = at.add(piece.len());
        }
        Ok(obj.cast_into_unchecked())
    }
}

fn not_canonical() -> String {
    ctxengine_core::decode::REASON_NOT_CANONICAL.to_owned()
}
