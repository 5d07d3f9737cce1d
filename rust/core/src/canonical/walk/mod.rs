//! The one walk every value goes through on its way to canonical bytes.
//!
//! A [`Source`] (the Python binding; [`super::value`] in tests) says what
//! each value is and hands out its members; the walk owns every rule: the
//! dispatch, one nesting budget for the whole value (each mapping, sequence
//! and value type counts one level, items nested in items included), cycle
//! checks, key order, splicing of cached item bytes, paths of failures. The
//! walk is the only place that recurses, and every recursion goes through
//! [`Walker::enter`], so no input can take it deeper than [`MAX_DEPTH`]
//! levels (a native stack overflow is not a reachable outcome).

mod keys;

use std::rc::Rc;

use super::nesting::nesting_within;
use super::path::PathError;
use super::source::{Cached, Elem, Member, Node, Source, WalkError};
use super::text::{cmp_utf16, write_str};
use super::{
    number, reason_to_dict_result, MAX_DEPTH, REASON_CYCLE, REASON_DEPTH, REASON_INT_RANGE,
    REASON_ITEM_CYCLE, REASON_VALUE_CYCLE,
};
use crate::hash::{sha256, StreamHasher};
use keys::KeyOrder;

#[cold]
fn fail<T, E>(reason: impl Into<String>) -> Result<T, WalkError<E>> {
    Err(WalkError::Path(PathError::new(reason)))
}

/// Streamed hashing sends chunks of this size after the first.
const STREAM_CHUNK: usize = 64 * 1024;
/// A spare item buffer larger than this is dropped rather than kept.
const SPARE_LIMIT: usize = 1 << 20;

/// One walk's state: the output, the ancestors (cycle checks) and the
/// scratch space shared by every level.
pub struct Walker<S: Source> {
    pub source: S,
    pub out: Vec<u8>,
    ancestors: Vec<usize>,
    members: Vec<Member<S::Owned>>,
    /// Key orders of recent mappings: (last use, order).
    orders: Vec<(u64, Rc<KeyOrder<S::Owned>>)>,
    order_clock: u64,
    /// Mappings met with and without a recorded order in this walk: orders
    /// are recorded while that pays (many key sets alternating do not).
    order_hits: u64,
    order_misses: u64,
    /// The last float written and its text (payloads repeat values).
    last_float: Option<(u64, [u8; 32], usize)>,
    /// A buffer for item bytes, reused across items.
    spare: Vec<u8>,
    /// Hand `out` to `stream` whenever it reaches this length.
    flush_at: usize,
    stream: Option<StreamHasher>,
}

impl<S: Source> Walker<S> {
    pub fn new(source: S, out: Vec<u8>) -> Self {
        Walker {
            source,
            out,
            ancestors: Vec::new(),
            members: Vec::new(),
            orders: Vec::new(),
            order_clock: 0,
            order_hits: 0,
            order_misses: 0,
            last_float: None,
            spare: Vec::new(),
            flush_at: usize::MAX,
            stream: None,
        }
    }

    /// Hash the output while walking: once it reaches `start_at` bytes,
    /// full chunks are hashed as they are made (on a worker thread once it
    /// is up); see [`Walker::finish_stream`].
    pub fn streaming(mut self, start_at: usize) -> Self {
        self.flush_at = start_at;
        self
    }

    /// The digest of everything written when the output was streamed
    /// (`None` when it never reached the streaming size: hash `out`), and
    /// the output buffer (only the unstreamed tail when streamed).
    pub fn finish_stream(mut self) -> (Option<Option<[u8; 32]>>, Vec<u8>) {
        let out = std::mem::take(&mut self.out);
        match self.stream.take() {
            Some(stream) => match stream.finish(&out) {
                Some((digest, spare)) => {
                    let keep = if spare.capacity() > out.capacity() {
                        spare
                    } else {
                        out
                    };
                    (Some(Some(digest)), keep)
                }
                None => (Some(None), out),
            },
            None => (None, out),
        }
    }

