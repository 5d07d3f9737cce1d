//! The nesting depth of canonical JSON bytes: how many levels an item's
//! cached bytes take when the item is spliced into a larger value.
//!
//! Every value type becomes exactly one JSON object (its `to_dict()` must
//! return a dict), and every mapping and sequence one object or array, so
//! the bracket nesting of an item's bytes is exactly the number of levels
//! the walk counted for it.

/// The deepest bracket nesting of canonical JSON (brackets inside strings
/// do not count; canonical strings escape only with a backslash).
pub fn nesting(json: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut in_string = false;
    let mut escaped = false;
    for &b in json {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// `nesting(json) <= budget`, usually without the exact scan: a nesting of
/// `d` needs `2d` bytes and `d` opening brackets.
#[inline]
pub fn nesting_within(json: &[u8], budget: usize) -> bool {
    if json.len() / 2 <= budget {
        return true;
    }
    opening_brackets(json) <= budget || nesting(json) <= budget
}

/// The number of `[` and `{` bytes (inside strings too).
pub fn opening_brackets(json: &[u8]) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: SSE2 is part of the x86-64 baseline.
        unsafe { opening_brackets_sse2(json) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        json.iter().filter(|&&b| b == b'[' || b == b'{').count()
    }
}

/// 16 bytes a step: two compares, a movemask and a popcount.
///
/// # Safety
/// SSE2 must be available (it is on every x86-64).
#[cfg(target_arch = "x86_64")]
#[inline]
unsafe fn opening_brackets_sse2(json: &[u8]) -> usize {
    use std::arch::x86_64::*;
    let square = _mm_set1_epi8(b'[' as i8);
    let curly = _mm_set1_epi8(b'{' as i8);
    let mut count = 0usize;
    let mut chunks = json.chunks_exact(16);
    for chunk in &mut chunks {
        let x = _mm_loadu_si128(chunk.as_ptr() as *const __m128i);
        let hits = _mm_or_si128(_mm_cmpeq_epi8(x, square), _mm_cmpeq_epi8(x, curly));
        count += (_mm_movemask_epi8(hits) as u32).count_ones() as usize;
    }
    count
        + chunks
            .remainder()
            .iter()
            .filter(|&&b| b == b'[' || b == b'{')
            .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_brackets_outside_strings() {
        assert_eq!(nesting(b"1"), 0);
        assert_eq!(nesting(b"[]"), 1);
        assert_eq!(nesting(b"{\"a\":[1,{\"b\":[]}],\"c\":[]}"), 4);
        assert_eq!(nesting(b"[\"[[[{{\",\"\\\"[[\"]"), 1);
        assert_eq!(nesting(b"[\"\\\\\",[[]]]"), 3);
    }

    #[test]
    fn counts_opening_brackets() {
        for n in 0..70 {
            let text: Vec<u8> = (0..n).map(|i| b"a[{\"]}"[i % 6]).collect();
            let want = text.iter().filter(|&&b| b == b'[' || b == b'{').count();
            assert_eq!(opening_brackets(&text), want);
        }
    }

    #[test]
    fn the_bound_agrees_with_the_scan() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let strings = format!("[\"{}\"]", "[".repeat(500));
        for json in [deep.as_bytes(), strings.as_bytes(), b"[[1],[2],[3]]"] {
            for budget in 0..210 {
                assert_eq!(nesting_within(json, budget), nesting(json) <= budget);
            }
        }
    }
}
