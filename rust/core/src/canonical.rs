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
/// or `\\`. Exact as a whole (zero iff no byte needs escaping); single
/// flags above a flagged byte may be spurious, so callers recheck bytes.
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

/// For every byte, its JSON string form padded to 8 bytes and that form's
/// length: the byte itself (1), a short escape (2) or `\\u00xx` (6).
const ESCAPED: ([[u8; 8]; 256], [u8; 256]) = {
    let mut seq = [[0u8; 8]; 256];
    let mut len = [1u8; 256];
    let mut b = 0usize;
    while b < 256 {
        seq[b][0] = b as u8;
        let short = match b as u8 {
            b'"' => b'"',
            b'\\' => b'\\',
            0x08 => b'b',
            0x0c => b'f',
            b'\n' => b'n',
            b'\r' => b'r',
            b'\t' => b't',
            _ => 0,
        };
        if short != 0 {
            seq[b] = [b'\\', short, 0, 0, 0, 0, 0, 0];
            len[b] = 2;
        } else if b < 0x20 {
            seq[b] = [b'\\', b'u', b'0', b'0', HEX[b >> 4], HEX[b & 15], 0, 0];
            len[b] = 6;
        }
        b += 1;
    }
    (seq, len)
};

/// Append `bytes` escaped, without a branch per byte: each byte's padded
/// form is stored whole and the cursor advances by its length. Used for
/// the blocks that hold escapes (dense escapes defeat branch prediction).
#[inline]
fn write_escaped_block(out: &mut Vec<u8>, bytes: &[u8]) {
    out.reserve(bytes.len() * 6 + 8);
    let (seq, len) = (&ESCAPED.0, &ESCAPED.1);
    let mut at = out.len();
    // SAFETY: capacity for 6 bytes per input byte plus the 8-byte overhang
    // of the last store was reserved above; only written bytes are kept.
    unsafe {
        let base = out.as_mut_ptr();
        for &b in bytes {
            std::ptr::write_unaligned(base.add(at) as *mut [u8; 8], seq[b as usize]);
            at += len[b as usize] as usize;
        }
        out.set_len(at);
    }
}

/// Append a 16-byte block whose escapes are flagged in `mask` (bit k for
/// byte k): per escape, one 16-byte store of the clean bytes before it and
/// one 8-byte store of its padded form; a branch per escape, not per byte.
#[inline]
fn write_block_with_escapes(out: &mut Vec<u8>, bytes: &[u8], mut mask: u32) {
    let mut block = [0u8; 32];
    block[..16].copy_from_slice(&bytes[..16]);
    out.reserve(16 * 6 + 16);
    let (seq, len) = (&ESCAPED.0, &ESCAPED.1);
    let mut at = out.len();
    let mut seg = 0usize;
    // SAFETY: at most 96 bytes are kept and stores overhang by at most 16,
    // within the reserve above; reads stay inside the 32-byte `block`.
    unsafe {
        let base = out.as_mut_ptr();
        while mask != 0 {
            let p = mask.trailing_zeros() as usize;
            let clean = std::ptr::read_unaligned(block.as_ptr().add(seg) as *const [u8; 16]);
            std::ptr::write_unaligned(base.add(at) as *mut [u8; 16], clean);
            at += p - seg;
            let b = block[p] as usize;
            std::ptr::write_unaligned(base.add(at) as *mut [u8; 8], seq[b]);
            at += len[b] as usize;
            seg = p + 1;
            mask &= mask - 1;
        }
        let clean = std::ptr::read_unaligned(block.as_ptr().add(seg) as *const [u8; 16]);
        std::ptr::write_unaligned(base.add(at) as *mut [u8; 16], clean);
        at += 16 - seg;
        out.set_len(at);
    }
}

/// Append `s` (valid UTF-8) as a JSON string: quotes, minimal escapes, the
/// rest verbatim. Each block is stored to the output as it is scanned (32
/// bytes a step with AVX2, 16 with SSE2, part of every x86-64; 8 portably),
/// so clean text is read once and written once; blocks with escapes go
/// through [`write_block_with_escapes`], the short tail through
/// [`write_escaped_block`].
pub fn write_str(out: &mut Vec<u8>, s: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        if s.len() >= 32 && std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is present (checked just above).
            unsafe { write_str_avx2(out, s) };
            return;
        }
        // SAFETY: SSE2 is part of the x86-64 baseline.
        unsafe { write_str_sse2(out, s, 0, true) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    write_str_portable(out, s);
}

