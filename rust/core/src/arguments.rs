//! Argument checks of the entry points (ADR 0010), worded as the reference
//! words them (`ctxengine/reference/arguments.py`; tests compare the two):
//! every entry point checks its arguments in signature order before any work.
//!
//! The binding reads a Python object into an [`Arg`] (what it is, and how to
//! name its type when a check rejects it); the checks and their wording are
//! here, returning [`CoreError::Argument`] (or [`CoreError::Estimator`] for
//! the estimator's methods and what a foreign estimator returned).

use std::fmt::Display;

use crate::error::{CoreError, CoreResult};

/// An argument's value, as the checks tell values apart.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    None,
    Bool(bool),
    /// An int (not a bool) within the signed 64-bit range.
    Int(i64),
    /// An int outside the signed 64-bit range.
    BigInt {
        negative: bool,
        /// Its value as a float; `None` past the float range.
        float: Option<f64>,
        /// Its digits, as `int.__repr__` writes them.
        digits: String,
    },
    Float(f64),
    /// A str (its UTF-8).
    Str(&'a str),
    /// A str holding a lone surrogate (it has no UTF-8).
    Surrogate,
    /// A bytes object's bytes.
    Bytes(&'a [u8]),
    /// Anything else.
    Other,
}

impl Value<'_> {
    /// An int outside the signed 64-bit range, from its digits: its float
    /// correctly rounded (as `PyLong_AsDouble`), `None` past the float range.
    pub fn big_int(digits: String) -> Self {
        Value::BigInt {
            negative: digits.starts_with('-'),
            float: digits.parse::<f64>().ok().filter(|f| f.is_finite()),
            digits,
        }
    }
}

/// An argument: its value, and the name of its type (`type(value).__name__`),
/// asked for only when a check rejects the value.
pub struct Arg<'v, 'n> {
    pub value: Value<'v>,
    pub type_name: &'n dyn Fn() -> String,
}

fn argument(function: &str, name: &dyn Display, reason: impl Into<String>) -> CoreError {
    CoreError::argument(function, name.to_string(), reason)
}

/// "expected WHAT, got TYPE".
fn expected(function: &str, name: &dyn Display, what: &str, arg: &Arg<'_, '_>) -> CoreError {
    argument(
        function,
        name,
        format!("expected {what}, got {}", (arg.type_name)()),
    )
}

fn out_of_range(function: &str, name: &dyn Display, digits: &str) -> CoreError {
    argument(function, name, format!("out of range, got {digits}"))
}

/// A signed 64-bit int (not a bool).
pub fn int64(function: &str, name: &dyn Display, arg: &Arg<'_, '_>) -> CoreResult<i64> {
    match &arg.value {
        Value::Int(v) => Ok(*v),
        Value::BigInt { digits, .. } => Err(out_of_range(function, name, digits)),
        _ => Err(expected(function, name, "an int", arg)),
    }
}

/// `None`, or a signed 64-bit int (not a bool).
pub fn optional_int64(
    function: &str,
    name: &dyn Display,
    arg: &Arg<'_, '_>,
) -> CoreResult<Option<i64>> {
    match &arg.value {
        Value::None => Ok(None),
        Value::Int(_) | Value::BigInt { .. } => int64(function, name, arg).map(Some),
        _ => Err(expected(function, name, "an int or None", arg)),
    }
}

/// `None`, or a non-negative 64-bit int (a block's cap).
pub fn optional_cap(
    function: &str,
    name: &dyn Display,
    arg: &Arg<'_, '_>,
) -> CoreResult<Option<i64>> {
    let cap = optional_int64(function, name, arg)?;
    match cap {
        Some(c) if c < 0 => Err(negative(function, name, c)),
        _ => Ok(cap),
    }
}

/// "must not be negative, got N".
pub fn negative(function: &str, name: &dyn Display, value: i64) -> CoreError {
    argument(function, name, format!("must not be negative, got {value}"))
}

/// An int or a float (not a bool), as a float.
pub fn ratio(function: &str, name: &dyn Display, arg: &Arg<'_, '_>) -> CoreResult<f64> {
    match &arg.value {
        Value::Float(v) => Ok(*v),
        // As `int.__float__`: correctly rounded.
        Value::Int(v) => Ok(*v as f64),
        Value::BigInt { float: Some(v), .. } => Ok(*v),
        Value::BigInt { digits, .. } => Err(out_of_range(function, name, digits)),
        _ => Err(expected(function, name, "a number", arg)),
    }
}

