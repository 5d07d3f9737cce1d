//! Batches measured under one lock: the facts of values (canonical length
//! and digest, by kind) through the core's memo.

use ctxengine_core::estimate::Reconciled;
use ctxengine_core::CoreError;
use pyo3::prelude::*;

use super::{Resolved, TokenEstimator};
use crate::errors::{estimator_error, IntoPy};
use crate::items::{scan, Facts, Items, Types, Want};

impl TokenEstimator {
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

    pub(super) fn sum_corrected<'py>(
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
}