/// The SSE2 step: escape bits of a 16-byte block (bit k for byte k).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn special16(x: std::arch::x86_64::__m128i) -> u32 {
    use std::arch::x86_64::*;
    let limit = _mm_set1_epi8(0x1f);
    let quote = _mm_set1_epi8(b'"' as i8);
    let backslash = _mm_set1_epi8(b'\\' as i8);
    // x <= 0x1f (unsigned) <=> min(x, 0x1f) == x
    let control = _mm_cmpeq_epi8(_mm_min_epu8(x, limit), x);
    let special = _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash));
    _mm_movemask_epi8(_mm_or_si128(control, special)) as u32
}

/// `write_str` from byte `from` of `s` on (the opening quote first when
/// `open`), 16 bytes a step.
///
/// # Safety
/// SSE2 must be available (it is on every x86-64).
#[cfg(target_arch = "x86_64")]
#[inline]
unsafe fn write_str_sse2(out: &mut Vec<u8>, s: &[u8], from: usize, open: bool) {
    use std::arch::x86_64::*;
    let n = s.len();
    let mut i = from;
    // Room for the rest verbatim plus one block's overhang.
    out.reserve(n - i + 2 + 16);
    if open {
        out.push(b'"');
    }
    let mut base = out.as_mut_ptr();
    let mut w = out.len();
    while i + 16 <= n {
        let x = _mm_loadu_si128(s.as_ptr().add(i) as *const __m128i);
        let mask = special16(x);
        if mask == 0 {
            // SAFETY: w + 16 <= len + (n - i) + 16 <= capacity.
            _mm_storeu_si128(base.add(w) as *mut __m128i, x);
            w += 16;
        } else {
            out.set_len(w);
            write_block_with_escapes(out, &s[i..i + 16], mask);
            out.reserve(n - i + 2 + 16);
            base = out.as_mut_ptr();
            w = out.len();
        }
        i += 16;
    }
    // The tail (under 16 bytes): two overlapping words checked at once and,
    // when clean, stored as they are (within the reserve above).
    let r = n - i;
    let p = s.as_ptr();
    if r >= 8 {
        let a = std::ptr::read_unaligned(p.add(i) as *const u64);
        let b = std::ptr::read_unaligned(p.add(n - 8) as *const u64);
        if escape_mask(a) | escape_mask(b) == 0 {
            std::ptr::write_unaligned(base.add(w) as *mut u64, a);
            std::ptr::write_unaligned(base.add(w + r - 8) as *mut u64, b);
            out.set_len(w + r);
            out.push(b'"');
            return;
        }
    } else if r >= 4 {
        // The upper half filled with a byte that needs no escape.
        const PAD: u64 = 0x6161_6161 << 32;
        let a = std::ptr::read_unaligned(p.add(i) as *const u32);
        let b = std::ptr::read_unaligned(p.add(n - 4) as *const u32);
        if escape_mask(a as u64 | PAD) | escape_mask(b as u64 | PAD) == 0 {
            std::ptr::write_unaligned(base.add(w) as *mut u32, a);
            std::ptr::write_unaligned(base.add(w + r - 4) as *mut u32, b);
            out.set_len(w + r);
            out.push(b'"');
            return;
        }
    }
    out.set_len(w);
    write_escaped_block(out, &s[i..]);
    out.push(b'"');
}

/// `write_str` 32 bytes a step.
///
/// # Safety
/// AVX2 must be available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn write_str_avx2(out: &mut Vec<u8>, s: &[u8]) {
    use std::arch::x86_64::*;
    let n = s.len();
    out.reserve(n + 2 + 32);
    out.push(b'"');
    let limit = _mm256_set1_epi8(0x1f);
    let quote = _mm256_set1_epi8(b'"' as i8);
    let backslash = _mm256_set1_epi8(b'\\' as i8);
    let mut base = out.as_mut_ptr();
    let mut w = out.len();
    let mut i = 0;
    while i + 32 <= n {
        let x = _mm256_loadu_si256(s.as_ptr().add(i) as *const __m256i);
        let control = _mm256_cmpeq_epi8(_mm256_min_epu8(x, limit), x);
        let special = _mm256_or_si256(_mm256_cmpeq_epi8(x, quote), _mm256_cmpeq_epi8(x, backslash));
        let mask = _mm256_movemask_epi8(_mm256_or_si256(control, special)) as u32;
        if mask == 0 {
            // SAFETY: w + 32 <= len + (n - i) + 32 <= capacity.
            _mm256_storeu_si256(base.add(w) as *mut __m256i, x);
            w += 32;
        } else {
            out.set_len(w);
            for (half, bits) in [(0usize, mask & 0xffff), (16, mask >> 16)] {
                let block = &s[i + half..i + half + 16];
                if bits == 0 {
                    out.extend_from_slice(block);
                } else {
                    write_block_with_escapes(out, block, bits);
                }
            }
            out.reserve(n - i + 2 + 32);
            base = out.as_mut_ptr();
            w = out.len();
        }
        i += 32;
    }
    out.set_len(w);
    write_str_sse2(out, s, i, false);
}