/// A token limit compared with sums of whole-token counts (LangChain's
/// `max_tokens`): an int (a bool counts as one, as in LangChain) or a
/// float, as the 64-bit int that compares alike with every count sum:
/// rounded down and clamped, and NaN (which no sum is at most) as -1.
pub fn token_limit(function: &str, name: &dyn Display, arg: &Arg<'_, '_>) -> CoreResult<i64> {
    match &arg.value {
        Value::Bool(b) => Ok(i64::from(*b)),
        Value::Int(v) => Ok(*v),
        Value::BigInt { negative, .. } => Ok(if *negative { i64::MIN } else { i64::MAX }),
        // `as` saturates: infinities and huge values clamp to the range.
        Value::Float(v) => Ok(if v.is_nan() { -1 } else { v.floor() as i64 }),
        _ => Err(expected(function, name, "a number", arg)),
    }
}

/// A str that encodes as UTF-8 (no lone surrogate).
pub fn string<'a>(function: &str, name: &dyn Display, arg: &Arg<'a, '_>) -> CoreResult<&'a str> {
    match arg.value {
        Value::Str(s) => Ok(s),
        Value::Surrogate => Err(argument(function, name, "lone surrogate in string")),
        _ => Err(expected(function, name, "a str", arg)),
    }
}

/// A bytes object.
pub fn bytes<'a>(function: &str, name: &dyn Display, arg: &Arg<'a, '_>) -> CoreResult<&'a [u8]> {
    match arg.value {
        Value::Bytes(b) => Ok(b),
        _ => Err(expected(function, name, "bytes", arg)),
    }
}

/// A sequence argument that is not one (`what` names its elements).
pub fn not_a_sequence(
    function: &str,
    name: &dyn Display,
    what: &str,
    type_name: &str,
) -> CoreError {
    argument(
        function,
        name,
        format!("expected a sequence of {what}, got {type_name}"),
    )
}

/// An estimator argument without callable `raw_estimates` and `corrected`.
pub fn not_an_estimator(function: &str, type_name: &str) -> CoreError {
    argument(
        function,
        &"estimator",
        format!("expected a token estimator, got {type_name}"),
    )
}

/// Measured raw estimates (`raw`): `got` of them, one per item (`count`);
/// each is then checked by [`raw_estimate`].
pub fn raw_count(function: &str, got: usize, count: usize) -> CoreResult<()> {
    if got != count {
        return Err(argument(
            function,
            &"raw",
            format!("{got} estimates for {count} items"),
        ));
    }
    Ok(())
}

/// The raw estimate `raw[index]`.
pub fn raw_estimate(function: &str, index: usize, arg: &Arg<'_, '_>) -> CoreResult<i64> {
    let name = RawName(index);
    let n = int64(function, &name, arg)?;
    if n < 0 {
        return Err(negative(function, &name, n));
    }
    Ok(n)
}

/// `raw[INDEX]`, written only when an error names it.
struct RawName(usize);

impl Display for RawName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "raw[{}]", self.0)
    }
}

/// The estimator methods' `model_id`.
pub fn model_id<'a>(arg: &Arg<'a, '_>) -> CoreResult<&'a str> {
    estimator_str("model_id", arg)
}

/// A str argument `name` of the estimator's methods (`model_id`, `kind`).
pub fn estimator_str<'a>(name: &str, arg: &Arg<'a, '_>) -> CoreResult<&'a str> {
    match arg.value {
        Value::Str(s) => Ok(s),
        Value::Surrogate => Err(CoreError::estimator(format!(
            "{name}: lone surrogate in string"
        ))),
        _ => Err(CoreError::estimator(format!(
            "{name}: expected a str, got {}",
            (arg.type_name)()
        ))),
    }
}

/// `estimate_text`'s `text`: any str (a lone surrogate fails when it is
/// canonicalized).
pub fn estimator_text(arg: &Arg<'_, '_>) -> CoreResult<()> {
    match arg.value {
        Value::Str(_) | Value::Surrogate => Ok(()),
        _ => Err(CoreError::estimator(format!(
            "text: expected a str, got {}",
            (arg.type_name)()
        ))),
    }
}

