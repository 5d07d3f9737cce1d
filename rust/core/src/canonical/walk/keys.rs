//! Mapping keys: checked in iteration order, sorted by UTF-16 code units,
//! and the orders of recent key sets kept (records in a list share them).

use std::rc::Rc;

use super::{fail, Walker};
use crate::canonical::source::{Source, WalkError};
use crate::canonical::text::{cmp_utf16, write_str};

/// The member order of a mapping's keys: a run of mappings with the same
/// key objects (records in a list) is checked and sorted once. Holds the
/// keys, so an identity met again is the same key.
pub(super) struct KeyOrder<O> {
    pub(super) keys: Vec<O>,
    /// For each written position, the index of the member in iteration order.
    pub(super) order: Vec<u32>,
    /// `"key":` of each written position, back to back; `ends` delimits them.
    pub(super) text: Vec<u8>,
    pub(super) ends: Vec<u32>,
}

/// Key orders kept per walk.
const KEY_ORDERS: usize = 8;
impl<S: Source> Walker<S> {
    /// Check the keys of `members[start..]` in iteration order (the first
    /// bad one is the error) and note their UTF-8.
    pub(super) fn check_keys(&mut self, start: usize) -> Result<(), WalkError<S::Error>> {
        for i in start..self.members.len() {
            let key = S::borrow(&self.members[i].key);
            // SAFETY: held by the member.
            match unsafe { self.source.key_text(key) }.map_err(WalkError::Host)? {
                Ok(text) => {
                    let m = &mut self.members[i];
                    m.text = text.as_ptr();
                    m.len = text.len();
                }
                Err(problem) => return fail(problem.reason()),
            }
        }
        Ok(())
    }

    /// Check and sort the keys of `members[start..]`, recording the order
    /// (replacing the least recently used one).
    pub(super) fn key_order(
        &mut self,
        start: usize,
    ) -> Result<Rc<KeyOrder<S::Owned>>, WalkError<S::Error>> {
        self.check_keys(start)?;
        let members = &self.members[start..];
        let n = members.len();
        let mut order: Vec<u32> = (0..n as u32).collect();
        if n > 1 {
            order.sort_unstable_by(|&a, &b| {
                cmp_utf16(members[a as usize].text(), members[b as usize].text())
            });
        }
        let mut text = Vec::new();
        let mut ends = Vec::with_capacity(n + 1);
        ends.push(0u32);
        for &i in &order {
            write_str(&mut text, members[i as usize].text());
            text.push(b':');
            ends.push(text.len() as u32);
        }
        let recorded = Rc::new(KeyOrder {
            keys: members.iter().map(|m| m.key.clone()).collect(),
            order,
            text,
            ends,
        });
        self.order_clock += 1;
        let entry = (self.order_clock, Rc::clone(&recorded));
        if self.orders.len() < KEY_ORDERS {
            self.orders.push(entry);
        } else if let Some(oldest) = self.orders.iter_mut().min_by_key(|(used, _)| *used) {
            *oldest = entry;
        }
        Ok(recorded)
    }
}
