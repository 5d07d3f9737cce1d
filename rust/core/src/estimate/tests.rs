use super::*;

fn key(n: u8) -> MemoKey {
    MemoKey {
        model: 0,
        kind: 0,
        digest: [n; 32],
    }
}

#[test]
fn raw_formula() {
    let p = Profile::new(3.0, 4).unwrap();
    assert_eq!(p.raw(0).unwrap(), 4);
    assert_eq!(p.raw(1).unwrap(), 5);
    assert_eq!(p.raw(3).unwrap(), 5);
    assert_eq!(p.raw(4).unwrap(), 6);
    let q = Profile::new(3.5, 0).unwrap();
    assert_eq!(q.raw(7).unwrap(), 2);
    assert_eq!(q.raw(8).unwrap(), 3);
    assert!(Profile::new(0.0, 4).is_err());
    assert!(Profile::new(f64::NAN, 4).is_err());
    assert!(Profile::new(3.0, -1).is_err());
}

#[test]
fn correction_is_exact_integer_ceiling() {
    assert_eq!(corrected(100, 0, 0), 100);
    assert_eq!(corrected(100, 10, 5), 100);
    assert_eq!(corrected(100, 10, 10), 100);
    assert_eq!(corrected(100, 10, 11), 110);
    assert_eq!(corrected(101, 10, 11), 112); // ceil(111.1)
    assert_eq!(corrected(3, 3, 10), 10);
    assert_eq!(corrected(0, 3, 10), 0);
    // where a float formula would round: 49 * (100/3 ... ) exactly
    assert_eq!(corrected(49, 3, 100), (49 * 100 + 2) / 3);
    // huge values do not overflow
    assert_eq!(
        corrected(i64::MAX, 1, u64::MAX),
        i64::MAX as i128 * u64::MAX as i128
    );
    // negative raw sums floor-divide like Python's //
    assert_eq!(corrected(-7, 2, 3), (-21 + 1i128).div_euclid(2));
}

#[test]
fn correction_matches_brute_force() {
    for raw in 0..60i64 {
        for e in 1..12u64 {
            for a in 0..30u64 {
                let want = if a <= e {
                    raw as i128
                } else {
                    let num = raw as i128 * a as i128;
                    let mut c = num / e as i128;
                    if c * (e as i128) < num {
                        c += 1;
                    }
                    c
                };
                assert_eq!(corrected(raw, e, a), want);
            }
        }
    }
}

#[test]
fn memo_is_lru() {
    let mut m = Memo::new(2);
    assert_eq!(m.get_or_insert_with(key(1), || Ok(1)).unwrap(), 1);
    assert_eq!(m.get_or_insert_with(key(2), || Ok(2)).unwrap(), 2);
    assert_eq!(m.get_or_insert_with(key(1), || Ok(99)).unwrap(), 1); // hit, 1 is MRU
    assert_eq!(m.get_or_insert_with(key(3), || Ok(3)).unwrap(), 3); // evicts 2
    assert_eq!(m.keys_mru(), vec![key(3), key(1)]);
    assert_eq!((m.hits, m.misses, m.len()), (1, 3, 2));
    assert!(m.get(&key(2)).is_none());
    let mut z = Memo::new(0);
    assert_eq!(z.get_or_insert_with(key(1), || Ok(7)).unwrap(), 7);
    assert_eq!(z.get_or_insert_with(key(1), || Ok(7)).unwrap(), 7);
    assert_eq!((z.hits, z.misses, z.len()), (0, 2, 0));
}

#[test]
fn memo_matches_a_model_lru() {
    // A simple Vec-based LRU as the oracle.
    let mut state: u64 = 12345;
    for cap in [1usize, 2, 3, 7] {
        let mut m = Memo::new(cap);
        let mut oracle: Vec<u8> = Vec::new(); // MRU first
        let (mut hits, mut misses) = (0u64, 0u64);
        for _ in 0..2000 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k = ((state >> 33) % 10) as u8;
            m.get_or_insert_with(key(k), || Ok(k as i64)).unwrap();
            if let Some(p) = oracle.iter().position(|&x| x == k) {
                oracle.remove(p);
                hits += 1;
            } else {
                misses += 1;
                if oracle.len() == cap {
                    oracle.pop();
                }
            }
            oracle.insert(0, k);
            let got: Vec<u8> = m.keys_mru().iter().map(|k| k.digest[0]).collect();
            assert_eq!(got, oracle);
        }
        assert_eq!((m.hits, m.misses), (hits, misses));
    }
}

#[test]
fn longest_prefix_wins() {
    let s = EstimatorState::new(
        Profile::new(3.0, 4).unwrap(),
        vec![
            ("openai:".into(), Profile::new(4.0, 3).unwrap()),
            ("openai:gpt-4".into(), Profile::new(3.5, 2).unwrap()),
        ],
        10,
    );
    assert_eq!(s.profile_for("openai:gpt-4o").framing_tokens, 2);
    assert_eq!(s.profile_for("openai:o3").framing_tokens, 3);
    assert_eq!(s.profile_for("anthropic:x").framing_tokens, 4);
}

