//! Foreign histories (issue 15): plain-data building blocks the binding
//! feeds from Python objects.
//!
//! - [`json`]: a JSON argument string straight to its canonical bytes,
//!   succeeding exactly when Python's `json.loads` and then canonical JSON
//!   both would.
//! - [`value`]: the one seam foreign values are read through (Python
//!   objects in the binding, parsed JSON in the tests).
//! - [`chat`]: OpenAI Chat messages to items, measured, and the cut over them.
//! - [`mappings`]: the cut over items' dict forms, shaped by the item schema.
//! - [`items`]: the canonical bytes of ctxengine items written from their
//!   fields, so a foreign message is measured without building the item.
//! - [`approximate`]: LangChain's approximate token count of one message.
//! - [`trim`]: LangChain's `trim_messages` over additive per-message counts,
//!   the pair-safe window inside it, and the message-index form of the cut.

pub mod approximate;
pub mod chat;
pub mod generations;
pub mod items;
pub mod json;
pub mod mappings;
pub mod trim;
pub mod value;
