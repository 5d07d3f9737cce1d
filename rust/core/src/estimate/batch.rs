//! Batches counted under one lock of the estimator state: the values'
//! facts (kind, digest, canonical length and bytes) through the memo, with
//! counts a line kept from an earlier call served as they are.

use super::{EstimatorState, Profile};
use crate::calibrate::Ratio;
use crate::error::CoreResult;
use crate::tokenize::Method;

/// What the estimator needs of one value of a batch.
pub trait Fact {
    /// Index into the batch's kinds.
    fn kind(&self) -> usize;
    fn digest(&self) -> &[u8; 32];
    /// The canonical length (read on a heuristic memo miss only).
    fn canonical_len(&self) -> usize;
    /// The canonical bytes (read on an exact memo miss only).
    fn canonical(&self) -> Vec<u8>;
}

/// A raw count with the way it was counted: the estimator state's serial,
/// its memo counter and the value's kind id (all 0: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Measured {
    pub serial: u64,
    pub memo: u32,
    pub kind: u32,
    pub raw: i64,
}

/// How one batch counted ([`EstimatorState::raw_batch_known`]): tags its
/// counts for keeping.
#[derive(Debug, Clone)]
pub struct Measuring {
    serial: u64,
    memo: u32,
    /// The state's kind id of each of the batch's kinds.
    kinds: Vec<u32>,
    /// How many leading values were served their known counts.
    pub served: usize,
}

impl Measuring {
    /// The count `raw` of a value of the batch's kind `kind`, tagged.
    #[inline]
    pub fn tag(&self, kind: usize, raw: i64) -> Measured {
        Measured {
            serial: self.serial,
            memo: self.memo,
            kind: self.kinds[kind],
            raw,
        }
    }
}

/// Ids resolved once per call for [`EstimatorState::raw_one`] (ids never
/// change).
#[derive(Debug, Default)]
pub struct Resolved {
    counter: Option<u32>,
    kinds: Vec<u32>,
}

impl EstimatorState {
    /// Raw counts of `facts` (their kinds index `kinds`) into `raws`, and
    /// the factor of `model_id`. The leading values may carry counts
    /// measured before (`known[i]` for value `i`, a line's): those of the
    /// leading run measured under this state's counter of `model_id` and
    /// the value's kind are served as they are, each counted as a memo hit
    /// without a lookup (the memo's recency of their keys is not
    /// refreshed); the rest go through the memo in order. Also returns how
    /// to tag this call's counts for keeping.
    pub fn raw_batch_known<T: Fact, K>(
        &mut self,
        model_id: &str,
        kinds: &[String],
        facts: &[T],
        known: &[K],
        measured: impl Fn(&K) -> Measured,
        raws: &mut Vec<i64>,
    ) -> CoreResult<(Ratio, Measuring)> {
        raws.clear();
        raws.reserve(facts.len());
        let counter = self.counter_id(model_id);
        let kind_ids: Vec<u32> = kinds.iter().map(|k| self.kind(k)).collect();
        let mut measuring = Measuring {
            serial: self.serial(),
            memo: self.counter(counter).memo,
            kinds: kind_ids,
            served: 0,
        };
        for (k, f) in known.iter().zip(facts) {
            let k = measured(k);
            if measuring.tag(f.kind(), k.raw) != k {
                break;
            }
            raws.push(k.raw);
        }
        let served = raws.len();
        measuring.served = served;
        self.memo_mut().hits += served as u64;
        let rest = &facts[served..];
        self.memo_mut().reserve(rest.len());
        let kind_ids = &measuring.kinds;
        self.raw_counted_each(
            counter,
            rest,
            |f| (kind_ids[f.kind()], f.digest()),
            T::canonical_len,
            T::canonical,
            raws,
        )?;
        Ok((self.factor(counter), measuring))
    }

    /// Raw counts of `facts` into `raws` (all through the memo) and the
    /// factor of `model_id`.
    pub fn raw_batch<T: Fact>(
        &mut self,
        model_id: &str,
        kinds: &[String],
        facts: &[T],
        raws: &mut Vec<i64>,
    ) -> CoreResult<Ratio> {
        let none: &[Measured] = &[];
        let (factor, _) = self.raw_batch_known(model_id, kinds, facts, none, |k| *k, raws)?;
        Ok(factor)
    }

