//! `TokenEstimator`: a frozen pyclass whose state (profiles, memo,
//! reconciled sums) lives behind one mutex. A batch is looked up under a
//! single lock; Python code never runs while the lock is held.

use std::sync::{Mutex, MutexGuard};

use ctxengine_core::estimate::{EstimatorState, Profile, Reconciled};
use ctxengine_core::CoreError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyMapping, PyString, PyTuple, PyType};

use crate::arguments;
use crate::batch::{scan, Facts, Items, Types, Want};
use crate::errors::{estimator_error, guard, IntoPy};

/// An int that is not a bool.
fn is_int(obj: &Bound<'_, PyAny>) -> bool {
    let ptr = obj.as_ptr();
    unsafe { ffi::PyLong_Check(ptr) != 0 && ffi::PyBool_Check(ptr) == 0 }
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".to_owned())
}

fn repr(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    Ok(obj.repr()?.to_string_lossy().into_owned())
}

/// A positive finite number (an int or a float, not a bool), as a float.
fn check_bytes_per_token(py: Python<'_>, value: &Bound<'_, PyAny>, place: &str) -> PyResult<f64> {
    let ptr = value.as_ptr();
    let numeric = unsafe {
        ffi::PyBool_Check(ptr) == 0 && (ffi::PyFloat_Check(ptr) != 0 || ffi::PyLong_Check(ptr) != 0)
    };
    if !numeric {
        return Err(estimator_error(
            py,
            format!("{place}: expected a number, got {}", type_name(value)),
        ));
    }
    let number: f64 = value.extract()?;
    if !(number.is_finite() && number > 0.0) {
        return Err(estimator_error(
            py,
            format!(
                "{place}: must be a positive finite number, got {}",
                repr(value)?
            ),
        ));
    }
    Ok(number)
}

/// A non-negative int (not a bool).
fn check_count(py: Python<'_>, value: &Bound<'_, PyAny>, place: &str) -> PyResult<i64> {
    if !is_int(value) {
        return Err(estimator_error(
            py,
            format!("{place}: expected an int, got {}", type_name(value)),
        ));
    }
    match value.extract::<i64>() {
        Ok(v) if v >= 0 => Ok(v),
        Ok(v) => Err(estimator_error(
            py,
            format!("{place}: must not be negative, got {v}"),
        )),
        Err(_) => Err(estimator_error(
            py,
            format!("{place}: out of range, got {}", repr(value)?),
        )),
    }
}

/// The `(key, value)` pairs of a mapping.
type Members<'py> = Vec<(Bound<'py, PyAny>, Bound<'py, PyAny>)>;

/// `(key, value)` pairs of a dict or any `collections.abc.Mapping`, or
/// `None` when `obj` is not a mapping.
fn mapping_items<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Option<Members<'py>>> {
    if let Ok(d) = obj.cast::<PyDict>() {
        return Ok(Some(d.iter().collect()));
    }
    if obj.cast::<PyMapping>().is_err() {
        return Ok(None);
    }
    let mut out = Vec::new();
    for pair in obj.call_method0("items")?.try_iter()? {
        let (k, v): (Bound<'py, PyAny>, Bound<'py, PyAny>) = pair?.extract()?;
        out.push((k, v));
    }
    Ok(Some(out))
}

/// A list or tuple of exactly two elements.
fn two<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Option<(Bound<'py, PyAny>, Bound<'py, PyAny>)>> {
    let seq = obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>();
    if seq && obj.len()? == 2 {
        return Ok(Some((obj.get_item(0)?, obj.get_item(1)?)));
    }
    Ok(None)
}

fn check_profiles(
    py: Python<'_>,
    profiles: &Bound<'_, PyAny>,
    place: &str,
) -> PyResult<Vec<(String, Profile)>> {
    let mut out: Vec<(String, Profile)> = Vec::new();
    if profiles.is_none() {
        return Ok(out);
    }
    let Some(items) = mapping_items(profiles)? else {
        return Err(estimator_error(
            py,
            format!("{place}: expected a mapping, got {}", type_name(profiles)),
        ));
    };
    for (prefix, profile) in items {
        if !prefix.is_instance_of::<PyString>() {
            return Err(estimator_error(
                py,
                format!("{place}: prefix {} is not a string", repr(&prefix)?),
            ));
        }
        let prefix_repr = repr(&prefix)?;
        let Some((bpt, framing)) = two(&profile)? else {
            return Err(estimator_error(
                py,
                format!("{place}[{prefix_repr}]: expected (bytes_per_token, framing_tokens)"),
            ));
        };
        let bpt =
            check_bytes_per_token(py, &bpt, &format!("{place}[{prefix_repr}].bytes_per_token"))?;
        let framing = check_count(
            py,
            &framing,
            &format!("{place}[{prefix_repr}].framing_tokens"),
        )?;
        let key = prefix.str()?;
        let Ok(key) = key.to_str().map(str::to_owned) else {
            return Err(estimator_error(
                py,
                format!("{place}: lone surrogate in prefix {prefix_repr}"),
            ));
        };
        let profile = Profile::new(bpt, framing).into_py(py)?;
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = profile,
            None => out.push((key, profile)),
        }
    }
    Ok(out)
}

