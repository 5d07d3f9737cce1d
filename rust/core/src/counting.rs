//! How the estimator counts a key, and what it learned per model (ADR 0012).
//!
//! A key is a model id, or a plan's counting key `model#method` that forces
//! the method. [`resolve`] splits it; [`Calibrations`] keeps, per
//! calibration key (the model id for the heuristic, `model#encoding` for an
//! exact method), the cumulative reconciled sums of ADR 0001 and the sample
//! window of [`crate::calibrate`], in first-reconcile order.

use std::collections::HashMap;

use crate::calibrate::{self, Ratio};
use crate::error::{CoreError, CoreResult};
use crate::estimate::Reconciled;
use crate::tokenize::table::EncodingTable;
use crate::tokenize::Method;

/// A key resolved: the model id, its method, and the key it calibrates under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved<'a> {
    pub model: &'a str,
    pub method: Method,
}

impl Resolved<'_> {
    /// The model id for the heuristic (as before ADR 0012), `model#encoding` otherwise.
    pub fn calibration_key(&self) -> String {
        match self.method {
            Method::Heuristic => self.model.to_owned(),
            Method::Exact(e) => format!("{}#{}", self.model, e.name()),
        }
    }

    /// The memo's counter: the model id for the heuristic (its profile is per
    /// model), `#encoding` for an exact method (shared by every model on it).
    pub fn memo_counter(&self) -> String {
        match self.method {
            Method::Heuristic => self.model.to_owned(),
            Method::Exact(e) => format!("#{}", e.name()),
        }
    }
}

/// Split `key` into model and method: a known method after the last `#`
/// forces it, else the table decides for the whole key.
pub fn resolve<'a>(key: &'a str, table: &EncodingTable) -> Resolved<'a> {
    if let Some((model, suffix)) = key.rsplit_once('#') {
        if let Some(method) = Method::from_name(suffix) {
            return Resolved { model, method };
        }
    }
    Resolved {
        model: key,
        method: table.resolve(key),
    }
}

#[derive(Debug, Clone, Default)]
struct Entry {
    sums: Reconciled,
    window: Vec<(u64, u64)>,
    /// The factor, computed on first use after a change.
    factor: Option<Ratio>,
}

/// Per calibration key: sums, sample window and the factor they give.
#[derive(Debug, Clone, Default)]
pub struct Calibrations {
    entries: Vec<(String, Entry)>,
    index: HashMap<String, usize>,
}

impl Calibrations {
    fn entry(&self, key: &str) -> Option<&Entry> {
        self.index.get(key).map(|&i| &self.entries[i].1)
    }

    fn entry_mut(&mut self, key: &str) -> &mut Entry {
        let i = match self.index.get(key) {
            Some(&i) => i,
            None => {
                self.index.insert(key.to_owned(), self.entries.len());
                self.entries.push((key.to_owned(), Entry::default()));
                self.entries.len() - 1
            }
        };
        &mut self.entries[i].1
    }

    pub fn sums(&self, key: &str) -> Reconciled {
        self.entry(key).map_or_else(Reconciled::default, |e| e.sums)
    }

    pub fn window(&self, key: &str) -> &[(u64, u64)] {
        self.entry(key).map_or(&[], |e| e.window.as_slice())
    }

    /// The factor of `key` (`two_sided` for the heuristic), cached until the
    /// next reconcile.
    pub fn factor(&mut self, key: &str, two_sided: bool) -> Ratio {
        match self.index.get(key) {
            None => (1, 1),
            Some(&i) => {
                let e = &mut self.entries[i].1;
                *e.factor.get_or_insert_with(|| {
                    calibrate::factor(e.sums.estimated, e.sums.actual, &e.window, two_sided)
                })
            }
        }
    }

    /// The factor without caching it (for readers holding `&self`).
    pub fn factor_of(&self, key: &str, two_sided: bool) -> Ratio {
        self.entry(key).map_or((1, 1), |e| {
            e.factor.unwrap_or_else(|| {
                calibrate::factor(e.sums.estimated, e.sums.actual, &e.window, two_sided)
            })
        })
    }

