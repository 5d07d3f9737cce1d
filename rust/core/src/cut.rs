//! Tool-pair validation and the deterministic history cut (ADR 0001):
//! one backward pass for the fit, one forward pass for pair reach.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

use crate::error::{CoreError, CoreResult};

/// FNV-1a over the call id bytes: call ids are short, and the id map lives
/// for one call, so a keyed hasher buys nothing here.
#[inline]
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A call id with its hash, computed once by whoever knows it best (a
/// binding may already hold one, cached in its string object).
#[derive(Debug, Clone, Copy, Eq)]
struct Id<'a> {
    hash: u64,
    text: &'a str,
}

impl PartialEq for Id<'_> {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.text == other.text
    }
}

impl Hash for Id<'_> {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// Passes the one `u64` that [`Id`] writes straight through.
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        self.0 = fnv1a(bytes);
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// The class `kind`s of conversation items (`ctxengine.model.ITEM_TYPES`):
/// what `select_history` and `validate_tool_pairs` accept, and the two of
/// them whose pairing they check.
pub const CONVERSATION_KINDS: [&str; 6] = [
    "system_message",
    "user_message",
    "assistant_message",
    "tool_call",
    "tool_result",
    "reasoning",
];

pub const REASON_DUPLICATE_CALL: &str = "duplicate tool call id";
pub const REASON_RESULT_WITHOUT_CALL: &str = "tool result without an earlier unanswered call";
pub const REASON_CALL_WITHOUT_RESULT: &str = "tool call never answered";

