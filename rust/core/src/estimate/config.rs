//! The estimator's settings, its counts and its snapshot, checked: the
//! reference's `_check_*`, `reconcile`, `corrected` and `restore`, in the
//! same order and the same words. A host ([`Values`]) says what each value
//! is; the core decides what is wrong with it.

use super::{EstimatorState, Profile, Reconciled};
use crate::error::CoreError;

/// The snapshot format this core writes and reads.
pub const SNAPSHOT_VERSION: i64 = 1;
/// A snapshot's keys, sorted (the order of the "missing" message).
pub const SNAPSHOT_KEYS: [&str; 6] = [
    "bytes_per_token",
    "corrections",
    "framing_tokens",
    "memo_capacity",
    "profiles",
    "version",
];

/// What a host value is, as far as the checks need to know.
pub enum Shape<V> {
    /// An int (not a bool): its value if it fits a signed 64-bit int, else
    /// whether it is negative; and its float value (infinite past the range).
    Int {
        value: Result<i64, bool>,
        float: f64,
    },
    Float(f64),
    /// A str: its text, `None` when it holds a lone surrogate.
    Str(Option<String>),
    /// A list or a tuple: its elements.
    Sequence(Vec<V>),
    /// A mapping: its items.
    Mapping(Vec<(V, V)>),
    None,
    /// A bool, or anything else.
    Other,
}

/// The host's view of its values.
pub trait Values {
    type Value;
    type Error: From<CoreError>;
    fn shape(&mut self, v: &Self::Value) -> Result<Shape<Self::Value>, Self::Error>;
    /// `repr(v)`.
    fn repr(&mut self, v: &Self::Value) -> Result<String, Self::Error>;
    /// `str(v)`.
    fn text(&mut self, v: &Self::Value) -> Result<String, Self::Error>;
    /// `type(v).__name__`.
    fn type_name(&mut self, v: &Self::Value) -> String;
}

fn fail<E: From<CoreError>, T>(message: String) -> Result<T, E> {
    Err(CoreError::estimator(message).into())
}

/// A positive finite number (an int or a float, not a bool).
pub fn check_number<H: Values>(h: &mut H, v: &H::Value, place: &str) -> Result<f64, H::Error> {
    let number = match h.shape(v)? {
        Shape::Int { float, .. } => float,
        Shape::Float(f) => f,
        _ => {
            return fail(format!(
                "{place}: expected a number, got {}",
                h.type_name(v)
            ))
        }
    };
    if !(number.is_finite() && number > 0.0) {
        return fail(format!(
            "{place}: must be a positive finite number, got {}",
            h.repr(v)?
        ));
    }
    Ok(number)
}

/// A non-negative signed 64-bit int (not a bool).
pub fn check_count<H: Values>(h: &mut H, v: &H::Value, place: &str) -> Result<i64, H::Error> {
    match h.shape(v)? {
        Shape::Int { value: Ok(n), .. } if n >= 0 => Ok(n),
        Shape::Int {
            value: Ok(_) | Err(true),
            ..
        } => fail(format!("{place}: must not be negative, got {}", h.repr(v)?)),
        Shape::Int {
            value: Err(false), ..
        } => fail(format!("{place}: out of range, got {}", h.repr(v)?)),
        _ => fail(format!("{place}: expected an int, got {}", h.type_name(v))),
    }
}

/// Prefix profiles: `None`, or a mapping of str prefixes to
/// `(bytes_per_token, framing_tokens)` pairs (a later prefix replaces an
/// equal earlier one).
pub fn check_profiles<H: Values>(
    h: &mut H,
    v: &H::Value,
    place: &str,
) -> Result<Vec<(String, Profile)>, H::Error> {
    let members = match h.shape(v)? {
        Shape::None => return Ok(Vec::new()),
        Shape::Mapping(members) => members,
        _ => {
            return fail(format!(
                "{place}: expected a mapping, got {}",
                h.type_name(v)
            ))
        }
    };
    let mut out: Vec<(String, Profile)> = Vec::new();
    for (prefix, profile) in members {
        let key = match h.shape(&prefix)? {
            Shape::Str(Some(text)) => text,
            Shape::Str(None) => {
                return fail(format!(
                    "{place}: lone surrogate in prefix {}",
                    h.repr(&prefix)?
                ))
            }
            _ => {
                return fail(format!(
                    "{place}: prefix {} is not a string",
                    h.repr(&prefix)?
                ))
            }
        };
        let shown = h.repr(&prefix)?;
        let pair = match h.shape(&profile)? {
            Shape::Sequence(pair) if pair.len() == 2 => pair,
            _ => {
                return fail(format!(
                    "{place}[{shown}]: expected (bytes_per_token, framing_tokens)"
                ))
            }
        };
        let bpt = check_number(h, &pair[0], &format!("{place}[{shown}].bytes_per_token"))?;
        let framing = check_count(h, &pair[1], &format!("{place}[{shown}].framing_tokens"))?;
        let profile = Profile::new(bpt, framing)?;
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = profile,
            None => out.push((key, profile)),
        }
    }
    Ok(out)
}

/// A new estimator's state from its settings (`place` prefixes the names:
/// `""` for the constructor, `"snapshot."` for a snapshot).
pub fn settings<H: Values>(
    h: &mut H,
    bytes_per_token: &H::Value,
    framing_tokens: &H::Value,
    profiles: &H::Value,
    memo_capacity: &H::Value,
    place: &str,
) -> Result<EstimatorState, H::Error> {
    let bpt = check_number(h, bytes_per_token, &format!("{place}bytes_per_token"))?;
    let framing = check_count(h, framing_tokens, &format!("{place}framing_tokens"))?;
    let profiles = check_profiles(h, profiles, &format!("{place}profiles"))?;
    let capacity = check_count(h, memo_capacity, &format!("{place}memo_capacity"))?;
    let default = Profile::new(bpt, framing)?;
    Ok(EstimatorState::new(default, profiles, capacity as usize))
}

