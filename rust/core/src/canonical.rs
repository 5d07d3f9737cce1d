//! RFC 8785 (JCS) canonical JSON: the formatting primitives the binding's
//! object walker writes with, and a walker over the pure-Rust [`Value`] tree
//! (used by tests and Rust callers).
//!
//! Everything here appends to one caller-owned `Vec<u8>`; nothing allocates
//! per value except on the error path.

use std::cmp::Ordering;
use std::fmt::Write as _;

use crate::error::CoreError;

/// The largest integer magnitude that prints as an integer: 2^53 - 1.
pub const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;
/// The deepest container nesting accepted; the root container is depth 1.
pub const MAX_DEPTH: usize = 128;

// The reasons, worded as the reference backend words them (Python reprs).
pub const REASON_NAN: &str = "nan is not a finite number";
pub const REASON_INFINITY: &str = "inf is not a finite number";
pub const REASON_NEG_INFINITY: &str = "-inf is not a finite number";
pub const REASON_INT_RANGE: &str = "integer outside ±(2**53-1)";
pub const REASON_DEPTH: &str = "nesting deeper than 128";
pub const REASON_CYCLE: &str = "cycle: container contains itself";
pub const REASON_ITEM_CYCLE: &str = "cycle: item contains itself";
pub const REASON_VALUE_CYCLE: &str = "cycle: value contains itself";
pub const REASON_SURROGATE: &str = "lone surrogate in string";

// ---------------------------------------------------------------------------
// JSON paths, built while an error unwinds (free on the success path)

/// One step of a JSON path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathSeg {
    Key(String),
    Index(usize),
}

/// A canonicalization failure whose path is completed as the walk unwinds:
/// each container frame prepends its own segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathError {
    /// Innermost segment first.
    segs: Vec<PathSeg>,
    pub reason: String,
}

impl PathError {
    pub fn new(reason: impl Into<String>) -> Self {
        PathError {
            segs: Vec::new(),
            reason: reason.into(),
        }
    }

    /// The error happened inside the value under `key`.
    #[must_use]
    pub fn in_key(mut self, key: &str) -> Self {
        self.segs.push(PathSeg::Key(key.to_owned()));
        self
    }

    /// The error happened inside the list element `index`.
    #[must_use]
    pub fn in_index(mut self, index: usize) -> Self {
        self.segs.push(PathSeg::Index(index));
        self
    }

    /// `$` then `.key` / `[i]` from the root down.
    pub fn path(&self) -> String {
        let mut p = String::from("$");
        for seg in self.segs.iter().rev() {
            match seg {
                PathSeg::Key(k) => {
                    p.push('.');
                    p.push_str(k);
                }
                PathSeg::Index(i) => {
                    let _ = write!(p, "[{i}]");
                }
            }
        }
        p
    }

    pub fn into_error(self) -> CoreError {
        CoreError::canonicalization(self.path(), self.reason)
    }
}

impl From<PathError> for CoreError {
    fn from(e: PathError) -> Self {
        e.into_error()
    }
}

// ---------------------------------------------------------------------------
// key order

/// Compare two UTF-8 strings by their UTF-16 code units (RFC 8785 §3.2.3).
///
/// UTF-8 byte order equals code point order; the two orders disagree only
/// when a character in U+E000..U+FFFF meets one above U+FFFF (whose UTF-16
/// lead surrogate, 0xD800..0xDBFF, sorts first). At the first differing byte
/// both strings are on a character boundary, so looking at the two lead
/// bytes there decides.
#[inline]
pub fn cmp_utf16(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i < n && a[i] == b[i] {
        i += 1;
    }
    if i == n {
        return a.len().cmp(&b.len());
    }
    let (x, y) = (a[i], b[i]);
    // 0xEE/0xEF lead U+E000..U+FFFF; 0xF0..0xF4 lead supplementary planes.
    if x >= 0xEE && y >= 0xEE {
        let (xs, ys) = (x >= 0xF0, y >= 0xF0);
        if xs != ys {
            return if xs {
                Ordering::Less
            } else {
                Ordering::Greater
            };
        }
    }
    x.cmp(&y)
}

