//! What the fit read of one history line, kept between calls by the line's
//! owner (`RenderLine.state`, ADR 0001 "The render line"): the bookkeeping
//! of the binding's `LineState`, without the Python objects it holds.
//!
//! A worker builds a session's requests over one line that grows at its
//! end. Reading an entry touches the history item and its render: objects
//! spread over the heap, out of the CPU's caches by the next turn. The
//! [`Readings`] keep those readings in one array (the binding's entries,
//! each with its [`EntryFacts`]), the last blocks and limits read with the
//! line, and the SHA-256 states of its body digest lists' leading part.
//!
//! A call takes the readings out of their [`Lease`] for its whole length
//! (the host may run foreign code meanwhile, and another thread may call
//! with the same line): a call that finds them taken fits without them.
//! `clear` bumps a generation, so readings given back from before it are
//! dropped. The lock is held only to take and give back.

use std::sync::{Mutex, MutexGuard, PoisonError};

use super::HistoryItem;
use crate::cut::ToolRole;
use crate::estimate::Measured;
use crate::hash::PrefixStates;

/// The stored prefixes of one line's body digest lists (see `PrefixStates`:
/// 32 bytes a digest; over the bound they start over).
pub const PREFIX_BYTES: usize = 2 << 20;

/// An entry's estimated memory beside its facts and call id: the host's
/// references to its objects.
pub const ENTRY_OBJECTS: usize = 32;

/// An entry's tool-pair role with its call id owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CachedRole {
    Other,
    Call(Box<str>),
    Result(Box<str>),
}

/// What an entry read of its history item and render: the render's digest,
/// the item's history reading, and the render's count as the last call
/// measured it (and how).
#[derive(Debug, Clone)]
pub struct EntryFacts {
    pub digest: [u8; 32],
    pub seq: Option<i64>,
    pub role: CachedRole,
    pub hash: u64,
    pub measured: Measured,
}

impl EntryFacts {
    /// The facts of a render with `digest` for the history item `read`.
    pub fn new(digest: [u8; 32], read: &HistoryItem<'_>) -> Self {
        let role = match read.role {
            ToolRole::Other => CachedRole::Other,
            ToolRole::Call(id) => CachedRole::Call(id.into()),
            ToolRole::Result(id) => CachedRole::Result(id.into()),
        };
        EntryFacts {
            digest,
            seq: read.seq,
            role,
            hash: read.hash,
            measured: Measured::default(),
        }
    }

    /// The history item the fit reads (its role borrows the call id).
    pub fn history(&self) -> HistoryItem<'_> {
        let role = match &self.role {
            CachedRole::Other => ToolRole::Other,
            CachedRole::Call(id) => ToolRole::Call(id),
            CachedRole::Result(id) => ToolRole::Result(id),
        };
        HistoryItem {
            raw: 0,
            seq: self.seq,
            role,
            hash: self.hash,
        }
    }
}

/// An entry as the host keeps it: its facts, and its estimated memory.
pub trait Entry {
    fn facts(&self) -> &EntryFacts;
    fn facts_mut(&mut self) -> &mut EntryFacts;

    /// Its estimated memory: `size` (the host's struct), its call id,
    /// [`ENTRY_OBJECTS`].
    fn size(&self) -> usize
    where
        Self: Sized,
    {
        let id = match &self.facts().role {
            CachedRole::Other => 0,
            CachedRole::Call(id) | CachedRole::Result(id) => id.len(),
        };
        std::mem::size_of::<Self>() + id + ENTRY_OBJECTS
    }
}

/// Something kept beside the entries, with its estimated memory.
pub trait Kept {
    fn nbytes(&self) -> usize;
}

/// What the fit keeps of one line: the entries in order from its start
/// (`E`, the host's), the last blocks (`B`) and limits (`L`) read with it,
/// and the body digest lists' leading parts.
pub struct Readings<E, B, L> {
    entries: Vec<E>,
    entry_bytes: usize,
    pub blocks: Option<B>,
    pub limits: Option<L>,
    prefixes: PrefixStates,
    /// Entries the call that has them out took from them.
    served: u64,
}

impl<E: Entry, B: Kept, L> Default for Readings<E, B, L> {
    fn default() -> Self {
        Readings {
            entries: Vec::new(),
            entry_bytes: 0,
            blocks: None,
            limits: None,
            prefixes: PrefixStates::new(PREFIX_BYTES),
            served: 0,
        }
    }
}

