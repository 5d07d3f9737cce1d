//! LangChain's `trim_messages` over additive per-message counts, the
//! pair-safe window inside its result, and the message-index cut.
//! `python/ctxengine/reference/interop.py` is the same, line for line.

use std::collections::HashMap;
use std::sync::Arc;

use super::approximate::Speaker;
use super::value::Value;

/// No id (a LangChain tool call whose `id` is `None`): never pairs.
pub const NO_ID: u32 = u32::MAX;

/// `(system_kept, a, b)`: `trim_messages` keeps `[messages[0]] * system_kept
/// + messages[a..b]`, with LangChain's loops and binary search over prefix
/// sums. `end_on` / `start_on` test message `i` (`None`: not given).
#[allow(clippy::too_many_arguments)]
pub fn lc_window<E>(
    counts: &[i64],
    max_tokens: i64,
    first: bool,
    first_is_system: bool,
    include_system: bool,
    mut end_on: Option<&mut dyn FnMut(usize) -> Result<bool, E>>,
    mut start_on: Option<&mut dyn FnMut(usize) -> Result<bool, E>>,
) -> Result<(bool, usize, usize), E> {
    let n = counts.len();
    let mut prefix = Vec::with_capacity(n + 1);
    prefix.push(0i128);
    for &c in counts {
        prefix.push(prefix[prefix.len() - 1] + c as i128);
    }
    let max = max_tokens as i128;
    let search = |m: usize, limit: i128, sum: &dyn Fn(usize) -> i128| -> usize {
        let (mut left, mut right) = (0usize, m);
        for _ in 0..(usize::BITS - m.leading_zeros()) {
            if left >= right {
                break;
            }
            let mid = (left + right).div_ceil(2);
            if sum(mid) <= limit {
                left = mid;
            } else {
                right = mid - 1;
            }
        }
        left
    };
    if first {
        if n == 0 {
            return Ok((false, 0, 0));
        }
        let mut idx = if prefix[n] <= max {
            n
        } else {
            search(n, max, &|k| prefix[k])
        };
        if let Some(f) = end_on.as_mut() {
            while idx > 0 && !f(idx - 1)? {
                idx -= 1;
            }
        }
        return Ok((false, 0, idx));
    }
    let mut b = n;
    if let Some(f) = end_on.as_mut() {
        while b > 0 && !f(b - 1)? {
            b -= 1;
        }
    }
    if b == 0 {
        return Ok((false, 0, 0));
    }
    let system = include_system && first_is_system;
    let lo = usize::from(system);
    let remaining = if system {
        (max - counts[0] as i128).max(0)
    } else {
        max
    };
    let m = b - lo;
    if m == 0 {
        return Ok((system, b, b));
    }
    let idx = if prefix[b] - prefix[lo] <= remaining {
        m
    } else {
        search(m, remaining, &|k| prefix[b] - prefix[b - k])
    };
    let mut a = b - idx;
    if let Some(f) = start_on.as_mut() {
        while a < b && !f(a)? {
            a += 1;
        }
    }
    Ok((system, a, b))
}

/// Messages `start..n` of a foreign history paired by position (ADR 0019):
/// a result answers the nearest earlier open call with its id. `lo[i]`
/// and `hi[i]` are the first and last message message `i` pairs with
/// (itself included); `orphan[i]` marks a message no window may hold: a
/// result without an open call, a call superseded by a later call with its
/// id while open, a call without an id ([`NO_ID`]), or a call never
/// answered, except in the last message holding calls when only tool
/// results follow it (the open pair, kept). `calls[i]` are message `i`'s
/// call ids, `results[i]` the call id it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reach {
    pub lo: Vec<usize>,
    pub hi: Vec<usize>,
    pub orphan: Vec<bool>,
}

