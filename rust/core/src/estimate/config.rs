//! The estimator's settings and its counts, checked: the reference's
//! `snapshot.check_*`, `tokenize.check_table`, `reconcile` and `corrected`,
//! in the same order and the same words (the snapshot is `snapshot.rs`). A
//! host ([`Values`]) says what each value is; the core decides what is wrong
//! with it.

use super::{EstimatorState, Profile};
use crate::arguments::Value;
use crate::error::CoreError;
use crate::tokenize::table::EncodingTable;
use crate::tokenize::Method;

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

/// A scalar argument's shape (a bool is `Other`, as the checks refuse it;
/// an int past the float range has an infinite float, as `float()` would
/// overflow).
impl<V> From<Value<'_>> for Shape<V> {
    fn from(v: Value<'_>) -> Self {
        match v {
            Value::None => Shape::None,
            Value::Int(n) => Shape::Int {
                value: Ok(n),
                float: n as f64,
            },
            Value::BigInt {
                negative, float, ..
            } => Shape::Int {
                value: Err(negative),
                float: float.unwrap_or(if negative {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                }),
            },
            Value::Float(f) => Shape::Float(f),
            Value::Str(s) => Shape::Str(Some(s.to_owned())),
            Value::Surrogate => Shape::Str(None),
            Value::Bool(_) | Value::Bytes(_) | Value::Other => Shape::Other,
        }
    }
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

pub(super) fn fail<E: From<CoreError>, T>(message: String) -> Result<T, E> {
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
    check_count_max(h, v, place, i64::MAX)
}

/// A non-negative int (not a bool) up to `max`.
pub fn check_count_max<H: Values>(
    h: &mut H,
    v: &H::Value,
    place: &str,
    max: i64,
) -> Result<i64, H::Error> {
    match h.shape(v)? {
        Shape::Int { value: Ok(n), .. } if (0..=max).contains(&n) => Ok(n),
        Shape::Int { value: Ok(n), .. } if n > max => {
            fail(format!("{place}: out of range, got {}", h.repr(v)?))
        }
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
        let key = prefix_key(h, &prefix, place)?;
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

/// A model-id prefix of a profiles or counting table: a str without lone surrogates.
fn prefix_key<H: Values>(h: &mut H, prefix: &H::Value, place: &str) -> Result<String, H::Error> {
    match h.shape(prefix)? {
        Shape::Str(Some(text)) => Ok(text),
        Shape::Str(None) => fail(format!(
            "{place}: lone surrogate in prefix {}",
            h.repr(prefix)?
        )),
        _ => fail(format!(
            "{place}: prefix {} is not a string",
            h.repr(prefix)?
        )),
    }
}

/// The caller's counting table: `None`, or a mapping of str model-id
/// prefixes to a known method name (a later prefix replaces an equal one).
pub fn check_table<H: Values>(
    h: &mut H,
    v: &H::Value,
    place: &str,
) -> Result<EncodingTable, H::Error> {
    let members = match h.shape(v)? {
        Shape::None => return Ok(EncodingTable::default()),
        Shape::Mapping(members) => members,
        _ => return fail(format!("{place}: expected a mapping")),
    };
    let mut out = Vec::new();
    for (prefix, name) in members {
        let key = prefix_key(h, &prefix, place)?;
        let method = match h.shape(&name)? {
            Shape::Str(Some(text)) => Method::from_name(&text),
            _ => None,
        };
        let Some(method) = method else {
            let (shown, named) = (h.repr(&prefix)?, h.repr(&name)?);
            return fail(format!(
                "{place}[{shown}]: unknown counting method {named}; known: {}",
                Method::KNOWN.join(", ")
            ));
        };
        out.push((key, method));
    }
    Ok(EncodingTable::new(out))
}

/// The constructor's keywords, in [`settings`]' order.
pub const SETTINGS: [&str; 5] = [
    "bytes_per_token",
    "framing_tokens",
    "profiles",
    "memo_capacity",
    "encodings",
];

/// A new estimator's state from the constructor's arguments (each `None`
/// when not given: the defaults `bytes_per_token=3.0`, `framing_tokens=4`,
/// no profiles, `memo_capacity=100_000`, the built-in counting table).
pub fn settings<H: Values>(
    h: &mut H,
    bytes_per_token: Option<&H::Value>,
    framing_tokens: Option<&H::Value>,
    profiles: Option<&H::Value>,
    memo_capacity: Option<&H::Value>,
    encodings: Option<&H::Value>,
) -> Result<EstimatorState, H::Error> {
    let (default, profiles, capacity) = check_settings(
        h,
        bytes_per_token,
        framing_tokens,
        profiles,
        memo_capacity,
        "",
    )?;
    let table = match encodings {
        Some(v) => check_table(h, v, "encodings")?,
        None => EncodingTable::default(),
    };
    Ok(EstimatorState::with_table(
        default, profiles, capacity, table,
    ))
}

/// The default profile, the prefix profiles and the memo capacity.
pub(super) type Checked = (Profile, Vec<(String, Profile)>, usize);

/// The settings a snapshot shares with the constructor (`place` prefixes
/// the names: `""` for the constructor, `"snapshot."` for a snapshot; a
/// `None` takes the constructor's default).
pub(super) fn check_settings<H: Values>(
    h: &mut H,
    bytes_per_token: Option<&H::Value>,
    framing_tokens: Option<&H::Value>,
    profiles: Option<&H::Value>,
    memo_capacity: Option<&H::Value>,
    place: &str,
) -> Result<Checked, H::Error> {
    let bpt = match bytes_per_token {
        Some(v) => check_number(h, v, &format!("{place}bytes_per_token"))?,
        None => 3.0,
    };
    let framing = match framing_tokens {
        Some(v) => check_count(h, v, &format!("{place}framing_tokens"))?,
        None => 4,
    };
    let profiles = match profiles {
        Some(v) => check_profiles(h, v, &format!("{place}profiles"))?,
        None => Vec::new(),
    };
    let capacity = match memo_capacity {
        Some(v) => check_count(h, v, &format!("{place}memo_capacity"))?,
        None => 100_000,
    };
    let default = Profile::new(bpt, framing)?;
    Ok((default, profiles, capacity as usize))
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
