use super::*;
use crate::tokenize::{Encoding, Method};

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
fn counters_by_method() {
    let mut s = EstimatorState::new(Profile::new(3.0, 4).unwrap(), vec![], 10);
    let a = s.counter_id("openai:gpt-4o");
    let b = s.counter_id("openai:gpt-4o-mini");
    let h = s.counter_id("openai:gpt-4o#heuristic");
    let m = s.counter_id("m:x");
    assert_eq!(s.counter(a).method, Method::Exact(Encoding::O200kBase));
    assert_eq!(s.counter(a).memo, s.counter(b).memo); // one memo counter per encoding
    assert_ne!(s.counter(a).memo, s.counter(h).memo);
    assert_eq!(s.counter(h).calibration, "openai:gpt-4o");
    assert_eq!(s.counter(m).calibration, "m:x");
    let kind = s.kind("text");
    let d = [7u8; 32];
    let exact = s
        .raw_counted(
            a,
            kind,
            &d,
            || unreachable!(),
            || br#""hello world""#.to_vec(),
        )
        .unwrap();
    assert_eq!(exact, 4 + 2);
    // the same digest under another o200k model: a hit, nothing counted
    let hit = s
        .raw_counted(b, kind, &d, || unreachable!(), || unreachable!())
        .unwrap();
    assert_eq!(hit, 6);
    let heuristic = s
        .raw_counted(h, kind, &d, || 13, || unreachable!())
        .unwrap();
    assert_eq!(heuristic, 5 + 4);
}

#[test]
fn stored_ids_name_the_method() {
    let profiles = vec![("anthropic:".into(), Profile::new(3.5, 2).unwrap())];
    let mut s = EstimatorState::new(Profile::new(3.0, 4).unwrap(), profiles, 10);
    let mut id = |key: &str| {
        let c = s.counter_id(key);
        s.counter(c).stored_id("history")
    };
    assert_eq!(id("m:x"), "heuristic:3:4|history");
    assert_eq!(id("anthropic:claude"), "heuristic:3.5:2|history");
    assert_eq!(id("openai:gpt-4o"), "o200k_base:1|history");
    assert_eq!(id("openai:gpt-4o-mini"), "o200k_base:1|history");
    assert_eq!(id("openai:gpt-4"), "cl100k_base:1|history");
    // a forced heuristic counts with the bare model's profile
    assert_eq!(id("openai:gpt-4o#heuristic"), "heuristic:3:4|history");
    assert_eq!(id("anthropic:claude#o200k_base"), "o200k_base:1|history");
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
        s.reconciled("m"),
        Reconciled {
            estimated: 200,
            actual: 300
        }
    );
    // the heuristic key of an exact model calibrates under the bare id
    s.reconcile("openai:gpt-4o#heuristic", 10, 20).unwrap();
    assert_eq!(s.reconciled("openai:gpt-4o").estimated, 0); // exact: its own key
    let keys: Vec<&str> = s.calibrations().iter().map(|(k, _, _)| k).collect();
    assert_eq!(keys, vec!["m", "openai:gpt-4o"]);
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
    let ok = settings(
        &mut Toy,
        Some(&V::F(3.0)),
        Some(&V::I(4)),
        Some(&V::N),
        Some(&V::I(10)),
        None,
    )
    .unwrap();
    assert_eq!(ok.default_profile(), Profile::new(3.0, 4).unwrap());
    // an argument not given takes the constructor's default
    let defaults = settings(&mut Toy, None, None, None, None, None).unwrap();
    assert_eq!(defaults.default_profile(), Profile::new(3.0, 4).unwrap());
    assert_eq!(defaults.memo().capacity(), 100_000);
    let e = settings(
        &mut Toy,
        Some(&V::S("3")),
        Some(&V::I(-1)),
        Some(&V::N),
        Some(&V::I(10)),
        None,
    );
    assert_eq!(message(e), "bytes_per_token: expected a number, got str");
    let e = config::check_settings(
        &mut Toy,
        Some(&V::F(3.0)),
        Some(&V::I(-1)),
        None,
        Some(&V::I(10)),
        "snapshot.",
    );
    assert_eq!(
        message(e),
        "snapshot.framing_tokens: must not be negative, got -1"
    );
    let profiles = V::M(vec![(V::S("a"), V::L(vec![V::F(0.0), V::I(1)]))]);
    let e = settings(
        &mut Toy,
        Some(&V::F(3.0)),
        Some(&V::I(4)),
        Some(&profiles),
        Some(&V::I(10)),
        None,
    );
    assert_eq!(
        message(e),
        "profiles['a'].bytes_per_token: must be a positive finite number, got F(0.0)"
    );
    // the counting table comes last, and names the methods it knows
    let table = V::M(vec![(V::S("azure:"), V::S("p50k_base"))]);
    let e = settings(
        &mut Toy,
        Some(&V::F(3.0)),
        None,
        Some(&V::N),
        None,
        Some(&table),
    );
    assert_eq!(
        message(e),
        "encodings['azure:']: unknown counting method 'p50k_base'; known: cl100k_base, heuristic, o200k_base"
    );
    let mut ok = azure_on_o200k(10);
    assert_eq!(
        ok.method("azure:gpt-4o"),
        Method::Exact(Encoding::O200kBase)
    );
}

