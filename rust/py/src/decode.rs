//! `decode_items`: stored conversation-item payloads into the package's own
//! frozen item objects, in one call (ADR 0011). The core parses, checks and
//! writes each item's canonical bytes (`ctxengine_core::decode`); this file
//! turns the core's values, field by field in the schema's order, into
//! Python ones and builds each object with `slots::Maker`. The caller passes
//! the item classes, the content part classes and the trust members.

use ctxengine_core::decode::item::{Part, Value};
use ctxengine_core::decode::{decode_item, Content, Json, Members, TRUST_LEVELS};
use ctxengine_core::schema::{self, Record};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::canonical::cache_of;
use crate::errors::guard;
use crate::slots::{atomic, untracked, Maker};

struct Decoder<'py> {
    py: Python<'py>,
    /// One maker per `schema::ITEMS` record, then one per `schema::PARTS` record.
    makers: Vec<Maker<'py>>,
    trust: Vec<Bound<'py, PyAny>>,
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

    fn json(&self, v: &Json<'_>) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        Ok(match v {
            Json::Null => py.None().into_bound(py),
            Json::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
            Json::Int(i) => i.into_pyobject(py)?.into_any(),
            Json::Float(f) => f.into_pyobject(py)?.into_any(),
            Json::Str(s) => self.str(s),
            Json::Array(values) => {
                let values = values.iter().map(|v| self.json(v));
                PyList::new(py, values.collect::<PyResult<Vec<_>>>()?)?.into_any()
            }
            Json::Object(members) => self.dict(members)?,
        })
    }

    fn dict(&self, members: &Members<'_>) -> PyResult<Bound<'py, PyAny>> {
        let d = PyDict::new(self.py);
        for (k, v) in members {
            d.set_item(self.str(k), self.json(v)?)?;
        }
        Ok(d.into_any())
    }

    fn content(&self, parts: &[Part<'_>]) -> PyResult<Bound<'py, PyAny>> {
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

    /// Each field's value as Python's (the one table reader).
    fn values(&self, fields: Vec<Value<'_, '_>>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let py = self.py;
        let values = fields.into_iter().map(|v| match v {
            Value::Text(s) | Value::Name(s) => Ok(self.str(s)),
            Value::OptName(s) => Ok(s.map_or_else(|| py.None().into_bound(py), |s| self.str(s))),
            Value::Content(Content::Text(s)) => Ok(self.str(s)),
            Value::Content(Content::Parts(parts)) => self.content(parts),
            Value::Trust(t) => Ok(self.trust[t as usize].clone()),
            Value::Members(m) => self.dict(m),
            Value::Bool(b) => Ok(PyBool::new(py, b).to_owned().into_any()),
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
        // The schema's fields (`Item::fields`), then `seq` and `_cj`.
        let mut values = self.values(decoded.item.fields())?;
        values.push(seq_obj);
        values.push(match &decoded.cache {
            Some((bytes, digest)) => {
                let joined = PyBytes::new_with(py, bytes.len(), |out| {
                    bytes.copy_to(out);
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
            let message = format!("trust: expected the {want} trust levels, got {got}");
            return Err(PyValueError::new_err(message));
        }
        // Each maker fills the record's fields in constructor order, then an item's `_cj`.
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
        for (cls, r) in [parts.0, parts.1].iter().zip(schema::PARTS.iter()) {
            makers.push(Maker::filling(cls, &fields(r, false), None)?);
        }
        let decoder = Decoder { py, makers, trust };
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
