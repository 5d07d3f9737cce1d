//! A memo keyed by object address, bounded by the bytes its entries are
//! estimated to hold: two generations; lookups promote from the old one;
//! when the new one holds half of `max_bytes`, it becomes the old one (the
//! previous old one is dropped), so both together hold at most `max_bytes`.
//! (LangChain's per-message counts, `trim_messages`.)

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Object addresses are distinct and aligned: a multiply spreads them.
#[derive(Default)]
pub struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_usize(&mut self, v: usize) {
        self.0 = ((v as u64) >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type ByAddress<E> = HashMap<usize, (E, usize), BuildHasherDefault<AddressHasher>>;

pub struct Generations<E> {
    new: ByAddress<E>,
    old: ByAddress<E>,
    new_bytes: usize,
    old_bytes: usize,
    pub max_bytes: usize,
}

impl<E> Generations<E> {
    pub fn empty(max_bytes: usize) -> Self {
        Generations {
            new: ByAddress::default(),
            old: ByAddress::default(),
            new_bytes: 0,
            old_bytes: 0,
            max_bytes,
        }
    }

    /// Keep `e` of `size` bytes (an entry over half the bound is not kept).
    pub fn put(&mut self, key: usize, e: E, size: usize) {
        let half = self.max_bytes / 2;
        if size > half {
            return;
        }
        if self.new_bytes + size > half {
            self.old = std::mem::take(&mut self.new);
            self.old_bytes = std::mem::replace(&mut self.new_bytes, 0);
        }
        self.new_bytes += size;
        if let Some((_, old)) = self.new.insert(key, (e, size)) {
            self.new_bytes -= old;
        }
    }

    /// The new generation's entry at `key`.
    pub fn get(&self, key: usize) -> Option<&E> {
        self.new.get(&key).map(|(e, _)| e)
    }

    /// The old generation's entry at `key`, taken out (to be put back).
    pub fn take_old(&mut self, key: usize) -> Option<(E, usize)> {
        let (e, size) = self.old.remove(&key)?;
        self.old_bytes -= size;
        Some((e, size))
    }

    /// Remove the entry at `key` when `is_it` says it is the one meant.
    pub fn remove_if(&mut self, key: usize, is_it: impl Fn(&E) -> bool) -> Option<E> {
        if self.new.get(&key).is_some_and(|(e, _)| is_it(e)) {
            let (e, size) = self.new.remove(&key)?;
            self.new_bytes -= size;
            return Some(e);
        }
        if self.old.get(&key).is_some_and(|(e, _)| is_it(e)) {
            return self.take_old(key).map(|(e, _)| e);
        }
        None
    }

    pub fn bytes(&self) -> usize {
        self.new_bytes + self.old_bytes
    }

    pub fn len(&self) -> usize {
        self.new.len() + self.old.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_generations_within_the_bound() {
        let mut g = Generations::empty(100);
        g.put(16, "a", 30);
        g.put(32, "b", 30); // 60 > 50: "a" goes old
        assert_eq!((g.get(32), g.get(16)), (Some(&"b"), None));
        assert_eq!(g.bytes(), 60);
        assert_eq!(g.take_old(16), Some(("a", 30)));
        g.put(48, "c", 30); // "b" goes old, the previous old one is dropped
        g.put(64, "big", 51); // over half: not kept
        assert_eq!((g.len(), g.bytes()), (2, 60));
        assert_eq!(g.remove_if(32, |e| *e == "x"), None);
        assert_eq!(g.remove_if(32, |e| *e == "b"), Some("b"));
        assert_eq!(g.bytes(), 30);
    }
}