/// [`Reach`] of messages `start..` (those before are not looked at).
pub fn message_reach(calls: &[&[u32]], results: &[Option<u32>], start: usize) -> Reach {
    let n = results.len();
    let mut r = Reach {
        lo: (0..n).collect(),
        hi: (0..n).collect(),
        orphan: vec![false; n],
    };
    let mut open: HashMap<u32, usize> = HashMap::new();
    let mut never: Vec<usize> = Vec::new();
    let mut last_calls: Option<usize> = None;
    for i in start..n {
        if !calls[i].is_empty() {
            last_calls = Some(i);
            for &id in calls[i] {
                if id == NO_ID {
                    never.push(i);
                    continue;
                }
                if let Some(earlier) = open.insert(id, i) {
                    r.orphan[earlier] = true;
                }
            }
        }
        if let Some(id) = results[i] {
            match open.remove(&id) {
                None => r.orphan[i] = true,
                Some(call) => {
                    r.lo[i] = r.lo[i].min(call);
                    r.hi[call] = r.hi[call].max(i);
                }
            }
        }
    }
    let tail_from = last_calls.map_or(start, |l| l + 1);
    let tail_ok = (tail_from..n).all(|j| results[j].is_some());
    for i in open.into_values().chain(never) {
        if !(tail_ok && Some(i) == last_calls) {
            r.orphan[i] = true;
        }
    }
    r
}

/// The smallest `s >= a` whose `[s, b)` holds no orphan and splits no tool
/// pair, and starts where `start_ok` allows (an empty window always
/// qualifies). `reach` is [`message_reach`] of the messages from `a` on.
pub fn safe_suffix<E>(
    reach: &Reach,
    a: usize,
    b: usize,
    mut start_ok: Option<&mut dyn FnMut(usize) -> Result<bool, E>>,
) -> Result<usize, E> {
    let mut best = b;
    let mut low = b; // the first message any of [s, b) pairs with
    for s in (a..b).rev() {
        if reach.orphan[s] || reach.hi[s] >= b {
            break;
        }
        low = low.min(reach.lo[s]);
        if low >= s {
            let ok = match start_ok.as_mut() {
                Some(f) => f(s)?,
                None => true,
            };
            if ok {
                best = s;
            }
        }
    }
    Ok(best)
}

/// The largest `e2 <= e` whose `[0, e2)` holds no orphan and splits no tool
/// pair, and ends where `end_ok` allows (an empty prefix always
/// qualifies). `reach` is [`message_reach`] from 0.
pub fn safe_prefix<E>(
    reach: &Reach,
    e: usize,
    mut end_ok: Option<&mut dyn FnMut(usize) -> Result<bool, E>>,
) -> Result<usize, E> {
    let mut best = 0;
    let mut high: Option<usize> = None; // the last message any of [0, i] pairs with
    for i in 0..e {
        if reach.orphan[i] {
            break;
        }
        let h = high.map_or(reach.hi[i], |h| h.max(reach.hi[i]));
        high = Some(h);
        if h <= i {
            let ok = match end_ok.as_mut() {
                Some(f) => f(i)?,
                None => true,
            };
            if ok {
                best = i + 1;
            }
        }
    }
    Ok(best)
}

/// An item cut as a message index: moved to the next message boundary
/// (`owners[k]` is the message of item `k`), then past the result of any
/// call that move dropped (`result_of` as from the pair validation).
pub fn message_cut(cut: usize, owners: &[usize], result_of: &[usize]) -> usize {
    let n = owners.len();
    let mut c = cut;
    while c > 0 && c < n && owners[c] == owners[c - 1] {
        c += 1;
    }
    let c = crate::cut::pair_reach(c, result_of);
    if c >= n {
        owners.last().map_or(0, |&o| o + 1)
    } else {
        owners[c]
    }
}

/// Call ids a message makes, and the call it answers (`None`: no id).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pairing {
    pub calls: Vec<Option<String>>,
    pub result: Option<String>,
}