    /// Add one response: `estimated` (what the engine sent) > 0, `actual` >= 0.
    pub fn reconcile(
        &mut self,
        key: &str,
        two_sided: bool,
        estimated: i64,
        actual: i64,
    ) -> CoreResult<()> {
        if estimated <= 0 {
            return Err(CoreError::estimator(format!(
                "estimated: expected a positive int, got {estimated}"
            )));
        }
        if actual < 0 {
            return Err(CoreError::estimator(format!(
                "actual: expected a non-negative int, got {actual}"
            )));
        }
        let in_force = self.factor(key, two_sided);
        let current = self.sums(key);
        let overflow = || CoreError::estimator("reconciled sums overflow 64 bits");
        let sums = Reconciled {
            estimated: current
                .estimated
                .checked_add(estimated as u64)
                .ok_or_else(overflow)?,
            actual: current
                .actual
                .checked_add(actual as u64)
                .ok_or_else(overflow)?,
        };
        let e = self.entry_mut(key);
        e.sums = sums;
        if two_sided {
            calibrate::push(&mut e.window, estimated as u64, actual as u64, in_force);
        }
        e.factor = None;
        Ok(())
    }

    /// Set a key's state outright (restoring a snapshot).
    pub fn set(&mut self, key: &str, sums: Reconciled, window: Vec<(u64, u64)>) {
        let e = self.entry_mut(key);
        e.sums = sums;
        e.window = window;
        e.factor = None;
    }

    /// Every key with its sums and window, in first-reconcile order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Reconciled, &[(u64, u64)])> {
        self.entries
            .iter()
            .map(|(k, e)| (k.as_str(), e.sums, e.window.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenize::Encoding;

    #[test]
    fn keys_resolve() {
        let t = EncodingTable::default();
        let r = resolve("openai:gpt-4o", &t);
        assert_eq!(r.method, Method::Exact(Encoding::O200kBase));
        assert_eq!(r.calibration_key(), "openai:gpt-4o#o200k_base");
        assert_eq!(r.memo_counter(), "#o200k_base");
        let r = resolve("openai:gpt-4o#heuristic", &t);
        assert_eq!((r.model, r.method), ("openai:gpt-4o", Method::Heuristic));
        assert_eq!(r.calibration_key(), "openai:gpt-4o");
        assert_eq!(r.memo_counter(), "openai:gpt-4o");
        let r = resolve("vertex:claude#v2", &t);
        assert_eq!((r.model, r.method), ("vertex:claude#v2", Method::Heuristic));
        let r = resolve("a#b#cl100k_base", &t);
        assert_eq!(
            (r.model, r.method),
            ("a#b", Method::Exact(Encoding::Cl100kBase))
        );
    }

    #[test]
    fn calibration_per_key() {
        let mut c = Calibrations::default();
        for _ in 0..7 {
            c.reconcile("m", true, 1000, 700).unwrap();
        }
        assert_eq!(c.factor("m", true), (1, 1));
        c.reconcile("m", true, 1000, 700).unwrap();
        let f = c.factor("m", true);
        assert_eq!(f.0 * 50, f.1 * 37);
        assert_eq!(c.factor_of("m", true), f);
        // exact keys: upward only, no window
        c.reconcile("m#o200k_base", false, 100, 50).unwrap();
        assert_eq!(c.factor("m#o200k_base", false), (1, 1));
        assert!(c.window("m#o200k_base").is_empty());
        assert!(c.reconcile("m", true, 0, 1).is_err());
        assert!(c.reconcile("m", true, 1, -1).is_err());
        let keys: Vec<&str> = c.iter().map(|(k, _, _)| k).collect();
        assert_eq!(keys, vec!["m", "m#o200k_base"]);
        assert_eq!(c.factor("nobody", true), (1, 1));
    }
}
