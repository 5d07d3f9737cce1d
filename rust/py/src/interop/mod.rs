//! Foreign histories (issue 15): the OpenAI Chat cut and LangChain's
//! `trim_messages`, reading Python objects into the core's plain data.
//! Anything outside the fast path's shapes hands the call back to the
//! reference (`ctxengine.reference.interop`), which raises the typed error.

mod chat;
mod langchain;
mod mappings;

use pyo3::prelude::*;

/// Add this module's functions and classes to `ctxengine._core`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(chat::openai_chat_cut, m)?)?;
    m.add_function(wrap_pyfunction!(langchain::langchain_trim, m)?)?;
    m.add_function(wrap_pyfunction!(mappings::mappings_cut, m)?)?;
    m.add_class::<langchain::LangChainCounter>()?;
    Ok(())
}