impl<E: Entry, B: Kept, L> Readings<E, B, L> {
    /// The entries, and the prefix states to update beside them.
    pub fn parts(&mut self) -> (&[E], &mut PrefixStates) {
        (&self.entries, &mut self.prefixes)
    }

    pub fn entries_mut(&mut self) -> &mut [E] {
        &mut self.entries
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn push(&mut self, entry: E) {
        self.entry_bytes += entry.size();
        self.entries.push(entry);
    }

    /// Push every entry of `entries` in order.
    pub fn extend(&mut self, entries: Vec<E>) {
        self.entry_bytes += entries.iter().map(Entry::size).sum::<usize>();
        if self.entries.is_empty() {
            self.entries = entries; // (a first call's: not moved again)
        } else {
            self.entries.extend(entries);
        }
    }

    /// Keep the first `n` entries: a call served them (the others no
    /// longer match the line).
    pub fn keep_served(&mut self, n: usize) {
        for e in self.entries.drain(n.min(self.entries.len())..) {
            self.entry_bytes -= e.size();
        }
        self.served += n as u64;
    }

    /// Every entry from `from` on keeps the count `tag(i)` this call
    /// measured for it.
    pub fn measured_from(&mut self, from: usize, mut tag: impl FnMut(usize) -> Measured) {
        for (i, e) in self.entries.iter_mut().enumerate().skip(from) {
            e.facts_mut().measured = tag(i);
        }
    }

    /// Estimated bytes held: the entries, the stored prefixes and the kept
    /// blocks.
    pub fn nbytes(&self) -> usize {
        let blocks = self.blocks.as_ref().map_or(0, Kept::nbytes);
        self.entry_bytes + self.prefixes.held_bytes() + blocks
    }
}

struct Slot<R> {
    /// `None` while a call has them out.
    readings: Option<Box<R>>,
    /// Bumped by `clear`: readings given back from before it are dropped.
    generation: u64,
    /// `nbytes` of the readings when last given back.
    nbytes: usize,
    /// Entries calls took from the readings, in all (for tests).
    served: u64,
}

/// Readings lent to one call at a time.
pub struct Lease<E, B, L> {
    slot: Mutex<Slot<Readings<E, B, L>>>,
}

/// Readings out of their [`Lease`] for one call: give them back with
/// [`Lease::give_back`].
pub struct Loan<E, B, L> {
    pub readings: Box<Readings<E, B, L>>,
    generation: u64,
}

impl<E: Entry, B: Kept, L> Default for Lease<E, B, L> {
    fn default() -> Self {
        Lease {
            slot: Mutex::new(Slot {
                readings: Some(Box::default()),
                generation: 0,
                nbytes: 0,
                served: 0,
            }),
        }
    }
}

impl<E: Entry, B: Kept, L> Lease<E, B, L> {
    fn lock(&self) -> MutexGuard<'_, Slot<Readings<E, B, L>>> {
        // (Nothing panics under the lock: a poisoned slot is still whole.)
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The estimated bytes held (as of the last call that gave them back).
    pub fn nbytes(&self) -> usize {
        self.lock().nbytes
    }

    /// Entries calls read from the readings instead of from the line, in all.
    pub fn served(&self) -> u64 {
        self.lock().served
    }

    /// Drop everything held (the line was started again). A call that has
    /// the readings out gives them back to be dropped.
    pub fn clear(&self) {
        let old = {
            let mut slot = self.lock();
            slot.generation += 1;
            slot.nbytes = 0;
            slot.readings.replace(Box::default())
        };
        drop(old); // (outside the lock)
    }

    /// The readings, unless another call has them out.
    pub fn take(&self) -> Option<Loan<E, B, L>> {
        let mut slot = self.lock();
        let readings = slot.readings.take()?;
        Some(Loan {
            readings,
            generation: slot.generation,
        })
    }

