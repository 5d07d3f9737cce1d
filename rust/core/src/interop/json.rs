//! JSON text -> canonical JSON bytes in one pass, with the acceptance rules
//! of Python's `json.loads` (the C scanner, `strict=True`) followed by
//! canonical JSON (ADR 0001): whitespace is ` \t\n\r`; numbers follow
//! `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?`, an integer without
//! fraction or exponent is an int (within ±(2^53-1) to be canonical), any
//! other a double; `NaN`, `Infinity`, lone surrogates, control characters
//! in strings and nesting deeper than 128 fail. Duplicate keys keep the last
//! value. Any failure is `None`: the caller asks the reference for the error.

use crate::canonical::{cmp_utf16, write_f64, write_int, write_str};

const MAX_DEPTH: usize = 128;

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    /// Scratch for decoded strings (reused).
    text: Vec<u8>,
}

/// The canonical bytes of the JSON object `src` encodes, appended to `out`;
/// `None` when `src` is not one (or cannot be canonical).
pub fn object_to_canonical(src: &str, out: &mut Vec<u8>) -> Option<()> {
    let mut p = Parser {
        s: src.as_bytes(),
        i: 0,
        text: Vec::new(),
    };
    p.ws();
    if p.peek()? != b'{' {
        return None;
    }
    p.value(out, 1)?;
    p.ws();
    (p.i == p.s.len()).then_some(())
}

