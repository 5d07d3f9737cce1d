//! `TokenEstimator`: the core's `EstimatorState` behind one mutex (a batch
//! under one lock; no Python code runs while it is held).

use std::sync::{Mutex, MutexGuard};

use ctxengine_core::arguments as check;
use ctxengine_core::calibrate::{self, Ratio};
use ctxengine_core::estimate::{self, EstimatorState};
use ctxengine_core::CoreResult;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyBytes, PyDict, PyString, PyTuple, PyType};

use crate::arguments::{self, checked, PyValues};
use crate::errors::{guard, IntoPy};
use crate::items::{scan, Items, Types, Want};

/// Per-model token counts (exact for public encodings, the calibrated byte
/// heuristic elsewhere) with a bounded LRU memo (ADR 0001, ADR 0012).
#[pyclass(frozen, module = "ctxengine._core")]
pub struct TokenEstimator {
    state: Mutex<EstimatorState>,
}

type Obj<'a> = &'a Bound<'a, PyAny>;

impl TokenEstimator {
    pub fn lock(&self) -> MutexGuard<'_, EstimatorState> {
        // A panic cannot happen while the lock is held; recover anyway.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `f` of the state and the checked `model_id`, under the lock.
    fn keyed<T>(
        &self,
        model_id: Obj<'_>,
        f: impl FnOnce(&mut EstimatorState, &str) -> T,
    ) -> PyResult<T> {
        guard(model_id.py(), || {
            Ok(f(&mut self.lock(), checked(model_id, check::model_id)?))
        })
    }

    /// `f` of the raw counts of the checked `values` (counted under one lock)
    /// and the factor of the checked `model_id` (checked in that order).
    fn counted<'py, T>(
        &self,
        values: impl FnOnce() -> PyResult<Items<'py>>,
        model_id: Obj<'_>,
        f: impl FnOnce(Vec<i64>, Ratio) -> CoreResult<T>,
    ) -> PyResult<T> {
        let py = model_id.py();
        guard(py, || {
            let values = values()?;
            let model_id = checked(model_id, check::model_id)?;
            let mut types = Types::new(py)?;
            let want = Want {
                pairs: None,
                facts: true,
            };
            let mut s = scan(py, &mut types, &values, want)?;
            s.finish_facts(py, &mut types)?;
            let mut raws = Vec::new();
            let factor = (self.lock()).raw_batch(model_id, &types.kinds, &s.buf.facts, &mut raws);
            f(raws, factor.into_py(py)?).into_py(py)
        })
    }
}

