//! The one error type of the core. The binding maps each variant once to the
//! Python class of the same name in `ctxengine.errors`.

use std::fmt;

/// Everything the core can reject, naming the offending thing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoreError {
    /// A value cannot be written as canonical JSON; `path` is its JSON path.
    Canonicalization { path: String, reason: String },
    /// A budget class does not fit: `budget_class` used `tokens` of `cap`.
    ContextOverflow {
        budget_class: String,
        tokens: i64,
        cap: i64,
        detail: String,
    },
    /// A policy value the arithmetic cannot use.
    Policy { key: String, reason: String },
    /// A tool call without its result, or a result without its call.
    OrphanedToolPair {
        call_id: String,
        index: usize,
        reason: String,
    },
    /// Bad input to the token estimator.
    Estimator(String),
    /// An entry point's argument of the wrong type or value.
    Argument {
        function: String,
        argument: String,
        reason: String,
    },
}

/// The Python classes of `ctxengine.errors` the variants map to, in
/// [`CoreError::class`] order.
pub const CLASSES: [&str; 6] = [
    "CanonicalizationError",
    "ContextOverflow",
    "PolicyError",
    "OrphanedToolPair",
    "EstimatorError",
    "ArgumentError",
];

impl CoreError {
    /// Its class's index in [`CLASSES`] and the class's constructor
    /// arguments, in order.
    pub fn class(self) -> (usize, Vec<crate::data::Data>) {
        use crate::data::Data;
        let s = Data::Str;
        match self {
            CoreError::Canonicalization { path, reason } => (0, vec![s(path), s(reason)]),
            CoreError::ContextOverflow {
                budget_class,
                tokens,
                cap,
                detail,
            } => (
                1,
                vec![
                    s(budget_class),
                    Data::int(tokens),
                    Data::int(cap),
                    s(detail),
                ],
            ),
            CoreError::Policy { key, reason } => (2, vec![s(key), s(reason)]),
            CoreError::OrphanedToolPair {
                call_id,
                index,
                reason,
            } => (3, vec![s(call_id), Data::int(index as u64), s(reason)]),
            CoreError::Estimator(message) => (4, vec![s(message)]),
            CoreError::Argument {
                function,
                argument,
                reason,
            } => (5, vec![s(function), s(argument), s(reason)]),
        }
    }

    pub fn canonicalization(path: impl Into<String>, reason: impl Into<String>) -> Self {
        CoreError::Canonicalization {
            path: path.into(),
            reason: reason.into(),
        }
    }

    pub fn overflow(budget_class: &str, tokens: i64, cap: i64, detail: impl Into<String>) -> Self {
        CoreError::ContextOverflow {
            budget_class: budget_class.to_owned(),
            tokens,
            cap,
            detail: detail.into(),
        }
    }

    pub fn policy(key: impl Into<String>, reason: impl Into<String>) -> Self {
        CoreError::Policy {
            key: key.into(),
            reason: reason.into(),
        }
    }

    pub fn orphan(call_id: &str, index: usize, reason: &str) -> Self {
        CoreError::OrphanedToolPair {
            call_id: call_id.to_owned(),
            index,
            reason: reason.to_owned(),
        }
    }

    pub fn estimator(message: impl Into<String>) -> Self {
        CoreError::Estimator(message.into())
    }

    pub fn argument(
        function: &str,
        argument: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        CoreError::Argument {
            function: function.to_owned(),
            argument: argument.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for CoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CoreError::Canonicalization { path, reason } => write!(f, "{path}: {reason}"),
            CoreError::ContextOverflow {
                budget_class,
                tokens,
                cap,
                detail,
            } => {
                // A detail is the whole explanation (what is larger than what, and the knob).
                if detail.is_empty() {
                    write!(
                        f,
                        "{budget_class}: {tokens} tokens exceeds the cap of {cap} tokens"
                    )
                } else {
                    write!(f, "{budget_class}: {detail}")
                }
            }
            CoreError::Policy { key, reason } => write!(f, "policy {key}: {reason}"),
            CoreError::OrphanedToolPair {
                call_id,
                index,
                reason,
            } => write!(f, "tool pair {call_id:?} at item {index}: {reason}"),
            CoreError::Estimator(message) => f.write_str(message),
            CoreError::Argument {
                function,
                argument,
                reason,
            } => write!(f, "{function}: {argument}: {reason}"),
        }
    }
}

impl std::error::Error for CoreError {}

pub type CoreResult<T> = Result<T, CoreError>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Data;

    #[test]
    fn each_error_names_its_class_and_arguments() {
        let (class, args) = CoreError::orphan("c1", 4, "no result").class();
        assert_eq!(CLASSES[class], "OrphanedToolPair");
        assert_eq!(
            args,
            [Data::from("c1"), Data::int(4u8), Data::from("no result")]
        );
        let (class, args) = CoreError::overflow("prefix", 9, 5, "").class();
        assert_eq!(CLASSES[class], "ContextOverflow");
        assert_eq!(args[1..3], [Data::int(9), Data::int(5)]);
        assert_eq!(
            CLASSES[CoreError::estimator("x").class().0],
            "EstimatorError"
        );
        let argument = CoreError::argument("f", "a", "r").class();
        assert_eq!(
            (CLASSES[argument.0], argument.1.len()),
            ("ArgumentError", 3)
        );
        assert_eq!(
            CLASSES[CoreError::policy("k", "r").class().0],
            "PolicyError"
        );
        let canonical = CoreError::canonicalization("$", "r").class().0;
        assert_eq!(CLASSES[canonical], "CanonicalizationError");
    }
}
