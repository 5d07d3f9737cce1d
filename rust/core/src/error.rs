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

impl CoreError {
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
