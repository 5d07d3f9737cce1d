//! The pure core of ctxengine: RFC 8785 canonical JSON, SHA-256 payload
//! hashing, token estimation with its bounded memo and exact-integer
//! correction, budget arithmetic and the deterministic history cut.
//!
//! No Python here: `rust/py` binds these to `ctxengine._core`, and the
//! contract both backends implement is `adr/0001-two-backends-one-contract.md`.

pub mod arguments;
pub mod body;
pub mod budget;
pub mod calibrate;
pub mod canonical;
pub mod counting;
pub mod cut;
pub mod data;
pub mod decode;
pub mod envelope;
pub mod error;
pub mod estimate;
pub mod hash;
pub mod interop;
pub mod pointer;
pub mod render;
pub mod schema;
pub mod tokenize;

pub use error::{CoreError, CoreResult};
