//! A strict parser of RFC 8785 canonical JSON: it accepts exactly the texts
//! the canonicalizer writes (no whitespace, keys in UTF-16 order without
//! duplicates, the canonical string escapes and number spellings, nesting
//! within [`MAX_DEPTH`]) and nothing else, so a stored payload that was not
//! written by a ctxengine store is refused instead of half-understood.
//!
//! It is the Rust twin of the reference reader (`json.loads` followed by a
//! re-canonicalization that must give back the same bytes): both accept the
//! same texts and read them as the same values.

use std::borrow::Cow;
use std::cmp::Ordering;

use super::scan::plain_end;
use crate::canonical::{cmp_utf16, write_f64, MAX_DEPTH, MAX_SAFE_INTEGER};

/// A parsed JSON value; strings borrow from the text unless they hold escapes.
#[derive(Debug, Clone, PartialEq)]
pub enum Json<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Cow<'a, str>),
    Array(Vec<Json<'a>>),
    /// Members in the (canonical, strictly increasing) order of the text.
    Object(Vec<(Cow<'a, str>, Json<'a>)>),
}

impl Json<'_> {
    /// The name of the Python type this value reads as (`json.loads`).
    pub fn py_type(&self) -> &'static str {
        match self {
            Json::Null => "NoneType",
            Json::Bool(_) => "bool",
            Json::Int(_) => "int",
            Json::Float(_) => "float",
            Json::Str(_) => "str",
            Json::Array(_) => "list",
            Json::Object(_) => "dict",
        }
    }

    /// The member `key` of an object (`None` for a missing key or a non-object).
    pub fn get(&self, key: &str) -> Option<&Self> {
        match self {
            // An item's objects have a handful of members: compared in turn.
            Json::Object(members) if members.len() <= 8 => members
                .iter()
                .find(|(k, _)| k.as_ref() == key)
                .map(|(_, v)| v),
            Json::Object(members) => members
                .binary_search_by(|(k, _)| cmp_utf16(k.as_bytes(), key.as_bytes()))
                .ok()
                .map(|i| &members[i].1),
            _ => None,
        }
    }
}

/// Why a text is not canonical JSON (for tests and diagnostics; the reader
/// reports every such text the same way).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotCanonical(pub &'static str);

type Parsed<T> = Result<T, NotCanonical>;

