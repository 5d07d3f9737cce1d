//! A small reader of the canonical JSON the core writes: one object level,
//! string values decoded, every other value kept as its raw span. The
//! counting recipe reads a rendered message's fields with it from the same
//! canonical bytes the memo is keyed by.

use std::borrow::Cow;

/// One member value of an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value<'a> {
    /// A string: decoded, and as written (quotes included).
    Str(Cow<'a, str>, &'a str),
    Null,
    /// A number, boolean, array or object: its bytes as written.
    Raw(&'a str),
}

struct Reader<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Reader<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn eat(&mut self, b: u8) -> Option<()> {
        self.skip_ws();
        (self.peek()? == b).then(|| self.at += 1)
    }

    fn hex4(&mut self) -> Option<u32> {
        let s = self.text.get(self.at..self.at + 4)?;
        if !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        self.at += 4;
        u32::from_str_radix(s, 16).ok()
    }

    /// A string (the reader is at its opening quote).
    fn string(&mut self) -> Option<Cow<'a, str>> {
        self.eat(b'"')?;
        let start = self.at;
        let bytes = self.text.as_bytes();
        // Fast path: no escapes.
        while let Some(&b) = bytes.get(self.at) {
            match b {
                b'"' => {
                    self.at += 1;
                    return Some(Cow::Borrowed(&self.text[start..self.at - 1]));
                }
                b'\\' => break,
                0..=0x1f => return None,
                _ => self.at += 1,
            }
        }
        let mut out = String::from(&self.text[start..self.at]);
        loop {
            let b = *bytes.get(self.at)?;
            match b {
                b'"' => {
                    self.at += 1;
                    return Some(Cow::Owned(out));
                }
                b'\\' => {
                    self.at += 1;
                    let e = *bytes.get(self.at)?;
                    self.at += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hi = self.hex4()?;
                            let code = if (0xD800..0xDC00).contains(&hi) {
                                // A surrogate pair, or nothing valid.
                                if self.text.get(self.at..self.at + 2)? != "\\u" {
                                    return None;
                                }
                                self.at += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return None;
                                }
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            } else {
                                hi
                            };
                            out.push(char::from_u32(code)?);
                        }
                        _ => return None,
                    }
                }
                0..=0x1f => return None,
                _ => {
                    // Copy the run up to the next quote or backslash.
                    let run_end = bytes[self.at..]
                        .iter()
                        .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
                        .map_or(bytes.len(), |p| self.at + p);
                    out.push_str(&self.text[self.at..run_end]);
                    self.at = run_end;
                }
            }
        }
    }

    /// Skip one value of any kind, returning its span.
    fn skip_value(&mut self) -> Option<&'a str> {
        self.skip_ws();
        let start = self.at;
        match self.peek()? {
            b'"' => {
                self.string()?;
            }
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match self.peek()? {
                        b'{' | b'[' => {
                            depth += 1;
                            self.at += 1;
                        }
                        b'}' | b']' => {
                            depth -= 1;
                            self.at += 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        b'"' => {
                            self.string()?;
                        }
                        _ => self.at += 1,
                    }
                }
            }
            _ => {
                while matches!(
                    self.peek(),
                    Some(b'-' | b'+' | b'.' | b'0'..=b'9' | b'e' | b'E' | b'a'..=b'z')
                ) {
                    self.at += 1;
                }
                if self.at == start {
                    return None;
                }
            }
        }
        Some(&self.text[start..self.at])
    }

    fn value(&mut self) -> Option<Value<'a>> {
        self.skip_ws();
        match self.peek()? {
            b'"' => {
                let start = self.at;
                let s = self.string()?;
                Some(Value::Str(s, &self.text[start..self.at]))
            }
            _ => {
                let raw = self.skip_value()?;
                Some(if raw == "null" {
                    Value::Null
                } else {
                    Value::Raw(raw)
                })
            }
        }
    }
}

/// The members of a JSON object, in order, or `None` when `text` is not
/// exactly one object. (A repeated key appears twice; readers take the last.)
pub fn object_members(text: &str) -> Option<Vec<(Cow<'_, str>, Value<'_>)>> {
    let mut r = Reader { text, at: 0 };
    r.eat(b'{')?;
    let mut out = Vec::new();
    r.skip_ws();
    if r.peek()? == b'}' {
        r.at += 1;
    } else {
        loop {
            r.skip_ws();
            let key = r.string()?;
            r.eat(b':')?;
            let value = r.value()?;
            out.push((key, value));
            r.skip_ws();
            match r.peek()? {
                b',' => r.at += 1,
                b'}' => {
                    r.at += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    r.skip_ws();
    (r.at == text.len()).then_some(out)
}

/// The string a JSON document holds, or `None` when it is not exactly one string.
pub fn string_value(text: &str) -> Option<Cow<'_, str>> {
    let mut r = Reader { text, at: 0 };
    let s = r.string()?;
    r.skip_ws();
    (r.at == text.len()).then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings() {
        assert_eq!(string_value(r#""abc""#).unwrap(), "abc");
        assert_eq!(
            string_value(r#""a\"b\\c\n\t\u0001\u00e9\ud83d\ude00""#).unwrap(),
            "a\"b\\c\n\t\u{1}é😀"
        );
        assert!(string_value(r#""\ud83d""#).is_none()); // lone surrogate
        assert!(string_value(r#""abc"x"#).is_none());
        assert!(string_value("\"a\nb\"").is_none()); // raw control character
        assert!(string_value("12").is_none());
    }

    #[test]
    fn objects() {
        let m = object_members(
            r#"{"a":"x","b":null,"c":{"d":[1,"}"]},"e":-1.5e+3,"f":true,"g":"q\"r"}"#,
        )
        .unwrap();
        assert_eq!(
            m,
            vec![
                ("a".into(), Value::Str("x".into(), r#""x""#)),
                ("b".into(), Value::Null),
                ("c".into(), Value::Raw(r#"{"d":[1,"}"]}"#)),
                ("e".into(), Value::Raw("-1.5e+3")),
                ("f".into(), Value::Raw("true")),
                ("g".into(), Value::Str("q\"r".into(), r#""q\"r""#)),
            ]
        );
        assert_eq!(object_members("{}").unwrap(), vec![]);
        assert!(object_members(r#"{"a":1"#).is_none());
        assert!(object_members(r#"{"a":1}x"#).is_none());
        assert!(object_members(r#"["a"]"#).is_none());
    }
}
