//! `TokenEstimator`: a frozen pyclass whose state (profiles, counting
//! table, memo, calibration) lives behind one mutex. A batch is looked up
//! under a single lock; Python code never runs while the lock is held. The
//! checks are `ctxengine_core::estimate` (settings, counts, snapshots) and
//! `ctxengine_core::arguments` (`model_id`, `kind`, the value sequences).

use std::sync::{Mutex, MutexGuard};

use ctxengine_core::calibrate::{self, Ratio};
use ctxengine_core::estimate::{self, EstimatorState, Fact};
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyBytes, PyType};

use crate::arguments::{self, PyValues};
use crate::errors::{estimator_error, guard, HostError, IntoPy};
use crate::items::{scan, Facts, Items, Scan, Types, Want};

/// Per-model token counts (exact for public encodings, the calibrated byte
/// heuristic elsewhere) with a bounded LRU memo (ADR 0001, ADR 0012).
#[pyclass(frozen, module = "ctxengine._core")]
pub struct TokenEstimator {
    state: Mutex<EstimatorState>,
}

type Arg<'a, 'py> = &'a Bound<'py, PyAny>;

impl TokenEstimator {
    pub fn lock(&self) -> MutexGuard<'_, EstimatorState> {
        // A panic cannot happen while the lock is held; recover anyway.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn of(state: Result<EstimatorState, HostError>, py: Python<'_>) -> PyResult<Self> {
        let state = Mutex::new(state.map_err(HostError::into_pyerr(py))?);
        Ok(TokenEstimator { state })
    }

    /// The raw counts of `values` (their facts gathered first, then
    /// measured through the core's memo under one lock) and the factor of
    /// `model_id`.
    fn raws(
        &self,
        py: Python<'_>,
        values: &Items<'_>,
        model_id: &str,
    ) -> PyResult<(Vec<i64>, Ratio)> {
        let mut types = Types::new(py)?;
        let want = Want {
            pairs: None,
            facts: true,
        };
        let mut s: Scan<'_> = scan(py, &mut types, values, want)?;
        s.finish_facts(py, &mut types)?;
        let mut raws = Vec::new();
        let factor = (self.lock()).raw_batch(model_id, &types.kinds, &s.buf.facts, &mut raws);
        Ok((raws, factor.into_py(py)?))
    }

    /// `corrected(sum of the raw counts of values)`, the sum checked.
    fn sum_corrected(&self, py: Python<'_>, values: &Items<'_>, model_id: &str) -> PyResult<i128> {
        let (raws, factor) = self.raws(py, values, model_id)?;
        let total = raws.iter().try_fold(0i64, |t, r| t.checked_add(*r));
        let total = total
            .ok_or_else(|| estimator_error(py, "raw estimate sum overflows a 64-bit integer"))?;
        Ok(calibrate::apply(total, factor))
    }
}

/// A value's facts as the core's batch reads them.
impl Fact for Facts {
    fn kind(&self) -> usize {
        self.kind
    }
    fn digest(&self) -> &[u8; 32] {
        &self.digest
    }
    fn canonical_len(&self) -> usize {
        self.len()
    }
    fn canonical(&self) -> Vec<u8> {
        Facts::canonical(self)
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
        bytes_per_token: Option<Arg<'_, '_>>,
        framing_tokens: Option<Arg<'_, '_>>,
        profiles: Option<Arg<'_, '_>>,
        memo_capacity: Option<Arg<'_, '_>>,
        encodings: Option<Arg<'_, '_>>,
    ) -> PyResult<Self> {
        let (bpt, framing, capacity) = (bytes_per_token, framing_tokens, memo_capacity);
        let h = &mut PyValues(py);
        Self::of(
            estimate::settings(h, bpt, framing, profiles, capacity, encodings),
            py,
        )
    }

    /// The uncorrected count of one value (exact, or the byte heuristic), memoized.
    fn raw(&self, py: Python<'_>, value: Arg<'_, '_>, model_id: Arg<'_, '_>) -> PyResult<i64> {
        guard(py, || {
            let model_id = arguments::model_id(model_id)?;
            Ok(self
                .raws(py, &Items::Other(vec![value.clone()]), model_id)?
                .0[0])
        })
    }

    /// Names how this estimator counts `kind` for `model_id` (ADR 0011):
    /// `heuristic:BYTES_PER_TOKEN:FRAMING|kind` or `ENCODING:RECIPE_VERSION|kind`.
    fn counter_id(&self, model_id: Arg<'_, '_>, kind: Arg<'_, '_>) -> PyResult<String> {
        let model_id = arguments::model_id(model_id)?;
        let kind = arguments::estimator_str("kind", kind)?;
        Ok(self.lock().stored_id_of(model_id, kind))
    }

    /// Memoize stored raw counts: `(model_id, kind, digest) -> raw` (ADR 0011),
    /// for each pair not memoized yet.
    fn prime(
        &self,
        py: Python<'_>,
        model_id: Arg<'_, '_>,
        kind: Arg<'_, '_>,
        digests: Arg<'_, '_>,
        raws: Arg<'_, '_>,
    ) -> PyResult<()> {
        let model_id = arguments::model_id(model_id)?;
        let kind = arguments::estimator_str("kind", kind)?;
        let digest = |d: Bound<'_, PyAny>| d.cast::<PyBytes>().ok()?.as_bytes().try_into().ok();
        let digests: Vec<Option<[u8; 32]>> = digests
            .try_iter()?
            .map(|d| d.map(digest))
            .collect::<PyResult<_>>()?;
        let raws: Vec<Bound<'_, PyAny>> = raws.try_iter()?.collect::<PyResult<_>>()?;
        let entries = estimate::check_prime(&mut PyValues(py), &digests, &raws)
            .map_err(HostError::into_pyerr(py))?;
        self.lock().prime_all(model_id, kind, &entries);
        Ok(())
    }