/// Interned ids for [`TokenEstimator::raw_one`] (ids never change).
#[derive(Default)]
pub struct Resolved {
    model: Option<(u32, Profile)>,
    kinds: Vec<u32>,
}

/// Conservative per-model token estimates with a bounded LRU memo and
/// reconciled correction factors (ADR 0001).
#[pyclass(frozen, module = "ctxengine._core")]
pub struct TokenEstimator {
    state: Mutex<EstimatorState>,
}

impl TokenEstimator {
    pub fn lock(&self) -> MutexGuard<'_, EstimatorState> {
        // A panic cannot happen while the lock is held; recover anyway.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Raw estimates of gathered facts, under one lock.
    pub fn raw_batch(
        &self,
        model_id: &str,
        kinds: &[String],
        facts: &[Facts],
    ) -> Result<Vec<i64>, CoreError> {
        let mut st = self.lock();
        let (model, profile) = st.model(model_id);
        let kind_ids: Vec<u32> = kinds.iter().map(|k| st.kind(k)).collect();
        facts
            .iter()
            .map(|f| st.raw(model, profile, kind_ids[f.kind], &f.digest, || f.len()))
            .collect()
    }

    /// Raw estimates (into `raws`) and the model's reconciled sums, under one lock.
    pub fn raw_batch_into(
        &self,
        model_id: &str,
        kinds: &[String],
        facts: &[Facts],
        raws: &mut Vec<i64>,
    ) -> Result<Reconciled, CoreError> {
        raws.clear();
        raws.reserve(facts.len());
        let mut st = self.lock();
        st.memo_mut().reserve(facts.len());
        let (model, profile) = st.model(model_id);
        let kind_ids: Vec<u32> = kinds.iter().map(|k| st.kind(k)).collect();
        for f in facts {
            raws.push(st.raw(model, profile, kind_ids[f.kind], &f.digest, || f.len())?);
        }
        Ok(st.reconciled(model_id))
    }

    /// One more raw estimate after a batch (`raw_batch_into`), with the
    /// model and kind ids resolved once per call instead of per value.
    pub fn raw_one(
        &self,
        resolved: &mut Resolved,
        model_id: &str,
        kinds: &[String],
        fact: &Facts,
    ) -> Result<i64, CoreError> {
        let mut st = self.lock();
        let (model, profile) = match resolved.model {
            Some(m) => m,
            None => *resolved.model.insert(st.model(model_id)),
        };
        while resolved.kinds.len() < kinds.len() {
            let id = st.kind(&kinds[resolved.kinds.len()]);
            resolved.kinds.push(id);
        }
        st.raw(
            model,
            profile,
            resolved.kinds[fact.kind],
            &fact.digest,
            || fact.len(),
        )
    }