/// Parse `text`, which must be one canonical JSON value and nothing more.
pub fn parse_canonical(text: &str) -> Parsed<Json<'_>> {
    let mut p = Parser {
        text,
        bytes: text.as_bytes(),
        pos: 0,
    };
    let value = p.value(0)?;
    if p.pos != p.bytes.len() {
        return Err(NotCanonical("trailing text after the value"));
    }
    Ok(value)
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn literal(&mut self, word: &'static [u8], value: Json<'a>) -> Parsed<Json<'a>> {
        if self.bytes[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(NotCanonical("not a JSON value"))
        }
    }

    /// A value whose enclosing container is at `depth` (0 at the root).
    fn value(&mut self, depth: usize) -> Parsed<Json<'a>> {
        match self.peek() {
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => Ok(Json::Str(self.string()?)),
            Some(b'n') => self.literal(b"null", Json::Null),
            Some(b't') => self.literal(b"true", Json::Bool(true)),
            Some(b'f') => self.literal(b"false", Json::Bool(false)),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(NotCanonical("not a JSON value")),
        }
    }

    fn enter(depth: usize) -> Parsed<()> {
        if depth > MAX_DEPTH {
            return Err(NotCanonical("nesting deeper than 128"));
        }
        Ok(())
    }

    fn object(&mut self, depth: usize) -> Parsed<Json<'a>> {
        Self::enter(depth)?;
        self.pos += 1;
        let mut members: Vec<(Cow<'a, str>, Json<'a>)> = Vec::new();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Json::Object(members));
        }
        loop {
            if self.peek() != Some(b'"') {
                return Err(NotCanonical("object key is not a string"));
            }
            let key = self.string()?;
            if let Some((last, _)) = members.last() {
                if cmp_utf16(last.as_bytes(), key.as_bytes()) != Ordering::Less {
                    return Err(NotCanonical("object keys out of canonical order"));
                }
            }
            if self.peek() != Some(b':') {
                return Err(NotCanonical("expected ':'"));
            }
            self.pos += 1;
            let value = self.value(depth)?;
            members.push((key, value));
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Json::Object(members));
                }
                _ => return Err(NotCanonical("expected ',' or '}'")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Parsed<Json<'a>> {
        Self::enter(depth)?;
        self.pos += 1;
        let mut values = Vec::new();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Json::Array(values));
        }
        loop {
            values.push(self.value(depth)?);
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Json::Array(values));
                }
                _ => return Err(NotCanonical("expected ',' or ']'")),
            }
        }
    }

    /// A string literal (the opening quote at `pos`), with exactly the
    /// canonical escapes: `\"`, `\\`, `\b \t \n \f \r`, and `\u00xx`
    /// (lowercase hex) for the other code points below U+0020.
    fn string(&mut self) -> Parsed<Cow<'a, str>> {
        let start = self.pos + 1;
        let b = self.bytes;
        // The common case: no escape before the closing quote.
        let mut i = plain_end(b, start);
        match b.get(i) {
            Some(b'"') => {
                self.pos = i + 1;
                return Ok(Cow::Borrowed(&self.text[start..i]));
            }
            Some(b'\\') => {}
            Some(_) => return Err(NotCanonical("unescaped control character")),
            None => return Err(NotCanonical("unterminated string")),
        }
        let mut out: Vec<u8> = b[start..i].to_vec();
        loop {
            match b.get(i) {
                Some(b'"') => {
                    self.pos = i + 1;
                    // Only ASCII was unescaped into `out`, between whole UTF-8 runs.
                    return String::from_utf8(out)
                        .map(Cow::Owned)
                        .map_err(|_| NotCanonical("invalid UTF-8"));
                }
                Some(b'\\') => {
                    let (c, used) = escape(&b[i + 1..])?;
                    out.push(c);
                    i += 1 + used;
                }
                Some(_) => return Err(NotCanonical("unescaped control character")),
                None => return Err(NotCanonical("unterminated string")),
            }
            let end = plain_end(b, i);
            out.extend_from_slice(&b[i..end]);
            i = end;
        }
    }

    fn number(&mut self) -> Parsed<Json<'a>> {
        let b = self.bytes;
        let start = self.pos;
        let mut i = start;
        if b[i] == b'-' {
            i += 1;
        }
        let int_start = i;
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                while matches!(b.get(i), Some(b'0'..=b'9')) {
                    i += 1;
                }
            }
            _ => return Err(NotCanonical("not a JSON number")),
        }
        let int_end = i;
        let mut is_float = false;
        if b.get(i) == Some(&b'.') {
            is_float = true;
            i += 1;
            let digits = i;
            while matches!(b.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
            if i == digits {
                return Err(NotCanonical("not a JSON number"));
            }
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            is_float = true;
            i += 1;
            if matches!(b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            let digits = i;
            while matches!(b.get(i), Some(b'0'..=b'9')) {
                i += 1;
            }
            if i == digits {
                return Err(NotCanonical("not a JSON number"));
            }
        }
        self.pos = i;
        let token = &self.text[start..i];
        if !is_float {
            // At most 16 digits can be within 2^53 - 1; longer is out of range.
            if int_end - int_start > 16 {
                return Err(NotCanonical("integer outside ±(2**53-1)"));
            }
            let v: i64 = token
                .parse()
                .map_err(|_| NotCanonical("not a JSON number"))?;
            if v.unsigned_abs() > MAX_SAFE_INTEGER as u64 {
                return Err(NotCanonical("integer outside ±(2**53-1)"));
            }
            if v == 0 && b[start] == b'-' {
                return Err(NotCanonical("-0 is not canonical"));
            }
            return Ok(Json::Int(v));
        }
        let v: f64 = token
            .parse()
            .map_err(|_| NotCanonical("not a JSON number"))?;
        let mut canonical = Vec::with_capacity(token.len());
        write_f64(&mut canonical, v).map_err(|_| NotCanonical("not a finite number"))?;
        if canonical != token.as_bytes() {
            return Err(NotCanonical("number not in canonical form"));
        }
        Ok(Json::Float(v))
    }
}

