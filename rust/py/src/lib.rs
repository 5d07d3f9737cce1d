//! `ctxengine._core`: the Rust backend of ctxengine (ADR 0001).
//!
//! A thin layer: Python objects are walked straight into the core's
//! canonical-JSON writer, core results come back as ints, bytes and
//! indices, and core errors are mapped once to `ctxengine.errors`.

mod batch;
mod conversions;
mod errors;
mod estimator;

use std::cell::Cell;

use ctxengine_core::budget::{self, BudgetInput};
use ctxengine_core::cut;
use ctxengine_core::estimate::corrected;
use ctxengine_core::hash::{hex, sha256};
use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use batch::{saturating_i64, scan, Items, Types, Want};
use conversions::{has_item_cache, item_canonical as item_cache, Walker};
use errors::{guard, IntoPy};
use estimator::TokenEstimator;

/// Hashing at least this many bytes releases the GIL.
const DETACH_HASH_BYTES: usize = 512 * 1024;
/// A scratch buffer larger than this is not kept between calls.
const KEEP_BUFFER_BYTES: usize = 16 * 1024 * 1024;

thread_local! {
    /// The output buffer of the last walk, reused to avoid re-faulting pages.
    /// Taken (not borrowed) so that a re-entrant call simply allocates.
    static SCRATCH: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

fn canonical_bytes(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let mut buf = SCRATCH.with(Cell::take);
    buf.clear();
    let mut walker = Walker::new(py, buf);
    match walker.write_root(value) {
        Ok(()) => Ok(walker.out),
        Err(e) => {
            give_back(walker.out);
            Err(e.into_pyerr(py))
        }
    }
}

fn give_back(buf: Vec<u8>) {
    if buf.capacity() <= KEEP_BUFFER_BYTES {
        SCRATCH.with(|s| s.set(buf));
    }
}

/// True for the exact JSON-shaped builtins, which never carry `_cj`.
fn is_exact_plain(value: &Bound<'_, PyAny>) -> bool {
    let p = value.as_ptr();
    unsafe {
        p == ffi::Py_None()
            || ffi::PyUnicode_CheckExact(p) != 0
            || ffi::PyDict_CheckExact(p) != 0
            || ffi::PyList_CheckExact(p) != 0
            || ffi::PyTuple_CheckExact(p) != 0
            || ffi::PyLong_CheckExact(p) != 0
            || ffi::PyFloat_CheckExact(p) != 0
            || ffi::PyBool_Check(p) != 0
    }
}

/// RFC 8785 canonical JSON bytes of `value`.
#[pyfunction]
fn canonical_json<'py>(py: Python<'py>, value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    guard(py, || {
        let buf = canonical_bytes(py, value)?;
        let out = PyBytes::new(py, &buf);
        give_back(buf);
        Ok(out)
    })
}

/// Lowercase SHA-256 hex of the canonical bytes of `value`.
#[pyfunction]
fn payload_hash(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<String> {
    guard(py, || {
        if !is_exact_plain(value) && has_item_cache(value)? {
            // An item: its cache already holds the digest.
            let digest = item_cache(value)?.get_item(1)?;
            return Ok(hex(&sha256_from(&digest)?));
        }
        let buf = canonical_bytes(py, value)?;
        let digest = if buf.len() >= DETACH_HASH_BYTES {
            py.detach(|| sha256(&buf))
        } else {
            sha256(&buf)
        };
        give_back(buf);
        Ok(hex(&digest))
    })
}

fn sha256_from(digest: &Bound<'_, PyAny>) -> PyResult<[u8; 32]> {
    let d = digest.cast::<PyBytes>()?.as_bytes();
    let mut out = [0u8; 32];
    if d.len() == 32 {
        out.copy_from_slice(d);
    }
    Ok(out)
}

/// `(canonical_bytes, sha256_digest)` of `item.to_dict()`, cached in `item._cj`.
#[pyfunction]
fn item_canonical<'py>(py: Python<'py>, item: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
    guard(py, || item_cache(item))
}

