//! Stored raw counts memoized ahead of use (ADR 0011): `counter_id` names
//! the counter a stored count belongs to, `prime` checks and memoizes
//! `(model_id, kind, digest) -> raw` pairs, worded as the reference words
//! them.

use super::config::{check_count, fail, Values};
use super::{EstimatorState, MemoKey};

/// `prime`'s digests (each a 32-byte digest, `None` for anything else) and
/// counts, checked in order: one count a digest, each digest then its count.
pub fn check_prime<H: Values>(
    h: &mut H,
    digests: &[Option<[u8; 32]>],
    raws: &[H::Value],
) -> Result<Vec<([u8; 32], i64)>, H::Error> {
    if digests.len() != raws.len() {
        let (d, r) = (digests.len(), raws.len());
        return fail(format!("prime: {d} digests for {r} counts"));
    }
    let mut entries = Vec::with_capacity(digests.len());
    for (i, (digest, raw)) in digests.iter().zip(raws).enumerate() {
        let Some(digest) = digest else {
            return fail(format!(
                "prime: digests[{i}] is not a 32-byte SHA-256 digest"
            ));
        };
        entries.push((*digest, check_count(h, raw, &format!("prime: raws[{i}]"))?));
    }
    Ok(entries)
}

impl EstimatorState {
    /// The id a raw count of `kind` is stored under for the key `model_id`
    /// (`Counter::stored_id`).
    pub fn stored_id_of(&mut self, model_id: &str, kind: &str) -> String {
        let counter = self.counter_id(model_id);
        self.counter(counter).stored_id(kind)
    }

    /// Memoize each `(digest, raw)` of `kind` under `model_id`'s counter,
    /// unless memoized already.
    pub fn prime_all(&mut self, model_id: &str, kind: &str, entries: &[([u8; 32], i64)]) {
        let counter = self.counter_id(model_id);
        let model = self.counter(counter).memo;
        let kind = self.kind(kind);
        for &(digest, raw) in entries {
            let key = MemoKey {
                model,
                kind,
                digest,
            };
            self.memo_mut().prime(key, raw);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{CoreError, CoreResult};
    use crate::estimate::{Profile, Shape};

    /// Values as plain ints (anything else: `None`).
    struct Ints;

    impl Values for Ints {
        type Value = Option<i64>;
        type Error = CoreError;
        fn shape(&mut self, v: &Option<i64>) -> CoreResult<Shape<Option<i64>>> {
            Ok(match v {
                Some(n) => Shape::Int {
                    value: Ok(*n),
                    float: *n as f64,
                },
                None => Shape::None,
            })
        }
        fn repr(&mut self, v: &Option<i64>) -> CoreResult<String> {
            Ok(v.map_or("None".to_owned(), |n| n.to_string()))
        }
        fn text(&mut self, v: &Option<i64>) -> CoreResult<String> {
            self.repr(v)
        }
        fn type_name(&mut self, v: &Option<i64>) -> String {
            if v.is_some() { "int" } else { "NoneType" }.to_owned()
        }
    }

    fn message(e: CoreError) -> String {
        match e {
            CoreError::Estimator(m) => m,
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn prime_checks_in_order_then_memoizes_what_is_new() {
        let d = Some([1u8; 32]);
        let bad = check_prime(&mut Ints, &[d], &[]).unwrap_err();
        assert_eq!(message(bad), "prime: 1 digests for 0 counts");
        let bad = check_prime(&mut Ints, &[d, None], &[Some(-1), Some(2)]).unwrap_err();
        assert_eq!(message(bad), "prime: raws[0]: must not be negative, got -1");
        let bad = check_prime(&mut Ints, &[d, None], &[Some(1), Some(2)]).unwrap_err();
        assert_eq!(
            message(bad),
            "prime: digests[1] is not a 32-byte SHA-256 digest"
        );
        let bad = check_prime(&mut Ints, &[d], &[None]).unwrap_err();
        assert_eq!(
            message(bad),
            "prime: raws[0]: expected an int, got NoneType"
        );
        let entries = check_prime(&mut Ints, &[d, Some([2; 32])], &[Some(7), Some(9)]).unwrap();
        assert_eq!(entries, [([1; 32], 7), ([2; 32], 9)]);

        let mut st = EstimatorState::new(Profile::new(3.0, 4).unwrap(), Vec::new(), 10);
        st.prime_all("m", "text", &entries);
        st.prime_all("m", "text", &[([1; 32], 100)]); // (memoized already: kept)
        let counter = st.counter_id("m");
        let kind = st.kind("text");
        let raw = st
            .raw_counted(counter, kind, &[1; 32], || 0, Vec::new)
            .unwrap();
        assert_eq!(raw, 7);
        assert_eq!(st.memo().hits, 1);
        assert!(st.stored_id_of("m", "text").ends_with("|text"));
    }
}