    /// The raw estimate of each item, in one batched call.
    fn raw_estimates(
        &self,
        py: Python<'_>,
        items: Arg<'_, '_>,
        model_id: Arg<'_, '_>,
    ) -> PyResult<Vec<i64>> {
        guard(py, || {
            let values = arguments::values("items", items)?;
            Ok(self.raws(py, &values, arguments::model_id(model_id)?)?.0)
        })
    }

    /// `corrected(sum of raw estimates)`.
    fn estimate(
        &self,
        py: Python<'_>,
        items: Arg<'_, '_>,
        model_id: Arg<'_, '_>,
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
        text: Arg<'_, '_>,
        model_id: Arg<'_, '_>,
    ) -> PyResult<i128> {
        guard(py, || {
            arguments::estimator_text(text)?;
            let model_id = arguments::model_id(model_id)?;
            self.sum_corrected(py, &Items::Other(vec![text.clone()]), model_id)
        })
    }

    /// `corrected(sum of raw estimates of the tool specs)`.
    fn estimate_tools(
        &self,
        py: Python<'_>,
        tools: Arg<'_, '_>,
        model_id: Arg<'_, '_>,
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
        raw_sum: Arg<'_, '_>,
        model_id: Arg<'_, '_>,
    ) -> PyResult<i128> {
        guard(py, || {
            let raw_sum = estimate::check_raw_sum(&mut PyValues(py), raw_sum)
                .map_err(HostError::into_pyerr(py))?;
            Ok(self
                .lock()
                .corrected(raw_sum, arguments::model_id(model_id)?))
        })
    }

    /// Record one response: `estimated` > 0 and `actual` >= 0 tokens.
    fn reconcile(
        &self,
        py: Python<'_>,
        model_id: Arg<'_, '_>,
        estimated: Arg<'_, '_>,
        actual: Arg<'_, '_>,
    ) -> PyResult<()> {
        guard(py, || {
            let model_id = arguments::model_id(model_id)?;
            let (e, a) = estimate::check_reconcile(&mut PyValues(py), estimated, actual)
                .map_err(HostError::into_pyerr(py))?;
            self.lock().reconcile(model_id, e, a).into_py(py)
        })
    }

    /// `"heuristic"` or the encoding that counts `model_id` (a `#method` suffix wins).
    fn counting_method(&self, py: Python<'_>, model_id: Arg<'_, '_>) -> PyResult<&'static str> {
        guard(py, || {
            Ok(self.lock().method(arguments::model_id(model_id)?).name())
        })
    }

    /// The factor applied to raw sums; 1.0 before any reconcile.
    fn correction(&self, py: Python<'_>, model_id: Arg<'_, '_>) -> PyResult<f64> {
        guard(py, || {
            Ok(self.lock().correction(arguments::model_id(model_id)?))
        })
    }

    /// `actual / estimated`, unclamped; 1.0 before any reconcile.
    fn error_ratio(&self, py: Python<'_>, model_id: Arg<'_, '_>) -> PyResult<f64> {
        guard(py, || {
            Ok(self.lock().error_ratio(arguments::model_id(model_id)?))
        })
    }

    /// Settings and calibration (not the memo), as plain data: version 1
    /// when that holds everything, else version 2 (ADR 0012).
    #[pyo3(signature = (max_version = None), text_signature = "($self, max_version=2)")]
    fn snapshot<'py>(
        &self,
        py: Python<'py>,
        max_version: Option<Arg<'_, 'py>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let max_version = estimate::check_max_version(&mut PyValues(py), max_version)
            .map_err(HostError::into_pyerr(py))?;
        let snap = self.lock().snapshot(max_version);
        crate::data::to_py(py, &snap.to_data())
    }

    /// Rebuild an estimator from `snapshot()` output of any version (either backend's).
    #[classmethod]
    fn restore(_cls: &Bound<'_, PyType>, py: Python<'_>, snapshot: Arg<'_, '_>) -> PyResult<Self> {
        guard(py, || {
            Self::of(estimate::restore(&mut PyValues(py), snapshot), py)
        })
    }

    /// `{"hits", "misses", "size", "capacity"}` of the memo.
    fn memo_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let stats = self.lock().memo().stats();
        crate::data::to_py(py, &stats)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let (default, profiles, capacity, table) = {
            let st = self.lock();
            let profiles = st.profiles().to_vec();
            (
                st.default_profile(),
                profiles,
                st.memo().capacity(),
                st.table().extra().to_vec(),
            )
        };
        let profiles = profiles
            .into_iter()
            .map(|(k, p)| (k, (p.bytes_per_token, p.framing_tokens)));
        let table = table.into_iter().map(|(k, method)| (k, method.name()));
        Ok(format!(
            "TokenEstimator(bytes_per_token={}, framing_tokens={}, profiles={}, memo_capacity={}, encodings={})",
            default.bytes_per_token.into_pyobject(py)?.repr()?,
            default.framing_tokens,
            profiles.into_py_dict(py)?.repr()?,
            capacity,
            table.into_py_dict(py)?.repr()?
        ))
    }
}
