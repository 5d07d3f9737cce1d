//! `TokenEstimator`: a frozen pyclass whose state (profiles, memo,
//! reconciled sums) lives behind one mutex. A batch is looked up under a
//! single lock; Python code never runs while the lock is held.

use std::sync::{Mutex, MutexGuard};

use ctxengine_core::calibrate::{self, Ratio};
use ctxengine_core::estimate::EstimatorState;
use ctxengine_core::CoreError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyType};

use crate::arguments;
use crate::batch::{scan, Facts, Items, Types, Want};
use crate::errors::{estimator_error, guard, IntoPy};
use crate::estimator_snapshot::{self as snapshot, is_int, repr, type_name};

/// Interned ids for [`TokenEstimator::raw_one`] (ids never change).
#[derive(Default)]
pub struct Resolved {
    counter: Option<u32>,
    kinds: Vec<u32>,
}

/// Per-model token counts (exact for public encodings, the calibrated byte
/// heuristic elsewhere) with a bounded LRU memo (ADR 0001, ADR 0012).
#[pyclass(frozen, module = "ctxengine._core")]
pub struct TokenEstimator {
    state: Mutex<EstimatorState>,
}

/// The raw count of one fact under one lock.
#[inline]
fn raw_of(st: &mut EstimatorState, counter: u32, kind: u32, f: &Facts) -> Result<i64, CoreError> {
    st.raw_counted(counter, kind, &f.digest, || f.len(), || f.canonical())
}

impl TokenEstimator {
    pub fn lock(&self) -> MutexGuard<'_, EstimatorState> {
        // A panic cannot happen while the lock is held; recover anyway.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn from_state(state: EstimatorState) -> Self {
        TokenEstimator {
            state: Mutex::new(state),
        }
    }

    /// Raw counts of gathered facts, under one lock.
    pub fn raw_batch(
        &self,
        model_id: &str,
        kinds: &[String],
        facts: &[Facts],
    ) -> Result<Vec<i64>, CoreError> {
        let mut raws = Vec::new();
        self.raw_batch_into(model_id, kinds, facts, &mut raws)?;
        Ok(raws)
    }

    /// Raw counts (into `raws`) and the key's factor, under one lock.
    pub fn raw_batch_into(
        &self,
        model_id: &str,
        kinds: &[String],
        facts: &[Facts],
        raws: &mut Vec<i64>,
    ) -> Result<Ratio, CoreError> {
        raws.clear();
        raws.reserve(facts.len());
        let mut st = self.lock();
        st.memo_mut().reserve(facts.len());
        let counter = st.counter_id(model_id);
        let kind_ids: Vec<u32> = kinds.iter().map(|k| st.kind(k)).collect();
        for f in facts {
            raws.push(raw_of(&mut st, counter, kind_ids[f.kind], f)?);
        }
        Ok(st.factor(counter))
    }

    /// One more raw count after a batch (`raw_batch_into`), with the
    /// counter and kind ids resolved once per call instead of per value.
    pub fn raw_one(
        &self,
        resolved: &mut Resolved,
        model_id: &str,
        kinds: &[String],
        fact: &Facts,
    ) -> Result<i64, CoreError> {
        let mut st = self.lock();
        let counter = match resolved.counter {
            Some(c) => c,
            None => *resolved.counter.insert(st.counter_id(model_id)),
        };
        while resolved.kinds.len() < kinds.len() {
            let id = st.kind(&kinds[resolved.kinds.len()]);
            resolved.kinds.push(id);
        }
        raw_of(&mut st, counter, resolved.kinds[fact.kind], fact)
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
        let factor = self
            .raw_batch_into(model_id, &types.kinds, &facts, &mut raws)
            .into_py(py)?;
        let mut total: i64 = 0;
        for r in raws {
            total = total.checked_add(r).ok_or_else(|| {
                estimator_error(py, "raw estimate sum overflows a 64-bit integer")
            })?;
        }
        Ok(calibrate::apply(total, factor))
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
        encodings: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        Ok(Self::from_state(snapshot::settings(
            py,
            bytes_per_token,
            framing_tokens,
            profiles,
            memo_capacity,
            encodings,
            "",
        )?))
    }
}

#[pymethods]
impl TokenEstimator {
    #[new]
    #[pyo3(
        signature = (*, bytes_per_token = None, framing_tokens = None, profiles = None, memo_capacity = None, encodings = None),
        text_signature = "(*, bytes_per_token=3.0, framing_tokens=4, profiles=None, memo_capacity=100000, encodings=None)"
    )]
    fn new(
        py: Python<'_>,
        bytes_per_token: Option<&Bound<'_, PyAny>>,
        framing_tokens: Option<&Bound<'_, PyAny>>,
        profiles: Option<&Bound<'_, PyAny>>,
        memo_capacity: Option<&Bound<'_, PyAny>>,
        encodings: Option<&Bound<'_, PyAny>>,
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
        Self::from_parts(
            py,
            &bpt,
            &framing,
            profiles.unwrap_or(&none),
            &capacity,
            encodings,
        )
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

    /// `"heuristic"` or the encoding that counts `model_id` (a `#method` suffix wins).
    fn counting_method(
        &self,
        py: Python<'_>,
        model_id: &Bound<'_, PyAny>,
    ) -> PyResult<&'static str> {
        guard(py, || {
            let model_id = arguments::model_id(model_id)?;
            Ok(self.lock().method(model_id).name())
        })
    }

    /// The factor applied to raw sums; 1.0 before any reconcile.
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

    /// Settings and calibration (not the memo), as plain data: version 1
    /// when that holds everything, else version 2 (ADR 0012).
    #[pyo3(signature = (max_version = None), text_signature = "($self, max_version=2)")]
    fn snapshot<'py>(
        &self,
        py: Python<'py>,
        max_version: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let allow_v2 = match max_version {
            None => true,
            Some(v) => match (is_int(v), v.extract::<i64>().ok()) {
                (true, Some(2)) => true,
                (true, Some(1)) => false,
                _ => {
                    return Err(estimator_error(
                        py,
                        format!("max_version: expected 1 or 2, got {}", repr(v)?),
                    ))
                }
            },
        };
        let parts = snapshot::Parts::of(&self.lock());
        snapshot::write(py, &parts, allow_v2)
    }

    /// Rebuild an estimator from `snapshot()` output of any version (either backend's).
    #[classmethod]
    fn restore(
        _cls: &Bound<'_, PyType>,
        py: Python<'_>,
        snapshot: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        Ok(Self::from_state(snapshot::read(py, snapshot)?))
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
        let (default, profiles, capacity, table) = {
            let st = self.lock();
            (
                st.default_profile(),
                st.profiles().to_vec(),
                st.memo().capacity(),
                st.table().extra().to_vec(),
            )
        };
        let p = PyDict::new(py);
        for (prefix, profile) in profiles {
            p.set_item(prefix, (profile.bytes_per_token, profile.framing_tokens))?;
        }
        let e = PyDict::new(py);
        for (prefix, method) in table {
            e.set_item(prefix, method.name())?;
        }
        Ok(format!(
            "TokenEstimator(bytes_per_token={}, framing_tokens={}, profiles={}, memo_capacity={}, encodings={})",
            repr(&default.bytes_per_token.into_pyobject(py)?.into_any())?,
            default.framing_tokens,
            repr(p.as_any())?,
            capacity,
            repr(e.as_any())?
        ))
    }
}
