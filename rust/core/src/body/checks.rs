//! The block checks of `check_body_inputs`, worded as the reference
//! (`ctxengine/reference/arguments.py`) words them and made at the points it
//! makes them: a known kind, a passages block's ids one per item, no second
//! history, working-state or skills block, and one history block in all.
//! The binding reads each block's fields; the checks are these.

use std::fmt::Display;

use super::Kind;
use crate::error::{CoreError, CoreResult};

/// What the checks have seen of the blocks so far.
#[derive(Debug, Default)]
pub struct BlockChecks {
    counts: [usize; 8],
}

impl BlockChecks {
    /// The kind named `name` of the block at `at` (`inputs.blocks[i]`);
    /// `repr` shows the name as Python's `repr` does, for the error.
    pub fn kind(
        function: &str,
        at: &dyn Display,
        name: &str,
        repr: impl FnOnce() -> String,
    ) -> CoreResult<Kind> {
        Kind::parse(name).ok_or_else(|| {
            CoreError::argument(
                function,
                format!("{at}.kind"),
                format!("unknown kind {}", repr()),
            )
        })
    }

    /// A passages block holds one id per item.
    pub fn ids(
        function: &str,
        at: &dyn Display,
        kind: Kind,
        ids: usize,
        items: usize,
    ) -> CoreResult<()> {
        if kind == Kind::Passages && ids != items {
            return Err(CoreError::argument(
                function,
                format!("{at}.ids"),
                format!("{ids} ids for {items} passages"),
            ));
        }
        Ok(())
    }

    /// One more block of `kind` (after its other checks): a second history,
    /// working-state or skills block is refused.
    pub fn count(&mut self, function: &str, at: &dyn Display, kind: Kind) -> CoreResult<()> {
        let seen = &mut self.counts[kind as usize];
        *seen += 1;
        if matches!(kind, Kind::History | Kind::WorkingState | Kind::Skills) && *seen > 1 {
            return Err(CoreError::argument(
                function,
                format!("{at}.kind"),
                format!("a second {} block", kind.name()),
            ));
        }
        Ok(())
    }

    /// After the last block: exactly one history block.
    pub fn finish(&self, function: &str) -> CoreResult<()> {
        if self.counts[Kind::History as usize] != 1 {
            return Err(CoreError::argument(
                function,
                "inputs.blocks",
                "expected one history block",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(e: CoreError) -> (String, String) {
        match e {
            CoreError::Argument {
                argument, reason, ..
            } => (argument, reason),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn kinds_are_the_model_names() {
        for name in Kind::NAMES {
            let kind = BlockChecks::kind("f", &"b", name, String::new).unwrap();
            assert_eq!(kind.name(), name);
        }
        let e = BlockChecks::kind("f", &"inputs.blocks[2]", "nope", || "'nope'".into());
        assert_eq!(
            reason(e.unwrap_err()),
            ("inputs.blocks[2].kind".into(), "unknown kind 'nope'".into())
        );
    }

    #[test]
    fn passages_hold_one_id_per_item() {
        assert!(BlockChecks::ids("f", &"b", Kind::Passages, 2, 2).is_ok());
        assert!(BlockChecks::ids("f", &"b", Kind::Lines, 0, 2).is_ok());
        let e = BlockChecks::ids("f", &"b", Kind::Passages, 1, 2).unwrap_err();
        assert_eq!(reason(e), ("b.ids".into(), "1 ids for 2 passages".into()));
    }

    #[test]
    fn one_history_block_and_no_second_of_the_single_kinds() {
        let mut c = BlockChecks::default();
        assert_eq!(
            reason(c.finish("f").unwrap_err()),
            ("inputs.blocks".into(), "expected one history block".into())
        );
        for kind in [Kind::Passages, Kind::Passages, Kind::History, Kind::Skills] {
            c.count("f", &"b", kind).unwrap();
        }
        assert!(c.finish("f").is_ok());
        for kind in [Kind::History, Kind::WorkingState, Kind::Skills] {
            let mut again = BlockChecks::default();
            again.count("f", &"b0", kind).unwrap();
            let e = again.count("f", &"b1", kind).unwrap_err();
            let second = format!("a second {} block", kind.name());
            assert_eq!(reason(e), ("b1.kind".into(), second));
        }
    }
}
