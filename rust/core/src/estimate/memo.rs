//! The bounded LRU memo of raw estimates, keyed by `(model, kind, sha256)`.

use std::hash::{Hash, Hasher};

use super::memo_index::{prefetch_read, MemoIndex};
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

#[derive(Debug, Clone)]
struct Node {
    key: MemoKey,
    value: i64,
    prev: u32, // towards the most recently used (from the head: the least)
    next: u32, // towards the least recently used
}

/// A bounded LRU map: a hit moves the entry to the front, an insert beyond
/// `capacity` drops the least recently used entry (the semantics of an
/// `OrderedDict` with `move_to_end` / `popitem(last=False)`).
///
/// The recency list is circular: the least recently used entry is the one
/// before the head. So using that entry — what a history seen before does
/// item after item, in the order it was first measured — only moves the
/// head back by one, writing no entry.
#[derive(Debug, Clone)]
pub struct Memo {
    /// Invariant: `index` finds slot `i` under `nodes[i].key`, for every slot.
    index: MemoIndex,
    nodes: Vec<Node>,
    /// The most recently used entry (NIL when empty).
    head: u32,
    capacity: usize,
    /// The slot of the last lookup or insert.
    last: u32,
    /// Whether the last lookup's slot guess was right.
    guessed: bool,
    pub hits: u64,
    pub misses: u64,
}

impl Memo {
    pub fn new(capacity: usize) -> Self {
        Memo {
            index: MemoIndex::default(),
            nodes: Vec::new(),
            head: NIL,
            capacity,
            last: NIL,
            guessed: false,
            hits: 0,
            misses: 0,
        }
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

    /// Take `i` out of the list (not the only entry).
    fn unlink(&mut self, i: u32) {
        let (prev, next) = {
            let n = &self.nodes[i as usize];
            (n.prev, n.next)
        };
        self.nodes[prev as usize].next = next;
        self.nodes[next as usize].prev = prev;
        if self.head == i {
            self.head = next;
        }
    }

    /// Put `i` (not in the list) in front, as the most recently used.
    fn push_front(&mut self, i: u32) {
        let head = self.head;
        if head == NIL {
            let n = &mut self.nodes[i as usize];
            n.prev = i;
            n.next = i;
        } else {
            let tail = self.nodes[head as usize].prev;
            {
                let n = &mut self.nodes[i as usize];
                n.prev = tail;
                n.next = head;
            }
            self.nodes[tail as usize].next = i;
            self.nodes[head as usize].prev = i;
        }
        self.head = i;
    }

    /// Make `i` (in the list) the most recently used.
    #[inline]
    fn touch(&mut self, i: u32) {
        let head = self.head;
        if head == i {
            return;
        }
        if self.nodes[head as usize].prev == i {
            // The least recently used: the circle just turns.
            self.head = i;
            return;
        }
        self.unlink(i);
        self.push_front(i);
    }

    /// The slot of `key`, trying slot `guess` before the index. A batch
    /// seen before looks its items up in insertion order, so the slot after
    /// the previous one is usually right, and checking it reads memory in
    /// sequence instead of probing at random. (By the invariant a slot
    /// holding `key` is the entry of `key`.)
    #[inline]
    fn slot(&mut self, key: &MemoKey, guess: u32) -> Option<u32> {
        if let Some(n) = self.nodes.get(guess as usize) {
            if n.key == *key {
                self.guessed = true;
                return Some(guess);
            }
        }
        self.guessed = false;
        self.find(key)
    }

    /// Whether the last lookup found its entry in the slot after the one
    /// before (a batch in insertion order: nothing to fetch ahead).
    #[inline]
    pub fn guessed(&self) -> bool {
        self.guessed
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
        self.last = i;
        self.hits += 1;
        self.touch(i);
        Some(self.nodes[i as usize].value)
    }

    /// Insert a value computed after a miss (counted here).
    pub fn insert_miss(&mut self, key: MemoKey, value: i64) {
        self.misses += 1;
        if self.capacity == 0 {
            return;
        }
        if self.len() < self.capacity {
            let i = self.nodes.len() as u32;
            self.nodes.push(Node {
                key,
                value,
                prev: NIL,
                next: NIL,
            });
            self.index.insert(key.hash32(), i);
            self.push_front(i);
            self.last = i;
        } else {
            // Reuse the least recently used slot, which then comes first.
            let i = self.nodes[self.head as usize].prev;
            let old = self.nodes[i as usize].key;
            self.index.remove(old.hash32(), i);
            let n = &mut self.nodes[i as usize];
            n.key = key;
            n.value = value;
            self.index.insert(key.hash32(), i);
            self.head = i;
            self.last = i;
        }
    }

    /// `memo_stats()`: `{"hits", "misses", "size", "capacity"}`.
    pub fn stats(&self) -> crate::data::Data {
        use crate::data::Data;
        Data::dict([
            ("hits", Data::int(self.hits)),
            ("misses", Data::int(self.misses)),
            ("size", Data::int(self.len() as u64)),
            ("capacity", Data::int(self.capacity() as u64)),
        ])
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

    /// Ask the CPU to fetch what a lookup of `key` reads first: its index
    /// entry. A batch asks this of a value some way ahead of the one it
    /// looks up, so that the random reads of many lookups overlap instead
    /// of each waiting for memory in turn.
    #[inline]
    pub fn prefetch_index(&self, key: &MemoKey) {
        self.index.prefetch(key.hash32());
    }

    /// Ask the CPU to fetch the entry a lookup of `key` is likely to find
    /// (read through the index entry, which [`Memo::prefetch_index`] asked
    /// for earlier).
    #[inline]
    pub fn prefetch_node(&self, key: &MemoKey) {
        if let Some(node) = self
            .index
            .peek(key.hash32())
            .and_then(|i| self.nodes.get(i as usize))
        {
            prefetch_read(node);
        }
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
        let mut out = Vec::with_capacity(self.len());
        let mut i = self.head;
        while i != NIL && out.len() < self.len() {
            out.push(self.nodes[i as usize].key);
            i = self.nodes[i as usize].next;
        }
        out
    }
}
