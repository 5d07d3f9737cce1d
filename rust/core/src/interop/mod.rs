//! Foreign histories (issue 15): plain-data building blocks the binding
//! feeds from Python objects.
//!
//! - [`json`]: a JSON argument string straight to its canonical bytes,
//!   succeeding exactly when Python's `json.loads` and then canonical JSON
//!   both would.
//! - [`items`]: the canonical bytes of ctxengine items written from their
//!   fields, so a foreign message is measured without building the item.
//! - [`trim`]: LangChain's `trim_messages` over additive per-message counts,
//!   the pair-safe window inside it, and the message-index form of the cut.

pub mod items;
pub mod json;
pub mod trim;
