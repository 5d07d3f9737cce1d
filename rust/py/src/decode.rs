//! `decode_items`: stored conversation-item payloads into the package's own
//! frozen item objects, in one call (ADR 0011).
//!
//! The core parses and checks each payload and writes the item's canonical
//! bytes (`ctxengine_core::decode`); this file only turns the core's values
//! into Python ones, field by field in the schema's order, and builds each
//! object with the one writer (`slots::Maker`). It imports nothing from
//! `ctxengine`: the caller passes the item classes, the content part classes
//! and the trust members.

use std::cell::RefCell;

use ctxengine_core::decode::item::Value;
use ctxengine_core::decode::{decode_item, Content, Json, Members, Names, TRUST_LEVELS};
use ctxengine_core::schema::{self, Record};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::canonical::cache_of;
use crate::errors::guard;
use crate::slots::{atomic, untracked, Maker};

/// A batch decoder: the classes looked up once, short names made once
/// across the batch (`Names`).
struct Decoder<'py> {
    py: Python<'py>,
    /// One maker per `schema::ITEMS` record, then `TextPart`, `FileRef`.
    makers: Vec<Maker<'py>>,
    trust: Vec<Bound<'py, PyAny>>,
    names: RefCell<Names<Bound<'py, PyString>>>,
}

impl<'py> Decoder<'py> {
    /// A new instance of `makers[at]` holding `values`, untracked when it can hold no cycle.
    fn make(&self, at: usize, values: Vec<Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
        let acyclic = values.iter().all(atomic);
        self.makers[at].make_acyclic(values, acyclic)
    }

    fn str(&self, s: &str) -> Bound<'py, PyAny> {
        PyString::new(self.py, s).into_any()
    }

    /// A string likely to recur in the batch (a name, not a text).
    fn name(&self, s: &str) -> Bound<'py, PyAny> {
        self.names
            .borrow_mut()
            .get(s, |s| PyString::new(self.py, s))
            .into_any()
    }

    fn opt_name(&self, s: Option<&str>) -> Bound<'py, PyAny> {
        s.map_or_else(|| self.py.None().into_bound(self.py), |s| self.name(s))
    }

    fn json(&self, v: &Json<'_>) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        Ok(match v {
            Json::Null => py.None().into_bound(py),
            Json::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
            Json::Int(i) => i.into_pyobject(py)?.into_any(),
            Json::Float(f) => f.into_pyobject(py)?.into_any(),
            Json::Str(s) => self.name(s),
            Json::Array(values) => PyList::new(
                py,
                values
                    .iter()
                    .map(|v| self.json(v))
                    .collect::<PyResult<Vec<_>>>()?,
            )?
            .into_any(),
            Json::Object(members) => self.dict(members)?,
        })
    }

    fn dict(&self, members: &Members<'_>) -> PyResult<Bound<'py, PyAny>> {
        let d = PyDict::new(self.py);
        for (k, v) in members {
            d.set_item(self.name(k), self.json(v)?)?;
        }
        Ok(d.into_any())
    }

    fn content(&self, c: &Content<'_>) -> PyResult<Bound<'py, PyAny>> {
        let parts = match c {
            Content::Text(s) => return Ok(self.str(s)),
            Content::Parts(parts) => parts,
        };
        let n = schema::ITEMS.len();
        let parts = (parts.iter()).map(|p| self.make(n + p.index(), self.values(p.fields())?));
        let parts = PyTuple::new(self.py, parts.collect::<PyResult<Vec<_>>>()?)?.into_any();
        // Parts of text and file references: atoms all the way down.
        Ok(if atomic(&parts) {
            untracked(parts)
        } else {
            parts
        })
    }

    /// Each field's value as Python's.
    fn values(&self, fields: Vec<Value<'_, '_>>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let values = fields.into_iter().map(|v| match v {
            Value::Text(s) => Ok(self.str(s)),
            Value::Name(s) => Ok(self.name(s)),
            Value::OptName(s) => Ok(self.opt_name(s)),
            Value::Content(c) => self.content(c),
            Value::Trust(t) => Ok(self.trust[t as usize].clone()),
            Value::Members(m) => self.dict(m),
            Value::Bool(b) => Ok(PyBool::new(self.py, b).to_owned().into_any()),
        });
        values.collect()
    }

    /// The item of event `seq` (`seq_obj`, the same int) from its stored payload
    /// text: `Ok(Err(reason))` when the text does not decode.
    fn item(
        &self,
        text: &str,
        seq: i64,
        seq_obj: Bound<'py, PyAny>,
    ) -> PyResult<Result<Bound<'py, PyAny>, String>> {
        let py = self.py;
        let decoded = match decode_item(text, seq) {
            Ok(d) => d,
            Err(reason) => return Ok(Err(reason)),
        };
        // The values in the schema's field order (`Item::fields`), then `seq` and `_cj`.
        let mut values = self.values(decoded.item.fields())?;
        values.push(seq_obj);
        values.push(match &decoded.cache {
            Some((bytes, digest)) => {
                let joined = PyBytes::new_with(py, bytes.len(), |mut out| {
                    for piece in bytes.pieces() {
                        let (head, rest) = out.split_at_mut(piece.len());
                        head.copy_from_slice(piece);
                        out = rest;
                    }
                    Ok(())
                })?;
                cache_of(joined, digest)?.into_any()
            }
            None => py.None().into_bound(py),
        });
        self.make(decoded.item.index(), values).map(Ok)
    }
}

