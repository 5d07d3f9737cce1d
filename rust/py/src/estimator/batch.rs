//! Batches measured under one lock: the facts of values (canonical length,
//! digest and, for an exact count on a memo miss, bytes, by kind) through
//! the core's memo (`ctxengine_core::estimate::batch`).

use ctxengine_core::calibrate::Ratio;
use ctxengine_core::estimate::{Fact, Measured, Measuring, Resolved};
use ctxengine_core::CoreError;
use pyo3::prelude::*;

use super::TokenEstimator;
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
}