/// `reconcile`'s counts: `estimated` > 0 and `actual` >= 0, each 64-bit.
pub fn check_reconcile<H: Values>(
    h: &mut H,
    estimated: &H::Value,
    actual: &H::Value,
) -> Result<(i64, i64), H::Error> {
    let e = match h.shape(estimated)? {
        Shape::Int { value: Ok(n), .. } if n > 0 => n,
        _ => {
            let shown = h.repr(estimated)?;
            return fail(format!("estimated: expected a positive int, got {shown}"));
        }
    };
    let a = match h.shape(actual)? {
        Shape::Int { value: Ok(n), .. } if n >= 0 => n,
        _ => {
            let shown = h.repr(actual)?;
            return fail(format!("actual: expected a non-negative int, got {shown}"));
        }
    };
    Ok((e, a))
}

/// `corrected`'s `raw_sum`: a signed 64-bit int.
pub fn check_raw_sum<H: Values>(h: &mut H, raw_sum: &H::Value) -> Result<i64, H::Error> {
    match h.shape(raw_sum)? {
        Shape::Int { value: Ok(n), .. } => Ok(n),
        Shape::Int { value: Err(_), .. } => {
            fail(format!("raw_sum: out of range, got {}", h.repr(raw_sum)?))
        }
        _ => fail(format!(
            "raw_sum: expected an int, got {}",
            h.type_name(raw_sum)
        )),
    }
}

/// What `snapshot()` returns: the settings and the reconciled sums (not the memo).
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub bytes_per_token: f64,
    pub framing_tokens: i64,
    pub profiles: Vec<(String, Profile)>,
    pub memo_capacity: usize,
    pub corrections: Vec<(String, Reconciled)>,
}

impl EstimatorState {
    pub fn snapshot(&self) -> Snapshot {
        let default = self.default_profile();
        Snapshot {
            bytes_per_token: default.bytes_per_token,
            framing_tokens: default.framing_tokens,
            profiles: self.profiles().to_vec(),
            memo_capacity: self.memo().capacity(),
            corrections: self.corrections().to_vec(),
        }
    }
}

/// An estimator's state from a `snapshot()` (of either backend).
pub fn restore<H: Values>(h: &mut H, snapshot: &H::Value) -> Result<EstimatorState, H::Error> {
    let Shape::Mapping(members) = h.shape(snapshot)? else {
        let name = h.type_name(snapshot);
        return fail(format!("snapshot: expected a mapping, got {name}"));
    };
    let mut found: [Option<usize>; 6] = [None; 6];
    let mut unknown: Vec<String> = Vec::new();
    for (at, (key, _)) in members.iter().enumerate() {
        let known = match h.shape(key)? {
            Shape::Str(Some(name)) => SNAPSHOT_KEYS.iter().position(|k| *k == name),
            _ => None,
        };
        match known {
            Some(i) => found[i] = Some(at),
            None => unknown.push(h.text(key)?),
        }
    }
    let missing: Vec<&str> = SNAPSHOT_KEYS
        .iter()
        .zip(&found)
        .filter(|(_, f)| f.is_none())
        .map(|(k, _)| *k)
        .collect();
    if !missing.is_empty() {
        return fail(format!("snapshot: missing {}", missing.join(", ")));
    }
    if !unknown.is_empty() {
        unknown.sort();
        return fail(format!("snapshot: unknown key {}", unknown.join(", ")));
    }
    let field = |name: &str| {
        let i = SNAPSHOT_KEYS.iter().position(|k| *k == name).unwrap_or(0);
        &members[found[i].unwrap_or(0)].1
    };
    let version = field("version");
    if !matches!(
        h.shape(version)?,
        Shape::Int {
            value: Ok(SNAPSHOT_VERSION),
            ..
        }
    ) {
        return fail(format!(
            "snapshot: unsupported version {}",
            h.repr(version)?
        ));
    }
    let mut state = settings(
        h,
        field("bytes_per_token"),
        field("framing_tokens"),
        field("profiles"),
        field("memo_capacity"),
        "snapshot.",
    )?;
    let corrections = field("corrections");
    let Shape::Mapping(corrections) = h.shape(corrections)? else {
        return fail("snapshot.corrections: expected a mapping".to_owned());
    };
    for (model_id, sums) in corrections {
        let place = format!("snapshot.corrections[{}]", h.repr(&model_id)?);
        let model_id = match h.shape(&model_id)? {
            Shape::Str(Some(text)) => text,
            Shape::Str(None) => return fail(format!("{place}: lone surrogate in model id")),
            _ => return fail(format!("{place}: model id is not a string")),
        };
        let pair = match h.shape(&sums)? {
            Shape::Sequence(pair) if pair.len() == 2 => pair,
            _ => return fail(format!("{place}: expected [estimated, actual]")),
        };
        let estimated = check_count(h, &pair[0], &format!("{place}.estimated"))?;
        let actual = check_count(h, &pair[1], &format!("{place}.actual"))?;
        state.set_reconciled(
            &model_id,
            Reconciled {
                estimated: estimated as u64,
                actual: actual as u64,
            },
        );
    }
    Ok(state)
}