/// `(reserve, body, usable, tool_results, history)`; raises `ContextOverflow`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn allocate_tokens(
    py: Python<'_>,
    context_window: i64,
    max_output_tokens: i64,
    default_output_reserve: i64,
    prefix_tokens: i64,
    reserve_tokens: i64,
    margin_ratio: f64,
    tool_results_ratio: f64,
    working_state_tokens: i64,
    history_floor: i64,
    prefix_ceiling: i64,
) -> PyResult<(i64, i64, i64, i64, i64)> {
    guard(py, || {
        let a = budget::allocate_tokens(&BudgetInput {
            context_window,
            max_output_tokens,
            default_output_reserve,
            prefix_tokens,
            reserve_tokens,
            margin_ratio,
            tool_results_ratio,
            working_state_tokens,
            history_floor,
            prefix_ceiling,
        })
        .into_py(py)?;
        Ok((a.reserve, a.body, a.usable, a.tool_results, a.history))
    })
}

/// Raise `OrphanedToolPair` for the first pairing violation in scan order.
#[pyfunction]
fn validate_tool_pairs(py: Python<'_>, items: &Bound<'_, PyAny>) -> PyResult<()> {
    guard(py, || {
        let values = Items::new(items)?;
        let mut types = Types::new(py)?;
        let want = Want {
            pairs: true,
            seqs: false,
            facts: false,
        };
        let s = scan(py, &mut types, &values, want)?;
        cut::validate_tool_pairs(&s.tool_roles()).into_py(py)?;
        Ok(())
    })
}

/// The cut index: `items[cut:]` is the largest retained suffix that fits
/// `history_tokens`, keeps items with `seq <= summary_floor` out and
/// splits no tool pair.
#[pyfunction]
fn select_history(
    py: Python<'_>,
    items: &Bound<'_, PyAny>,
    summary_floor: &Bound<'_, PyAny>,
    history_tokens: i128,
    estimator: &Bound<'_, PyAny>,
    model_id: &str,
) -> PyResult<usize> {
    guard(py, || {
        let floor = if summary_floor.is_none() {
            i64::MIN
        } else {
            saturating_i64(summary_floor).ok_or_else(|| {
                PyTypeError::new_err(format!(
                    "summary_floor must be an int, got {}",
                    summary_floor.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                ))
            })?
        };
        let values = Items::new(items)?;
        let mut types = Types::new(py)?;
        let own = estimator.cast::<TokenEstimator>().ok();
        let want = Want {
            pairs: true,
            seqs: true,
            facts: own.is_some(),
        };
        let mut s = scan(py, &mut types, &values, want)?;
        let result_of = cut::validate_tool_pairs(&s.tool_roles()).into_py(py)?;

        if let Some(est) = own {
            // Fast path: one lock for the whole batch, correction in Rust.
            s.finish_facts(py, &mut types)?;
            let (raws, sums) = est
                .get()
                .raw_batch_with_sums(model_id, &types.kinds, &s.facts)
                .into_py(py)?;
            return cut::cut_after_validation(&raws, &s.seqs, &result_of, floor, history_tokens, |sum| {
                corrected(sum, sums.estimated, sums.actual)
            })
            .into_py(py);
        }

        // Any estimator with raw_estimates() and corrected().
        let raws: Vec<i64> = estimator
            .call_method1(intern!(py, "raw_estimates"), (values.to_object(py)?, model_id))?
            .extract()?;
        if raws.len() != s.seqs.len() {
            return Err(PyTypeError::new_err("raw_estimates returned the wrong number of estimates"));
        }
        let floor_bound = cut::floor_bound(&s.seqs, floor);
        let corrected_name = intern!(py, "corrected");
        let fit = cut::fit_index(
            &raws,
            history_tokens,
            |sum| {
                estimator
                    .call_method1(corrected_name, (sum, model_id))?
                    .extract::<i128>()
            },
            || PyTypeError::new_err("raw estimate sum overflows a 64-bit integer"),
        )?;
        Ok(cut::pair_reach(fit.max(floor_bound), &result_of))
    })
}

/// The Rust backend of ctxengine.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(canonical_json, m)?)?;
    m.add_function(wrap_pyfunction!(payload_hash, m)?)?;
    m.add_function(wrap_pyfunction!(item_canonical, m)?)?;
    m.add_function(wrap_pyfunction!(allocate_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(select_history, m)?)?;
    m.add_function(wrap_pyfunction!(validate_tool_pairs, m)?)?;
    m.add_class::<TokenEstimator>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
