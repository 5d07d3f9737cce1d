//! `TokenEstimator`: a frozen pyclass whose state (profiles, counting
//! table, memo, calibration) lives behind one mutex. A batch is looked up
//! under a single lock; Python code never runs while the lock is held.

mod batch;
mod values;

use std::sync::{Mutex, MutexGuard};

use ctxengine_core::estimate::{self, EstimatorState};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyType};

use crate::arguments::{self, type_name};
use crate::errors::{estimator_error, guard, HostError, IntoPy};
use crate::items::{Items, Types};
pub use values::PyValues;

/// Per-model token counts (exact for public encodings, the calibrated byte
/// heuristic elsewhere) with a bounded LRU memo (ADR 0001, ADR 0012).
#[pyclass(frozen, module = "ctxengine._core")]
pub struct TokenEstimator {
    state: Mutex<EstimatorState>,
}

impl TokenEstimator {
    pub fn lock(&self) -> MutexGuard<'_, EstimatorState> {
        // A panic cannot happen while the lock is held; recover anyway.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn from_parts(
        py: Python<'_>,
        bytes_per_token: &Bound<'_, PyAny>,
        framing_tokens: &Bound<'_, PyAny>,
        profiles: &Bound<'_, PyAny>,
        memo_capacity: &Bound<'_, PyAny>,
        encodings: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let mut h = PyValues(py);
        let state = estimate::settings(
            &mut h,
            bytes_per_token,
            framing_tokens,
            profiles,
            memo_capacity,
            encodings,
        )
        .map_err(HostError::into_pyerr(py))?;
        Ok(TokenEstimator {
            state: Mutex::new(state),
        })
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

    /// The uncorrected count of one value (exact, or the byte heuristic), memoized.
    fn raw(
        &self,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        model_id: &Bound<'_, PyAny>,
    ) -> PyResult<i64> {
        guard(py, || {
            let model_id = arguments::model_id(model_id)?;
            let mut types = Types::new(py)?;
            let values = Items::Other(vec![value.clone()]);
            let scan = Self::facts_of(py, &mut types, &values)?;
            let raws = self
                .raw_batch(model_id, &types.kinds, &scan.buf.facts)
                .into_py(py)?;
            raws.first()
                .copied()
                .ok_or_else(|| estimator_error(py, "no estimate"))
        })
    }

    /// Names how this estimator counts `kind` for `model_id` (ADR 0011).
    fn counter_id(&self, model_id: &Bound<'_, PyAny>, kind: &Bound<'_, PyAny>) -> PyResult<String> {
        crate::counts::counter_id(self, model_id, kind)
    }

    /// Memoize stored raw counts: `(model_id, kind, digest) -> raw` (ADR 0011).
    fn prime(
        &self,
        py: Python<'_>,
        model_id: &Bound<'_, PyAny>,
        kind: &Bound<'_, PyAny>,
        digests: &Bound<'_, PyAny>,
        raws: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        crate::counts::prime(py, self, model_id, kind, digests, raws)
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
            let scan = Self::facts_of(py, &mut types, &values)?;
            self.raw_batch(model_id, &types.kinds, &scan.buf.facts)
                .into_py(py)
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
        guard(py, || {
            let raw_sum = estimate::check_raw_sum(&mut PyValues(py), raw_sum)
                .map_err(HostError::into_pyerr(py))?;
            let model_id = arguments::model_id(model_id)?;
            Ok(self.lock().corrected(raw_sum, model_id))
        })
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
            let model_id = arguments::model_id(model_id)?;
            let (e, a) = estimate::check_reconcile(&mut PyValues(py), estimated, actual)
                .map_err(HostError::into_pyerr(py))?;
            self.lock().reconcile(model_id, e, a).into_py(py)
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
        let max_version = estimate::check_max_version(&mut PyValues(py), max_version)
            .map_err(HostError::into_pyerr(py))?;
        let snap = self.lock().snapshot(max_version);
        Ok(crate::data::to_py(py, &snap.to_data())?.cast_into::<PyDict>()?)
    }

    /// Rebuild an estimator from `snapshot()` output of any version (either backend's).
    #[classmethod]
    fn restore(
        _cls: &Bound<'_, PyType>,
        py: Python<'_>,
        snapshot: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        guard(py, || {
            let state = estimate::restore(&mut PyValues(py), snapshot)
                .map_err(HostError::into_pyerr(py))?;
            Ok(TokenEstimator {
                state: Mutex::new(state),
            })
        })
    }

    /// `{"hits", "misses", "size", "capacity"}` of the memo.
    fn memo_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let stats = self.lock().memo().stats();
        Ok(crate::data::to_py(py, &stats)?.cast_into::<PyDict>()?)
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
            default.bytes_per_token.into_pyobject(py)?.repr()?,
            default.framing_tokens,
            p.repr()?,
            capacity,
            e.repr()?
        ))
    }
}
