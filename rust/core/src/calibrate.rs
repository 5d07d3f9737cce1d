//! Two-sided calibration of the byte heuristic (ADR 0012).
//!
//! `reconcile(estimated, actual)` is told the engine's estimate as it was
//! sent (corrected by the factor then in force). Each reconcile adds one
//! sample to a bounded window per model: the actual count against the
//! uncorrected estimate, `estimated / factor` (rounded down, so the ratio
//! errs high), so the window holds the heuristic's own ratio whatever factor
//! was applied. With fewer than [`MIN_SAMPLES`] samples the factor is today's
//! upward-only `max(1, A / E)` over the cumulative sums (ADR 0001), so a
//! version-1 snapshot restores and behaves exactly as before. With enough
//! samples the factor may fall below 1, but never below the window's 95th
//! percentile ratio plus [`MARGIN`], nor below the window's mean ratio, nor
//! below [`MIN_FACTOR`]. Everything is exact rational arithmetic in
//! integers, so both backends agree on every input.

/// The most recent samples kept per model.
pub const WINDOW: usize = 64;
/// Below this many samples the factor never goes under 1.
pub const MIN_SAMPLES: usize = 8;
/// The safety margin over the 95th percentile ratio: 1/25 (four points).
pub const MARGIN: (u128, u128) = (1, 25);
/// The factor never goes below 1/2 (a heuristic that counted twice the tokens).
pub const MIN_FACTOR: (u128, u128) = (1, 2);
/// A reconcile whose counts pass this is summed but not sampled (it keeps the
/// rational arithmetic inside 128 bits; no request is a trillion tokens).
pub const SAMPLE_MAX: u64 = 1 << 40;
/// A stored sample's estimate is at most this (`SAMPLE_MAX` over a factor of at least 1/2).
pub const STORED_MAX: u64 = SAMPLE_MAX << 1;

/// `num / den`, both positive.
pub type Ratio = (u128, u128);

/// `a >= b` for two ratios.
#[inline]
fn ge(a: Ratio, b: Ratio) -> bool {
    a.0 * b.1 >= b.0 * a.1
}

fn max(a: Ratio, b: Ratio) -> Ratio {
    if ge(a, b) {
        a
    } else {
        b
    }
}

/// Whether one reconcile enters the window.
#[inline]
pub fn sampled(estimated: u64, actual: u64) -> bool {
    estimated > 0 && estimated <= SAMPLE_MAX && actual <= SAMPLE_MAX
}

/// Push the sample of one reconcile whose estimate was corrected by `factor`
/// (the factor in force), dropping the oldest beyond [`WINDOW`].
pub fn push(window: &mut Vec<(u64, u64)>, estimated: u64, actual: u64, factor: Ratio) {
    if !sampled(estimated, actual) {
        return;
    }
    let (num, den) = factor;
    // estimated < 2^41 and den < 2^64: the product fits; the factor is at
    // least 1/2, so the quotient is at most 2 * estimated.
    let raw = ((estimated as u128 * den) / num).max(1) as u64;
    if window.len() == WINDOW {
        window.remove(0);
    }
    window.push((raw, actual));
}

/// The 95th percentile ratio of the window by nearest rank (the
/// `ceil(0.95 n)`-th smallest), `None` when empty.
pub fn p95(window: &[(u64, u64)]) -> Option<Ratio> {
    if window.is_empty() {
        return None;
    }
    let mut ratios: Vec<Ratio> = window
        .iter()
        .map(|&(e, a)| (a as u128, e as u128))
        .collect();
    // Exact order; ties keep their window order (irrelevant to the value).
    ratios.sort_by(|x, y| (x.0 * y.1).cmp(&(y.0 * x.1)));
    let rank = (95 * ratios.len()).div_ceil(100);
    Some(ratios[rank - 1])
}

/// The factor for cumulative sums `(estimated, actual)` and a window.
/// `two_sided` is false for exactly counted models: they keep today's rule.
pub fn factor(estimated: u64, actual: u64, window: &[(u64, u64)], two_sided: bool) -> Ratio {
    if !two_sided || window.len() < MIN_SAMPLES {
        return if estimated > 0 && actual > estimated {
            (actual as u128, estimated as u128)
        } else {
            (1, 1)
        };
    }
    let Some((pn, pd)) = p95(window) else {
        return (1, 1);
    };
    // p95 + margin = (pn * md + mn * pd) / (pd * md)
    let floor = (pn * MARGIN.1 + MARGIN.0 * pd, pd * MARGIN.1);
    let (se, sa) = window.iter().fold((0u128, 0u128), |(se, sa), &(e, a)| {
        (se + e as u128, sa + a as u128)
    });
    max(max(floor, (sa, se)), MIN_FACTOR)
}

