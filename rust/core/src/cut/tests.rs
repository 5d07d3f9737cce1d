//! The cut against a brute-force oracle.

use super::*;
use crate::error::CoreResult;
use crate::estimate::corrected as correct;
use proptest::prelude::*;

/// One item as the cut sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CutItem<'a> {
    raw: i64,
    seq: Option<i64>,
    role: ToolRole<'a>,
}

/// A history of plain items with a reconciled correction.
struct Items<'a, 'b> {
    items: &'b [CutItem<'a>],
    result_of: Vec<usize>,
    raws: Vec<i64>,
    sums: (u64, u64),
}

impl CutHost for Items<'_, '_> {
    type Error = CoreError;
    fn validate_pairs(&mut self) -> CoreResult<()> {
        let roles: Vec<ToolRole<'_>> = self.items.iter().map(|it| it.role).collect();
        self.result_of = validate_tool_pairs(&roles)?;
        Ok(())
    }
    fn measure(&mut self) -> CoreResult<()> {
        self.raws = self.items.iter().map(|it| it.raw).collect();
        Ok(())
    }
    fn raws(&self) -> &[i64] {
        &self.raws
    }
    fn result_of(&self) -> &[usize] {
        &self.result_of
    }
    fn corrected(&self, raw_sum: i64) -> CoreResult<i128> {
        Ok(correct(raw_sum, self.sums.0, self.sums.1))
    }
    fn seq(&self, index: usize) -> CoreResult<Option<i64>> {
        Ok(self.items[index].seq)
    }
}

fn cut(
    items: &[CutItem<'_>],
    floor: Option<i64>,
    tokens: i128,
    e: u64,
    a: u64,
) -> CoreResult<usize> {
    let mut host = Items {
        items,
        result_of: Vec::new(),
        raws: Vec::new(),
        sums: (e, a),
    };
    select_history(&mut host, floor, tokens)
}

fn roles_of(spec: &str) -> Vec<ToolRole<'static>> {
    // "c1 r1 x" style: c<id> call, r<id> result, x other
    const IDS: [&str; 10] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];
    spec.split_whitespace()
        .map(|t| {
            let id = t[1..].parse::<usize>().map_or("", |n| IDS[n]);
            match &t[..1] {
                "c" => ToolRole::Call(id),
                "r" => ToolRole::Result(id),
                _ => ToolRole::Other,
            }
        })
        .collect()
}

#[test]
fn pairing_errors_in_scan_order() {
    assert!(validate_tool_pairs(&roles_of("x c1 r1 x c2 x r2")).is_ok());
    // an id reused once its pair is complete opens a new pair (ADR 0019) ...
    assert_eq!(
        validate_tool_pairs(&roles_of("c1 r1 c1 r1")),
        Ok(vec![1, NO_RESULT, 3, NO_RESULT])
    );
    // ... never while it is open
    assert_eq!(
        validate_tool_pairs(&roles_of("c1 c1 r1 r1")),
        Err(CoreError::orphan("1", 1, REASON_DUPLICATE_CALL))
    );
    assert_eq!(
        validate_tool_pairs(&roles_of("c1 r1 c1 x")),
        Err(CoreError::orphan("1", 2, REASON_CALL_WITHOUT_RESULT))
    );
    assert_eq!(
        validate_tool_pairs(&roles_of("c1 r1 r1")),
        Err(CoreError::orphan("1", 2, REASON_RESULT_WITHOUT_CALL))
    );
    assert_eq!(
        validate_tool_pairs(&roles_of("x r2 c2")),
        Err(CoreError::orphan("2", 1, REASON_RESULT_WITHOUT_CALL))
    );
    assert_eq!(
        validate_tool_pairs(&roles_of("c3 c1 c2 r1")),
        Err(CoreError::orphan("3", 0, REASON_CALL_WITHOUT_RESULT))
    );
    assert_eq!(
        validate_tool_pairs(&roles_of("c1 c2 r2 c3 r3")),
        Err(CoreError::orphan("1", 0, REASON_CALL_WITHOUT_RESULT))
    );
}

#[test]
fn reach_moves_past_results() {
    let roles = roles_of("c1 c2 r1 x r2 x");
    let result_of = validate_tool_pairs(&roles).unwrap();
    assert_eq!(pair_reach(0, &result_of), 0);
    assert_eq!(pair_reach(1, &result_of), 5);
    assert_eq!(pair_reach(2, &result_of), 5);
    assert_eq!(pair_reach(5, &result_of), 5);
    assert_eq!(pair_reach(6, &result_of), 6);
    // chained: c1 c2 r1 c3 r2 r3 — cutting at 1 reaches r1(2) then r2(4) then r3(5)
    let roles = roles_of("c1 c2 r1 c3 r2 r3 x");
    let result_of = validate_tool_pairs(&roles).unwrap();
    assert_eq!(pair_reach(1, &result_of), 6);
}