impl Parser<'_> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    #[inline]
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    fn lit(&mut self, word: &[u8]) -> Option<()> {
        if self.s[self.i..].starts_with(word) {
            self.i += word.len();
            Some(())
        } else {
            None
        }
    }

    fn value(&mut self, out: &mut Vec<u8>, depth: usize) -> Option<()> {
        match self.peek()? {
            b'{' => self.object(out, depth),
            b'[' => self.array(out, depth),
            b'"' => {
                self.string()?;
                write_str(out, &self.text);
                Some(())
            }
            b't' => self.lit(b"true").map(|()| out.extend_from_slice(b"true")),
            b'f' => self.lit(b"false").map(|()| out.extend_from_slice(b"false")),
            b'n' => self.lit(b"null").map(|()| out.extend_from_slice(b"null")),
            b'-' | b'0'..=b'9' => self.number(out),
            _ => None, // NaN, Infinity and anything else
        }
    }

    fn object(&mut self, out: &mut Vec<u8>, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.i += 1;
        let mut members: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        self.ws();
        if self.peek()? == b'}' {
            self.i += 1;
        } else {
            loop {
                self.ws();
                if self.peek()? != b'"' {
                    return None;
                }
                self.string()?;
                let key = self.text.clone();
                self.ws();
                if self.peek()? != b':' {
                    return None;
                }
                self.i += 1;
                self.ws();
                let mut value = Vec::new();
                self.value(&mut value, depth + 1)?;
                match members.iter_mut().find(|(k, _)| *k == key) {
                    Some(slot) => slot.1 = value,
                    None => members.push((key, value)),
                }
                self.ws();
                match self.peek()? {
                    b',' => self.i += 1,
                    b'}' => {
                        self.i += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        members.sort_by(|a, b| cmp_utf16(&a.0, &b.0));
        out.push(b'{');
        for (n, (key, value)) in members.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            write_str(out, key);
            out.push(b':');
            out.extend_from_slice(value);
        }
        out.push(b'}');
        Some(())
    }

    fn array(&mut self, out: &mut Vec<u8>, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.i += 1;
        out.push(b'[');
        self.ws();
        if self.peek()? == b']' {
            self.i += 1;
            out.push(b']');
            return Some(());
        }
        let mut first = true;
        loop {
            self.ws();
            if !first {
                out.push(b',');
            }
            first = false;
            self.value(out, depth + 1)?;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    out.push(b']');
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
        self.i - start
    }

    fn number(&mut self, out: &mut Vec<u8>) -> Option<()> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => {
                self.digits();
            }
            _ => return None,
        }
        let int_end = self.i;
        let mut float = false;
        if self.peek() == Some(b'.') && matches!(self.s.get(self.i + 1), Some(b'0'..=b'9')) {
            self.i += 1;
            self.digits();
            float = true;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            let save = self.i;
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if self.digits() == 0 {
                self.i = save; // not an exponent: the number ends before it
            } else {
                float = true;
            }
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).ok()?;
        if float {
            write_f64(out, text.parse::<f64>().ok()?).ok()
        } else {
            // Longer than 16 digits is beyond 2^53 anyway; i64 parsing would also do.
            if int_end - start > 17 {
                return None;
            }
            write_int(out, text.parse::<i64>().ok()?).ok()
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let h = self.s.get(self.i..self.i + 4)?;
        let mut v = 0u32;
        for &c in h {
            v = v * 16 + (c as char).to_digit(16)?;
        }
        self.i += 4;
        Some(v)
    }

    /// Decode the string at `self.i` into `self.text` (UTF-8).
    fn string(&mut self) -> Option<()> {
        self.i += 1;
        self.text.clear();
        loop {
            let start = self.i;
            while let Some(&c) = self.s.get(self.i) {
                if c == b'"' || c == b'\\' || c < 0x20 {
                    break;
                }
                self.i += 1;
            }
            let chunk = &self.s[start..self.i];
            self.text.extend_from_slice(chunk);
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    return Some(());
                }
                b'\\' => {
                    self.i += 1;
                    let e = self.peek()?;
                    self.i += 1;
                    let c = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let hi = self.hex4()?;
                            let code = if (0xD800..0xDC00).contains(&hi) {
                                // A pair only when a low surrogate escape follows.
                                if self.s.get(self.i..self.i + 2) == Some(b"\\u") {
                                    let save = self.i;
                                    self.i += 2;
                                    let lo = self.hex4()?;
                                    if (0xDC00..0xE000).contains(&lo) {
                                        0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                                    } else {
                                        self.i = save;
                                        return None; // a lone surrogate: not canonical
                                    }
                                } else {
                                    return None;
                                }
                            } else if (0xDC00..0xE000).contains(&hi) {
                                return None;
                            } else {
                                hi
                            };
                            char::from_u32(code)?
                        }
                        _ => return None,
                    };
                    let mut buf = [0u8; 4];
                    self.text
                        .extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
                _ => return None, // a raw control character
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(src: &str) -> Option<String> {
        let mut out = Vec::new();
        object_to_canonical(src, &mut out).map(|()| String::from_utf8(out).unwrap())
    }

    #[test]
    fn objects_become_canonical() {
        assert_eq!(
            canon(r#" {"b": 1, "a": [1.0, 2e2, -0, -0.0, "x\u00e9\n"]} "#).unwrap(),
            "{\"a\":[1,200,0,0,\"x\u{e9}\\n\"],\"b\":1}"
        );
        assert_eq!(canon(r#"{"a":1,"a":2}"#).unwrap(), "{\"a\":2}");
        assert_eq!(
            canon(r#"{"k":"\ud83d\ude00"}"#).unwrap(),
            "{\"k\":\"\u{1F600}\"}"
        );
        assert_eq!(canon("{}").unwrap(), "{}");
    }

    #[test]
    fn what_python_or_canonical_json_rejects_fails() {
        for bad in [
            "",
            "[]",
            "1",
            "{",
            "{\"a\":NaN}",
            "{\"a\":Infinity}",
            "{\"a\":1e400}",
            "{\"a\":9007199254740992}",
            "{\"a\":01}",
            "{\"a\":\"\\ud800\"}",
            "{\"a\":\"\t\"}",
            "{\"a\":1} x",
            "{a:1}",
            "{\"a\":1,}",
            "{\"a\":.5}",
            "{\"a\":1.}",
            "{\"a\":\"\\x\"}",
        ] {
            assert_eq!(canon(bad), None, "{bad:?}");
        }
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(128), "]".repeat(128));
        assert!(canon(&deep).is_none());
        let ok = format!("{{\"a\":{}1{}}}", "[".repeat(127), "]".repeat(127));
        assert!(canon(&ok).is_some());
    }
}