/// `ceil(raw_sum * num / den)` (floor division, as Python's `//`).
#[inline]
pub fn apply(raw_sum: i64, (num, den): Ratio) -> i128 {
    if num == den {
        return raw_sum as i128;
    }
    // num and den are below 2^64 (today's sums) or 2^47 (the window), and
    // |raw_sum| < 2^63: the product fits.
    let (n, d) = (num as i128, den as i128);
    (raw_sum as i128 * n + d - 1).div_euclid(d)
}

/// [`apply`] of the sum of `raws`, the sum checked.
pub fn apply_sum(raws: &[i64], factor: Ratio) -> crate::CoreResult<i128> {
    let total = raws.iter().try_fold(0i64, |t, r| t.checked_add(*r));
    let overflow = || crate::CoreError::estimator("raw estimate sum overflows a 64-bit integer");
    Ok(apply(total.ok_or_else(overflow)?, factor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sum_is_applied_or_refused() {
        assert_eq!(apply_sum(&[2, 3], (3, 2)), Ok(8));
        let err = apply_sum(&[i64::MAX, 1], (1, 1)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "raw estimate sum overflows a 64-bit integer"
        );
    }

    fn window(ratios: &[(u64, u64)]) -> Vec<(u64, u64)> {
        let mut w = Vec::new();
        for &(e, a) in ratios {
            push(&mut w, e, a, (1, 1));
        }
        w
    }

    #[test]
    fn few_samples_keep_the_upward_only_rule() {
        let w = window(&[(100, 70); 7]);
        assert_eq!(factor(700, 490, &w, true), (1, 1));
        assert_eq!(factor(700, 900, &w, true), (900, 700));
        assert_eq!(factor(0, 0, &[], true), (1, 1));
    }

    #[test]
    fn enough_samples_move_the_factor_down_with_a_margin() {
        let w = window(&[(100, 70); 20]);
        // p95 = 0.70, + 0.04 = 0.74; mean 0.70
        let f = factor(2000, 1400, &w, true);
        assert_eq!(f.0 * 50, f.1 * 37);
        assert_eq!(apply(1000, f), 740);
        assert_eq!(apply(1001, f), 741); // ceil(740.74)
                                         // the exact models keep today's rule
        assert_eq!(factor(2000, 1400, &w, false), (1, 1));
    }

    #[test]
    fn the_floor_is_the_95th_percentile_plus_margin() {
        let mut samples = vec![(100u64, 60u64); 19];
        samples.push((100, 90)); // the one worst of twenty is the p95 by nearest rank
        let w = window(&samples);
        assert_eq!(p95(&w), Some((60, 100)));
        samples.push((100, 95)); // 21 samples: rank ceil(19.95) = 20 -> 0.90
        let w = window(&samples);
        assert_eq!(p95(&w), Some((90, 100)));
        let f = factor(1, 1, &w, true);
        assert_eq!(f.0 * 100, f.1 * 94); // 0.90 + 0.04
    }

    #[test]
    fn never_below_the_mean_nor_one_half() {
        // one huge outlier pulls the mean above the p95
        let mut samples = vec![(100u64, 50u64); 30];
        samples.push((100, 100_000));
        let w = window(&samples);
        let f = factor(1, 1, &w, true);
        let (se, sa) = (3100u128, 1500u128 + 100_000);
        assert_eq!(f.0 * se, f.1 * sa);
        let w = window(&[(100, 1); 10]);
        assert_eq!(factor(1, 1, &w, true), MIN_FACTOR);
    }

    #[test]
    fn the_window_is_bounded_and_skips_huge_counts() {
        let mut w = Vec::new();
        for i in 0..100u64 {
            push(&mut w, 100, i, (1, 1));
        }
        assert_eq!(w.len(), WINDOW);
        assert_eq!(w[0], (100, 36));
        push(&mut w, SAMPLE_MAX + 1, 1, (1, 1));
        push(&mut w, 0, 1, (1, 1));
        assert_eq!(w.last(), Some(&(100, 99)));
    }

    #[test]
    fn a_sample_is_against_the_uncorrected_estimate() {
        let mut w = Vec::new();
        // sent 75 under a factor of 3/4: the heuristic said 100
        push(&mut w, 75, 70, (3, 4));
        assert_eq!(w, vec![(100, 70)]);
        push(&mut w, 76, 70, (3, 4)); // 101.33 rounds down
        assert_eq!(w[1], (101, 70));
        push(&mut w, 1, 0, (1000, 1)); // never below 1
        assert_eq!(w[2], (1, 0));
    }

    #[test]
    fn apply_rounds_up_exactly() {
        assert_eq!(apply(10, (3, 4)), 8); // ceil(7.5)
        assert_eq!(apply(0, (3, 4)), 0);
        assert_eq!(apply(-7, (3, 2)), (-21i128 + 1).div_euclid(2));
        assert_eq!(apply(i64::MAX, (1, 1)), i64::MAX as i128);
    }
}
