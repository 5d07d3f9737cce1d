//! The bounded LRU memo of raw estimates, keyed by `(model, kind, sha256)`.

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use super::memo_index::MemoIndex;
use crate::error::CoreResult;

/// `(model_id, kind, sha256)` with the strings interned to small ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoKey {
    pub model: u32,
    pub kind: u32,
    pub digest: [u8; 32],
}

impl Hash for MemoKey {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        // The digest is already uniformly distributed.
        let mut head = [0u8; 8];
        head.copy_from_slice(&self.digest[..8]);
        let tag =
            ((self.model as u64) << 32 | self.kind as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        state.write_u64(u64::from_le_bytes(head) ^ tag);
    }
}

impl MemoKey {
    /// The 32-bit hash the memo's index files the key under (the digest is
    /// already uniformly distributed; model and kind are mixed in).
    #[inline]
    pub fn hash32(&self) -> u32 {
        let mut head = [0u8; 8];
        head.copy_from_slice(&self.digest[..8]);
        let tag =
            ((self.model as u64) << 32 | self.kind as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let h = u64::from_le_bytes(head) ^ tag;
        (h ^ (h >> 32)) as u32
    }
}

/// Passes the one `u64` that [`MemoKey`] writes straight through.
#[derive(Default)]
pub struct PassThrough(u64);

impl Hasher for PassThrough {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        // Not used by MemoKey; a plain FNV-1a keeps it correct for others.
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

const NIL: u32 = u32::MAX;

/// Memos made so far (each gets the next number: `Memo::id`).
static MEMOS: AtomicU64 = AtomicU64::new(0);

#[derive(Debug, Clone)]
struct Node {
    key: MemoKey,
    value: i64,
}

/// A memo entry as one lookup found it: where it was, under which kind,
/// when that lookup used it, and its value. While the memo's slot still
/// carries that use ([`Memo::use_known`]), the slot holds the same key
/// and value: a slot given to another key is used anew.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Known {
    pub slot: u32,
    pub kind: u32,
    pub stamp: u64,
    pub value: i64,
}

impl Known {
    /// No entry (a memo of capacity 0 keeps none).
    pub const NONE: Known = Known {
        slot: NIL,
        kind: NIL,
        stamp: 0,
        value: 0,
    };
}

/// A bounded LRU map: a hit makes the entry the most recently used, an
/// insert beyond `capacity` drops the least recently used entry (the
/// semantics of an `OrderedDict` with `move_to_end` / `popitem(last=False)`).
///
/// Recency is a clock: every use of a slot gives it the next tick
/// (`used`) and queues `(tick, slot)`; the least recently used entry is the
/// first queued use that is still its slot's last. A hit so writes one
/// word and appends to the queue, instead of relinking neighbours spread
/// over the node array; and a caller that kept a lookup's [`Known`] can
/// use the entry again without reading its key ([`Memo::use_known`]).
#[derive(Debug)]
pub struct Memo {
    /// This memo's number: a [`Known`] is only ever used with the memo
    /// whose `id` it was taken from.
    id: u64,
    /// Invariant: `index` finds slot `i` under `nodes[i].key`, for every slot.
    index: MemoIndex,
    nodes: Vec<Node>,
    /// Each slot's last use (ticks never repeat).
    used: Vec<u64>,
    /// Uses, oldest first; each slot's last use among them.
    uses: VecDeque<(u64, u32)>,
    clock: u64,
    capacity: usize,
    /// The slot of the last lookup or insert.
    last: u32,
    pub hits: u64,
    pub misses: u64,
}

impl Clone for Memo {
    /// A copy with its own `id` (a [`Known`] of the original is not the copy's).
    fn clone(&self) -> Self {
        Memo {
            id: MEMOS.fetch_add(1, Ordering::Relaxed),
            index: self.index.clone(),
            nodes: self.nodes.clone(),
            used: self.used.clone(),
            uses: self.uses.clone(),
            clock: self.clock,
            capacity: self.capacity,
            last: self.last,
            hits: self.hits,
            misses: self.misses,
        }
    }
}

impl Memo {
    pub fn new(capacity: usize) -> Self {
        Memo {
            id: MEMOS.fetch_add(1, Ordering::Relaxed),
            index: MemoIndex::default(),
            nodes: Vec::new(),
            used: Vec::new(),
            uses: VecDeque::new(),
            clock: 0,
            capacity,
            last: NIL,
            hits: 0,
            misses: 0,
        }
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Make room for up to `additional` new entries (never past capacity).
    pub fn reserve(&mut self, additional: usize) {
        let room = self.capacity.saturating_sub(self.len()).min(additional);
        self.index.reserve(room);
        self.nodes.reserve(room);
        self.used.reserve(room);
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The slot of `key` in the index.
    #[inline]
    fn find(&self, key: &MemoKey) -> Option<u32> {
        let nodes = &self.nodes;
        self.index
            .find(key.hash32(), |i| nodes[i as usize].key == *key)
    }

    /// Slot `i` is used now: the most recently used.
    #[inline]
    fn use_slot(&mut self, i: u32) {
        self.clock += 1;
        self.used[i as usize] = self.clock;
        if self.uses.len() >= 2 * self.used.len() + 64 {
            // Drop the uses a later use of their slot superseded (amortized:
            // at most half of the queue stays).
            let used = &self.used;
            self.uses
                .retain(|&(tick, slot)| used[slot as usize] == tick);
        }
        self.uses.push_back((self.clock, i));
        self.last = i;
    }

    /// The least recently used slot (the memo is not empty).
    fn least_recent(&mut self) -> u32 {
        loop {
            let (tick, slot) = self
                .uses
                .pop_front()
                .expect("every slot's last use is queued");
            if self.used[slot as usize] == tick {
                return slot;
            }
        }
    }

    /// The slot of `key`, trying slot `guess` before the index. A batch
    /// seen before looks its items up in insertion order, so the slot after
    /// the previous one is usually right, and checking it reads memory in
    /// sequence instead of probing at random. (By the invariant a slot
    /// holding `key` is the entry of `key`.)
    #[inline]
    fn slot(&self, key: &MemoKey, guess: u32) -> Option<u32> {
        if let Some(n) = self.nodes.get(guess as usize) {
            if n.key == *key {
                return Some(guess);
            }
        }
        self.find(key)
    }

    /// The memoized value of `key`, counting a hit; `None` counts nothing.
    #[inline]
    pub fn get(&mut self, key: &MemoKey) -> Option<i64> {
        self.get_near(key, NIL)
    }

    /// [`Memo::get`] with a slot guess (see [`Memo::slot`]).
    #[inline]
    fn get_near(&mut self, key: &MemoKey, guess: u32) -> Option<i64> {
        let i = self.slot(key, guess)?;
        self.hits += 1;
        self.use_slot(i);
        Some(self.nodes[i as usize].value)
    }

    /// Use the entry `known` was taken from again, as a hit of its key,
    /// when the memo still holds it (its slot's last use is `known`'s);
    /// `None` (nothing counted) otherwise. The entry's key is not read.
    #[inline]
    pub fn use_known(&mut self, known: &Known) -> Option<Known> {
        if self.used.get(known.slot as usize) != Some(&known.stamp) {
            return None;
        }
        self.hits += 1;
        self.use_slot(known.slot);
        Some(Known {
            stamp: self.clock,
            ..*known
        })
    }

    /// The entry the last lookup or insert found or made, as a [`Known`]
    /// under `kind` (its key's kind); [`Known::NONE`] when none is kept.
    #[inline]
    pub fn last_known(&self, kind: u32) -> Known {
        match self.nodes.get(self.last as usize) {
            Some(n) => Known {
                slot: self.last,
                kind,
                stamp: self.used[self.last as usize],
                value: n.value,
            },
            None => Known::NONE,
        }
    }

    /// Insert a value computed after a miss (counted here).
    pub fn insert_miss(&mut self, key: MemoKey, value: i64) {
        self.misses += 1;
        if self.capacity == 0 {
            self.last = NIL;
            return;
        }
        if self.len() < self.capacity {
            let i = self.nodes.len() as u32;
            self.nodes.push(Node { key, value });
            self.used.push(0);
            self.index.insert(key.hash32(), i);
            self.use_slot(i);
        } else {
            // Reuse the least recently used slot, which is then the most.
            let i = self.least_recent();
            let old = self.nodes[i as usize].key;
            self.index.remove(old.hash32(), i);
            self.nodes[i as usize] = Node { key, value };
            self.index.insert(key.hash32(), i);
            self.use_slot(i);
        }
    }

    /// Insert a value read from elsewhere (a stored count, ADR 0011) unless
    /// `key` is already memoized; counts neither a hit nor a miss.
    pub fn prime(&mut self, key: MemoKey, value: i64) {
        if self.capacity == 0 || self.find(&key).is_some() {
            return;
        }
        let misses = self.misses;
        self.insert_miss(key, value);
        self.misses = misses;
    }

    /// Look `key` up, computing and inserting on a miss.
    #[inline]
    pub fn get_or_insert_with(
        &mut self,
        key: MemoKey,
        compute: impl FnOnce() -> CoreResult<i64>,
    ) -> CoreResult<i64> {
        let guess = self.last.wrapping_add(1);
        if let Some(v) = self.get_near(&key, guess) {
            return Ok(v);
        }
        let v = compute()?;
        self.insert_miss(key, v);
        Ok(v)
    }

    /// Keys from most to least recently used.
    #[cfg(test)]
    pub fn keys_mru(&self) -> Vec<MemoKey> {
        let mut slots: Vec<usize> = (0..self.nodes.len()).collect();
        slots.sort_by_key(|&i| std::cmp::Reverse(self.used[i]));
        slots.into_iter().map(|i| self.nodes[i].key).collect()
    }
}