/// The character of the escape after a backslash (`rest` starts after it),
/// and how many bytes the escape used.
fn escape(rest: &[u8]) -> Parsed<(u8, usize)> {
    let c = match rest.first() {
        Some(b'"') => b'"',
        Some(b'\\') => b'\\',
        Some(b'b') => 0x08,
        Some(b't') => b'\t',
        Some(b'n') => b'\n',
        Some(b'f') => 0x0c,
        Some(b'r') => b'\r',
        Some(b'u') => {
            let hex = rest.get(1..5).ok_or(NotCanonical("short \\u escape"))?;
            if &hex[..2] != b"00" {
                return Err(NotCanonical("\\u escape of a character that needs none"));
            }
            let digit = |h: u8| match h {
                b'0'..=b'9' => Ok(h - b'0'),
                b'a'..=b'f' => Ok(h - b'a' + 10),
                _ => Err(NotCanonical("\\u escape not in lowercase hex")),
            };
            let code = digit(hex[2])? * 16 + digit(hex[3])?;
            if code >= 0x20 || matches!(code, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d) {
                return Err(NotCanonical("\\u escape where the canonical form differs"));
            }
            return Ok((code, 5));
        }
        _ => return Err(NotCanonical("unknown escape")),
    };
    Ok((c, 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Json<'_> {
        parse_canonical(text).unwrap_or_else(|e| panic!("{text}: {e:?}"))
    }

    fn bad(text: &str) {
        assert!(parse_canonical(text).is_err(), "{text} was accepted");
    }

    #[test]
    fn accepts_canonical_texts() {
        assert_eq!(ok("{}"), Json::Object(vec![]));
        assert_eq!(ok("[1,-2,1.5,1e+21,1e-7,0.000001]").py_type(), "list");
        assert_eq!(
            ok("\"a\\n\\u001f\\\"\\\\é\""),
            Json::Str("a\n\u{1f}\"\\é".into())
        );
        assert_eq!(
            ok("{\"a\":null,\"b\":true,\"c\":false}").get("b"),
            Some(&Json::Bool(true))
        );
        assert_eq!(ok("9007199254740991"), Json::Int(9007199254740991));
        // U+FFFF sorts after U+10000 in UTF-16 order.
        ok("{\"\u{10000}\":1,\"\u{ffff}\":2}");
    }

    #[test]
    fn refuses_everything_else() {
        for text in [
            " {}",
            "{} ",
            "{\"b\":1,\"a\":2}",
            "{\"a\":1,\"a\":2}",
            "{\"\u{ffff}\":1,\"\u{10000}\":2}",
            "\"\\u0041\"",
            "\"\\/\"",
            "\"\\u000a\"",
            "\"\\u001F\"",
            "\"\u{1}\"",
            "1.0",
            "1E5",
            "01",
            "-0",
            "-0.0",
            "1e400",
            "9007199254740992",
            "12345678901234567890",
            "NaN",
            "[1,]",
            "{\"a\" :1}",
            "\"abc",
            "tru",
        ] {
            bad(text);
        }
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        ok(&deep(MAX_DEPTH));
        bad(&deep(MAX_DEPTH + 1));
        bad(&deep(100_000));
    }
}
