//! The fit's result as the caller hands it back: a result that only names
//! what is missing, the body's digest (SHA-256 over its parts' 32-byte
//! canonical digests, in order), and the measured blocks built from the
//! raw counts of a batch.

use super::{Block, BodyFit, Kind, Part, Reason};
use crate::hash::{hex, sha256, PrefixStates};

/// Not measured: the block item's place in the batch is unknown.
pub const UNMEASURED: usize = usize::MAX;

impl BodyFit {
    /// A result whose only news is the history indices the caller lacks
    /// (renders or pointers): it renders them and calls again.
    pub fn missing(indices: Vec<usize>) -> BodyFit {
        BodyFit {
            body: Vec::new(),
            body_raw: 0,
            reason: Reason::Fits,
            compactable: false,
            cut: 0,
            history_budget: 0,
            steps: Vec::new(),
            missing: indices,
        }
    }

    /// How many leading parts of the body repeat from build to build: the
    /// history (rendered or as pointers) and the summary before it.
    pub fn leading(&self, kind_of: impl Fn(usize) -> Kind) -> usize {
        self.body
            .iter()
            .take_while(|p| match p {
                Part::History(_) | Part::Pointer(_) => true,
                Part::Item { block, .. } => kind_of(*block) == Kind::Summary,
            })
            .count()
    }
}

/// The hex SHA-256 over `digests` concatenated, in order; with `prefixes`,
/// the states after the `leading` digests are kept and reused (they repeat
/// from build to build).
pub fn body_sha256<'d>(
    digests: impl ExactSizeIterator<Item = &'d [u8; 32]>,
    leading: usize,
    prefixes: Option<&mut PrefixStates>,
) -> String {
    let mut flat: Vec<u8> = Vec::with_capacity(digests.len() * 32);
    for d in digests {
        flat.extend_from_slice(d);
    }
    hex(&match prefixes {
        Some(states) => states.sha256(&flat, 32 * leading),
        None => sha256(&flat),
    })
}

impl<'a> Block<'a> {
    /// A block of `len` items whose measured ones are at `at` in a batch
    /// counted as `raws` ([`UNMEASURED`]: not measured, a lines block's
    /// shorter items).
    #[allow(clippy::too_many_arguments)]
    pub fn measured(
        class: &'a str,
        kind: Kind,
        len: usize,
        at: &[usize],
        raws: &[i64],
        ids: Vec<&'a str>,
        max_items: Option<i64>,
        max_tokens: Option<i64>,
    ) -> Self {
        Block {
            class,
            kind,
            len,
            raws: at
                .iter()
                .filter(|&&i| i != UNMEASURED)
                .map(|&i| raws[i])
                .collect(),
            ids,
            max_items,
            max_tokens,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_result_names_only_the_indices() {
        let fit = BodyFit::missing(vec![3, 5]);
        assert_eq!(fit.missing, [3, 5]);
        assert!(fit.body.is_empty() && fit.steps.is_empty());
        assert_eq!((fit.reason, fit.cut, fit.body_raw), (Reason::Fits, 0, 0));
    }

    #[test]
    fn the_leading_parts_are_the_summary_and_the_history() {
        let mut fit = BodyFit::missing(Vec::new());
        let kinds = [Kind::Summary, Kind::Turn];
        fit.body = vec![
            Part::Item { block: 0, item: 0 },
            Part::History(0),
            Part::Pointer(1),
            Part::Item { block: 1, item: 0 },
            Part::History(2),
        ];
        assert_eq!(fit.leading(|b| kinds[b]), 3);
        fit.body.insert(0, Part::Item { block: 1, item: 0 });
        assert_eq!(fit.leading(|b| kinds[b]), 0);
    }

    #[test]
    fn the_body_digest_is_the_hash_of_the_digests_with_or_without_prefixes() {
        let digests = [[1u8; 32], [2; 32], [3; 32]];
        let plain = body_sha256(digests.iter(), 2, None);
        let mut flat = Vec::new();
        for d in &digests {
            flat.extend_from_slice(d);
        }
        assert_eq!(plain, hex(&sha256(&flat)));
        let mut states = PrefixStates::new(1 << 20);
        assert_eq!(body_sha256(digests.iter(), 2, Some(&mut states)), plain);
        assert_eq!(body_sha256(digests.iter(), 2, Some(&mut states)), plain);
        assert_eq!(body_sha256([].iter(), 0, None), hex(&sha256(b"")));
    }

    #[test]
    fn a_measured_block_takes_the_raws_of_its_measured_items() {
        let raws = [10, 20, 30, 40];
        let b = Block::measured(
            "lines",
            Kind::Lines,
            3,
            &[UNMEASURED, UNMEASURED, 2],
            &raws,
            Vec::new(),
            None,
            Some(5),
        );
        assert_eq!(
            (b.len, b.raws.as_slice(), b.max_tokens),
            (3, &[30][..], Some(5))
        );
        let b = Block::measured(
            "p",
            Kind::Passages,
            2,
            &[0, 3],
            &raws,
            vec!["a", "b"],
            None,
            None,
        );
        assert_eq!(b.raws, [10, 40]);
    }
}
