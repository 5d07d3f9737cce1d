//! JSON text -> canonical JSON bytes in one pass, with the acceptance rules
//! of Python's `json.loads` (the C scanner, `strict=True`) followed by
//! canonical JSON (ADR 0001): whitespace is ` \t\n\r`; numbers follow
//! `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?`, an integer without
//! fraction or exponent is an int (within ±(2^53-1) to be canonical), any
//! other a double; `NaN`, `Infinity`, lone surrogates, control characters
//! in strings and nesting deeper than the canonical limit (counted from the
//! item that holds the object) fail. Duplicate keys keep the last value.
//! Any failure is `None`: the caller asks the reference for the error.
//!
//! Linear in the text: an object's members are sorted once and duplicate
//! keys dropped from the sorted run, never looked up one by one.

use std::ops::Range;

use crate::canonical::{cmp_utf16, write_f64, write_int, write_str, MAX_DEPTH};

/// The level of an argument object: its item's dict is level 1, as the
/// canonicalizer counts the item (`ToolCall.to_dict()["arguments"]`).
const ARGUMENTS_LEVEL: usize = 2;

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    /// Scratch for decoded strings (reused).
    text: Vec<u8>,
    /// Member buffers of the objects being read, reused from one object to
    /// the next (one per level in use).
    spare: Vec<Vec<u8>>,
}

/// The canonical bytes of the JSON object `src` encodes, appended to `out`;
/// `None` when `src` is not one (or cannot be canonical as an item's
/// `arguments`).
pub fn object_to_canonical(src: &str, out: &mut Vec<u8>) -> Option<()> {
    let mut p = Parser {
        s: src.as_bytes(),
        i: 0,
        text: Vec::new(),
        spare: Vec::new(),
    };
    p.ws();
    if p.peek()? != b'{' {
        return None;
    }
    p.value(out, ARGUMENTS_LEVEL)?;
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
        // Each member's key and canonical value go into one buffer; the
        // members are then sorted once by key and written out.
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        let mut members: Vec<(Range<usize>, Range<usize>)> = Vec::new();
        let read = self.members(&mut buf, &mut members, depth);
        if read.is_some() {
            // A stable sort keeps equal keys in text order: the last of each
            // run is the value `json.loads` keeps.
            members.sort_by(|a, b| cmp_utf16(&buf[a.0.clone()], &buf[b.0.clone()]));
            out.push(b'{');
            let mut first = true;
            for (n, (key, value)) in members.iter().enumerate() {
                let later = members.get(n + 1);
                if later.is_some_and(|next| buf[next.0.clone()] == buf[key.clone()]) {
                    continue; // a later duplicate replaces it
                }
                if !first {
                    out.push(b',');
                }
                first = false;
                write_str(out, &buf[key.clone()]);
                out.push(b':');
                out.extend_from_slice(&buf[value.clone()]);
            }
            out.push(b'}');
        }
        self.spare.push(buf);
        read
    }

    /// The members of the object being read, up to its closing brace.
    fn members(
        &mut self,
        buf: &mut Vec<u8>,
        members: &mut Vec<(Range<usize>, Range<usize>)>,
        depth: usize,
    ) -> Option<()> {
        self.ws();
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        loop {
            self.ws();
            if self.peek()? != b'"' {
                return None;
            }
            self.string()?;
            let key = buf.len()..buf.len() + self.text.len();
            buf.extend_from_slice(&self.text);
            self.ws();
            if self.peek()? != b':' {
                return None;
            }
            self.i += 1;
            self.ws();
            let start = buf.len();
            self.value(buf, depth + 1)?;
            members.push((key, start..buf.len()));
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
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
        // The last value of a duplicate key wins wherever its copies stand.
        assert_eq!(
            canon(r#"{"b":1,"a":{"y":1,"x":2,"y":3},"b":[2],"a":0,"c":1,"b":3}"#).unwrap(),
            "{\"a\":0,\"b\":3,\"c\":1}"
        );
        assert_eq!(
            canon(r#"{"k":{"y":1,"x":2,"y":3}}"#).unwrap(),
            "{\"k\":{\"x\":2,\"y\":3}}"
        );
        assert_eq!(
            canon(r#"{"k":"\ud83d\ude00"}"#).unwrap(),
            "{\"k\":\"\u{1F600}\"}"
        );
        assert_eq!(canon("{}").unwrap(), "{}");
    }

    #[test]
    fn many_keys_and_duplicates_stay_linear() {
        // 200,000 members, every key twice: sorted once, not scanned per key.
        let n = 100_000;
        let mut src = String::from("{");
        for round in 0..2 {
            for k in 0..n {
                if round + k > 0 {
                    src.push(',');
                }
                src.push_str(&format!("\"k{k}\":{}", round * n + k));
            }
        }
        src.push('}');
        let out = canon(&src).unwrap();
        assert!(out.starts_with("{\"k0\":100000,\"k1\":100001,\"k10\":100010,"));
        assert_eq!(out.matches(':').count(), n);
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
        // The object and 126 levels inside it fit in a ToolCall's 128; one more does not.
        let ok = format!("{{\"a\":{}1{}}}", "[".repeat(126), "]".repeat(126));
        assert!(canon(&ok).is_some());
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(127), "]".repeat(127));
        assert!(canon(&deep).is_none());
    }
}