/// A snapshot as the host would hand it back.
/// A snapshot as the dict `snapshot()` returns (`Snapshot::to_data`).
fn as_value(snap: &Snapshot) -> V {
    from_data(&snap.to_data())
}

fn from_data(d: &crate::data::Data) -> V {
    use crate::data::Data;
    match d {
        Data::None | Data::Bool(_) => V::N,
        Data::Int(n) => V::I(*n as i64),
        Data::Float(f) => V::F(*f),
        Data::Str(s) => V::S(leak(s)),
        Data::List(l) => V::L(l.iter().map(from_data).collect()),
        Data::Dict(m) => V::M(
            m.iter()
                .map(|(k, v)| (V::S(leak(k)), from_data(v)))
                .collect(),
        ),
    }
}

#[test]
fn a_snapshot_dict_has_its_versions_keys() {
    use crate::data::Data;
    for version in [1, 2] {
        let mut state = EstimatorState::new(Profile::new(3.5, 2).unwrap(), Vec::new(), 10);
        state.reconcile("m", 10, 12).unwrap();
        let Data::Dict(pairs) = state.snapshot(version).to_data() else {
            panic!("a dict");
        };
        let mut keys: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys[..3], ["version", "bytes_per_token", "framing_tokens"]);
        keys.sort_unstable();
        let expected: &[&str] = if version == 1 { &V1_KEYS } else { &V2_KEYS };
        assert_eq!(keys, expected);
    }
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_owned().into_boxed_str())
}

#[test]
fn snapshots_round_trip_and_name_what_is_wrong() {
    let mut state = settings(
        &mut Toy,
        Some(&V::F(2.5)),
        Some(&V::I(3)),
        Some(&V::N),
        Some(&V::I(7)),
        None,
    )
    .unwrap();
    state.reconcile("m#o200k_base", 10, 12).unwrap();
    // an exact model keeps no samples, but its key needs version 2
    assert_eq!(state.snapshot(SNAPSHOT_VERSION).version, 2);
    let fresh = settings(
        &mut Toy,
        Some(&V::F(2.5)),
        Some(&V::I(3)),
        Some(&V::N),
        Some(&V::I(7)),
        None,
    )
    .unwrap();
    let snap = fresh.snapshot(SNAPSHOT_VERSION);
    assert_eq!(snap.version, 1); // nothing of version 2's
    assert_eq!(
        restore(&mut Toy, &as_value(&snap)).unwrap().snapshot(2),
        snap
    );
    let e = restore(&mut Toy, &V::M(vec![(V::S("zz"), V::N)]));
    assert_eq!(
        message(e),
        "snapshot: missing bytes_per_token, corrections, framing_tokens, memo_capacity, profiles, version"
    );
    let e = restore(&mut Toy, &V::L(vec![]));
    assert_eq!(message(e), "snapshot: expected a mapping, got list");
    let e = restore(&mut Toy, &V::M(vec![(V::S("version"), V::I(3))]));
    assert_eq!(message(e), "snapshot: unsupported version 3");
    let e = restore(&mut Toy, &V::M(vec![(V::S("version"), V::I(2))]));
    assert_eq!(
        message(e),
        "snapshot: missing bytes_per_token, corrections, encodings, framing_tokens, memo_capacity, profiles, samples"
    );
}

#[test]
fn version_two_holds_the_table_and_the_samples() {
    let mut state = azure_on_o200k(7);
    for _ in 0..3 {
        state.reconcile("m", 100, 70).unwrap();
    }
    state.reconcile("azure:x", 100, 120).unwrap();
    let snap = state.snapshot(2);
    assert_eq!(snap.version, 2);
    assert_eq!(
        snap.encodings,
        vec![("azure:".to_owned(), Method::Exact(Encoding::O200kBase))]
    );
    assert_eq!(snap.samples, vec![("m".to_owned(), vec![(100, 70); 3])]);
    let keys: Vec<&str> = snap.corrections.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, vec!["m", "azure:x#o200k_base"]);
    let back = restore(&mut Toy, &as_value(&snap)).unwrap();
    assert_eq!(back.snapshot(2), snap);
    // version 1 for readers that know only it: the sums stay, the rest goes
    let v1 = state.snapshot(1);
    assert_eq!((v1.version, v1.corrections.len()), (1, 2));
    assert!(v1.encodings.is_empty() && v1.samples.is_empty());
    assert_eq!(
        restore(&mut Toy, &as_value(&v1))
            .unwrap()
            .snapshot(2)
            .version,
        2
    );
    // samples need sums, and fit the window's bounds
    let mut bad = snap.clone();
    bad.samples = vec![("nobody".to_owned(), vec![(1, 1)])];
    let e = restore(&mut Toy, &as_value(&bad));
    assert_eq!(
        message(e),
        "snapshot.samples['nobody']: no reconciled sums for this model"
    );
    bad.samples = vec![("m".to_owned(), vec![(0, 1)])];
    let e = restore(&mut Toy, &as_value(&bad));
    assert_eq!(
        message(e),
        "snapshot.samples['m'][0].estimated: must be positive, got 0"
    );
    bad.samples = vec![("m".to_owned(), vec![(1, crate::calibrate::SAMPLE_MAX + 1)])];
    let e = restore(&mut Toy, &as_value(&bad));
    assert_eq!(
        message(e),
        format!(
            "snapshot.samples['m'][0].actual: out of range, got {}",
            crate::calibrate::SAMPLE_MAX + 1
        )
    );
    assert_eq!(
        message(snapshot::check_max_version(&mut Toy, Some(&V::I(3)))),
        "max_version: expected 1 or 2, got 3"
    );
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