impl Pairing {
    /// The pairing of a message as `speaker` says: an AI message's call ids
    /// (`extra`, its `tool_calls`, then `invalid`, its `invalid_tool_calls`;
    /// each call's `id`), a tool message's answered call (`extra`, its
    /// `tool_call_id`). `Some(None)`: no pairing; `None`: a shape (a call not
    /// a dict, an id neither a str nor `None`) the host reads instead.
    pub fn read<V: Value>(
        speaker: Option<Speaker<'_>>,
        extra: &V,
        invalid: Option<&V>,
    ) -> Option<Option<Arc<Pairing>>> {
        let mut p = Pairing::default();
        match speaker {
            Some(Speaker::Ai) => {
                for calls in [Some(extra), invalid].into_iter().flatten() {
                    calls.elements(|call| {
                        call.dict_len()?;
                        p.calls.push(match call.get("id") {
                            Some(id) if !id.is_null() => Some(id.str()?.to_owned()),
                            _ => None,
                        });
                        Some(())
                    })?;
                }
                if p.calls.is_empty() {
                    return Some(None);
                }
            }
            Some(Speaker::Tool) => p.result = Some(extra.str()?.to_owned()),
            _ => return Some(None),
        }
        Some(Some(Arc::new(p)))
    }
}

/// What the trim knows of one message: its count, whether it is a system
/// message, its pairing.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Facts {
    pub count: i64,
    pub system: bool,
    pub pairing: Option<Arc<Pairing>>,
}

impl Facts {
    /// The memory its memo entry is estimated to hold ([`entry_size`]).
    pub fn size(&self) -> usize {
        entry_size(self.count, self.pairing.as_deref())
    }
}

/// A memo entry's estimated memory beside what its count measures: the
/// entry, its weak reference and callback, the pairing.
pub const ENTRY_OBJECTS: usize = 256;

/// The memory a message's memo entry is estimated to hold: `ENTRY_OBJECTS`,
/// its call ids, and four bytes a token of its count (the text the
/// approximate count measured).
pub fn entry_size(count: i64, pairing: Option<&Pairing>) -> usize {
    let ids = pairing.map_or(0, |p| {
        p.calls
            .iter()
            .map(|c| c.as_ref().map_or(8, |s| s.len() + 24))
            .sum::<usize>()
            + p.result.as_ref().map_or(0, |s| s.len() + 24)
    });
    ENTRY_OBJECTS + ids + 4 * count.max(0) as usize
}

/// A message test (`end_on` / `start_on`) by index.
pub type Test<'a, E> = &'a mut dyn FnMut(usize) -> Result<bool, E>;

