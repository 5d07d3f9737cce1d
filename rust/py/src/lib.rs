//! `ctxengine._core`, the Rust backend (ADR 0001): Python objects converted
//! to `ctxengine_core` values and back, one module per concept exposed.

mod arguments;
mod assembly;
mod budget;
mod canonical;
mod data;
mod decode;
mod errors;
mod estimator;
mod history;
mod interop;
mod items;
mod render;
mod slots;
mod tokenize;

use ctxengine_core::schema;
use pyo3::prelude::*;

/// The item schema as JSON text (the same as `ctxengine/model/schema.json`).
#[pyfunction]
fn item_schema() -> String {
    schema::to_json()
}

/// `(table, kind, dict keys)` of each hand-written Rust item table (the schema test).
#[pyfunction(name = "_schema_tables")]
fn schema_tables() -> Vec<(&'static str, &'static str, Vec<String>)> {
    schema::tables()
}

/// The Rust backend of ctxengine.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(errors::bind_errors, m)?)?;
    m.add_function(wrap_pyfunction!(canonical::canonical_json, m)?)?;
    m.add_function(wrap_pyfunction!(canonical::payload_hash, m)?)?;
    m.add_function(wrap_pyfunction!(canonical::item_canonical, m)?)?;
    m.add_function(wrap_pyfunction!(budget::allocate_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(history::select_history, m)?)?;
    m.add_function(wrap_pyfunction!(history::validate_tool_pairs, m)?)?;
    m.add_function(wrap_pyfunction!(history::shared_prefix, m)?)?;
    m.add_class::<assembly::LineState>()?;
    m.add_function(wrap_pyfunction!(assembly::fit_body, m)?)?;
    m.add_function(wrap_pyfunction!(decode::decode_items, m)?)?;
    m.add_function(wrap_pyfunction!(render::render_items, m)?)?;
    m.add_function(wrap_pyfunction!(render::render_pointers, m)?)?;
    m.add_class::<estimator::TokenEstimator>()?;
    m.add_function(wrap_pyfunction!(tokenize::count_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(tokenize::encode_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(tokenize::load_encoding, m)?)?;
    m.add_function(wrap_pyfunction!(tokenize::exact_raw, m)?)?;
    m.add_function(wrap_pyfunction!(tokenize::counting_method, m)?)?;
    m.add_function(wrap_pyfunction!(tokenize::encoding_ranks_sha256, m)?)?;
    m.add_function(wrap_pyfunction!(item_schema, m)?)?;
    m.add_function(wrap_pyfunction!(schema_tables, m)?)?;
    interop::register(m)?;
    m.setattr("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