#[pymethods]
impl TokenEstimator {
    /// Keywords read by name: an explicit `None` is checked as given (a PyO3
    /// `Option` would take the default, which the reference refuses).
    #[new]
    #[pyo3(
        signature = (**kwargs),
        text_signature = "(*, bytes_per_token=3.0, framing_tokens=4, profiles=None, memo_capacity=100000, encodings=None)"
    )]
    fn new(py: Python<'_>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let mut given: [Option<Bound<'_, PyAny>>; 5] = Default::default();
        for (key, value) in kwargs.into_iter().flatten() {
            let name = key.cast::<PyString>()?.to_str()?;
            let unknown =
                || format!("TokenEstimator() got an unexpected keyword argument '{name}'");
            let i = estimate::SETTINGS.iter().position(|n| *n == name);
            let i = i.ok_or_else(|| PyTypeError::new_err(unknown()))?;
            given[i] = Some(value); // (the core reads a `None` profiles or encodings as empty)
        }
        let [bpt, framing, profiles, capacity, encodings] = given.each_ref().map(Option::as_ref);
        let h = &mut PyValues(py);
        let state = estimate::settings(h, bpt, framing, profiles, capacity, encodings);
        Ok(TokenEstimator {
            state: state.into_py(py)?.into(),
        })
    }

    /// The uncorrected count of one value (exact, or the byte heuristic), memoized.
    fn raw(&self, value: Obj<'_>, model_id: Obj<'_>) -> PyResult<i64> {
        let one = || Ok(Items::Tuple(PyTuple::new(value.py(), [value])?));
        self.counted(one, model_id, |raws, _| Ok(raws[0]))
    }

    /// Names how this estimator counts `kind` for `model_id` (ADR 0011):
    /// `heuristic:BYTES_PER_TOKEN:FRAMING|kind` or `ENCODING:RECIPE_VERSION|kind`.
    fn counter_id(&self, model_id: Obj<'_>, kind: Obj<'_>) -> PyResult<String> {
        let model_id = checked(model_id, check::model_id)?;
        let kind = checked(kind, |a| check::estimator_str("kind", a))?;
        Ok(self.lock().stored_id_of(model_id, kind))
    }

    /// Memoize stored raw counts: `(model_id, kind, digest) -> raw` (ADR 0011),
    /// for each pair not memoized yet.
    fn prime(
        &self,
        model_id: Obj<'_>,
        kind: Obj<'_>,
        digests: Obj<'_>,
        raws: Obj<'_>,
    ) -> PyResult<()> {
        let kind_py = kind.py();
        let model_id = checked(model_id, check::model_id)?;
        let kind = checked(kind, |a| check::estimator_str("kind", a))?;
        let digest = |d: Bound<'_, PyAny>| d.cast::<PyBytes>().ok()?.as_bytes().try_into().ok();
        let digests: Vec<Option<[u8; 32]>> = digests
            .try_iter()?
            .map(|d| d.map(digest))
            .collect::<PyResult<_>>()?;
        let raws: Vec<Bound<'_, PyAny>> = raws.try_iter()?.collect::<PyResult<_>>()?;
        let entries =
            estimate::check_prime(&mut PyValues(kind_py), &digests, &raws).into_py(kind_py)?;
        self.lock().prime_all(model_id, kind, &entries);
        Ok(())
    }

    /// The raw estimate of each item, in one batched call.
    fn raw_estimates(&self, items: Obj<'_>, model_id: Obj<'_>) -> PyResult<Vec<i64>> {
        self.counted(|| arguments::values("items", items), model_id, |r, _| Ok(r))
    }

    /// `corrected(sum of raw estimates)`.
    fn estimate(&self, items: Obj<'_>, model_id: Obj<'_>) -> PyResult<i128> {
        let items = || arguments::values("items", items);
        self.counted(items, model_id, |r, f| calibrate::apply_sum(&r, f))
    }

    /// `corrected(raw(text))`.
    fn estimate_text(&self, text: Obj<'_>, model_id: Obj<'_>) -> PyResult<i128> {
        let one = || {
            checked(text, check::estimator_text)?;
            Ok(Items::Tuple(PyTuple::new(text.py(), [text])?))
        };
        self.counted(one, model_id, |r, f| calibrate::apply_sum(&r, f))
    }

    /// `corrected(sum of raw estimates of the tool specs)`.
    fn estimate_tools(&self, tools: Obj<'_>, model_id: Obj<'_>) -> PyResult<i128> {
        let tools = || arguments::values("tools", tools);
        self.counted(tools, model_id, |r, f| calibrate::apply_sum(&r, f))
    }

    /// `raw_sum`, scaled up by the model's reconciled factor exactly in integers.
    fn corrected(&self, raw_sum: Obj<'_>, model_id: Obj<'_>) -> PyResult<i128> {
        let raw_sum =
            estimate::check_raw_sum(&mut PyValues(raw_sum.py()), raw_sum).into_py(raw_sum.py())?;
        self.keyed(model_id, |st, m| st.corrected(raw_sum, m))
    }

    /// Record one response: `estimated` > 0 and `actual` >= 0 tokens.
    fn reconcile(&self, model_id: Obj<'_>, estimated: Obj<'_>, actual: Obj<'_>) -> PyResult<()> {
        let py = model_id.py();
        guard(py, || {
            let model_id = checked(model_id, check::model_id)?;
            let (e, a) =
                estimate::check_reconcile(&mut PyValues(py), estimated, actual).into_py(py)?;
            self.lock().reconcile(model_id, e, a).into_py(py)
        })
    }

    /// `"heuristic"` or the encoding that counts `model_id` (a `#method` suffix wins).
    fn counting_method(&self, model_id: Obj<'_>) -> PyResult<&'static str> {
        self.keyed(model_id, |st, m| st.method(m).name())
    }

    /// The factor applied to raw sums; 1.0 before any reconcile.
    fn correction(&self, model_id: Obj<'_>) -> PyResult<f64> {
        self.keyed(model_id, |st, m| st.correction(m))
    }

    /// `actual / estimated`, unclamped; 1.0 before any reconcile.
    fn error_ratio(&self, model_id: Obj<'_>) -> PyResult<f64> {
        self.keyed(model_id, |st, m| st.error_ratio(m))
    }

    /// Settings and calibration (not the memo), as plain data: version 1
    /// when that holds everything, else version 2 (ADR 0012).
    #[pyo3(signature = (max_version = None), text_signature = "($self, max_version=2)")]
    fn snapshot<'py>(
        &self,
        py: Python<'py>,
        max_version: Option<Obj<'_>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let max_version =
            estimate::check_max_version(&mut PyValues(py), max_version).into_py(py)?;
        let snap = self.lock().snapshot(max_version);
        crate::data::to_py(py, &snap.to_data())
    }

    /// Rebuild an estimator from `snapshot()` output of any version (either backend's).
    #[classmethod]
    fn restore(_cls: &Bound<'_, PyType>, snapshot: Obj<'_>) -> PyResult<Self> {
        let py = snapshot.py();
        guard(py, || {
            let state = estimate::restore(&mut PyValues(py), snapshot).into_py(py)?;
            Ok(TokenEstimator {
                state: state.into(),
            })
        })
    }

    /// `{"hits", "misses", "size", "capacity"}` of the memo.
    fn memo_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let stats = self.lock().memo().stats();
        crate::data::to_py(py, &stats)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let st = self.lock();
        let (default, capacity) = (st.default_profile(), st.memo().capacity());
        let profiles: Vec<_> = (st.profiles().iter())
            .map(|(k, p)| (k.clone(), (p.bytes_per_token, p.framing_tokens)))
            .collect();
        let table: Vec<_> = st
            .table()
            .extra()
            .iter()
            .map(|(k, m)| (k.clone(), m.name()))
            .collect();
        drop(st); // (no Python code runs under the lock)
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
