//! Token estimation: per-model profiles, the raw-estimate formula, the
//! bounded LRU memo and the exact-integer correction (ADR 0001).
//!
//! [`EstimatorState`] is plain data; the binding keeps it behind one mutex
//! and looks a whole history up under a single lock.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

use crate::error::{CoreError, CoreResult};

/// Bytes per token and framing tokens per item for one model family.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Profile {
    pub bytes_per_token: f64,
    pub framing_tokens: i64,
}

impl Profile {
    pub fn new(bytes_per_token: f64, framing_tokens: i64) -> CoreResult<Self> {
        if !(bytes_per_token.is_finite() && bytes_per_token > 0.0) {
            return Err(CoreError::estimator(format!(
                "bytes_per_token must be a positive finite number, got {bytes_per_token}"
            )));
        }
        if framing_tokens < 0 {
            return Err(CoreError::estimator(format!(
                "framing_tokens must be a non-negative integer, got {framing_tokens}"
            )));
        }
        Ok(Profile {
            bytes_per_token,
            framing_tokens,
        })
    }

    /// `ceil(len / bytes_per_token) + framing_tokens`, the division in
    /// IEEE-754 double.
    #[inline]
    pub fn raw(&self, len: usize) -> CoreResult<i64> {
        let q = (len as f64 / self.bytes_per_token).ceil();
        let overflow = || CoreError::estimator("raw estimate overflows a 64-bit integer");
        if q >= 4.0e18 {
            return Err(overflow());
        }
        (q as i64)
            .checked_add(self.framing_tokens)
            .ok_or_else(overflow)
    }
}

/// `raw_sum` scaled by the model's reconciled `actual / estimated`, rounded
/// up, exactly in integers; unchanged when `estimated == 0` or
/// `actual <= estimated`.
#[inline]
pub fn corrected(raw_sum: i64, estimated: u64, actual: u64) -> i128 {
    if estimated == 0 || actual <= estimated {
        return raw_sum as i128;
    }
    let e = estimated as i128;
    // |raw_sum| < 2^63 and actual < 2^64: the product fits in i128.
    (raw_sum as i128 * actual as i128 + e - 1).div_euclid(e)
}

// ---------------------------------------------------------------------------
// the memo

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
    /// Invariant: `map[nodes[i].key] == i` for every slot `i`.
    map: HashMap<MemoKey, u32, BuildHasherDefault<PassThrough>>,
    nodes: Vec<Node>,
    /// The most recently used entry (NIL when empty).
    head: u32,
    capacity: usize,
    /// The slot of the last lookup or insert.
    last: u32,
    pub hits: u64,
    pub misses: u64,
}