    #[cold]
    fn flush(&mut self) {
        let stream = self.stream.get_or_insert_with(StreamHasher::new);
        let full = std::mem::take(&mut self.out);
        // Chunk buffers stay below the allocator's mmap threshold, so they
        // are reused rather than mapped and faulted in each time.
        self.out = stream.push(full, STREAM_CHUNK + STREAM_CHUNK / 4);
        self.flush_at = STREAM_CHUNK;
    }

    #[inline(always)]
    fn maybe_flush(&mut self) {
        if self.out.len() >= self.flush_at {
            self.flush();
        }
    }

    /// Append the canonical bytes of a root value.
    pub fn write_root(&mut self, value: S::Ref) -> Result<(), WalkError<S::Error>> {
        self.ancestors.clear();
        self.members.clear();
        self.value(value, 0)
    }

    /// Append the canonical bytes of a root value to `out` (not streamed).
    pub fn root_into(
        &mut self,
        value: S::Ref,
        out: &mut Vec<u8>,
    ) -> Result<(), WalkError<S::Error>> {
        self.with_output(out, |w| w.write_root(value))
    }

    /// Append the canonical bytes of an item's `to_dict()` to `out`, the
    /// item a root (its cache is neither read nor filled: the caller
    /// stores it). On error `out` may hold a partial tail.
    pub fn item_into(
        &mut self,
        item: S::Ref,
        out: &mut Vec<u8>,
    ) -> Result<(), WalkError<S::Error>> {
        self.ancestors.clear();
        self.members.clear();
        self.with_output(out, |w| w.object_fresh(item, 0, true))
    }

    /// The item's cache, filled on first use (the item a root).
    pub fn item_cache(&mut self, item: S::Ref) -> Result<Cached<S::Owned>, WalkError<S::Error>> {
        // SAFETY: the caller holds `item`.
        if let Some(c) = unsafe { self.source.item_cache(item) }.map_err(WalkError::Host)? {
            return Ok(c);
        }
        self.ancestors.clear();
        self.members.clear();
        self.item_fresh(item, 0)
    }

    /// Run `f` with `out` standing in for the output (never streamed).
    fn with_output<T>(
        &mut self,
        out: &mut Vec<u8>,
        f: impl FnOnce(&mut Self) -> Result<T, WalkError<S::Error>>,
    ) -> Result<T, WalkError<S::Error>> {
        let flush_at = std::mem::replace(&mut self.flush_at, usize::MAX);
        let saved = std::mem::replace(&mut self.out, std::mem::take(out));
        let result = f(self);
        *out = std::mem::replace(&mut self.out, saved);
        self.flush_at = flush_at;
        result
    }

    /// The one gate of every level: cycle check first, then the budget;
    /// `level` is the parent's (0 at the root).
    #[inline]
    fn enter(
        &mut self,
        id: usize,
        level: usize,
        cycle: &'static str,
    ) -> Result<(), WalkError<S::Error>> {
        if self.ancestors.contains(&id) {
            return fail(cycle);
        }
        if level >= MAX_DEPTH {
            return fail(REASON_DEPTH);
        }
        self.ancestors.push(id);
        Ok(())
    }

    /// Append `value`, whose parent sits at `level` (0 for the root).
    fn value(&mut self, value: S::Ref, level: usize) -> Result<(), WalkError<S::Error>> {
        // SAFETY: every value reaching here is held by the caller or by a
        // parent's member list.
        let node = unsafe { self.source.classify(value) }.map_err(WalkError::Host)?;
        match node {
            Node::Str(s) => self.string(s),
            Node::Map => return self.map(value, level),
            Node::Seq => return self.seq(value, level),
            Node::Null => self.out.extend_from_slice(b"null"),
            Node::Bool(true) => self.out.extend_from_slice(b"true"),
            Node::Bool(false) => self.out.extend_from_slice(b"false"),
            Node::Int(v) => self.int(v)?,
            Node::BigInt => return fail(REASON_INT_RANGE),
            Node::Float(v) => self.float(v)?,
            Node::Object { item } => return self.object(value, level, item),
            Node::Reject(reason) => return fail(reason),
        }
        Ok(())
    }