/// The estimator methods' sequences of values (`name`) that are not one.
pub fn not_values(name: &str, type_name: &str) -> CoreError {
    CoreError::estimator(format!(
        "{name}: expected a sequence of values, got {type_name}"
    ))
}

/// A foreign estimator's `raw_estimates` returned `got` (its length, or the
/// name of its type when it is not a list or tuple) estimates for `count` items.
pub fn foreign_raw_count(got: &str, count: usize) -> CoreError {
    CoreError::estimator(format!(
        "estimator.raw_estimates returned {got} estimates for {count} items"
    ))
}

/// A foreign estimator's raw estimate: a non-negative 64-bit int (not a
/// bool); `repr` writes the value when it is not one (its error returned
/// as the outer one).
pub fn foreign_raw<E>(
    value: &Value<'_>,
    repr: impl FnOnce() -> Result<String, E>,
) -> Result<CoreResult<i64>, E> {
    Ok(match value {
        Value::Int(n) if *n >= 0 => Ok(*n),
        _ => Err(CoreError::estimator(format!(
            "estimator.raw_estimates returned {}, not a count",
            repr()?
        ))),
    })
}

/// A foreign estimator's `method` returned a value of type `type_name`, not an int.
pub fn foreign_not_int(method: &str, type_name: &str) -> CoreError {
    CoreError::estimator(format!(
        "estimator.{method} returned {type_name}, not an int"
    ))
}

/// The name of an argument's part, formatted only when an error needs it:
/// `base.field`, or `base[at].field`.
#[derive(Clone, Copy)]
pub struct Path<'a> {
    base: &'a str,
    at: Option<usize>,
    field: &'a str,
}

impl<'a> Path<'a> {
    pub fn of(base: &'a str, field: &'a str) -> Self {
        Path {
            base,
            at: None,
            field,
        }
    }

    pub fn at(base: &'a str, at: usize, field: &'a str) -> Self {
        Path {
            base,
            at: Some(at),
            field,
        }
    }
}