/// `write_str` 8 bytes a step, without SIMD.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn write_str_portable(out: &mut Vec<u8>, s: &[u8]) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    let n = s.len();
    let mut start = 0; // first byte not yet copied
    let mut i = 0;
    while i + 8 <= n {
        let mut chunk = [0u8; 8];
        chunk.copy_from_slice(&s[i..i + 8]);
        if escape_mask(u64::from_le_bytes(chunk)) != 0 {
            out.extend_from_slice(&s[start..i]);
            write_escaped_block(out, &s[i..i + 8]);
            start = i + 8;
        }
        i += 8;
    }
    out.extend_from_slice(&s[start..i]);
    write_escaped_block(out, &s[i..]);
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

/// Digits (no leading or trailing zeros), their count and the decimal
/// point position `n` (value = 0.d1d2...dk × 10^n) of Ryu's shortest
/// round-trip output for a finite, non-zero `v`.
///
/// Ryu picks the shortest digit string that round-trips and, among those,
/// the one nearest the value, ties to even: the digits ECMAScript's
/// `Number.prototype.toString` (and Python's `repr`) use. Only its layout
/// differs, so it is re-laid here.
fn shortest_digits(v: f64) -> ([u8; 24], usize, i32) {
    let mut buf = ryu::Buffer::new();
    let text = buf.format_finite(v).as_bytes();
    let (mantissa, exp) = match text.iter().position(|&c| c == b'e' || c == b'E') {
        Some(p) => (&text[..p], parse_exponent(&text[p + 1..])),
        None => (text, 0),
    };
    let mut digits = [0u8; 24];
    let mut k = 0usize;
    let mut point: i32 = 0;
    let mut seen_point = false;
    for &c in mantissa {
        match c {
            b'.' => seen_point = true,
            b'0'..=b'9' => {
                if !seen_point {
                    point += 1;
                }
                if k == 0 && c == b'0' {
                    // a leading zero: the point moves left instead
                    point -= 1;
                } else if k < digits.len() {
                    digits[k] = c;
                    k += 1;
                }
            }
            _ => {}
        }
    }
    while k > 1 && digits[k - 1] == b'0' {
        k -= 1;
    }
    (digits, k, point + exp)
}

/// The common case without Ryu: `v` (positive) is `m / 10^f` for an
/// integer `m < 2^50` and at most three fraction digits `f`. Then that
/// decimal is the shortest round-trip one and the nearest: its last digit
/// sits at 10^-f, while the doubles near `v` are under 10^-f / 4 apart, so
/// no other decimal as short rounds to `v`.
#[inline]
fn short_decimal(v: f64) -> Option<([u8; 24], usize, i32)> {
    const POW10: [f64; 4] = [1.0, 10.0, 100.0, 1000.0];
    const LIMIT: f64 = (1u64 << 50) as f64;
    for (f, &p) in POW10.iter().enumerate() {
        let scaled = v * p;
        if scaled >= LIMIT {
            return None;
        }
        if scaled.fract() == 0.0 && scaled / p == v {
            let mut m = scaled as u64;
            if m == 0 {
                return None;
            }
            let mut f = f as i32;
            while f > 0 && m.is_multiple_of(10) {
                m /= 10;
                f -= 1;
            }
            let mut digits = [0u8; 24];
            let mut tmp = [0u8; 20];
            let mut t = tmp.len();
            while m > 0 {
                t -= 1;
                tmp[t] = b'0' + (m % 10) as u8;
                m /= 10;
            }
            let mut k = tmp.len() - t;
            digits[..k].copy_from_slice(&tmp[t..]);
            let point = k as i32 - f;
            while k > 1 && digits[k - 1] == b'0' {
                k -= 1;
            }
            return Some((digits, k, point));
        }
    }
    None
}