/// What an item is to the pairing rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolRole<'a> {
    Other,
    Call(&'a str),
    Result(&'a str),
}

/// Marks a non-call in [`validate_tool_pairs`]' output.
pub const NO_RESULT: usize = usize::MAX;

/// Check pairing in scan order; on success, the index of each call's result
/// ([`NO_RESULT`] for items that are not calls).
pub fn validate_tool_pairs(roles: &[ToolRole<'_>]) -> CoreResult<Vec<usize>> {
    let mut result_of = Vec::new();
    validate_tool_pairs_into(roles.iter().copied(), &mut result_of)?;
    Ok(result_of)
}

/// [`validate_tool_pairs`] over any sequence of roles, writing the result
/// index of each call into a caller-owned buffer (cleared first).
pub fn validate_tool_pairs_into<'a>(
    roles: impl ExactSizeIterator<Item = ToolRole<'a>>,
    result_of: &mut Vec<usize>,
) -> CoreResult<()> {
    let mut v = PairValidator::new(result_of, 0);
    for role in roles {
        v.push(role)?;
    }
    v.finish()
}

/// Tool-pair validation fed one item at a time, for callers that learn
/// the roles in a pass of their own.
pub struct PairValidator<'a, 'b> {
    /// call_id -> call index (answered when `result_of[call]` is set)
    calls: HashMap<Id<'a>, usize, BuildHasherDefault<PassThrough>>,
    /// The latest call: a result usually answers the call just before it,
    /// and is then matched without a map lookup.
    last_call: Option<(Id<'a>, usize)>,
    open: usize,
    result_of: &'b mut Vec<usize>,
}

impl<'a, 'b> PairValidator<'a, 'b> {
    /// `result_of` is cleared; `calls_hint` sizes the id map.
    pub fn new(result_of: &'b mut Vec<usize>, calls_hint: usize) -> Self {
        result_of.clear();
        PairValidator {
            calls: HashMap::with_capacity_and_hasher(calls_hint, BuildHasherDefault::default()),
            last_call: None,
            open: 0,
            result_of,
        }
    }

    /// The next item's role; the first violation in scan order is an error.
    #[inline]
    pub fn push(&mut self, role: ToolRole<'a>) -> CoreResult<()> {
        let hash = match role {
            ToolRole::Other => 0,
            ToolRole::Call(id) | ToolRole::Result(id) => fnv1a(id.as_bytes()),
        };
        self.push_hashed(role, hash)
    }

    /// [`PairValidator::push`] with the id's hash supplied: equal ids must
    /// get equal hashes, so one validator is fed by one of the two methods.
    #[inline(always)]
    pub fn push_hashed(&mut self, role: ToolRole<'a>, hash: u64) -> CoreResult<()> {
        let i = self.result_of.len();
        self.result_of.push(NO_RESULT);
        match role {
            ToolRole::Other => {}
            ToolRole::Call(text) => {
                let id = Id { hash, text };
                match self.calls.entry(id) {
                    Entry::Occupied(_) => {
                        return Err(CoreError::orphan(text, i, REASON_DUPLICATE_CALL))
                    }
                    Entry::Vacant(slot) => {
                        slot.insert(i);
                        self.open += 1;
                    }
                }
                self.last_call = Some((id, i));
            }
            ToolRole::Result(text) => {
                let id = Id { hash, text };
                let call = match self.last_call {
                    Some((last, call)) if last == id => Some(call),
                    _ => self.calls.get(&id).copied(),
                };
                match call {
                    Some(call) if self.result_of[call] == NO_RESULT => {
                        self.result_of[call] = i;
                        self.open -= 1;
                    }
                    _ => return Err(CoreError::orphan(text, i, REASON_RESULT_WITHOUT_CALL)),
                }
            }
        }
        Ok(())
    }

    /// After the last item: a call never answered (the lowest index) is an error.
    pub fn finish(self) -> CoreResult<()> {
        if self.open > 0 {
            if let Some((id, i)) = self
                .calls
                .iter()
                .filter(|(_, &i)| self.result_of[i] == NO_RESULT)
                .min_by_key(|(_, &i)| i)
            {
                return Err(CoreError::orphan(id.text, *i, REASON_CALL_WITHOUT_RESULT));
            }
        }
        Ok(())
    }
}

/// 1 + the last index whose `seq` is known and `<= summary_floor`; 0 if none.
pub fn floor_bound(seqs: &[Option<i64>], summary_floor: i64) -> usize {
    seqs.iter()
        .rposition(|s| matches!(s, Some(v) if *v <= summary_floor))
        .map_or(0, |i| i + 1)
}

/// The smallest `c` with `corrected(sum(raw[c..])) <= history_tokens`
/// (`raw.len()` if none), in one backward pass. Raw estimates are
/// non-negative, so the corrected suffix sum only grows as `c` falls.
pub fn fit_index<E>(
    raw: &[i64],
    history_tokens: i128,
    mut corrected: impl FnMut(i64) -> Result<i128, E>,
    overflow: impl Fn() -> E,
) -> Result<usize, E> {
    let mut fit = raw.len();
    let mut sum: i64 = 0;
    for (i, &r) in raw.iter().enumerate().rev() {
        sum = sum.checked_add(r).ok_or_else(&overflow)?;
        if corrected(sum)? <= history_tokens {
            fit = i;
        } else {
            break;
        }
    }
    Ok(fit)
}

/// Move `cut` later while a call before it has its result at or after it.
pub fn pair_reach(cut: usize, result_of: &[usize]) -> usize {
    let mut c = cut;
    let mut reach: Option<usize> = None; // latest result of any call before i
    for (i, &r) in result_of.iter().enumerate() {
        if i >= c {
            match reach {
                Some(m) if m >= c => c = m + 1,
                _ => return c,
            }
        }
        if r != NO_RESULT {
            reach = Some(reach.map_or(r, |m| m.max(r)));
        }
    }
    match reach {
        Some(m) if m >= c => m + 1,
        _ => c,
    }
}

/// One item as the cut sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CutItem<'a> {
    pub raw: i64,
    pub seq: Option<i64>,
    pub role: ToolRole<'a>,
}

/// The cut index: `items[cut..]` is retained.
pub fn select_history(
    items: &[CutItem<'_>],
    summary_floor: i64,
    history_tokens: i128,
    corrected: impl FnMut(i64) -> i128,
) -> CoreResult<usize> {
    let roles: Vec<ToolRole<'_>> = items.iter().map(|it| it.role).collect();
    let result_of = validate_tool_pairs(&roles)?;
    let seqs: Vec<Option<i64>> = items.iter().map(|it| it.seq).collect();
    let raw: Vec<i64> = items.iter().map(|it| it.raw).collect();
    cut_after_validation(
        &raw,
        &seqs,
        &result_of,
        summary_floor,
        history_tokens,
        corrected,
    )
}

/// Steps 2-4 of the cut, once the pairs are known valid.
pub fn cut_after_validation(
    raw: &[i64],
    seqs: &[Option<i64>],
    result_of: &[usize],
    summary_floor: i64,
    history_tokens: i128,
    mut corrected: impl FnMut(i64) -> i128,
) -> CoreResult<usize> {
    let floor = floor_bound(seqs, summary_floor);
    let fit = fit_index(
        raw,
        history_tokens,
        |s| Ok::<i128, CoreError>(corrected(s)),
        || CoreError::estimator("raw estimate sum overflows a 64-bit integer"),
    )?;
    Ok(pair_reach(fit.max(floor), result_of))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::corrected as correct;
    use proptest::prelude::*;

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
        assert_eq!(
            validate_tool_pairs(&roles_of("c1 r1 c1 r1")),
            Err(CoreError::orphan("1", 2, REASON_DUPLICATE_CALL))
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
        assert_eq!(floor_bound(&[Some(1), None, Some(3), Some(2), None], 2), 4);
        assert_eq!(floor_bound(&[None, Some(5)], 2), 0);
        let raw = [5, 5, 5, 5];
        let fit = |h: i128| fit_index(&raw, h, |s| Ok::<_, ()>(s as i128), || ()).unwrap();
        assert_eq!(fit(20), 0);
        assert_eq!(fit(19), 1);
        assert_eq!(fit(5), 3);
        assert_eq!(fit(4), 4);
        assert_eq!(fit(0), 4);
        assert_eq!(fit(-1), 4);
    }

    /// The contract stated directly: every candidate cut checked.
    fn oracle(
        items: &[CutItem<'_>],
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
        let splits = |c: usize| {
            (0..c).any(|i| match items[i].role {
                ToolRole::Call(id) => (c..n).any(|j| items[j].role == ToolRole::Result(id)),
                _ => false,
            })
        };
        let fits =
            |c: usize| correct(items[c..].iter().map(|it| it.raw).sum(), e, a) <= history_tokens;
        // the largest suffix that fits, respects the floor and splits no pair
        (0..=n)
            .find(|&c| c >= floor && fits(c) && !splits(c))
            .unwrap_or(n)
    }

    fn items_strategy() -> impl Strategy<Value = Vec<(i64, Option<i64>, u8)>> {
        prop::collection::vec((0i64..40, prop::option::of(0i64..30), 0u8..3), 0..40)
    }

    /// Build a valid pairing: kind 1 opens a call, kind 2 closes the oldest
    /// (or a random) open call; unclosed calls are closed at the end.
    fn build<'a>(spec: &[(i64, Option<i64>, u8)], ids: &'a [String]) -> Vec<CutItem<'a>> {
        let mut items = Vec::new();
        let mut open: Vec<usize> = Vec::new();
        let mut next = 0usize;
        for (k, &(raw, seq, kind)) in spec.iter().enumerate() {
            let role = match kind {
                1 => {
                    open.push(next);
                    next += 1;
                    ToolRole::Call(&ids[next - 1])
                }
                2 if !open.is_empty() => {
                    let id = open.remove(k % open.len());
                    ToolRole::Result(&ids[id])
                }
                _ => ToolRole::Other,
            };
            items.push(CutItem { raw, seq, role });
        }
        for id in open {
            items.push(CutItem {
                raw: 3,
                seq: None,
                role: ToolRole::Result(&ids[id]),
            });
        }
        items
    }

    proptest! {
        #[test]
        fn cut_matches_the_oracle(
            spec in items_strategy(),
            summary_floor in -1i64..30,
            history_tokens in -5i128..400,
            e in 0u64..20,
            a in 0u64..40,
        ) {
            let ids: Vec<String> = (0..64).map(|i| format!("call_{i}")).collect();
            let items = build(&spec, &ids);
            let c = select_history(&items, summary_floor, history_tokens, |s| correct(s, e, a)).unwrap();
            prop_assert_eq!(c, oracle(&items, summary_floor, history_tokens, e, a));
            // deterministic
            let again = select_history(&items, summary_floor, history_tokens, |s| correct(s, e, a)).unwrap();
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
        fn reach_never_moves_earlier(spec in items_strategy(), cut in 0usize..45) {
            let ids: Vec<String> = (0..64).map(|i| format!("call_{i}")).collect();
            let items = build(&spec, &ids);
            let roles: Vec<ToolRole<'_>> = items.iter().map(|it| it.role).collect();
            let result_of = validate_tool_pairs(&roles).unwrap();
            let cut = cut.min(items.len());
            let c = pair_reach(cut, &result_of);
            prop_assert!(c >= cut && c <= items.len());
        }
    }
}
