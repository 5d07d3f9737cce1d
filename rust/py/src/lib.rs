//! `ctxengine._core`: the Rust backend of ctxengine (ADR 0001).
//!
//! A thin layer: Python objects are walked straight into the core's
//! canonical-JSON writer, core results come back as ints, bytes and
//! indices, and core errors are mapped once to `ctxengine.errors`.

mod arguments;
mod assemble;
mod batch;
mod conversions;
mod errors;
mod estimator;
mod estimator_snapshot;
mod interop;
mod tokenize;

use std::cell::Cell;

use ctxengine_core::budget::{self, BudgetInput};
use ctxengine_core::calibrate::{apply, Ratio};
use ctxengine_core::cut;
use ctxengine_core::hash::{hex, sha256};
use pyo3::exceptions::PyRuntimeError;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use batch::{scan, Items, Types, Want};
use conversions::{has_item_cache, item_canonical as item_cache, walk_error, walker};
use errors::{guard, IntoPy};
use estimator::TokenEstimator;

/// `payload_hash` of a value whose canonical bytes pass this size hashes
/// them in chunks as the walk goes on, on a second thread as soon as that
/// is up (`StreamHasher`): a megabyte costs little more than its hashing.
const STREAM_FROM_BYTES: usize = 16 * 1024;
/// Hashing at least this many bytes in one piece releases the GIL.
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
    let mut w = walker(py, buf);
    match w.write_root(value.as_ptr()) {
        Ok(()) => Ok(w.out),
        Err(e) => {
            give_back(w.out);
            Err(walk_error(py, e))
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
fn canonical_json<'py>(
    py: Python<'py>,
    value: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
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
        let mut buf = SCRATCH.with(Cell::take);
        buf.clear();
        let mut w = walker(py, buf).streaming(STREAM_FROM_BYTES);
        if let Err(e) = w.write_root(value.as_ptr()) {
            return Err(walk_error(py, e));
        }
        let (streamed, buf) = w.finish_stream();
        let digest = match streamed {
            Some(Some(digest)) => digest,
            Some(None) => return Err(PyRuntimeError::new_err("the hashing thread failed")),
            None if buf.len() >= DETACH_HASH_BYTES => py.detach(|| sha256(&buf)),
            None => sha256(&buf),
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
    context_window: &Bound<'_, PyAny>,
    max_output_tokens: &Bound<'_, PyAny>,
    default_output_reserve: &Bound<'_, PyAny>,
    prefix_tokens: &Bound<'_, PyAny>,
    reserve_tokens: &Bound<'_, PyAny>,
    margin_ratio: &Bound<'_, PyAny>,
    tool_results_ratio: &Bound<'_, PyAny>,
    working_state_tokens: &Bound<'_, PyAny>,
    history_floor: &Bound<'_, PyAny>,
    prefix_ceiling: &Bound<'_, PyAny>,
) -> PyResult<(i64, i64, i64, i64, i64)> {
    guard(py, || {
        const F: &str = "allocate_tokens";
        let input = BudgetInput {
            context_window: arguments::int64(F, "context_window", context_window)?,
            max_output_tokens: arguments::int64(F, "max_output_tokens", max_output_tokens)?,
            default_output_reserve: arguments::int64(
                F,
                "default_output_reserve",
                default_output_reserve,
            )?,
            prefix_tokens: arguments::int64(F, "prefix_tokens", prefix_tokens)?,
            reserve_tokens: arguments::int64(F, "reserve_tokens", reserve_tokens)?,
            margin_ratio: arguments::ratio(F, "margin_ratio", margin_ratio)?,
            tool_results_ratio: arguments::ratio(F, "tool_results_ratio", tool_results_ratio)?,
            working_state_tokens: arguments::int64(
                F,
                "working_state_tokens",
                working_state_tokens,
            )?,
            history_floor: arguments::int64(F, "history_floor", history_floor)?,
            prefix_ceiling: arguments::int64(F, "prefix_ceiling", prefix_ceiling)?,
        };
        let a = budget::allocate_tokens(&input).into_py(py)?;
        Ok((a.reserve, a.body, a.usable, a.tool_results, a.history))
    })
}

/// Raise `OrphanedToolPair` for the first pairing violation in scan order.
#[pyfunction]
fn validate_tool_pairs(py: Python<'_>, items: &Bound<'_, PyAny>) -> PyResult<()> {
    guard(py, || {
        const F: &str = "validate_tool_pairs";
        let values = arguments::sequence(F, "items", items, "conversation items")?;
        let mut types = Types::new(py)?;
        let want = Want {
            pairs: Some(F),
            facts: false,
        };
        scan(py, &mut types, &values, want)?.pairs(py)
    })
}

/// The cut index: `items[cut:]` is the largest retained suffix that fits
/// `history_tokens`, keeps items with `seq <= summary_floor` out and
/// splits no tool pair.
/// `raw`, when given, are the items' raw estimates already measured (one
/// per item); the estimator then only corrects.
#[pyfunction]
#[pyo3(signature = (items, summary_floor, history_tokens, estimator, model_id, raw = None))]
fn select_history(
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
        // The arguments, in order, before any work.
        let values = arguments::sequence(F, "items", items, "conversation items")?;
        let mut types = Types::new(py)?;
        let own = estimator.cast::<TokenEstimator>().ok();
        let want = Want {
            pairs: Some(F),
            facts: own.is_some() && raw.is_none(),
        };
        // (The scan checks the items and holds its pairing error back.)
        let mut s = scan(py, &mut types, &values, want)?;
        let floor = arguments::optional_int64(F, "summary_floor", summary_floor)?;
        let history_tokens = arguments::int64(F, "history_tokens", history_tokens)? as i128;
        arguments::estimator_like(F, estimator)?;
        let model_id = arguments::string(F, "model_id", model_id)?;
        let count = values.len();
        let raw = match raw {
            Some(r) if !r.is_none() => Some(arguments::raw_estimates(F, r, count)?),
            _ => None,
        };
        // 1. the pairs (OrphanedToolPair)
        s.pairs(py)?;

        // 3. the fit, over measured, own or any estimator's raw estimates
        let fit = match (raw, own) {
            (Some(raws), Some(est)) => {
                let factor = {
                    let mut st = est.get().lock();
                    let counter = st.counter_id(model_id);
                    st.factor(counter)
                };
                own_fit(py, &raws, factor, history_tokens)?
            }
            (Some(raws), None) => generic_fit(py, estimator, &raws, history_tokens, model_id)?,
            (None, Some(est)) => {
                // One lock for the whole batch, the correction in Rust.
                s.finish_facts(py, &mut types)?;
                let buf = &mut *s.buf;
                let sums = est
                    .get()
                    .raw_batch_into(model_id, &types.kinds, &buf.facts, &mut buf.raws)
                    .into_py(py)?;
                own_fit(py, &buf.raws, sums, history_tokens)?
            }
            (None, None) => {
                let raws = estimator.call_method1(
                    intern!(py, "raw_estimates"),
                    (values.to_object(py)?, model_id),
                )?;
                let raws = arguments::foreign_raws(&raws, count)?;
                generic_fit(py, estimator, &raws, history_tokens, model_id)?
            }
        };

        // 2. the floor bound: 1 + the last index with seq <= summary_floor.
        // Only an index at or after the fit can move the cut, so only the
        // items from the fit on are read (backwards, up to the first hit).
        let floor_bound = match floor {
            Some(floor) => types.floor_bound_from(py, &values, fit, count, floor)?,
            None => 0,
        };

        // 4. never split a tool pair
        Ok(cut::pair_reach(fit.max(floor_bound), &s.buf.result_of))
    })
}

