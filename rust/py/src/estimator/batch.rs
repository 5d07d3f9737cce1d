//! Batches measured under one lock: the facts of values (canonical length,
//! digest and, for an exact count on a memo miss, bytes, by kind) through
//! the core's memo.

use ctxengine_core::calibrate::{self, Ratio};
use ctxengine_core::estimate::{EstimatorState, Profile};
use ctxengine_core::tokenize::Method;
use ctxengine_core::CoreError;
use pyo3::prelude::*;

use super::{Resolved, TokenEstimator};
use crate::errors::{estimator_error, IntoPy};
use crate::items::{scan, Facts, Items, Scan, Types, Want};

/// The raw count of one fact under the lock.
#[inline]
fn raw_of(st: &mut EstimatorState, counter: u32, kind: u32, f: &Facts) -> Result<i64, CoreError> {
    st.raw_counted(counter, kind, &f.digest, || f.len(), || f.canonical())
}

/// A raw count with the way it was counted: the estimator state's serial,
/// its memo counter and the value's kind id (all 0: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Measured {
    pub serial: u64,
    pub memo: u32,
    pub kind: u32,
    pub raw: i64,
}

/// How one batch counted (`raw_batch_known`): tags its counts for keeping.
pub struct Measuring {
    serial: u64,
    memo: u32,
    /// The state's kind id of each gathered kind index.
    kinds: Vec<u32>,
    /// How many leading values were served their known counts.
    pub served: usize,
}

impl Measuring {
    /// The count `raw` of a value of gathered kind `kind`, tagged.
    #[inline]
    pub fn tag(&self, kind: usize, raw: i64) -> Measured {
        Measured {
            serial: self.serial,
            memo: self.memo,
            kind: self.kinds[kind],
            raw,
        }
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

    /// [`TokenEstimator::raw_batch_into`] where the leading values carry
    /// counts measured before (`known[i]` for value `i`, a line cache's):
    /// those of the leading run measured under this state's counter of
    /// `model_id` and the value's kind are served as they are, each counted
    /// as a memo hit without a lookup (the memo's recency of their keys is
    /// not refreshed); the rest go through the memo in order. Also returns
    /// how to tag this call's counts for keeping.
    pub fn raw_batch_known<K>(
        &self,
        model_id: &str,
        kinds: &[String],
        facts: &[Facts],
        known: &[K],
        measured: impl Fn(&K) -> Measured,
        raws: &mut Vec<i64>,
    ) -> Result<(Ratio, Measuring), CoreError> {
        raws.clear();
        raws.reserve(facts.len());
        let mut st = self.lock();
        let counter = st.counter_id(model_id);
        let kind_ids: Vec<u32> = kinds.iter().map(|k| st.kind(k)).collect();
        let mut measuring = Measuring {
            serial: st.serial(),
            memo: st.counter(counter).memo,
            kinds: kind_ids,
            served: 0,
        };
        for (k, f) in known.iter().zip(facts) {
            let k = measured(k);
            if measuring.tag(f.kind, k.raw) != k {
                break;
            }
            raws.push(k.raw);
        }
        let served = raws.len();
        measuring.served = served;
        st.memo_mut().hits += served as u64;
        let rest = &facts[served..];
        st.memo_mut().reserve(rest.len());
        let kind_ids = &measuring.kinds;
        st.raw_counted_each(
            counter,
            rest,
            |f| (kind_ids[f.kind], &f.digest),
            Facts::len,
            Facts::canonical,
            raws,
        )?;
        Ok((st.factor(counter), measuring))
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

    /// The byte heuristic's profile and the factor of a key, or `None` when
    /// the key counts exactly (the native interop cuts then take the
    /// generic path, through the estimator).
    pub fn heuristic(&self, model_id: &str) -> Option<(Profile, Ratio)> {
        let mut st = self.lock();
        let counter = st.counter_id(model_id);
        if st.counter(counter).method != Method::Heuristic {
            return None;
        }
        Some((st.counter(counter).profile, st.factor(counter)))
    }

    /// The factor of a key (for the cut's own fit).
    pub fn factor(&self, model_id: &str) -> Ratio {
        let mut st = self.lock();
        let counter = st.counter_id(model_id);
        st.factor(counter)
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
