//! `select_history` and `validate_tool_pairs`: the arguments read, the cut
//! the core's (`cut::select_history`) over a [`CutHost`] of Python items.

use std::cell::RefCell;

use ctxengine_core::calibrate::{apply, Ratio};
use ctxengine_core::cut::{self, CutHost};
use pyo3::intern;
use pyo3::prelude::*;

use crate::arguments;
use crate::errors::{guard, HostError, IntoPy};
use crate::estimator::TokenEstimator;
use crate::items::{scan, Items, Scan, Types, Want};

/// Raise `OrphanedToolPair` for the first pairing violation in scan order.
#[pyfunction]
pub fn validate_tool_pairs(py: Python<'_>, items: &Bound<'_, PyAny>) -> PyResult<()> {
    guard(py, || {
        const F: &str = "validate_tool_pairs";
        let values = arguments::sequence(F, "items", items, "conversation items")?;
        let want = Want {
            pairs: Some(F),
            facts: false,
        };
        scan(py, &mut Types::new(py)?, &values, want)?.pairs(py)
    })
}

/// The cut index: `items[cut:]` is the largest retained suffix that fits
/// `history_tokens`, keeps items with `seq <= summary_floor` out and
/// splits no tool pair. `raw`, when given, are the items' raw estimates
/// already measured (one per item); the estimator then only corrects.
#[pyfunction]
#[pyo3(signature = (items, summary_floor, history_tokens, estimator, model_id, raw = None))]
pub fn select_history(
    py: Python<'_>,
    items: &Bound<'_, PyAny>,
    summary_floor: &Bound<'_, PyAny>,
    history_tokens: &Bound<'_, PyAny>,
    estimator: &Bound<'_, PyAny>,
    model_id: &Bound<'_, PyAny>,
    raw: Option<&Bound<'_, PyAny>>,
) -> PyResult<usize> {
    guard(py, || {
        const F: &str = "select_history";
        // The arguments in order before any work (the scan holds a pairing error back).
        let values = arguments::sequence(F, "items", items, "conversation items")?;
        let mut types = Types::new(py)?;
        let own = estimator.cast::<TokenEstimator>().ok();
        let want = Want {
            pairs: Some(F),
            facts: own.is_some() && raw.is_none(),
        };
        let scan = scan(py, &mut types, &values, want)?;
        let arguments::CutArguments {
            summary_floor: floor,
            history_tokens,
            model_id,
        } = arguments::cut_arguments(F, summary_floor, history_tokens, estimator, model_id)?;
        let raws = match raw {
            Some(r) if !r.is_none() => Some(arguments::raw_estimates(F, r, values.len())?),
            _ => None,
        };
        let mut host = PyCut {
            py,
            values: &values,
            types: RefCell::new(types),
            scan,
            own: own.map(|e| e.get()),
            estimator,
            model_id,
            raws,
            factor: (1, 1),
        };
        cut::select_history(&mut host, floor, history_tokens as i128).into_py(py)
    })
}

/// A Python history as the cut reads it.
struct PyCut<'a, 'py> {
    py: Python<'py>,
    values: &'a Items<'py>,
    types: RefCell<Types>,
    scan: Scan<'py>,
    /// This module's estimator: the batch and the correction run here.
    own: Option<&'a TokenEstimator>,
    estimator: &'a Bound<'py, PyAny>,
    model_id: &'a str,
    /// Measured beforehand (`raw`) or by another estimator; else by this
    /// module's estimator into the scan's buffer.
    raws: Option<Vec<i64>>,
    /// This module's estimator's factor for the key.
    factor: Ratio,
}

impl CutHost for PyCut<'_, '_> {
    type Error = HostError;

    fn validate_pairs(&mut self) -> Result<(), HostError> {
        Ok(self.scan.pairs(self.py)?)
    }

    fn measure(&mut self) -> Result<(), HostError> {
        let py = self.py;
        if let Some(est) = self.own {
            if self.raws.is_none() {
                // One lock for the whole batch.
                let mut types = self.types.borrow_mut();
                self.scan.finish_facts(py, &mut types)?;
                let buf = &mut *self.scan.buf;
                let factor =
                    (est.lock()).raw_batch(self.model_id, &types.kinds, &buf.facts, &mut buf.raws);
                self.factor = factor.into_py(py)?;
            } else {
                self.factor = est.lock().factor_of(self.model_id);
            }
        } else if self.raws.is_none() {
            let raws = self.estimator.call_method1(
                intern!(py, "raw_estimates"),
                (self.values.to_object(py)?, self.model_id),
            )?;
            self.raws = Some(arguments::foreign_raws(&raws, self.values.len())?);
        }
        Ok(())
    }

    fn raws(&self) -> &[i64] {
        self.raws.as_deref().unwrap_or(&self.scan.buf.raws)
    }

    fn result_of(&self) -> &[usize] {
        &self.scan.buf.result_of
    }

    fn corrected(&self, raw_sum: i64) -> Result<i128, HostError> {
        if self.own.is_some() {
            return Ok(apply(raw_sum, self.factor));
        }
        let r = self
            .estimator
            .call_method1(intern!(self.py, "corrected"), (raw_sum, self.model_id))?;
        Ok(arguments::foreign_int(&r, "corrected")?)
    }

    fn seq(&self, index: usize) -> Result<Option<i64>, HostError> {
        Ok(self.types.borrow_mut().seq_at(self.values, index)?)
    }
}

/// How many leading items `a` and `b` share: the first `n` with `a[i] is
/// b[i]` for every `i < n` (identity, never equality: no Python code runs).
#[pyfunction]
pub fn shared_prefix(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
) -> PyResult<usize> {
    guard(py, || {
        const F: &str = "shared_prefix";
        let a = arguments::sequence(F, "a", a, "objects")?;
        let b = arguments::sequence(F, "b", b, "objects")?;
        let n = a.len().min(b.len());
        Ok((0..n).find(|&i| a.ptr(i) != b.ptr(i)).unwrap_or(n))
    })
}