impl Memo {
    pub fn new(capacity: usize) -> Self {
        Memo {
            map: HashMap::default(),
            nodes: Vec::new(),
            head: NIL,
            capacity,
            last: NIL,
            hits: 0,
            misses: 0,
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Make room for up to `additional` new entries (never past capacity).
    pub fn reserve(&mut self, additional: usize) {
        let room = self.capacity.saturating_sub(self.map.len()).min(additional);
        self.map.reserve(room);
        self.nodes.reserve(room);
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
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

    /// The slot of `key`, trying slot `guess` before the hash map. A batch
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
        self.map.get(key).copied()
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
        if self.map.len() < self.capacity {
            let i = self.nodes.len() as u32;
            self.nodes.push(Node {
                key,
                value,
                prev: NIL,
                next: NIL,
            });
            self.map.insert(key, i);
            self.push_front(i);
            self.last = i;
        } else {
            // Reuse the least recently used slot, which then comes first.
            let i = self.nodes[self.head as usize].prev;
            let old = self.nodes[i as usize].key;
            self.map.remove(&old);
            let n = &mut self.nodes[i as usize];
            n.key = key;
            n.value = value;
            self.map.insert(key, i);
            self.head = i;
            self.last = i;
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

    /// Keys from most to least recently used (for tests).
    pub fn keys_mru(&self) -> Vec<MemoKey> {
        let mut out = Vec::with_capacity(self.map.len());
        let mut i = self.head;
        while i != NIL && out.len() < self.map.len() {
            out.push(self.nodes[i as usize].key);
            i = self.nodes[i as usize].next;
        }
        out
    }
}

mod state;
pub use state::{EstimatorState, Reconciled};

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> MemoKey {
        MemoKey {
            model: 0,
            kind: 0,
            digest: [n; 32],
        }
    }

    #[test]
    fn raw_formula() {
        let p = Profile::new(3.0, 4).unwrap();
        assert_eq!(p.raw(0).unwrap(), 4);
        assert_eq!(p.raw(1).unwrap(), 5);
        assert_eq!(p.raw(3).unwrap(), 5);
        assert_eq!(p.raw(4).unwrap(), 6);
        let q = Profile::new(3.5, 0).unwrap();
        assert_eq!(q.raw(7).unwrap(), 2);
        assert_eq!(q.raw(8).unwrap(), 3);
        assert!(Profile::new(0.0, 4).is_err());
        assert!(Profile::new(f64::NAN, 4).is_err());
        assert!(Profile::new(3.0, -1).is_err());
    }

    #[test]
    fn correction_is_exact_integer_ceiling() {
        assert_eq!(corrected(100, 0, 0), 100);
        assert_eq!(corrected(100, 10, 5), 100);
        assert_eq!(corrected(100, 10, 10), 100);
        assert_eq!(corrected(100, 10, 11), 110);
        assert_eq!(corrected(101, 10, 11), 112); // ceil(111.1)
        assert_eq!(corrected(3, 3, 10), 10);
        assert_eq!(corrected(0, 3, 10), 0);
        // where a float formula would round: 49 * (100/3 ... ) exactly
        assert_eq!(corrected(49, 3, 100), (49 * 100 + 2) / 3);
        // huge values do not overflow
        assert_eq!(
            corrected(i64::MAX, 1, u64::MAX),
            i64::MAX as i128 * u64::MAX as i128
        );
        // negative raw sums floor-divide like Python's //
        assert_eq!(corrected(-7, 2, 3), (-21 + 1i128).div_euclid(2));
    }

    #[test]
    fn correction_matches_brute_force() {
        for raw in 0..60i64 {
            for e in 1..12u64 {
                for a in 0..30u64 {
                    let want = if a <= e {
                        raw as i128
                    } else {
                        let num = raw as i128 * a as i128;
                        let mut c = num / e as i128;
                        if c * (e as i128) < num {
                            c += 1;
                        }
                        c
                    };
                    assert_eq!(corrected(raw, e, a), want);
                }
            }
        }
    }

    #[test]
    fn memo_is_lru() {
        let mut m = Memo::new(2);
        assert_eq!(m.get_or_insert_with(key(1), || Ok(1)).unwrap(), 1);
        assert_eq!(m.get_or_insert_with(key(2), || Ok(2)).unwrap(), 2);
        assert_eq!(m.get_or_insert_with(key(1), || Ok(99)).unwrap(), 1); // hit, 1 is MRU
        assert_eq!(m.get_or_insert_with(key(3), || Ok(3)).unwrap(), 3); // evicts 2
        assert_eq!(m.keys_mru(), vec![key(3), key(1)]);
        assert_eq!((m.hits, m.misses, m.len()), (1, 3, 2));
        assert!(m.get(&key(2)).is_none());
        let mut z = Memo::new(0);
        assert_eq!(z.get_or_insert_with(key(1), || Ok(7)).unwrap(), 7);
        assert_eq!(z.get_or_insert_with(key(1), || Ok(7)).unwrap(), 7);
        assert_eq!((z.hits, z.misses, z.len()), (0, 2, 0));
    }

    #[test]
    fn memo_matches_a_model_lru() {
        // A simple Vec-based LRU as the oracle.
        let mut state: u64 = 12345;
        for cap in [1usize, 2, 3, 7] {
            let mut m = Memo::new(cap);
            let mut oracle: Vec<u8> = Vec::new(); // MRU first
            let (mut hits, mut misses) = (0u64, 0u64);
            for _ in 0..2000 {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let k = ((state >> 33) % 10) as u8;
                m.get_or_insert_with(key(k), || Ok(k as i64)).unwrap();
                if let Some(p) = oracle.iter().position(|&x| x == k) {
                    oracle.remove(p);
                    hits += 1;
                } else {
                    misses += 1;
                    if oracle.len() == cap {
                        oracle.pop();
                    }
                }
                oracle.insert(0, k);
                let got: Vec<u8> = m.keys_mru().iter().map(|k| k.digest[0]).collect();
                assert_eq!(got, oracle);
            }
            assert_eq!((m.hits, m.misses), (hits, misses));
        }
    }
}
