//! RFC 8785 (JCS) canonical JSON: the formatting primitives ([`text`],
//! [`number`]), the JSON paths of failures ([`path`]) and the one walk every
//! value goes through ([`walk`]), with one nesting budget for the whole
//! value. A host (the Python binding, or [`value::Value`] in tests) only
//! says what each value is; the walk decides everything else.
//!
//! Everything appends to one caller-owned `Vec<u8>`; nothing allocates per
//! value except on the error path.

pub mod nesting;
pub mod number;
pub mod path;
pub mod source;
pub mod text;
#[cfg(test)]
mod value;
pub mod walk;

pub use number::{i64_text, write_f64, write_i64, write_int};
pub use path::{PathError, PathSeg};
pub use source::{Cached, KeyProblem, Node, Source, WalkError};
pub use text::{cmp_utf16, write_str};
pub use walk::Walker;

/// The largest integer magnitude that prints as an integer: 2^53 - 1.
pub const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;
/// The deepest nesting accepted. Every mapping, sequence and value type
/// (`to_dict()` hop) on the way down counts one level; the root container
/// is level 1, a container or value type at level 129 fails.
pub const MAX_DEPTH: usize = 128;

// The reasons, worded as the reference backend words them (Python reprs).
pub const REASON_NAN: &str = "nan is not a finite number";
pub const REASON_INFINITY: &str = "inf is not a finite number";
pub const REASON_NEG_INFINITY: &str = "-inf is not a finite number";
pub const REASON_INT_RANGE: &str = "integer outside ±(2**53-1)";
pub const REASON_DEPTH: &str = "nesting deeper than 128";
pub const REASON_CYCLE: &str = "cycle: container contains itself";
pub const REASON_ITEM_CYCLE: &str = "cycle: item contains itself";
pub const REASON_VALUE_CYCLE: &str = "cycle: value contains itself";
pub const REASON_SURROGATE: &str = "lone surrogate in string";

/// A value of a type the canonicalizer does not accept.
pub fn reason_unsupported_type(type_name: &str) -> String {
    format!("unsupported type {type_name}")
}

/// A subclass of a JSON type (`base`) that is not one of the accepted ones
/// (ADR 0010: enum members and the standard library's ordered and default
/// dicts; a subclass may redefine how its data reads, so it is refused).
pub fn reason_unsupported_subclass(type_name: &str, base: &str) -> String {
    format!("unsupported subclass {type_name} of {base}")
}

/// A value type whose `to_dict()` did not return a dict.
pub fn reason_to_dict_result(type_name: &str, result_type: &str) -> String {
    format!("{type_name}.to_dict() returned {result_type}, not a dict")
}