    #[inline(never)]
    fn string(&mut self, s: &[u8]) {
        write_str(&mut self.out, s);
    }

    #[inline(never)]
    fn int(&mut self, v: i64) -> Result<(), WalkError<S::Error>> {
        number::write_int(&mut self.out, v).or_else(fail)
    }

    // Out of line: the recursion's frames stay small.
    #[inline(never)]
    fn float(&mut self, v: f64) -> Result<(), WalkError<S::Error>> {
        if let Some((bits, text, len)) = &self.last_float {
            if v.to_bits() == *bits {
                self.out.extend_from_slice(&text[..*len]);
                return Ok(());
            }
        }
        let start = self.out.len();
        number::write_f64(&mut self.out, v).or_else(fail)?;
        let written = &self.out[start..];
        if written.len() <= 32 {
            let mut text = [0u8; 32];
            text[..written.len()].copy_from_slice(written);
            self.last_float = Some((v.to_bits(), text, written.len()));
        }
        Ok(())
    }

    fn seq(&mut self, seq: S::Ref, level: usize) -> Result<(), WalkError<S::Error>> {
        self.enter(S::identity(seq), level, REASON_CYCLE)?;
        self.out.push(b'[');
        let mut i = 0;
        let result = loop {
            // SAFETY: `seq` is alive (held by our caller).
            let Some(elem) = (unsafe { self.source.seq_item(seq, i) }) else {
                break Ok(());
            };
            if i > 0 {
                self.out.push(b',');
            }
            let r = match &elem {
                Elem::Borrowed(r) => self.value(*r, level + 1),
                Elem::Held(o) => self.value(S::borrow(o), level + 1),
            };
            if let Err(e) = r {
                break Err(e.in_index(i));
            }
            self.maybe_flush();
            i += 1;
        };
        self.ancestors.pop();
        result?;
        self.out.push(b']');
        Ok(())
    }

    fn map(&mut self, map: S::Ref, level: usize) -> Result<(), WalkError<S::Error>> {
        self.enter(S::identity(map), level, REASON_CYCLE)?;
        let start = self.members.len();
        let result = self.map_members(map, level, start);
        self.members.truncate(start);
        self.ancestors.pop();
        result
    }

    fn map_members(
        &mut self,
        map: S::Ref,
        level: usize,
        start: usize,
    ) -> Result<(), WalkError<S::Error>> {
        // SAFETY: `map` is alive (held by our caller).
        unsafe { self.source.map_members(map, &mut self.members) }.map_err(WalkError::Host)?;
        let n = self.members.len() - start;
        // The same key objects as a recent mapping: its order and key text.
        let hit = self.orders.iter().position(|(_, o)| {
            o.keys.len() == n
                && o.keys
                    .iter()
                    .zip(&self.members[start..])
                    .all(|(a, b)| S::identity(S::borrow(a)) == S::identity(S::borrow(&b.key)))
        });
        let o = match hit {
            Some(i) => {
                self.order_hits += 1;
                self.order_clock += 1;
                self.orders[i].0 = self.order_clock;
                // (Shared: a nested mapping may replace the slot meanwhile.)
                Rc::clone(&self.orders[i].1)
            }
            None => {
                self.order_misses += 1;
                if self.order_misses > 64 && self.order_hits < self.order_misses {
                    return self.map_sorted(start, level);
                }
                self.key_order(start)?
            }
        };
        self.out.push(b'{');
        for j in 0..n {
            let at = o.order[j] as usize;
            if j > 0 {
                self.out.push(b',');
            }
            self.out
                .extend_from_slice(&o.text[o.ends[j] as usize..o.ends[j + 1] as usize]);
            let value = S::borrow(&self.members[start + at].value);
            if let Err(e) = self.value(value, level + 1) {
                let key = S::borrow(&o.keys[at]);
                // SAFETY: the key is held by the order; checked before.
                let text = match unsafe { self.source.key_text(key) } {
                    Ok(Ok(t)) => t,
                    _ => &[],
                };
                return Err(e.in_key(text));
            }
            self.maybe_flush();
        }
        self.out.push(b'}');
        Ok(())
    }