    /// The facts of `values`, their kinds indexing `types.kinds`.
    pub(crate) fn facts_of<'py>(
        py: Python<'py>,
        types: &mut Types,
        values: &Items<'py>,
    ) -> PyResult<Vec<Facts>> {
        let want = Want {
            pairs: None,
            facts: true,
        };
        let mut s = scan(py, types, values, want)?;
        s.finish_facts(py, types)?;
        Ok(std::mem::take(&mut s.buf.facts))
    }

    fn sum_corrected<'py>(
        &self,
        py: Python<'py>,
        values: &Items<'py>,
        model_id: &str,
    ) -> PyResult<i128> {
        let mut types = Types::new(py)?;
        let facts = Self::facts_of(py, &mut types, values)?;
        let mut raws = Vec::new();
        let sums = self
            .raw_batch_into(model_id, &types.kinds, &facts, &mut raws)
            .into_py(py)?;
        let mut total: i64 = 0;
        for r in raws {
            total = total.checked_add(r).ok_or_else(|| {
                estimator_error(py, "raw estimate sum overflows a 64-bit integer")
            })?;
        }
        Ok(ctxengine_core::estimate::corrected(
            total,
            sums.estimated,
            sums.actual,
        ))
    }

    fn reconcile_checked(
        &self,
        py: Python<'_>,
        model_id: &Bound<'_, PyAny>,
        estimated: &Bound<'_, PyAny>,
        actual: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let model_id = arguments::model_id(model_id)?;
        let e = if is_int(estimated) {
            estimated.extract::<i64>().ok()
        } else {
            None
        };
        let Some(e) = e.filter(|v| *v > 0) else {
            return Err(estimator_error(
                py,
                format!(
                    "estimated: expected a positive int, got {}",
                    repr(estimated)?
                ),
            ));
        };
        let a = if is_int(actual) {
            actual.extract::<i64>().ok()
        } else {
            None
        };
        let Some(a) = a.filter(|v| *v >= 0) else {
            return Err(estimator_error(
                py,
                format!("actual: expected a non-negative int, got {}", repr(actual)?),
            ));
        };
        self.lock().reconcile(model_id, e, a).into_py(py)
    }

    fn corrected_checked(
        &self,
        py: Python<'_>,
        raw_sum: &Bound<'_, PyAny>,
        model_id: &Bound<'_, PyAny>,
    ) -> PyResult<i128> {
        if !is_int(raw_sum) {
            return Err(estimator_error(
                py,
                format!("raw_sum: expected an int, got {}", type_name(raw_sum)),
            ));
        }
        let Ok(raw_sum) = raw_sum.extract::<i64>() else {
            return Err(estimator_error(
                py,
                format!(
                    "raw_sum: out of range, got {}",
                    arguments::int_repr(raw_sum)?
                ),
            ));
        };
        let model_id = arguments::model_id(model_id)?;
        Ok(self.lock().corrected(raw_sum, model_id))
    }

    fn from_parts(
        py: Python<'_>,
        bytes_per_token: &Bound<'_, PyAny>,
        framing_tokens: &Bound<'_, PyAny>,
        profiles: &Bound<'_, PyAny>,
        memo_capacity: &Bound<'_, PyAny>,
        place: &str,
    ) -> PyResult<Self> {
        let bpt = check_bytes_per_token(py, bytes_per_token, &format!("{place}bytes_per_token"))?;
        let framing = check_count(py, framing_tokens, &format!("{place}framing_tokens"))?;
        let profiles = check_profiles(py, profiles, &format!("{place}profiles"))?;
        let capacity = check_count(py, memo_capacity, &format!("{place}memo_capacity"))?;
        let default = Profile::new(bpt, framing).into_py(py)?;
        Ok(TokenEstimator {
            state: Mutex::new(EstimatorState::new(default, profiles, capacity as usize)),
        })
    }
}

const SNAPSHOT_KEYS: [&str; 6] = [
    "bytes_per_token",
    "corrections",
    "framing_tokens",
    "memo_capacity",
    "profiles",
    "version",
];