/// The fit with this module's own correction (exact integers, no calls).
fn own_fit(py: Python<'_>, raws: &[i64], factor: Ratio, history_tokens: i128) -> PyResult<usize> {
    cut::fit_index(
        raws,
        history_tokens,
        |sum| Ok::<i128, PyErr>(apply(sum, factor)),
        || overflow_error(py),
    )
}

fn overflow_error(py: Python<'_>) -> PyErr {
    errors::estimator_error(py, "raw estimate sum overflows a 64-bit integer")
}

/// The fit through any estimator's `corrected()`.
fn generic_fit(
    py: Python<'_>,
    estimator: &Bound<'_, PyAny>,
    raws: &[i64],
    history_tokens: i128,
    model_id: &str,
) -> PyResult<usize> {
    let corrected_name = intern!(py, "corrected");
    cut::fit_index(
        raws,
        history_tokens,
        |sum| {
            let r = estimator.call_method1(corrected_name, (sum, model_id))?;
            arguments::foreign_int(&r, "corrected")
        },
        || overflow_error(py),
    )
}

/// Each item's cached rendered form for `region_class` (`item._rc`, a dict
/// or None), else `render(item, region_class)`; then the raw estimate of
/// each rendered item, in one batch.
#[pyfunction]
fn render_measure<'py>(
    py: Python<'py>,
    items: &Bound<'py, PyAny>,
    region_class: &Bound<'py, PyAny>,
    render: &Bound<'py, PyAny>,
    estimator: &Bound<'py, PyAny>,
    model_id: &str,
) -> PyResult<(Bound<'py, PyList>, Vec<i64>)> {
    guard(py, || {
        let values = Items::new(items)?;
        let rc_name = intern!(py, "_rc");
        let get_name = intern!(py, "get");
        let mut rendered: Vec<Bound<'py, PyAny>> = Vec::with_capacity(values.len());
        let mut i = 0;
        while let Some(item) = values.get(i) {
            let cache = item.getattr(rc_name)?;
            let hit = if cache.is_none() {
                None
            } else if let Ok(d) = cache.cast_exact::<PyDict>() {
                d.get_item(region_class)?
            } else {
                Some(cache.call_method1(get_name, (region_class,))?)
            };
            match hit {
                Some(h) if !h.is_none() => rendered.push(h),
                _ => rendered.push(render.call1((&item, region_class))?),
            }
            i += 1;
        }
        let list = PyList::new(py, &rendered)?;
        let raws = match estimator.cast::<TokenEstimator>() {
            Ok(est) => {
                let mut types = Types::new(py)?;
                let facts = TokenEstimator::facts_of(py, &mut types, &Items::Other(rendered))?;
                let mut raws = Vec::with_capacity(facts.len());
                est.get()
                    .raw_batch_into(model_id, &types.kinds, &facts, &mut raws)
                    .into_py(py)?;
                raws
            }
            Err(_) => estimator
                .call_method1(intern!(py, "raw_estimates"), (&list, model_id))?
                .extract()?,
        };
        Ok((list, raws))
    })
}