fn parse_exponent(text: &[u8]) -> i32 {
    let mut exp: i32 = 0;
    let mut negative = false;
    for &c in text {
        match c {
            b'-' => negative = true,
            b'0'..=b'9' => exp = exp * 10 + (c - b'0') as i32,
            _ => {}
        }
    }
    if negative {
        -exp
    } else {
        exp
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
    let (digits, k, n) = short_decimal(v.abs()).unwrap_or_else(|| shortest_digits(v.abs()));
    let digits = &digits[..k];
    let k = k as i32;
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
        let mut out = vec![b'>'];
        write_str(&mut out, text.as_bytes());
        let mut portable = vec![b'>'];
        write_str_portable(&mut portable, text.as_bytes());
        assert_eq!(out, portable);
        String::from_utf8(out[1..].to_vec()).unwrap()
    }

    #[test]
    // The literals are exact binary values on purpose (ties, boundaries).
    #[allow(clippy::excessive_precision)]
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
            // two shortest candidates: the nearer one, ties to even
            (562949953421312.25, "562949953421312.2"),
            (-562949953421312.25, "-562949953421312.2"),
            (70368744177664.125, "70368744177664.12"),
            (85378352326445.125, "85378352326445.12"),
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
        assert_eq!(
            s("plain text that is long enough"),
            "\"plain text that is long enough\""
        );
        assert_eq!(s("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(
            s("\u{8}\u{c}\n\r\t\u{0}\u{1f}\u{7f}"),
            "\"\\b\\f\\n\\r\\t\\u0000\\u001f\u{7f}\""
        );
        assert_eq!(s("€𝄞/é"), "\"€𝄞/é\"");
        // every tail length, clean or with an escape anywhere
        for len in 0usize..70 {
            let clean = "abcdefghij".repeat(7)[..len].to_string();
            assert_eq!(s(&clean), format!("\"{clean}\""));
            for pos in 0..len {
                let mut text = clean.clone();
                text.replace_range(pos..pos + 1, "\t");
                let want = format!("\"{}\\t{}\"", &clean[..pos], &clean[pos + 1..]);
                assert_eq!(s(&text), want);
            }
        }
        // escapes at every offset of a chunk
        for len in [1usize, 7, 8, 15, 16, 17, 31, 32, 33, 50, 63, 64, 65, 100] {
            for pos in 0..len {
                for (raw, esc) in [
                    ("\n", "\\n"),
                    ("\"", "\\\""),
                    ("\\", "\\\\"),
                    ("\u{1f}", "\\u001f"),
                ] {
                    let mut text = "é".repeat(len);
                    text.replace_range(pos * 2..pos * 2 + 2, raw);
                    let want = format!("\"{}{esc}{}\"", "é".repeat(pos), "é".repeat(len - 1 - pos));
                    assert_eq!(s(&text), want);
                }
            }
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
        let mut keys = vec![
            "\u{FFFF}",
            "\u{1F600}",
            "a",
            "",
            "ab",
            "\u{E000}",
            "\u{D7FF}",
            "b",
        ];
        keys.sort_by(|a, b| cmp_utf16(a.as_bytes(), b.as_bytes()));
        assert_eq!(
            keys,
            vec![
                "",
                "a",
                "ab",
                "b",
                "\u{D7FF}",
                "\u{1F600}",
                "\u{E000}",
                "\u{FFFF}"
            ]
        );
    }

    #[test]
    fn values_canonicalize_with_paths() {
        let v = Value::Object(vec![
            (
                "b".into(),
                Value::Array(vec![Value::Int(1), Value::Float(2.5), Value::Null]),
            ),
            ("a".into(), Value::Bool(true)),
        ]);
        assert_eq!(
            canonical_json(&v).unwrap(),
            b"{\"a\":true,\"b\":[1,2.5,null]}"
        );
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
                let mut portable = Vec::new();
                write_str_portable(&mut portable, text.as_bytes());
                prop_assert_eq!(&out, &portable);
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
            fn short_decimals_agree_with_ryu(m in 1u64..(1 << 50), f in 0i32..4) {
                let v = m as f64 / 10f64.powi(f);
                if let Some(fast) = short_decimal(v) {
                    let slow = shortest_digits(v);
                    prop_assert_eq!(&fast.0[..fast.1], &slow.0[..slow.1]);
                    prop_assert_eq!((fast.1, fast.2), (slow.1, slow.2));
                }
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