#[pymethods]
impl TokenEstimator {
    #[new]
    #[pyo3(
        signature = (*, bytes_per_token = None, framing_tokens = None, profiles = None, memo_capacity = None),
        text_signature = "(*, bytes_per_token=3.0, framing_tokens=4, profiles=None, memo_capacity=100000)"
    )]
    fn new(
        py: Python<'_>,
        bytes_per_token: Option<&Bound<'_, PyAny>>,
        framing_tokens: Option<&Bound<'_, PyAny>>,
        profiles: Option<&Bound<'_, PyAny>>,
        memo_capacity: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let bpt = match bytes_per_token {
            Some(v) => v.clone(),
            None => 3.0f64.into_pyobject(py)?.into_any(),
        };
        let framing = match framing_tokens {
            Some(v) => v.clone(),
            None => 4i64.into_pyobject(py)?.into_any(),
        };
        let capacity = match memo_capacity {
            Some(v) => v.clone(),
            None => 100_000i64.into_pyobject(py)?.into_any(),
        };
        let none = py.None().into_bound(py);
        Self::from_parts(py, &bpt, &framing, profiles.unwrap_or(&none), &capacity, "")
    }

    /// `ceil(len(canonical) / bytes_per_token) + framing_tokens`, memoized.
    fn raw(
        &self,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        model_id: &Bound<'_, PyAny>,
    ) -> PyResult<i64> {
        guard(py, || {
            let model_id = arguments::model_id(model_id)?;
            let mut types = Types::new(py)?;
            let facts = Self::facts_of(py, &mut types, &Items::Other(vec![value.clone()]))?;
            let raws = self.raw_batch(model_id, &types.kinds, &facts).into_py(py)?;
            raws.first()
                .copied()
                .ok_or_else(|| estimator_error(py, "no estimate"))
        })
    }

    /// The raw estimate of each item, in one batched call.
    fn raw_estimates(
        &self,
        py: Python<'_>,
        items: &Bound<'_, PyAny>,
        model_id: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<i64>> {
        guard(py, || {
            let values = arguments::values("items", items)?;
            let model_id = arguments::model_id(model_id)?;
            let mut types = Types::new(py)?;
            let facts = Self::facts_of(py, &mut types, &values)?;
            self.raw_batch(model_id, &types.kinds, &facts).into_py(py)
        })
    }

    /// `corrected(sum of raw estimates)`.
    fn estimate(
        &self,
        py: Python<'_>,
        items: &Bound<'_, PyAny>,
        model_id: &Bound<'_, PyAny>,
    ) -> PyResult<i128> {
        guard(py, || {
            let values = arguments::values("items", items)?;
            self.sum_corrected(py, &values, arguments::model_id(model_id)?)
        })
    }

    /// `corrected(raw(text))`.
    fn estimate_text(
        &self,
        py: Python<'_>,
        text: &Bound<'_, PyAny>,
        model_id: &Bound<'_, PyAny>,
    ) -> PyResult<i128> {
        guard(py, || {
            if !text.is_instance_of::<PyString>() {
                return Err(estimator_error(
                    py,
                    format!("text: expected a str, got {}", type_name(text)),
                ));
            }
            let model_id = arguments::model_id(model_id)?;
            self.sum_corrected(py, &Items::Other(vec![text.clone()]), model_id)
        })
    }

    /// `corrected(sum of raw estimates of the tool specs)`.
    fn estimate_tools(
        &self,
        py: Python<'_>,
        tools: &Bound<'_, PyAny>,
        model_id: &Bound<'_, PyAny>,
    ) -> PyResult<i128> {
        guard(py, || {
            let values = arguments::values("tools", tools)?;
            self.sum_corrected(py, &values, arguments::model_id(model_id)?)
        })
    }

    /// `raw_sum`, scaled up by the model's reconciled factor exactly in integers.
    fn corrected(
        &self,
        py: Python<'_>,
        raw_sum: &Bound<'_, PyAny>,
        model_id: &Bound<'_, PyAny>,
    ) -> PyResult<i128> {
        guard(py, || self.corrected_checked(py, raw_sum, model_id))
    }

    /// Record one response: `estimated` > 0 and `actual` >= 0 tokens.
    fn reconcile(
        &self,
        py: Python<'_>,
        model_id: &Bound<'_, PyAny>,
        estimated: &Bound<'_, PyAny>,
        actual: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        guard(py, || {
            self.reconcile_checked(py, model_id, estimated, actual)
        })
    }

    /// `max(1.0, actual / estimated)`; 1.0 before any reconcile.
    fn correction(&self, py: Python<'_>, model_id: &Bound<'_, PyAny>) -> PyResult<f64> {
        guard(py, || {
            let model_id = arguments::model_id(model_id)?;
            Ok(self.lock().correction(model_id))
        })
    }

    /// `actual / estimated`, unclamped; 1.0 before any reconcile.
    fn error_ratio(&self, py: Python<'_>, model_id: &Bound<'_, PyAny>) -> PyResult<f64> {
        guard(py, || {
            let model_id = arguments::model_id(model_id)?;
            Ok(self.lock().error_ratio(model_id))
        })
    }

    /// Configuration and reconciled sums (not the memo), as plain data.
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (default, profiles, capacity, corrections) = {
            let st = self.lock();
            (
                st.default_profile(),
                st.profiles().to_vec(),
                st.memo().capacity(),
                st.corrections().to_vec(),
            )
        };
        let d = PyDict::new(py);
        d.set_item("version", 1)?;
        d.set_item("bytes_per_token", default.bytes_per_token)?;
        d.set_item("framing_tokens", default.framing_tokens)?;
        let p = PyDict::new(py);
        for (prefix, profile) in profiles {
            let pair = PyList::new(
                py,
                [
                    profile.bytes_per_token.into_pyobject(py)?.into_any(),
                    profile.framing_tokens.into_pyobject(py)?.into_any(),
                ],
            )?;
            p.set_item(prefix, pair)?;
        }
        d.set_item("profiles", p)?;
        d.set_item("memo_capacity", capacity)?;
        let c = PyDict::new(py);
        for (model, sums) in corrections {
            c.set_item(model, PyList::new(py, [sums.estimated, sums.actual])?)?;
        }
        d.set_item("corrections", c)?;
        Ok(d)
    }

    /// Rebuild an estimator from `snapshot()` output (either backend's).
    #[classmethod]
    fn restore(
        _cls: &Bound<'_, PyType>,
        py: Python<'_>,
        snapshot: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let Some(members) = mapping_items(snapshot)? else {
            return Err(estimator_error(
                py,
                format!("snapshot: expected a mapping, got {}", type_name(snapshot)),
            ));
        };
        let mut missing: Vec<&str> = Vec::new();
        let mut found: Vec<Option<Bound<'_, PyAny>>> = vec![None; SNAPSHOT_KEYS.len()];
        let mut unknown: Vec<String> = Vec::new();
        for (key, value) in &members {
            let name = key
                .cast::<PyString>()
                .ok()
                .and_then(|k| k.to_str().ok().map(str::to_owned));
            match name
                .as_deref()
                .and_then(|n| SNAPSHOT_KEYS.iter().position(|k| *k == n))
            {
                Some(i) => found[i] = Some(value.clone()),
                None => unknown.push(key.str()?.to_string_lossy().into_owned()),
            }
        }
        for (i, key) in SNAPSHOT_KEYS.iter().enumerate() {
            if found[i].is_none() {
                missing.push(key);
            }
        }
        if !missing.is_empty() {
            return Err(estimator_error(
                py,
                format!("snapshot: missing {}", missing.join(", ")),
            ));
        }
        if !unknown.is_empty() {
            unknown.sort();
            return Err(estimator_error(
                py,
                format!("snapshot: unknown key {}", unknown.join(", ")),
            ));
        }
        let field = |name: &str| -> Bound<'_, PyAny> {
            let i = SNAPSHOT_KEYS.iter().position(|k| *k == name).unwrap_or(0);
            found[i].clone().unwrap_or_else(|| py.None().into_bound(py))
        };
        let version = field("version");
        let version_ok = is_int(&version) && version.extract::<i64>().ok() == Some(1);
        if !version_ok {
            return Err(estimator_error(
                py,
                format!("snapshot: unsupported version {}", repr(&version)?),
            ));
        }
        let est = Self::from_parts(
            py,
            &field("bytes_per_token"),
            &field("framing_tokens"),
            &field("profiles"),
            &field("memo_capacity"),
            "snapshot.",
        )?;
        let corrections = field("corrections");
        let Some(corrections) = mapping_items(&corrections)? else {
            return Err(estimator_error(
                py,
                "snapshot.corrections: expected a mapping",
            ));
        };
        let mut restored: Vec<(String, Reconciled)> = Vec::new();
        for (model_id, sums) in corrections {
            let place = format!("snapshot.corrections[{}]", repr(&model_id)?);
            let Ok(model_id) = model_id.cast::<PyString>() else {
                return Err(estimator_error(
                    py,
                    format!("{place}: model id is not a string"),
                ));
            };
            let Some((e, a)) = two(&sums)? else {
                return Err(estimator_error(
                    py,
                    format!("{place}: expected [estimated, actual]"),
                ));
            };
            let e = check_count(py, &e, &format!("{place}.estimated"))?;
            let a = check_count(py, &a, &format!("{place}.actual"))?;
            let Ok(model_id) = model_id.to_str().map(str::to_owned) else {
                return Err(estimator_error(
                    py,
                    format!("{place}: lone surrogate in model id"),
                ));
            };
            restored.push((
                model_id,
                Reconciled {
                    estimated: e as u64,
                    actual: a as u64,
                },
            ));
        }
        {
            let mut st = est.lock();
            for (model_id, sums) in restored {
                st.set_reconciled(&model_id, sums);
            }
        }
        Ok(est)
    }

    /// `{"hits", "misses", "size", "capacity"}` of the memo.
    fn memo_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (hits, misses, size, capacity) = {
            let st = self.lock();
            let m = st.memo();
            (m.hits, m.misses, m.len(), m.capacity())
        };
        let d = PyDict::new(py);
        d.set_item("hits", hits)?;
        d.set_item("misses", misses)?;
        d.set_item("size", size)?;
        d.set_item("capacity", capacity)?;
        Ok(d)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let (default, profiles, capacity) = {
            let st = self.lock();
            (
                st.default_profile(),
                st.profiles().to_vec(),
                st.memo().capacity(),
            )
        };
        let p = PyDict::new(py);
        for (prefix, profile) in profiles {
            p.set_item(prefix, (profile.bytes_per_token, profile.framing_tokens))?;
        }
        Ok(format!(
            "TokenEstimator(bytes_per_token={}, framing_tokens={}, profiles={}, memo_capacity={})",
            repr(&default.bytes_per_token.into_pyobject(py)?.into_any())?,
            default.framing_tokens,
            repr(p.as_any())?,
            capacity
        ))
    }
}
