//! The memo's index: memo slots by key hash, in one flat table of 8-byte
//! entries (the key's 32-bit hash and the slot), open addressing with
//! linear probing and backward-shift deletion.
//!
//! Why not a map from key to slot: that stores each 40-byte key a second
//! time, and a memo that misses (many sessions built in turn) removes and
//! inserts an entry per value, each touching a bucket the size of a key in
//! a table of several megabytes. Here an entry is 8 bytes, a probe compares
//! hashes and reads a slot's key only on a hash match, and removing an
//! entry needs no key at all.

/// An empty entry.
const EMPTY: u64 = u64::MAX;

/// Ask the CPU to bring `value`'s cache line in (no effect on the program's
/// meaning; nothing on targets without the instruction).
#[inline(always)]
pub(super) fn prefetch_read<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing the program sees and cannot fault.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

#[derive(Debug, Clone)]
pub struct MemoIndex {
    /// `(hash << 32) | slot`, or `EMPTY`; the length is a power of two.
    entries: Vec<u64>,
    len: usize,
}

impl Default for MemoIndex {
    fn default() -> Self {
        MemoIndex {
            entries: vec![EMPTY; 8],
            len: 0,
        }
    }
}

impl MemoIndex {
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn mask(&self) -> usize {
        self.entries.len() - 1
    }

    /// Room for `additional` more entries at a load of at most one half.
    pub fn reserve(&mut self, additional: usize) {
        let need = (self.len + additional).saturating_mul(2);
        if need > self.entries.len() {
            self.rebuild(need.next_power_of_two());
        }
    }

    fn rebuild(&mut self, size: usize) {
        let old = std::mem::replace(&mut self.entries, vec![EMPTY; size]);
        let mask = size - 1;
        for e in old.into_iter().filter(|&e| e != EMPTY) {
            let mut p = (e >> 32) as usize & mask;
            while self.entries[p] != EMPTY {
                p = (p + 1) & mask;
            }
            self.entries[p] = e;
        }
    }

    /// Ask the CPU to fetch the entry a probe for `hash` reads first.
    #[inline]
    pub fn prefetch(&self, hash: u32) {
        prefetch_read(&self.entries[hash as usize & self.mask()]);
    }

    /// The slot filed at `hash`'s home entry under `hash`, if any (one read,
    /// no probing: a hint for prefetching, not an answer).
    #[inline]
    pub fn peek(&self, hash: u32) -> Option<u32> {
        let e = self.entries[hash as usize & self.mask()];
        (e != EMPTY && (e >> 32) as u32 == hash).then_some(e as u32)
    }

    /// The slot with hash `hash` for which `is_key(slot)` holds.
    #[inline]
    pub fn find(&self, hash: u32, mut is_key: impl FnMut(u32) -> bool) -> Option<u32> {
        let mask = self.mask();
        let mut p = hash as usize & mask;
        loop {
            let e = self.entries[p];
            if e == EMPTY {
                return None;
            }
            if (e >> 32) as u32 == hash && is_key(e as u32) {
                return Some(e as u32);
            }
            p = (p + 1) & mask;
        }
    }

    /// Add `slot` under `hash` (its key must not be indexed yet).
    pub fn insert(&mut self, hash: u32, slot: u32) {
        self.reserve(1);
        let mask = self.mask();
        let mut p = hash as usize & mask;
        while self.entries[p] != EMPTY {
            p = (p + 1) & mask;
        }
        self.entries[p] = (hash as u64) << 32 | slot as u64;
        self.len += 1;
    }

    /// Remove `slot`, indexed under `hash`; false when it is not there.
    pub fn remove(&mut self, hash: u32, slot: u32) -> bool {
        let mask = self.mask();
        let want = (hash as u64) << 32 | slot as u64;
        let mut hole = hash as usize & mask;
        loop {
            match self.entries[hole] {
                EMPTY => return false,
                e if e == want => break,
                _ => hole = (hole + 1) & mask,
            }
        }
        // Backward shift: move each later entry of the run into the hole
        // when the hole lies between its home and where it sits.
        self.entries[hole] = EMPTY;
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let e = self.entries[j];
            if e == EMPTY {
                break;
            }
            let home = (e >> 32) as usize & mask;
            if j.wrapping_sub(home) & mask >= j.wrapping_sub(hole) & mask {
                self.entries[hole] = e;
                self.entries[j] = EMPTY;
                hole = j;
            }
        }
        self.len -= 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::MemoIndex;
    use proptest::prelude::*;
    use std::collections::HashMap;

    proptest! {
        /// Against a map: any sequence of inserts and removes (hashes drawn
        /// from a few values, so runs collide and wrap) finds exactly what the
        /// map holds.
        #[test]
        fn finds_what_a_map_holds(ops in proptest::collection::vec((any::<bool>(), 0u32..40, 0u32..6), 0..400)) {
            let mut index = MemoIndex::default();
            let mut model: HashMap<u32, u32> = HashMap::new(); // slot -> hash
            let hash_of = |h: u32| h.wrapping_mul(0x9E37_79B9) | (h & 3); // few homes, wrapping runs
            for (add, slot, h) in ops {
                let hash = hash_of(h);
                if add && !model.contains_key(&slot) {
                    index.insert(hash, slot);
                    model.insert(slot, hash);
                } else if !add {
                    let had = model.remove(&slot);
                    prop_assert_eq!(index.remove(had.unwrap_or(hash), slot), had.is_some());
                }
                prop_assert_eq!(index.len(), model.len());
                for (&s, &hh) in &model {
                    prop_assert_eq!(index.find(hh, |c| c == s), Some(s));
                }
            }
        }
    }
}
