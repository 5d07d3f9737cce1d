//! Strings and keys: UTF-16 key order and minimal JSON string escaping.

use std::cmp::Ordering;

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

#[cfg(test)]
mod tests {
    use super::*;

    fn s(text: &str) -> String {
        let mut out = vec![b'>'];
        write_str(&mut out, text.as_bytes());
        let mut portable = vec![b'>'];
        write_str_portable(&mut portable, text.as_bytes());
        assert_eq!(out, portable);
        String::from_utf8(out[1..].to_vec()).unwrap()
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

        }
    }
}