/// Settings with the default profile, `memo_capacity` and one table entry:
/// `azure:` counts with `o200k_base`.
fn azure_on_o200k(memo_capacity: i64) -> EstimatorState {
    let table = V::M(vec![(V::S("azure:"), V::S("o200k_base"))]);
    settings(
        &mut Toy,
        None,
        None,
        None,
        Some(&V::I(memo_capacity)),
        Some(&table),
    )
    .unwrap()
}

/// A batch of lookups fetches ahead only while they go through the index;
/// either way it finds, counts and orders exactly what the same lookups one
/// at a time do (a small memo, so entries are evicted on the way).
#[test]
fn batched_lookups_match_lookups_one_at_a_time() {
    let mut state: u64 = 99;
    let mut values: Vec<(u32, [u8; 32], usize)> = Vec::new();
    for i in 0..600u32 {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        // Runs in order (the slot guess holds) and scattered repeats.
        let n = if i % 100 < 40 {
            i % 100
        } else {
            (state >> 33) as u32 % 90
        };
        let mut digest = [0u8; 32];
        digest[..4].copy_from_slice(&n.to_le_bytes());
        values.push((n % 2, digest, 10 + n as usize));
    }
    let run = |batch: bool| {
        let mut st = azure_on_o200k(48);
        let counter = st.counter_id("gpt-4o");
        let kinds = [st.kind("history"), st.kind("tool_result")];
        let mut out = Vec::new();
        let chunks: Vec<&[(u32, [u8; 32], usize)]> = if batch {
            values.chunks(150).collect()
        } else {
            values.chunks(1).collect()
        };
        for chunk in chunks {
            st.raw_counted_each(
                counter,
                chunk,
                |v| (kinds[v.0 as usize], &v.1),
                |v| v.2,
                |_| Vec::new(),
                &mut out,
            )
            .unwrap();
        }
        let m = st.memo();
        (out, m.hits, m.misses, m.keys_mru())
    };
    let (batched, one) = (run(true), run(false));
    assert!(batched.1 > 100 && batched.2 > 100, "both hits and misses");
    assert_eq!(batched, one);
}

#[test]
fn every_state_and_every_clone_has_a_serial_of_its_own() {
    let a = EstimatorState::new(Profile::new(3.0, 4).unwrap(), vec![], 10);
    let b = EstimatorState::new(Profile::new(3.0, 4).unwrap(), vec![], 10);
    let c = a.clone();
    assert_ne!(a.serial(), 0);
    assert_ne!(a.serial(), b.serial());
    assert_ne!(a.serial(), c.serial());
    assert_ne!(b.serial(), c.serial());
}

#[test]
fn scalar_arguments_have_the_checks_shapes() {
    use crate::arguments::Value;
    let shape = |v: Value<'_>| Shape::<()>::from(v);
    assert!(matches!(shape(Value::Int(-2)), Shape::Int { value: Ok(-2), float } if float == -2.0));
    let huge = Value::BigInt {
        negative: true,
        float: None,
        digits: "-1e400".into(),
    };
    assert!(
        matches!(shape(huge), Shape::Int { value: Err(true), float } if float == f64::NEG_INFINITY)
    );
    let big = Value::BigInt {
        negative: false,
        float: Some(1e19),
        digits: String::new(),
    };
    assert!(matches!(shape(big), Shape::Int { value: Err(false), float } if float == 1e19));
    assert!(matches!(shape(Value::Surrogate), Shape::Str(None)));
    assert!(matches!(shape(Value::Str("a")), Shape::Str(Some(s)) if s == "a"));
    assert!(matches!(shape(Value::Bool(true)), Shape::Other));
    assert!(matches!(shape(Value::None), Shape::None));
    assert!(matches!(shape(Value::Float(0.5)), Shape::Float(f) if f == 0.5));
}