impl std::fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.at {
            Some(at) => write!(f, "{}[{at}]", self.base)?,
            None => f.write_str(self.base)?,
        }
        if !self.field.is_empty() {
            write!(f, ".{}", self.field)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_an_arguments_part() {
        assert_eq!(Path::of("inputs", "history").to_string(), "inputs.history");
        assert_eq!(Path::of("inputs.blocks", "").to_string(), "inputs.blocks");
        assert_eq!(
            Path::at("inputs.blocks", 2, "ids").to_string(),
            "inputs.blocks[2].ids"
        );
        assert_eq!(
            Path::at("inputs.blocks", 0, "").to_string(),
            "inputs.blocks[0]"
        );
    }

    fn arg<'a>(value: Value<'a>, type_name: &'a dyn Fn() -> String) -> Arg<'a, 'a> {
        Arg { value, type_name }
    }

    /// The message of an `ArgumentError` as `str()` shows it.
    fn message<T: std::fmt::Debug>(r: CoreResult<T>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn big_int_reads_sign_and_float_from_digits() {
        assert_eq!(
            big(true, Some(-9223372036854775809.0)),
            Value::big_int("-9223372036854775809".into())
        );
        assert_eq!(
            big(false, Some(9.223372036854776e18)),
            Value::big_int("9223372036854775808".into())
        );
        let huge = "1".repeat(400);
        let Value::BigInt {
            negative,
            float,
            digits,
        } = Value::big_int(huge.clone())
        else {
            panic!("not a BigInt");
        };
        assert_eq!((negative, float, digits), (false, None, huge));
    }

    fn big(negative: bool, float: Option<f64>) -> Value<'static> {
        Value::BigInt {
            negative,
            float,
            digits: if negative {
                "-9223372036854775809"
            } else {
                "9223372036854775808"
            }
            .to_owned(),
        }
    }

    #[test]
    fn bytes_are_bytes() {
        let s = || "str".to_owned();
        assert_eq!(
            bytes("f", &"b", &arg(Value::Bytes(b"x"), &s)),
            Ok(&b"x"[..])
        );
        let bad = bytes("exact_raw", &"canonical", &arg(Value::Str("x"), &s));
        assert_eq!(
            message(bad),
            "exact_raw: canonical: expected bytes, got str"
        );
    }

    #[test]
    fn the_estimators_strs_are_named_in_its_errors() {
        let i = || "int".to_owned();
        let kind = |v| estimator_str("kind", &arg(v, &i)).map_err(|e| e.to_string());
        assert_eq!(kind(Value::Str("user_message")), Ok("user_message"));
        assert_eq!(
            kind(Value::Surrogate),
            Err("kind: lone surrogate in string".into())
        );
        assert_eq!(
            kind(Value::Int(1)),
            Err("kind: expected a str, got int".into())
        );
        assert_eq!(model_id(&arg(Value::Str("m"), &i)), Ok("m"));
        assert_eq!(estimator_text(&arg(Value::Surrogate, &i)), Ok(()));
        let bad = estimator_text(&arg(Value::None, &|| "NoneType".to_owned()));
        assert_eq!(
            bad.unwrap_err().to_string(),
            "text: expected a str, got NoneType"
        );
    }

    #[test]
    fn ints_are_checked_and_worded_as_the_reference() {
        let f = || "float".to_owned();
        let none = || "NoneType".to_owned();
        let b = || "bool".to_owned();
        let i = || "int".to_owned();
        assert_eq!(int64("g", &"n", &arg(Value::Int(-3), &i)), Ok(-3));
        assert_eq!(
            message(int64("g", &"n", &arg(Value::Float(1.0), &f))),
            "g: n: expected an int, got float"
        );
        assert_eq!(
            message(int64("g", &"n", &arg(Value::Bool(true), &b))),
            "g: n: expected an int, got bool"
        );
        assert_eq!(
            message(int64("g", &"n", &arg(big(false, Some(9.2e18)), &i))),
            "g: n: out of range, got 9223372036854775808"
        );
        assert_eq!(
            optional_int64("g", &"n", &arg(Value::None, &none)),
            Ok(None)
        );
        assert_eq!(
            optional_int64("g", &"n", &arg(Value::Int(4), &i)),
            Ok(Some(4))
        );
        assert_eq!(
            message(optional_int64(
                "g",
                &"n",
                &arg(Value::Str("x"), &|| "str".to_owned())
            )),
            "g: n: expected an int or None, got str"
        );
        assert_eq!(
            message(optional_int64("g", &"n", &arg(big(true, None), &i))),
            "g: n: out of range, got -9223372036854775809"
        );
        assert_eq!(
            message(optional_cap("g", &"cap", &arg(Value::Int(-1), &i))),
            "g: cap: must not be negative, got -1"
        );
        assert_eq!(
            optional_cap("g", &"cap", &arg(Value::Int(0), &i)),
            Ok(Some(0))
        );
    }

    #[test]
    fn the_type_name_is_asked_for_only_on_rejection() {
        let asked = std::cell::Cell::new(0);
        let name = || {
            asked.set(asked.get() + 1);
            "MyInt".to_owned()
        };
        assert_eq!(int64("g", &"n", &arg(Value::Int(1), &name)), Ok(1));
        assert_eq!(ratio("g", &"n", &arg(Value::Int(1), &name)), Ok(1.0));
        assert_eq!(asked.get(), 0);
        assert_eq!(
            message(string("g", &"s", &arg(Value::Int(1), &name))),
            "g: s: expected a str, got MyInt"
        );
        assert_eq!(asked.get(), 1);
    }

    #[test]
    fn ratios_and_token_limits() {
        let n = || "NoneType".to_owned();
        let i = || "int".to_owned();
        assert_eq!(ratio("g", &"r", &arg(Value::Float(0.25), &n)), Ok(0.25));
        assert_eq!(
            ratio("g", &"r", &arg(Value::Int(i64::MAX), &i)),
            Ok(9.223372036854776e18)
        );
        assert_eq!(ratio("g", &"r", &arg(big(false, Some(1e19)), &i)), Ok(1e19));
        assert_eq!(
            message(ratio("g", &"r", &arg(big(false, None), &i))),
            "g: r: out of range, got 9223372036854775808"
        );
        assert_eq!(
            message(ratio(
                "g",
                &"r",
                &arg(Value::Bool(false), &|| "bool".to_owned())
            )),
            "g: r: expected a number, got bool"
        );
        assert_eq!(
            message(ratio("g", &"r", &arg(Value::None, &n))),
            "g: r: expected a number, got NoneType"
        );
        assert_eq!(token_limit("t", &"m", &arg(Value::Bool(true), &n)), Ok(1));
        assert_eq!(
            token_limit("t", &"m", &arg(Value::Float(f64::NAN), &n)),
            Ok(-1)
        );
        assert_eq!(token_limit("t", &"m", &arg(Value::Float(-2.5), &n)), Ok(-3));
        assert_eq!(
            token_limit("t", &"m", &arg(Value::Float(f64::INFINITY), &n)),
            Ok(i64::MAX)
        );
        assert_eq!(
            token_limit("t", &"m", &arg(Value::Float(f64::NEG_INFINITY), &n)),
            Ok(i64::MIN)
        );
        assert_eq!(
            token_limit("t", &"m", &arg(big(true, None), &i)),
            Ok(i64::MIN)
        );
        assert_eq!(
            token_limit("t", &"m", &arg(big(false, None), &i)),
            Ok(i64::MAX)
        );
        assert_eq!(
            message(token_limit(
                "t",
                &"m",
                &arg(Value::Str("5"), &|| "str".to_owned())
            )),
            "t: m: expected a number, got str"
        );
    }

    #[test]
    fn strings_sequences_and_estimators() {
        let s = || "str".to_owned();
        assert_eq!(string("g", &"model_id", &arg(Value::Str("m"), &s)), Ok("m"));
        assert_eq!(
            message(string("g", &"model_id", &arg(Value::Surrogate, &s))),
            "g: model_id: lone surrogate in string"
        );
        assert_eq!(
            not_a_sequence("g", &"items", "conversation items", "dict").to_string(),
            "g: items: expected a sequence of conversation items, got dict"
        );
        assert_eq!(
            not_an_estimator("g", "object").to_string(),
            "g: estimator: expected a token estimator, got object"
        );
    }

    #[test]
    fn raw_estimates_name_their_index() {
        let i = || "int".to_owned();
        assert_eq!(raw_count("g", 2, 2), Ok(()));
        assert_eq!(
            raw_count("g", 1, 2).unwrap_err().to_string(),
            "g: raw: 1 estimates for 2 items"
        );
        assert_eq!(raw_estimate("g", 3, &arg(Value::Int(5), &i)), Ok(5));
        assert_eq!(
            message(raw_estimate("g", 3, &arg(Value::Int(-5), &i))),
            "g: raw[3]: must not be negative, got -5"
        );
        assert_eq!(
            message(raw_estimate(
                "g",
                0,
                &arg(Value::Float(1.0), &|| "float".to_owned())
            )),
            "g: raw[0]: expected an int, got float"
        );
        assert!(matches!(
            raw_estimate("g", 0, &arg(Value::Int(-1), &i)),
            Err(CoreError::Argument { argument, .. }) if argument == "raw[0]"
        ));
    }

    #[test]
    fn the_estimators_wording() {
        let s = || "str".to_owned();
        assert_eq!(model_id(&arg(Value::Str("m"), &s)), Ok("m"));
        assert_eq!(
            message(model_id(&arg(Value::Surrogate, &s))),
            "model_id: lone surrogate in string"
        );
        assert_eq!(
            message(model_id(&arg(Value::Int(1), &|| "int".to_owned()))),
            "model_id: expected a str, got int"
        );
        assert_eq!(
            not_values("items", "int").to_string(),
            "items: expected a sequence of values, got int"
        );
        assert_eq!(
            foreign_raw_count("3", 4).to_string(),
            "estimator.raw_estimates returned 3 estimates for 4 items"
        );
        let raw = |v, repr: &str| foreign_raw::<()>(&v, || Ok(repr.to_owned())).unwrap();
        assert_eq!(raw(Value::Int(0), "0"), Ok(0));
        assert_eq!(
            foreign_raw(&Value::None, || Err("repr failed")),
            Err("repr failed")
        );
        assert_eq!(
            message(raw(Value::Int(-1), "-1")),
            "estimator.raw_estimates returned -1, not a count"
        );
        assert_eq!(
            message(raw(Value::Bool(true), "True")),
            "estimator.raw_estimates returned True, not a count"
        );
        assert_eq!(
            foreign_not_int("corrected", "float").to_string(),
            "estimator.corrected returned float, not an int"
        );
    }
}
