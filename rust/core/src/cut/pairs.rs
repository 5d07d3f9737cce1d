//! Tool-pair validation: each call answered once, by a later result, paired
//! by position (ADR 0019): a result answers the nearest earlier open call
//! with its id, so an id may be reused once its earlier pair is complete.

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

pub const REASON_DUPLICATE_CALL: &str = "tool call id reused while its earlier call is still open";
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
    /// call_id -> the latest call with it (answered when `result_of[call]`
    /// is set). Only the latest can be open: a call whose id is open is an
    /// error, so the map holds every open call.
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
                    Entry::Occupied(mut slot) => {
                        if self.result_of[*slot.get()] == NO_RESULT {
                            return Err(CoreError::orphan(text, i, REASON_DUPLICATE_CALL));
                        }
                        slot.insert(i); // reused after its earlier pair completed
                    }
                    Entry::Vacant(slot) => {
                        slot.insert(i);
                    }
                }
                self.open += 1;
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

/// A foreign history's items paired by position with orphans allowed (ADR
/// 0019): for each item the index of its call's result ([`NO_RESULT`] for
/// non-calls and calls never answered), and the index after the last
/// orphan (0 if none). Orphans: a result without an open call for its id,
/// a call superseded by a later call with its id while open, and a call
/// never answered, except in the last message holding calls when only tool
/// results follow that message (the open pair). `owners[k]` is the message
/// of item `k`.
pub fn pair_foreign(roles: &[ToolRole<'_>], owners: &[usize]) -> (Vec<usize>, usize) {
    let mut result_of = vec![NO_RESULT; roles.len()];
    let mut open: HashMap<&str, usize> = HashMap::new();
    let mut bound = 0;
    let mut last_call = None;
    for (i, role) in roles.iter().enumerate() {
        match *role {
            ToolRole::Other => {}
            ToolRole::Call(id) => {
                if let Some(earlier) = open.insert(id, i) {
                    bound = bound.max(earlier + 1);
                }
                last_call = Some(i);
            }
            ToolRole::Result(id) => match open.remove(id) {
                Some(call) => result_of[call] = i,
                None => bound = i + 1,
            },
        }
    }
    if let Some(last) = last_call.filter(|_| !open.is_empty()) {
        let message = owners[last];
        let tail_ok = roles
            .iter()
            .zip(owners)
            .all(|(r, &o)| o <= message || matches!(r, ToolRole::Result(_)));
        for &i in open.values() {
            if !(tail_ok && owners[i] == message) {
                bound = bound.max(i + 1);
            }
        }
    }
    (result_of, bound)
}