/// `trim_messages` with the pair-safe window inside its result: `(system_kept,
/// start, end)` over each message's facts (each counts 1 when `use_len`;
/// `strategy` "first" when `first`).
pub fn pair_safe_trim<E>(
    facts: &[Facts],
    use_len: bool,
    max_tokens: i64,
    first: bool,
    include_system: bool,
    mut end_on: Option<Test<'_, E>>,
    mut start_on: Option<Test<'_, E>>,
) -> Result<(bool, usize, usize), E> {
    let counts: Vec<i64> = facts
        .iter()
        .map(|f| if use_len { 1 } else { f.count })
        .collect();
    let first_is_system = facts.first().is_some_and(|f| f.system);
    let pairings: Vec<Option<&Pairing>> = facts.iter().map(|f| f.pairing.as_deref()).collect();
    let (system, a, b) = lc_window(
        &counts,
        max_tokens,
        first,
        first_is_system,
        include_system,
        end_on.as_deref_mut().map(|f| f as Test<'_, E>),
        start_on.as_deref_mut().map(|f| f as Test<'_, E>),
    )?;
    // Intern the ids from the window's start to the history's end (whether a
    // call is answered after the window, or never, decides what the window
    // may hold, ADR 0019); a message without pairing has none.
    let (lo, hi) = (if first { 0 } else { a }, pairings.len());
    let mut ids: HashMap<&str, u32> = HashMap::new();
    let mut flat: Vec<u32> = Vec::new();
    let mut spans: Vec<(usize, usize)> = Vec::with_capacity(hi - lo);
    let mut results: Vec<Option<u32>> = vec![None; hi];
    for (i, pairing) in pairings.iter().enumerate().take(hi).skip(lo) {
        let start = flat.len();
        if let Some(p) = pairing {
            for id in &p.calls {
                let v = match id {
                    Some(s) => {
                        let next = ids.len() as u32;
                        *ids.entry(s.as_str()).or_insert(next)
                    }
                    None => NO_ID,
                };
                flat.push(v);
            }
            if let Some(r) = &p.result {
                let next = ids.len() as u32;
                results[i] = Some(*ids.entry(r.as_str()).or_insert(next));
            }
        }
        spans.push((start, flat.len()));
    }
    let mut calls: Vec<&[u32]> = vec![&[]; hi];
    for (k, &(s, e)) in spans.iter().enumerate() {
        calls[lo + k] = &flat[s..e];
    }
    let reach = message_reach(&calls, &results, lo);
    if first {
        let e = safe_prefix(&reach, b, end_on)?;
        return Ok((false, 0, e));
    }
    let s = safe_suffix(&reach, a, b, start_on)?;
    Ok((system, s, b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;

    #[test]
    fn last_keeps_the_fitting_suffix() {
        let counts = [5, 1, 1, 1, 1];
        let r = lc_window::<Infallible>(&counts, 3, false, true, true, None, None).unwrap();
        assert_eq!(r, (true, 5, 5)); // the system message alone uses the budget
        let r = lc_window::<Infallible>(&counts, 8, false, true, true, None, None).unwrap();
        assert_eq!(r, (true, 2, 5));
        let r = lc_window::<Infallible>(&counts, 2, true, false, false, None, None).unwrap();
        assert_eq!(r, (false, 0, 0));
        let r = lc_window::<Infallible>(&counts, 7, true, false, false, None, None).unwrap();
        assert_eq!(r, (false, 0, 3));
    }

    #[test]
    fn windows_without_orphans() {
        // 0: call 1; 1: result 1; 2: result 9 (ghost); 3: call 2; 4: result 2
        let calls: Vec<&[u32]> = vec![&[1], &[], &[], &[2], &[]];
        let results = [None, Some(1), Some(9), None, Some(2)];
        let whole = message_reach(&calls, &results, 0);
        assert_eq!(whole.orphan, [false, false, true, false, false]);
        assert_eq!(safe_suffix::<Infallible>(&whole, 0, 5, None).unwrap(), 3);
        assert_eq!(safe_suffix::<Infallible>(&whole, 0, 4, None).unwrap(), 4);
        assert_eq!(safe_prefix::<Infallible>(&whole, 5, None).unwrap(), 2);
        assert_eq!(safe_prefix::<Infallible>(&whole, 1, None).unwrap(), 0);
    }

    #[test]
    fn ids_recur_and_the_last_calls_may_stay_open() {
        // 0: call 1; 1: result 1; 2: call 1 (reused after completion); 3: result 1;
        // 4: call 1 + call 2 (parallel); 5: result 2 -- call 1 of message 4 still runs
        let calls: Vec<&[u32]> = vec![&[1], &[], &[1], &[], &[1, 2], &[]];
        let results = [None, Some(1), None, Some(1), None, Some(2)];
        let r = message_reach(&calls, &results, 0);
        assert_eq!(r.orphan, [false; 6]);
        assert_eq!((r.lo[3], r.hi[2], r.hi[4]), (2, 3, 5));
        assert_eq!(safe_suffix::<Infallible>(&r, 0, 6, None).unwrap(), 0);
        // the same open call followed by a message other than a tool result: an orphan
        let calls: Vec<&[u32]> = vec![&[1, 2], &[], &[]];
        let results = [None, Some(2), None];
        let r = message_reach(&calls, &results, 0);
        assert_eq!(r.orphan, [true, false, false]);
        assert_eq!(safe_suffix::<Infallible>(&r, 0, 3, None).unwrap(), 2);
        // a call reused while open supersedes the earlier one
        let calls: Vec<&[u32]> = vec![&[1], &[1], &[]];
        let results = [None, None, Some(1)];
        let r = message_reach(&calls, &results, 0);
        assert_eq!(r.orphan, [true, false, false]);
        assert_eq!(safe_suffix::<Infallible>(&r, 0, 3, None).unwrap(), 1);
    }

    #[test]
    fn the_trim_keeps_pairs_whole() {
        // 0 system; 1 call a; 2 result a; 3 user
        let call = Pairing {
            calls: vec![Some("a".into())],
            result: None,
        };
        let result = Pairing {
            calls: vec![],
            result: Some("a".into()),
        };
        let facts = [None, Some(call.clone()), Some(result), None].map(|p| Facts {
            count: 1,
            system: p.is_none(),
            pairing: p.map(Arc::new),
        });
        let trim = |max, first| {
            pair_safe_trim::<Infallible>(&facts, false, max, first, true, None, None).unwrap()
        };
        assert_eq!(trim(10, false), (true, 1, 4));
        assert_eq!(trim(3, false), (true, 3, 4)); // room for 2: the result alone is not kept
        assert_eq!(trim(2, true), (false, 0, 1)); // a prefix that ends inside the pair
        assert_eq!(entry_size(2, Some(&call)), ENTRY_OBJECTS + 25 + 8);
        let one = |max| pair_safe_trim::<Infallible>(&facts, true, max, false, true, None, None);
        assert_eq!(one(2).unwrap(), (true, 3, 4)); // each counts 1
    }

    fn json(text: &str) -> crate::decode::Json<'_> {
        crate::decode::parse_canonical(text).expect("canonical json")
    }

    #[test]
    fn pairings_read_as_the_reference_reads_them() {
        let read = |s, extra: &str, invalid: Option<&str>| {
            let (extra, invalid) = (json(extra), invalid.map(json));
            Pairing::read(s, &&extra, invalid.as_ref().as_ref()).map(|p| p.as_deref().cloned())
        };
        let calls = r#"[{"id":"a"},{"id":null},{"name":"f"}]"#;
        let expect = |calls: Vec<Option<&str>>, result: Option<&str>| {
            Some(Some(Pairing {
                calls: calls.into_iter().map(|c| c.map(str::to_owned)).collect(),
                result: result.map(str::to_owned),
            }))
        };
        let ai = Some(Speaker::Ai);
        let ids = vec![Some("a"), None, None, Some("b")];
        assert_eq!(read(ai, calls, Some(r#"[{"id":"b"}]"#)), expect(ids, None));
        assert_eq!(read(ai, "[]", Some("[]")), Some(None)); // no calls: no pairing
        assert_eq!(
            read(Some(Speaker::Tool), "\"a\"", None),
            expect(vec![], Some("a"))
        );
        assert_eq!(read(Some(Speaker::System), "{}", None), Some(None));
        assert_eq!(read(None, "{}", None), Some(None));
        // Left to the host: an id not a str, a call not a dict, a call id not a str.
        assert_eq!(read(ai, r#"[{"id":1}]"#, Some("[]")), None);
        assert_eq!(read(ai, r#"["a"]"#, Some("[]")), None);
        assert_eq!(read(Some(Speaker::Tool), "1", None), None);
    }

    #[test]
    fn cuts_land_on_message_starts() {
        // messages: 0 -> items 0,1 (text, call); 1 -> item 2 (result); 2 -> item 3
        let owners = [0, 0, 1, 2];
        let result_of = [usize::MAX, 2, usize::MAX, usize::MAX];
        assert_eq!(message_cut(0, &owners, &result_of), 0);
        assert_eq!(message_cut(1, &owners, &result_of), 2);
        assert_eq!(message_cut(4, &owners, &result_of), 3);
    }
}