    /// One more raw count after a batch, with the counter and kind ids
    /// resolved once per call (`resolved`) instead of per value.
    pub fn raw_one<T: Fact>(
        &mut self,
        resolved: &mut Resolved,
        model_id: &str,
        kinds: &[String],
        fact: &T,
    ) -> CoreResult<i64> {
        let counter = match resolved.counter {
            Some(c) => c,
            None => *resolved.counter.insert(self.counter_id(model_id)),
        };
        while resolved.kinds.len() < kinds.len() {
            let id = self.kind(&kinds[resolved.kinds.len()]);
            resolved.kinds.push(id);
        }
        let kind = resolved.kinds[fact.kind()];
        self.raw_counted(
            counter,
            kind,
            fact.digest(),
            || fact.canonical_len(),
            || fact.canonical(),
        )
    }

    /// The byte heuristic's profile and the factor of a key, or `None` when
    /// the key counts exactly.
    pub fn heuristic(&mut self, model_id: &str) -> Option<(Profile, Ratio)> {
        let counter = self.counter_id(model_id);
        if self.counter(counter).method != Method::Heuristic {
            return None;
        }
        Some((self.counter(counter).profile, self.factor(counter)))
    }

    /// The factor of a key.
    pub fn factor_of(&mut self, model_id: &str) -> Ratio {
        let counter = self.counter_id(model_id);
        self.factor(counter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct F(usize, [u8; 32], usize);

    impl Fact for F {
        fn kind(&self) -> usize {
            self.0
        }
        fn digest(&self) -> &[u8; 32] {
            &self.1
        }
        fn canonical_len(&self) -> usize {
            self.2
        }
        fn canonical(&self) -> Vec<u8> {
            vec![b'x'; self.2]
        }
    }

    fn state() -> EstimatorState {
        EstimatorState::new(Profile::new(3.0, 4).unwrap(), Vec::new(), 100)
    }

    #[test]
    fn known_counts_are_served_while_they_were_counted_the_same_way() {
        let mut st = state();
        let kinds = ["user_message".to_owned(), "text".to_owned()];
        let facts = [F(0, [1; 32], 30), F(1, [2; 32], 9), F(0, [3; 32], 3)];
        let mut raws = Vec::new();
        let none: &[Measured] = &[];
        let (_, m) = st
            .raw_batch_known("m", &kinds, &facts, none, |k| *k, &mut raws)
            .unwrap();
        assert_eq!(raws, [14, 7, 5]);
        assert_eq!(m.served, 0);
        assert_eq!((st.memo().hits, st.memo().misses), (0, 3));
        // Without known counts: every value through the memo.
        let mut again = Vec::new();
        let factor = st.raw_batch("m", &kinds, &facts, &mut again).unwrap();
        assert_eq!(
            (again.as_slice(), factor),
            (raws.as_slice(), st.factor_of("m"))
        );
        assert_eq!((st.memo().hits, st.memo().misses), (3, 3));
        st.memo_mut().hits = 0;
        // Tagged as this batch counted them: served without a lookup (as hits).
        let mut known: Vec<Measured> = facts
            .iter()
            .zip(&raws)
            .map(|(f, &r)| m.tag(f.0, r))
            .collect();
        known[2].raw = 99; // (served as kept, right or wrong: the tag matches)
        let (_, m2) = st
            .raw_batch_known("m", &kinds, &facts, &known, |k| *k, &mut raws)
            .unwrap();
        assert_eq!((raws.as_slice(), m2.served), (&[14, 7, 99][..], 3));
        assert_eq!((st.memo().hits, st.memo().misses), (3, 3));
        // Another key's counter: nothing served, the memo looked up.
        let (_, m3) = st
            .raw_batch_known("other", &kinds, &facts, &known, |k| *k, &mut raws)
            .unwrap();
        assert_eq!((raws.as_slice(), m3.served), (&[14, 7, 5][..], 0));
    }

    #[test]
    fn one_more_count_and_the_heuristic_of_a_key() {
        let mut st = state();
        let kinds = ["text".to_owned()];
        let mut resolved = Resolved::default();
        assert_eq!(
            st.raw_one(&mut resolved, "m", &kinds, &F(0, [5; 32], 6))
                .unwrap(),
            6
        );
        assert_eq!(
            st.raw_one(&mut resolved, "m", &kinds, &F(0, [5; 32], 600))
                .unwrap(),
            6
        );
        let (profile, factor) = st.heuristic("m").expect("heuristic");
        assert_eq!(profile, Profile::new(3.0, 4).unwrap());
        assert_eq!(factor, st.factor_of("m"));
    }
}