/// Hex SHA-256 over the 32-byte canonical digests of `values`, in order.
#[pyfunction]
fn digest_list(py: Python<'_>, values: &Bound<'_, PyAny>) -> PyResult<String> {
    guard(py, || {
        let values = Items::new(values)?;
        let cj_name = intern!(py, "_cj");
        let mut flat: Vec<u8> = Vec::with_capacity(values.len() * 32);
        let mut i = 0;
        while let Some(value) = values.get(i) {
            let cached = if is_exact_plain(&value) {
                None
            } else {
                match value.getattr_opt(cj_name) {
                    Ok(Some(cj)) => unsafe { conversions::read_cache(cj.as_ptr()) }.map(|(_, d)| d),
                    _ => None,
                }
            };
            match cached {
                Some(digest) => flat.extend_from_slice(&digest),
                None => {
                    let tuple = item_cache(&value)?;
                    let digest = tuple.get_item(1)?;
                    flat.extend_from_slice(&sha256_from(&digest)?);
                }
            }
            i += 1;
        }
        Ok(hex(&sha256(&flat)))
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
    m.add_function(wrap_pyfunction!(render_measure, m)?)?;
    m.add_function(wrap_pyfunction!(digest_list, m)?)?;
    m.add_function(wrap_pyfunction!(assemble::fit_body, m)?)?;
    m.add_class::<TokenEstimator>()?;
    m.add_function(wrap_pyfunction!(tokenize::count_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(tokenize::encode_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(tokenize::exact_raw, m)?)?;
    m.add_function(wrap_pyfunction!(tokenize::counting_method, m)?)?;
    m.add_function(wrap_pyfunction!(tokenize::encoding_ranks_sha256, m)?)?;
    interop::register(m)?;
    m.setattr("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
