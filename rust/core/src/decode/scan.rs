//! The plain run of a string literal, found a block at a time: the parser's
//! hottest loop (stored item texts are mostly long strings without escapes).

/// The index of the first byte at or after `from` that ends a plain run of
/// string text: `"`, `\\` or a control character below U+0020;
/// `bytes.len()` when there is none.
#[inline]
pub fn plain_end(bytes: &[u8], from: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: SSE2 is part of the x86-64 baseline.
        unsafe { plain_end_sse2(bytes, from) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        plain_end_bytes(bytes, from)
    }
}

#[inline(always)]
fn ends_run(c: u8) -> bool {
    c == b'"' || c == b'\\' || c < 0x20
}

/// One byte a step (the tail of a block scan, and other targets).
#[inline]
fn plain_end_bytes(bytes: &[u8], from: usize) -> usize {
    bytes[from..]
        .iter()
        .position(|&c| ends_run(c))
        .map_or(bytes.len(), |p| from + p)
}

/// 16 bytes a step.
///
/// # Safety
/// SSE2 must be available (it is on every x86-64).
#[cfg(target_arch = "x86_64")]
#[inline]
unsafe fn plain_end_sse2(bytes: &[u8], from: usize) -> usize {
    use std::arch::x86_64::*;
    let limit = _mm_set1_epi8(0x1f);
    let quote = _mm_set1_epi8(b'"' as i8);
    let backslash = _mm_set1_epi8(b'\\' as i8);
    let mut i = from;
    while i + 16 <= bytes.len() {
        let x = _mm_loadu_si128(bytes.as_ptr().add(i) as *const __m128i);
        // x <= 0x1f (unsigned) <=> min(x, 0x1f) == x
        let control = _mm_cmpeq_epi8(_mm_min_epu8(x, limit), x);
        let special = _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash));
        let mask = _mm_movemask_epi8(_mm_or_si128(control, special)) as u32;
        if mask != 0 {
            return i + mask.trailing_zeros() as usize;
        }
        i += 16;
    }
    plain_end_bytes(bytes, i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_first_byte_that_ends_a_run_at_every_position() {
        for len in 0..40 {
            for at in 0..=len {
                for stop in [b'"', b'\\', 0x00, 0x1f] {
                    let mut text = vec![b'a'; len];
                    text.extend_from_slice("é ~\u{7f}".as_bytes());
                    if at < len {
                        text[at] = stop;
                    }
                    let want = if at < len { at } else { text.len() };
                    for from in 0..=at.min(len) {
                        assert_eq!(plain_end(&text, from), want, "{len} {at} {from}");
                        assert_eq!(plain_end_bytes(&text, from), want);
                    }
                }
            }
        }
    }
}
