//! Batches measured under one lock: the facts of values (canonical length,
//! digest and, for an exact count on a memo miss, bytes, by kind) through
//! the core's memo (`ctxengine_core::estimate::batch`).

use ctxengine_core::calibrate::{self, Ratio};
use ctxengine_core::estimate::{Fact, Measured, Measuring, Profile, Resolved};
use ctxengine_core::CoreError;
use pyo3::prelude::*;

use super::TokenEstimator;
use crate::errors::{estimator_error, IntoPy};
use crate::items::{scan, Facts, Items, Scan, Types, Want};

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

impl TokenEstimator {
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

    /// Raw counts (into `raws`) and the factor of the key, under one lock.
    pub fn raw_batch_into(
        &self,
        model_id: &str,
        kinds: &[String],
        facts: &[Facts],
        raws: &mut Vec<i64>,
    ) -> Result<Ratio, CoreError> {
        let none: &[Measured] = &[];
        let (factor, _) = self.raw_batch_known(model_id, kinds, facts, none, |k| *k, raws)?;
        Ok(factor)
    }

    /// `EstimatorState::raw_batch_known` under the lock.
    pub fn raw_batch_known<K>(
        &self,
        model_id: &str,
        kinds: &[String],
        facts: &[Facts],
        known: &[K],
        measured: impl Fn(&K) -> Measured,
        raws: &mut Vec<i64>,
    ) -> Result<(Ratio, Measuring), CoreError> {
        let mut st = self.lock();
        st.raw_batch_known(model_id, kinds, facts, known, measured, raws)
    }

    /// `EstimatorState::raw_one` under the lock.
    pub fn raw_one(
        &self,
        resolved: &mut Resolved,
        model_id: &str,
        kinds: &[String],
        fact: &Facts,
    ) -> Result<i64, CoreError> {
        self.lock().raw_one(resolved, model_id, kinds, fact)
    }

    /// The byte heuristic's profile and the factor of a key, or `None` when
    /// the key counts exactly (the native interop cuts then take the
    /// generic path, through the estimator).
    pub fn heuristic(&self, model_id: &str) -> Option<(Profile, Ratio)> {
        self.lock().heuristic(model_id)
    }

    /// The factor of a key (for the cut's own fit).
    pub fn factor(&self, model_id: &str) -> Ratio {
        self.lock().factor_of(model_id)
    }

    /// The facts of `values` (in `buf.facts`, their kinds indexing
    /// `types.kinds`), valid while the scan lives.
    pub(crate) fn facts_of<'py>(
        py: Python<'py>,
        types: &mut Types,
        values: &Items<'py>,
    ) -> PyResult<Scan<'py>> {
        let want = Want {
            pairs: None,
            facts: true,
        };
        let mut s = scan(py, types, values, want)?;
        s.finish_facts(py, types)?;
        Ok(s)
    }

    pub(super) fn sum_corrected<'py>(
        &self,
        py: Python<'py>,
        values: &Items<'py>,
        model_id: &str,
    ) -> PyResult<i128> {
        let mut types = Types::new(py)?;
        let scan = Self::facts_of(py, &mut types, values)?;
        let mut raws = Vec::new();
        let factor = self
            .raw_batch_into(model_id, &types.kinds, &scan.buf.facts, &mut raws)
            .into_py(py)?;
        let mut total: i64 = 0;
        for r in raws {
            total = total.checked_add(r).ok_or_else(|| {
                estimator_error(py, "raw estimate sum overflows a 64-bit integer")
            })?;
        }
        Ok(calibrate::apply(total, factor))
    }
}
