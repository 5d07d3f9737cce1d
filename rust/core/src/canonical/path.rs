//! JSON paths of canonicalization failures, built while the walk unwinds
//! (free on the success path).

use std::fmt::Write as _;

use crate::error::CoreError;

/// One step of a JSON path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathSeg {
    Key(String),
    Index(usize),
}

/// A canonicalization failure whose path is completed as the walk unwinds:
/// each container frame prepends its own segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathError {
    /// Innermost segment first.
    segs: Vec<PathSeg>,
    pub reason: String,
}

impl PathError {
    pub fn new(reason: impl Into<String>) -> Self {
        PathError {
            segs: Vec::new(),
            reason: reason.into(),
        }
    }

    /// The error happened inside the value under `key`.
    #[must_use]
    pub fn in_key(mut self, key: &str) -> Self {
        self.segs.push(PathSeg::Key(key.to_owned()));
        self
    }

    /// The error happened inside the list element `index`.
    #[must_use]
    pub fn in_index(mut self, index: usize) -> Self {
        self.segs.push(PathSeg::Index(index));
        self
    }

    /// `$` then `.key` / `[i]` from the root down.
    pub fn path(&self) -> String {
        let mut p = String::from("$");
        for seg in self.segs.iter().rev() {
            match seg {
                PathSeg::Key(k) => {
                    p.push('.');
                    p.push_str(k);
                }
                PathSeg::Index(i) => {
                    let _ = write!(p, "[{i}]");
                }
            }
        }
        p
    }

    pub fn into_error(self) -> CoreError {
        CoreError::canonicalization(self.path(), self.reason)
    }
}

impl From<PathError> for CoreError {
    fn from(e: PathError) -> Self {
        e.into_error()
    }
}
