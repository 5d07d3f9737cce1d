//! Numbers: integers within ±(2^53-1) and ECMAScript float formatting.

use super::{MAX_SAFE_INTEGER, REASON_INFINITY, REASON_INT_RANGE, REASON_NAN, REASON_NEG_INFINITY};

// ---------------------------------------------------------------------------
// numbers

/// Append an integer already known to be within ±(2^53-1) (or any i64).
#[inline]
pub fn write_i64(out: &mut Vec<u8>, v: i64) {
    let mut buf = [0u8; 20];
    out.extend_from_slice(i64_text(v, &mut buf));
}

/// The decimal text of `v` (a leading `-` when negative), written at the
/// end of `buf`.
#[inline]
pub fn i64_text(v: i64, buf: &mut [u8; 20]) -> &[u8] {
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
        pos -= 1;
        buf[pos] = b'-';
    }
    &buf[pos..]
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

#[cfg(test)]
mod tests {
    use super::*;

    fn f(v: f64) -> String {
        let mut out = Vec::new();
        write_f64(&mut out, v).unwrap();
        String::from_utf8(out).unwrap()
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

    mod props {
        use super::super::*;
        use proptest::prelude::*;

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