    /// The readings back (dropped when the lease was cleared meanwhile).
    pub fn give_back(&self, loan: Loan<E, B, L>) {
        let Loan {
            mut readings,
            generation,
        } = loan;
        let stale = {
            let mut slot = self.lock();
            if slot.generation == generation && slot.readings.is_none() {
                slot.nbytes = readings.nbytes();
                slot.served += std::mem::take(&mut readings.served);
                slot.readings = Some(readings);
                None
            } else {
                Some(readings)
            }
        };
        drop(stale); // (outside the lock)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone)]
    struct E(EntryFacts);

    impl Entry for E {
        fn facts(&self) -> &EntryFacts {
            &self.0
        }
        fn facts_mut(&mut self) -> &mut EntryFacts {
            &mut self.0
        }
    }

    struct Blocks(usize);

    impl Kept for Blocks {
        fn nbytes(&self) -> usize {
            self.0
        }
    }

    type R = Readings<E, Blocks, ()>;

    fn entry(role: ToolRole<'_>) -> E {
        E(EntryFacts::new(
            [7; 32],
            &HistoryItem {
                raw: 0,
                seq: Some(3),
                role,
                hash: 9,
            },
        ))
    }

    #[test]
    fn an_entry_reads_back_its_history_item() {
        let e = entry(ToolRole::Result("call-1"));
        let h = e.facts().history();
        assert_eq!((h.raw, h.seq, h.hash), (0, Some(3), 9));
        assert!(matches!(h.role, ToolRole::Result("call-1")));
        assert!(matches!(
            entry(ToolRole::Other).facts().history().role,
            ToolRole::Other
        ));
        let base = std::mem::size_of::<E>() + ENTRY_OBJECTS;
        assert_eq!(e.size(), base + 6);
        assert_eq!(entry(ToolRole::Call("ab")).size(), base + 2);
    }

    #[test]
    fn extending_counts_as_pushing_each_entry() {
        let all = || [ToolRole::Other, ToolRole::Call("abc"), ToolRole::Other].map(entry);
        let (mut pushed, mut extended) = (R::default(), R::default());
        for e in all() {
            pushed.push(e);
        }
        extended.extend(all()[..1].to_vec());
        extended.extend(all()[1..].to_vec());
        assert_eq!((extended.len(), extended.nbytes()), (3, pushed.nbytes()));
    }

    #[test]
    fn readings_count_their_bytes_as_entries_come_and_go() {
        let mut r = R::default();
        let empty = r.nbytes();
        r.push(entry(ToolRole::Other));
        r.push(entry(ToolRole::Call("abc")));
        r.push(entry(ToolRole::Other));
        let all = r.nbytes();
        assert_eq!(
            all - empty,
            3 * (std::mem::size_of::<E>() + ENTRY_OBJECTS) + 3
        );
        r.keep_served(1);
        assert_eq!(r.len(), 1);
        assert_eq!(r.nbytes() - empty, std::mem::size_of::<E>() + ENTRY_OBJECTS);
        r.blocks = Some(Blocks(100));
        assert_eq!(
            r.nbytes() - empty,
            std::mem::size_of::<E>() + ENTRY_OBJECTS + 100
        );
        r.keep_served(5); // (more than it holds: keeps them all)
        assert_eq!(r.len(), 1);
        assert_eq!(r.served, 6);
    }

    #[test]
    fn measured_counts_are_kept_from_a_point_on() {
        let mut r = R::default();
        for _ in 0..3 {
            r.push(entry(ToolRole::Other));
        }
        r.measured_from(1, |i| Measured {
            raw: i as i64 * 10,
            ..Measured::default()
        });
        let raws: Vec<i64> = r.parts().0.iter().map(|e| e.0.measured.raw).collect();
        assert_eq!(raws, [0, 10, 20]);
    }

    #[test]
    fn a_lease_lends_to_one_call_and_takes_back_what_it_served() {
        let lease: Lease<E, Blocks, ()> = Lease::default();
        let mut loan = lease.take().expect("free");
        assert!(lease.take().is_none(), "out to one call at a time");
        loan.readings.push(entry(ToolRole::Other));
        loan.readings.keep_served(1);
        let nbytes = loan.readings.nbytes();
        lease.give_back(loan);
        assert_eq!((lease.nbytes(), lease.served()), (nbytes, 1));
        let loan = lease.take().expect("back");
        assert_eq!(loan.readings.len(), 1);
        assert_eq!(loan.readings.served, 0, "served moves to the lease");
        lease.give_back(loan);
        assert_eq!(lease.served(), 1);
    }

    #[test]
    fn readings_out_while_the_lease_is_cleared_are_dropped() {
        let lease: Lease<E, Blocks, ()> = Lease::default();
        let mut loan = lease.take().expect("free");
        loan.readings.push(entry(ToolRole::Other));
        lease.clear();
        assert_eq!(lease.nbytes(), 0);
        // The cleared lease lends its fresh readings to another call.
        let other = lease.take().expect("fresh readings");
        assert!(other.readings.is_empty());
        lease.give_back(loan); // stale: dropped
        lease.give_back(other);
        assert!(lease.take().expect("back").readings.is_empty());
    }
}
