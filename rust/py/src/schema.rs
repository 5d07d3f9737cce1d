//! The item schema (`ctxengine_core::schema`) for Python: its JSON text,
//! and what the Rust side's item tables say, for the schema test.

use ctxengine_core::schema;
use pyo3::prelude::*;

/// The item schema as JSON text (the same as `ctxengine/model/schema.json`).
#[pyfunction]
fn item_schema() -> String {
    schema::to_json()
}

/// `(table, kind, dict keys)` for each hand-written Rust item table.
#[pyfunction(name = "_schema_tables")]
fn schema_tables() -> Vec<(&'static str, &'static str, Vec<String>)> {
    schema::tables()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(item_schema, m)?)?;
    m.add_function(wrap_pyfunction!(schema_tables, m)?)?;
    Ok(())
}