/// Decode stored item payloads (`{"item": {...}}`, canonical JSON text) as
/// the items of events `seqs`. Returns `(items, None, None)`, or at the
/// first payload that does not decode, `(the items before it, its index,
/// the reason)`. `classes` maps each item kind to its class; `parts` is
/// `(TextPart, FileRef)`; `trust` the seven trust members in declaration
/// order; `extra` values for the item slots the decoder does not fill
/// (default None).
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
        let trust: Vec<Bound<'py, PyAny>> = trust.extract()?;
        if trust.len() != TRUST_LEVELS.len() {
            let (want, got) = (TRUST_LEVELS.len(), trust.len());
            return Err(PyValueError::new_err(format!(
                "trust: expected the {want} trust levels, got {got}"
            )));
        }
        // The slots the decoder fills: the record's fields in constructor order, then `_cj` for an item.
        let fields = |r: &Record, item: bool| -> Vec<&str> {
            r.names().chain(item.then_some("_cj")).collect()
        };
        let mut makers = Vec::with_capacity(schema::ITEMS.len() + 2);
        for r in schema::ITEMS.iter() {
            let cls = (classes.get_item(r.kind)?).ok_or_else(|| {
                PyValueError::new_err(format!("classes: no class for {:?}", r.kind))
            })?;
            makers.push(Maker::filling(&cls, &fields(r, true), extra)?);
        }
        makers.push(Maker::filling(
            &parts.0,
            &fields(&schema::PARTS[0], false),
            None,
        )?);
        makers.push(Maker::filling(
            &parts.1,
            &fields(&schema::PARTS[1], false),
            None,
        )?);
        let decoder = Decoder {
            py,
            makers,
            trust,
            names: RefCell::default(),
        };
        let (payloads, seqs) = (payloads.cast::<PyList>()?, seqs.cast::<PyList>()?);
        if payloads.len() != seqs.len() {
            let (p, s) = (payloads.len(), seqs.len());
            return Err(PyValueError::new_err(format!(
                "{p} payloads for {s} sequences"
            )));
        }
        let out = PyList::empty(py);
        for (i, (payload, seq_obj)) in payloads.iter().zip(seqs.iter()).enumerate() {
            let seq: i64 = seq_obj.extract()?;
            let decoded = match payload.cast::<PyString>().map(|s| s.to_str()) {
                Ok(Ok(text)) => decoder.item(text, seq, seq_obj)?,
                _ => Err(ctxengine_core::decode::REASON_NOT_CANONICAL.to_owned()),
            };
            match decoded {
                Ok(item) => out.append(item)?,
                Err(reason) => return Ok((out, Some(i), Some(reason))),
            }
        }
        Ok((out, None, None))
    })
}