    /// The members of `members[start..]` sorted in place and written, no
    /// order recorded.
    fn map_sorted(&mut self, start: usize, level: usize) -> Result<(), WalkError<S::Error>> {
        self.check_keys(start)?;
        let members = &mut self.members[start..];
        if members.len() > 1 {
            members.sort_unstable_by(|a, b| cmp_utf16(a.text(), b.text()));
        }
        self.out.push(b'{');
        for i in start..self.members.len() {
            if i > start {
                self.out.push(b',');
            }
            let (text, value) = {
                let m = &self.members[i];
                // SAFETY: the text lives in the key, held by the member
                // (which stays in `members` until this mapping is done).
                let text: &[u8] = unsafe { std::slice::from_raw_parts(m.text, m.len) };
                (text, S::borrow(&m.value))
            };
            write_str(&mut self.out, text);
            self.out.push(b':');
            if let Err(e) = self.value(value, level + 1) {
                return Err(e.in_key(text));
            }
            self.maybe_flush();
        }
        self.out.push(b'}');
        Ok(())
    }

    /// A value type at `level + 1`: an item splices its cached bytes when
    /// they fit the budget left; anything else is its `to_dict()`.
    fn object(
        &mut self,
        value: S::Ref,
        level: usize,
        item: bool,
    ) -> Result<(), WalkError<S::Error>> {
        if !item {
            return self.object_fresh(value, level, false);
        }
        // SAFETY: `value` is alive (held by our caller).
        match unsafe { self.source.item_cache(value) }.map_err(WalkError::Host)? {
            Some(c) => {
                if self.ancestors.contains(&S::identity(value)) {
                    return fail(REASON_ITEM_CYCLE);
                }
                if level < MAX_DEPTH && nesting_within(c.bytes(), MAX_DEPTH - level) {
                    self.out.extend_from_slice(c.bytes());
                    return Ok(());
                }
                // Too deep here: walk it to name the path (the cache stays).
                self.object_fresh(value, level, true)
            }
            None => {
                let c = self.item_fresh(value, level)?;
                self.out.extend_from_slice(c.bytes());
                Ok(())
            }
        }
    }

    /// An item not cached yet: its bytes (the item at `level + 1`, error
    /// paths continuing the enclosing walk's), then its cache filled.
    fn item_fresh(
        &mut self,
        item: S::Ref,
        level: usize,
    ) -> Result<Cached<S::Owned>, WalkError<S::Error>> {
        let mut bytes = std::mem::take(&mut self.spare);
        bytes.clear();
        let result = self
            .with_output(&mut bytes, |w| w.object_fresh(item, level, true))
            .and_then(|()| {
                // SAFETY: the caller holds `item`.
                unsafe { self.source.store_item_cache(item, &bytes, &sha256(&bytes)) }
                    .map_err(WalkError::Host)
            });
        if bytes.capacity() <= SPARE_LIMIT {
            self.spare = bytes;
        }
        result
    }

    /// A value type written as its `to_dict()`, which must be a dict: the
    /// hop and the dict are one level (so an item is one JSON object, and
    /// its bytes' nesting is the levels it takes).
    fn object_fresh(
        &mut self,
        value: S::Ref,
        level: usize,
        item: bool,
    ) -> Result<(), WalkError<S::Error>> {
        let cycle = if item {
            REASON_ITEM_CYCLE
        } else {
            REASON_VALUE_CYCLE
        };
        self.enter(S::identity(value), level, cycle)?;
        // SAFETY (all below): `value` is alive; `dict` is held here.
        let result = (|| {
            let dict = unsafe { self.source.to_dict(value) }.map_err(WalkError::Host)?;
            let d = S::borrow(&dict);
            match unsafe { self.source.classify(d) }.map_err(WalkError::Host)? {
                Node::Map => {}
                _ => {
                    let (t, r) =
                        unsafe { (self.source.type_name(value), self.source.type_name(d)) };
                    return fail(reason_to_dict_result(&t, &r));
                }
            }
            self.map(d, level)
        })();
        self.ancestors.pop();
        result
    }
}