#[test]
fn reconcile_accumulates() {
    let mut s = EstimatorState::new(Profile::new(3.0, 4).unwrap(), vec![], 10);
    assert_eq!(s.correction("m"), 1.0);
    assert_eq!(s.error_ratio("m"), 1.0);
    s.reconcile("m", 100, 50).unwrap();
    assert_eq!(s.correction("m"), 1.0);
    assert_eq!(s.error_ratio("m"), 0.5);
    s.reconcile("m", 100, 250).unwrap();
    assert_eq!(s.correction("m"), 1.5);
    assert_eq!(s.corrected(10, "m"), 15);
    assert_eq!(s.corrected(11, "m"), 17); // ceil(16.5)
    assert_eq!(s.corrected(11, "other"), 11);
    assert!(s.reconcile("m", 0, 1).is_err());
    assert!(s.reconcile("m", 1, -1).is_err());
    assert_eq!(
        s.corrections(),
        &[(
            "m".to_string(),
            Reconciled {
                estimated: 200,
                actual: 300
            }
        )]
    );
}

// -- settings and snapshots, through a toy host --------------------------------

#[derive(Clone, Debug)]
enum V {
    I(i64),
    F(f64),
    S(&'static str),
    L(Vec<V>),
    M(Vec<(V, V)>),
    N,
}

struct Toy;

impl Values for Toy {
    type Value = V;
    type Error = CoreError;
    fn shape(&mut self, v: &V) -> Result<Shape<V>, CoreError> {
        Ok(match v {
            V::I(n) => Shape::Int {
                value: Ok(*n),
                float: *n as f64,
            },
            V::F(f) => Shape::Float(*f),
            V::S(s) => Shape::Str(Some((*s).to_owned())),
            V::L(l) => Shape::Sequence(l.clone()),
            V::M(m) => Shape::Mapping(m.clone()),
            V::N => Shape::None,
        })
    }
    fn repr(&mut self, v: &V) -> Result<String, CoreError> {
        Ok(match v {
            V::S(s) => format!("'{s}'"),
            V::I(n) => n.to_string(),
            other => format!("{other:?}"),
        })
    }
    fn text(&mut self, v: &V) -> Result<String, CoreError> {
        Ok(match v {
            V::S(s) => (*s).to_owned(),
            other => format!("{other:?}"),
        })
    }
    fn type_name(&mut self, v: &V) -> String {
        match v {
            V::I(_) => "int",
            V::F(_) => "float",
            V::S(_) => "str",
            V::L(_) => "list",
            V::M(_) => "dict",
            V::N => "NoneType",
        }
        .to_owned()
    }
}

fn message<T: std::fmt::Debug>(r: Result<T, CoreError>) -> String {
    match r {
        Err(CoreError::Estimator(message)) => message,
        other => panic!("expected an estimator error, got {other:?}"),
    }
}

#[test]
fn settings_are_checked_in_order_with_their_names() {
    let ok = settings(&mut Toy, &V::F(3.0), &V::I(4), &V::N, &V::I(10), "").unwrap();
    assert_eq!(ok.default_profile(), Profile::new(3.0, 4).unwrap());
    let e = settings(&mut Toy, &V::S("3"), &V::I(-1), &V::N, &V::I(10), "");
    assert_eq!(message(e), "bytes_per_token: expected a number, got str");
    let e = settings(
        &mut Toy,
        &V::F(3.0),
        &V::I(-1),
        &V::N,
        &V::I(10),
        "snapshot.",
    );
    assert_eq!(
        message(e),
        "snapshot.framing_tokens: must not be negative, got -1"
    );
    let profiles = V::M(vec![(V::S("a"), V::L(vec![V::F(0.0), V::I(1)]))]);
    let e = settings(&mut Toy, &V::F(3.0), &V::I(4), &profiles, &V::I(10), "");
    assert_eq!(
        message(e),
        "profiles['a'].bytes_per_token: must be a positive finite number, got F(0.0)"
    );
}

#[test]
fn snapshots_round_trip_and_name_what_is_wrong() {
    let mut state = settings(&mut Toy, &V::F(2.5), &V::I(3), &V::N, &V::I(7), "").unwrap();
    state.reconcile("m", 10, 12).unwrap();
    let snap = state.snapshot();
    let as_value = V::M(vec![
        (V::S("version"), V::I(SNAPSHOT_VERSION)),
        (V::S("bytes_per_token"), V::F(snap.bytes_per_token)),
        (V::S("framing_tokens"), V::I(snap.framing_tokens)),
        (V::S("profiles"), V::M(vec![])),
        (V::S("memo_capacity"), V::I(snap.memo_capacity as i64)),
        (
            V::S("corrections"),
            V::M(vec![(V::S("m"), V::L(vec![V::I(10), V::I(12)]))]),
        ),
    ]);
    assert_eq!(restore(&mut Toy, &as_value).unwrap().snapshot(), snap);
    let e = restore(&mut Toy, &V::M(vec![(V::S("zz"), V::N)]));
    assert_eq!(
        message(e),
        "snapshot: missing bytes_per_token, corrections, framing_tokens, memo_capacity, profiles, version"
    );
    let e = restore(&mut Toy, &V::L(vec![]));
    assert_eq!(message(e), "snapshot: expected a mapping, got list");
}

#[test]
fn counts_of_reconcile_and_raw_sums() {
    assert_eq!(
        check_reconcile(&mut Toy, &V::I(1), &V::I(0)).unwrap(),
        (1, 0)
    );
    let e = check_reconcile(&mut Toy, &V::I(0), &V::I(0));
    assert_eq!(message(e), "estimated: expected a positive int, got 0");
    let e = check_raw_sum(&mut Toy, &V::F(1.0));
    assert_eq!(message(e), "raw_sum: expected an int, got float");
}