#[test]
fn floor_and_fit() {
    let item = |seq| CutItem {
        raw: 1,
        seq,
        role: ToolRole::Other,
    };
    let items = [
        item(Some(1)),
        item(None),
        item(Some(3)),
        item(Some(2)),
        item(None),
    ];
    assert_eq!(cut(&items, Some(2), 100, 0, 0).unwrap(), 4);
    assert_eq!(cut(&items, None, 100, 0, 0).unwrap(), 0);
    assert_eq!(
        cut(&[item(None), item(Some(5))], Some(2), 100, 0, 0).unwrap(),
        0
    );
    let raw = [5, 5, 5, 5];
    let fit = |h: i128| fit_index(&raw, h, |s| Ok::<_, ()>(s as i128), || ()).unwrap();
    assert_eq!(fit(20), 0);
    assert_eq!(fit(19), 1);
    assert_eq!(fit(5), 3);
    assert_eq!(fit(4), 4);
    assert_eq!(fit(0), 4);
    assert_eq!(fit(-1), 4);
}

/// The contract stated directly: every candidate cut checked against the
/// pairs `build` made (call index, result index).
fn oracle(
    items: &[CutItem<'_>],
    pairs: &[(usize, usize)],
    summary_floor: i64,
    history_tokens: i128,
    e: u64,
    a: u64,
) -> usize {
    let n = items.len();
    let floor = items
        .iter()
        .enumerate()
        .filter(|(_, it)| matches!(it.seq, Some(s) if s <= summary_floor))
        .map(|(i, _)| i + 1)
        .max()
        .unwrap_or(0);
    let splits = |c: usize| pairs.iter().any(|&(call, result)| call < c && c <= result);
    let fits = |c: usize| correct(items[c..].iter().map(|it| it.raw).sum(), e, a) <= history_tokens;
    // the largest suffix that fits, respects the floor and splits no pair
    (0..=n)
        .find(|&c| c >= floor && fits(c) && !splits(c))
        .unwrap_or(n)
}

fn items_strategy() -> impl Strategy<Value = Vec<(i64, Option<i64>, u8)>> {
    prop::collection::vec((0i64..40, prop::option::of(0i64..30), 0u8..3), 0..40)
}

/// Build a valid pairing: kind 1 opens a call, kind 2 closes the oldest
/// (or a random) open call; unclosed calls are closed at the end. With
/// `reuse`, a call takes the first of four ids not open (ids recur once
/// their pair is complete, ADR 0019). The items and the pairs made.
fn build<'a>(
    spec: &[(i64, Option<i64>, u8)],
    ids: &'a [String],
    reuse: bool,
) -> (Vec<CutItem<'a>>, Vec<(usize, usize)>) {
    let mut items = Vec::new();
    let mut pairs = Vec::new();
    let mut open: Vec<(usize, usize)> = Vec::new(); // (id, call index)
    let mut next = 0usize;
    for (k, &(raw, seq, kind)) in spec.iter().enumerate() {
        let role = match kind {
            1 => {
                let id = match (0..4).find(|i| !open.iter().any(|o| o.0 == *i)) {
                    Some(i) if reuse => i,
                    _ => {
                        next += 1;
                        4 + next
                    }
                };
                open.push((id, items.len()));
                ToolRole::Call(&ids[id])
            }
            2 if !open.is_empty() => {
                let (id, call) = open.remove(k % open.len());
                pairs.push((call, items.len()));
                ToolRole::Result(&ids[id])
            }
            _ => ToolRole::Other,
        };
        items.push(CutItem { raw, seq, role });
    }
    for (id, call) in open {
        pairs.push((call, items.len()));
        items.push(CutItem {
            raw: 3,
            seq: None,
            role: ToolRole::Result(&ids[id]),
        });
    }
    (items, pairs)
}

proptest! {
    #[test]
    fn cut_matches_the_oracle(
        spec in items_strategy(),
        summary_floor in -1i64..30,
        history_tokens in -5i128..400,
        e in 0u64..20,
        a in 0u64..40,
        reuse in any::<bool>(),
    ) {
        let ids: Vec<String> = (0..64).map(|i| format!("call_{i}")).collect();
        let (items, pairs) = build(&spec, &ids, reuse);
        let c = cut(&items, Some(summary_floor), history_tokens, e, a).unwrap();
        prop_assert_eq!(c, oracle(&items, &pairs, summary_floor, history_tokens, e, a));
        // the pairing found is the one built
        let roles: Vec<ToolRole<'_>> = items.iter().map(|it| it.role).collect();
        let result_of = validate_tool_pairs(&roles).unwrap();
        for &(call, result) in &pairs {
            prop_assert_eq!(result_of[call], result);
        }
        // deterministic
        let again = cut(&items, Some(summary_floor), history_tokens, e, a).unwrap();
        prop_assert_eq!(c, again);
        // the retained suffix holds no orphan
        let roles: Vec<ToolRole<'_>> = items[c..].iter().map(|it| it.role).collect();
        prop_assert!(validate_tool_pairs(&roles).is_ok());
        // the floor is respected
        for it in &items[c..] {
            if let Some(s) = it.seq { prop_assert!(s > summary_floor); }
        }
    }

    #[test]
    fn reach_never_moves_earlier(spec in items_strategy(), cut in 0usize..45, reuse in any::<bool>()) {
        let ids: Vec<String> = (0..64).map(|i| format!("call_{i}")).collect();
        let (items, _) = build(&spec, &ids, reuse);
        let roles: Vec<ToolRole<'_>> = items.iter().map(|it| it.role).collect();
        let result_of = validate_tool_pairs(&roles).unwrap();
        let cut = cut.min(items.len());
        let c = pair_reach(cut, &result_of);
        prop_assert!(c >= cut && c <= items.len());
    }
}