// ---------------------------------------------------------------------------
// strings

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Flags (bit 7 of each byte) the bytes that need escaping: < 0x20, `"`
/// or `\\`. The lowest flag is exact (borrows only run upwards from a
/// flagged byte), so `trailing_zeros / 8` is the first such byte.
#[inline(always)]
fn escape_mask(x: u64) -> u64 {
    let below_space = x.wrapping_sub(ONES * 0x20) & !x;
    let q = x ^ (ONES * b'"' as u64);
    let quote = q.wrapping_sub(ONES) & !q;
    let s = x ^ (ONES * b'\\' as u64);
    let backslash = s.wrapping_sub(ONES) & !s;
    (below_space | quote | backslash) & HIGHS
}

const HEX: &[u8; 16] = b"0123456789abcdef";

#[inline]
fn write_escape(out: &mut Vec<u8>, b: u8) {
    match b {
        b'"' => out.extend_from_slice(b"\\\""),
        b'\\' => out.extend_from_slice(b"\\\\"),
        0x08 => out.extend_from_slice(b"\\b"),
        0x0c => out.extend_from_slice(b"\\f"),
        b'\n' => out.extend_from_slice(b"\\n"),
        b'\r' => out.extend_from_slice(b"\\r"),
        b'\t' => out.extend_from_slice(b"\\t"),
        _ => out.extend_from_slice(&[
            b'\\',
            b'u',
            b'0',
            b'0',
            HEX[(b >> 4) as usize],
            HEX[(b & 15) as usize],
        ]),
    }
}

#[inline(always)]
fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// Append `s` (valid UTF-8) as a JSON string: quotes, minimal escapes, the
/// rest verbatim. Scans eight bytes a step and copies clean runs in bulk.
pub fn write_str(out: &mut Vec<u8>, s: &[u8]) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    let n = s.len();
    let mut start = 0; // first byte not yet copied
    let mut i = 0;
    while i + 8 <= n {
        let mut chunk = [0u8; 8];
        chunk.copy_from_slice(&s[i..i + 8]);
        let m = escape_mask(u64::from_le_bytes(chunk));
        if m == 0 {
            i += 8;
            continue;
        }
        let j = i + (m.trailing_zeros() / 8) as usize;
        out.extend_from_slice(&s[start..j]);
        write_escape(out, s[j]);
        start = j + 1;
        i = j + 1;
    }
    while i < n {
        let b = s[i];
        if needs_escape(b) {
            out.extend_from_slice(&s[start..i]);
            write_escape(out, b);
            start = i + 1;
        }
        i += 1;
    }
    out.extend_from_slice(&s[start..]);
    out.push(b'"');
}

// ---------------------------------------------------------------------------
// numbers

/// Append an integer already known to be within ±(2^53-1) (or any i64).
#[inline]
pub fn write_i64(out: &mut Vec<u8>, v: i64) {
    let mut buf = [0u8; 20];
    let mut pos = buf.len();
    let mut m = v.unsigned_abs();
    loop {
        pos -= 1;
        buf[pos] = b'0' + (m % 10) as u8;
        m /= 10;
        if m == 0 {
            break;
        }
    }
    if v < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&buf[pos..]);
}

/// Append an integer, rejecting magnitudes above 2^53-1.
#[inline]
pub fn write_int(out: &mut Vec<u8>, v: i64) -> Result<(), &'static str> {
    if !(-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&v) {
        return Err(REASON_INT_RANGE);
    }
    write_i64(out, v);
    Ok(())
}

/// A fixed stack buffer for `core::fmt` output.
struct StackBuf {
    buf: [u8; 40],
    len: usize,
}

impl std::fmt::Write for StackBuf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        if end > self.buf.len() {
            return Err(std::fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Append a float as ECMAScript `Number.prototype.toString` prints it
/// (RFC 8785 §3.2.2.3). NaN and infinities are rejected.
pub fn write_f64(out: &mut Vec<u8>, v: f64) -> Result<(), &'static str> {
    if v.is_nan() {
        return Err(REASON_NAN);
    }
    if v.is_infinite() {
        return Err(if v > 0.0 {
            REASON_INFINITY
        } else {
            REASON_NEG_INFINITY
        });
    }
    if v == 0.0 {
        // Also -0.0.
        out.push(b'0');
        return Ok(());
    }
    // Rust's `{:e}` yields the shortest round-trip digits, nearest to the
    // value: `d[.ddd]e<exp>`.
    let mut sb = StackBuf {
        buf: [0; 40],
        len: 0,
    };
    if write!(sb, "{:e}", v.abs()).is_err() {
        return Err("float formatting failed");
    }
    let text = &sb.buf[..sb.len];
    let epos = match text.iter().position(|&c| c == b'e') {
        Some(p) => p,
        None => return Err("float formatting failed"),
    };
    let mut digits = [0u8; 24];
    let mut k = 0usize;
    for &c in &text[..epos] {
        if c.is_ascii_digit() {
            if k == digits.len() {
                return Err("float formatting failed");
            }
            digits[k] = c;
            k += 1;
        }
    }
    let mut exp: i32 = 0;
    let mut neg_exp = false;
    for &c in &text[epos + 1..] {
        match c {
            b'-' => neg_exp = true,
            b'0'..=b'9' => exp = exp * 10 + (c - b'0') as i32,
            _ => return Err("float formatting failed"),
        }
    }
    if neg_exp {
        exp = -exp;
    }
    let digits = &digits[..k];
    let k = k as i32;
    let n = exp + 1; // the decimal point position
    if v < 0.0 {
        out.push(b'-');
    }
    if k <= n && n <= 21 {
        out.extend_from_slice(digits);
        out.extend(std::iter::repeat_n(b'0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        out.extend_from_slice(&digits[..n as usize]);
        out.push(b'.');
        out.extend_from_slice(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.extend_from_slice(b"0.");
        out.extend(std::iter::repeat_n(b'0', (-n) as usize));
        out.extend_from_slice(digits);
    } else {
        out.push(digits[0]);
        if k > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        let e = n - 1;
        out.push(if e < 0 { b'-' } else { b'+' });
        write_i64(out, e.unsigned_abs() as i64);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// a pure-Rust value tree

/// A JSON value built in Rust. Object members keep insertion order; the
/// canonicalizer sorts them. Keys are assumed unique.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Array(Vec<Value>),
    Object(Vec<(String, Value)>),
}

/// The canonical bytes of `value`.
pub fn canonical_json(value: &Value) -> Result<Vec<u8>, CoreError> {
    let mut out = Vec::new();
    write_value(&mut out, value, 0).map_err(PathError::into_error)?;
    Ok(out)
}

/// Append `value`, whose parent container sits at `depth` (0 for the root).
pub fn write_value(out: &mut Vec<u8>, value: &Value, depth: usize) -> Result<(), PathError> {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Int(i) => write_int(out, *i).map_err(PathError::new)?,
        Value::Float(f) => write_f64(out, *f).map_err(PathError::new)?,
        Value::Str(s) => write_str(out, s.as_bytes()),
        Value::Array(items) => {
            if depth + 1 > MAX_DEPTH {
                return Err(PathError::new(REASON_DEPTH));
            }
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item, depth + 1).map_err(|e| e.in_index(i))?;
            }
            out.push(b']');
        }
        Value::Object(members) => {
            if depth + 1 > MAX_DEPTH {
                return Err(PathError::new(REASON_DEPTH));
            }
            let mut order: Vec<&(String, Value)> = members.iter().collect();
            order.sort_by(|a, b| cmp_utf16(a.0.as_bytes(), b.0.as_bytes()));
            out.push(b'{');
            for (i, (key, item)) in order.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, key.as_bytes());
                out.push(b':');
                write_value(out, item, depth + 1).map_err(|e| e.in_key(key))?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(v: f64) -> String {
        let mut out = Vec::new();
        write_f64(&mut out, v).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn s(text: &str) -> String {
        let mut out = Vec::new();
        write_str(&mut out, text.as_bytes());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn floats_follow_ecmascript() {
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (-0.0, "0"),
            (1.0, "1"),
            (-1.5, "-1.5"),
            (0.1, "0.1"),
            (123456789.125, "123456789.125"),
            (1e20, "100000000000000000000"),
            (1e21, "1e+21"),
            (1.5e21, "1.5e+21"),
            (1e-6, "0.000001"),
            (1e-7, "1e-7"),
            (1.25e-7, "1.25e-7"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (9007199254740992.0, "9007199254740992"),
            (333333333.33333329, "333333333.3333333"),
            (4.5, "4.5"),
            (2e-3, "0.002"),
            (0.000001234, "0.000001234"),
            (1e300, "1e+300"),
            (-1e-300, "-1e-300"),
            (123e18, "123000000000000000000"),
        ];
        for &(v, want) in cases {
            assert_eq!(f(v), want, "{v:e}");
        }
        let mut out = Vec::new();
        assert_eq!(write_f64(&mut out, f64::NAN), Err(REASON_NAN));
        assert_eq!(write_f64(&mut out, f64::INFINITY), Err(REASON_INFINITY));
        assert_eq!(
            write_f64(&mut out, f64::NEG_INFINITY),
            Err(REASON_NEG_INFINITY)
        );
    }

    #[test]
    fn strings_escape_minimally() {
        assert_eq!(s(""), "\"\"");
        assert_eq!(s("plain text that is long enough"), "\"plain text that is long enough\"");
        assert_eq!(s("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(
            s("\u{8}\u{c}\n\r\t\u{0}\u{1f}\u{7f}"),
            "\"\\b\\f\\n\\r\\t\\u0000\\u001f\u{7f}\""
        );
        assert_eq!(s("€𝄞/é"), "\"€𝄞/é\"");
        // escapes at every offset of a chunk
        for pos in 0..20 {
            let mut text = "x".repeat(20);
            text.replace_range(pos..pos + 1, "\n");
            let want = format!("\"{}\\n{}\"", "x".repeat(pos), "x".repeat(19 - pos));
            assert_eq!(s(&text), want);
        }
    }

    #[test]
    fn ints_check_the_safe_range() {
        let mut out = Vec::new();
        write_int(&mut out, MAX_SAFE_INTEGER).unwrap();
        out.push(b' ');
        write_int(&mut out, -MAX_SAFE_INTEGER).unwrap();
        out.push(b' ');
        write_int(&mut out, 0).unwrap();
        assert_eq!(out, b"9007199254740991 -9007199254740991 0");
        assert!(write_int(&mut out, MAX_SAFE_INTEGER + 1).is_err());
        assert!(write_int(&mut out, i64::MIN).is_err());
    }

    #[test]
    fn keys_sort_by_utf16_code_units() {
        let mut keys = vec!["\u{FFFF}", "\u{1F600}", "a", "", "ab", "\u{E000}", "\u{D7FF}", "b"];
        keys.sort_by(|a, b| cmp_utf16(a.as_bytes(), b.as_bytes()));
        assert_eq!(
            keys,
            vec!["", "a", "ab", "b", "\u{D7FF}", "\u{1F600}", "\u{E000}", "\u{FFFF}"]
        );
    }

    #[test]
    fn values_canonicalize_with_paths() {
        let v = Value::Object(vec![
            ("b".into(), Value::Array(vec![Value::Int(1), Value::Float(2.5), Value::Null])),
            ("a".into(), Value::Bool(true)),
        ]);
        assert_eq!(canonical_json(&v).unwrap(), b"{\"a\":true,\"b\":[1,2.5,null]}");
        let bad = Value::Object(vec![(
            "x".into(),
            Value::Array(vec![Value::Int(0), Value::Float(f64::NAN)]),
        )]);
        assert_eq!(
            canonical_json(&bad),
            Err(CoreError::canonicalization("$.x[1]", REASON_NAN))
        );
    }

    #[test]
    fn depth_limit() {
        let mut v = Value::Null;
        for _ in 0..128 {
            v = Value::Array(vec![v]);
        }
        assert!(canonical_json(&v).is_ok());
        let v = Value::Array(vec![v]);
        let err = canonical_json(&v).unwrap_err();
        let want_path = format!("${}", "[0]".repeat(128));
        assert_eq!(err, CoreError::canonicalization(want_path, REASON_DEPTH));
    }

    mod props {
        use super::super::*;
        use proptest::prelude::*;

        fn unescape(json: &str) -> String {
            let inner = &json[1..json.len() - 1];
            let mut out = String::new();
            let mut chars = inner.chars();
            while let Some(c) = chars.next() {
                if c != '\\' {
                    out.push(c);
                    continue;
                }
                match chars.next().unwrap() {
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'n' => out.push('\n'),
                    'r' => out.push('\r'),
                    't' => out.push('\t'),
                    'u' => {
                        let hex: String = chars.by_ref().take(4).collect();
                        assert!(hex.starts_with("00") && hex == hex.to_lowercase());
                        let v = u32::from_str_radix(&hex, 16).unwrap();
                        assert!(v < 0x20 && !matches!(v, 8 | 9 | 10 | 12 | 13));
                        out.push(char::from_u32(v).unwrap());
                    }
                    other => out.push(other),
                }
            }
            out
        }

        proptest! {
            #[test]
            fn floats_round_trip_in_ecmascript_form(bits in any::<u64>()) {
                let v = f64::from_bits(bits);
                prop_assume!(v.is_finite());
                let mut out = Vec::new();
                write_f64(&mut out, v).unwrap();
                let text = String::from_utf8(out).unwrap();
                let back: f64 = text.parse().unwrap();
                prop_assert_eq!(back, if v == 0.0 { 0.0 } else { v });
                let a = v.abs();
                let exponent_form = text.contains('e');
                prop_assert_eq!(exponent_form, a != 0.0 && !(1e-6..1e21).contains(&a));
                // shortest: as many digits as Rust's shortest repr
                let digits = |t: &str| t.split('e').next().unwrap().chars().filter(char::is_ascii_digit)
                    .collect::<String>().trim_matches('0').len();
                prop_assert_eq!(digits(&text), digits(&format!("{:e}", a)));
            }

            #[test]
            fn strings_round_trip(text in "\\PC*|[\\x00-\\x7f]*") {
                let mut out = Vec::new();
                write_str(&mut out, text.as_bytes());
                let json = String::from_utf8(out).unwrap();
                prop_assert!(!json[1..json.len() - 1].bytes().any(|b| b < 0x20));
                prop_assert_eq!(unescape(&json), text);
            }

            #[test]
            fn key_order_is_utf16(a in "\\PC{0,6}", b in "\\PC{0,6}") {
                let want = a.encode_utf16().cmp(b.encode_utf16());
                prop_assert_eq!(cmp_utf16(a.as_bytes(), b.as_bytes()), want);
            }

            #[test]
            fn ints_print_in_range(v in any::<i64>()) {
                let mut out = Vec::new();
                let r = write_int(&mut out, v);
                if v.unsigned_abs() <= MAX_SAFE_INTEGER as u64 {
                    prop_assert!(r.is_ok());
                    prop_assert_eq!(String::from_utf8(out).unwrap(), v.to_string());
                } else {
                    prop_assert!(r.is_err());
                }
            }
        }
    }
}
