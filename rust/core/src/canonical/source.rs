//! What the walk asks of a host ([`Source`]) and what it hands back: the
//! kinds of value ([`Node`]), mapping members, cached item bytes, failures.

use super::path::PathError;

/// What one value is, as the walk needs to know it. Strings borrow the
/// host's UTF-8 (valid while the value is).
pub enum Node<'a> {
    Null,
    Bool(bool),
    /// An integer within 64 bits (the walk checks the safe range).
    Int(i64),
    /// An integer beyond 64 bits.
    BigInt,
    Float(f64),
    Str(&'a [u8]),
    /// A sequence: its elements through [`Source::seq_item`].
    Seq,
    /// A mapping: its members through [`Source::map_members`].
    Map,
    /// A value type, written as its `to_dict()`. An `item` carries a cache
    /// of its canonical bytes ([`Source::item_cache`]).
    Object {
        item: bool,
    },
    /// Not accepted; the reason names why.
    Reject(String),
}

/// Why a mapping key is refused.
pub enum KeyProblem {
    /// Not a string: the key's repr.
    NotStr(String),
    /// A string subclass that is not accepted: its type name.
    Subclass(String),
    /// A lone surrogate: the repr of the key's string data.
    Surrogate(String),
}

impl KeyProblem {
    pub fn reason(self) -> String {
        match self {
            KeyProblem::NotStr(repr) => format!("object key {repr} is not a string"),
            KeyProblem::Subclass(type_name) => {
                format!("object key of unsupported subclass {type_name} of str")
            }
            KeyProblem::Surrogate(repr) => format!("lone surrogate in object key {repr}"),
        }
    }
}

/// An element of a sequence: borrowed when the sequence cannot change
/// while the walk runs host code, else held.
pub enum Elem<R, O> {
    Borrowed(R),
    Held(O),
}

/// A mapping member, held while it waits to be written in key order
/// (host code run mid-walk cannot free it).
pub struct Member<O> {
    pub(super) key: O,
    pub(super) value: O,
    pub(super) text: *const u8,
    pub(super) len: usize,
}

impl<O> Member<O> {
    pub fn new(key: O, value: O) -> Self {
        Member {
            key,
            value,
            text: std::ptr::null(),
            len: 0,
        }
    }

    #[inline]
    pub(super) fn text(&self) -> &[u8] {
        // SAFETY: set from the key's UTF-8, which lives as long as `key`.
        unsafe { std::slice::from_raw_parts(self.text, self.len) }
    }
}

/// An item's cached canonical bytes, with whatever keeps them alive.
pub struct Cached<O> {
    pub(super) keep: O,
    pub(super) bytes: *const u8,
    pub(super) len: usize,
}

impl<O> Cached<O> {
    /// # Safety
    /// `bytes` must stay valid and unchanged while `keep` lives.
    pub unsafe fn new(keep: O, bytes: &[u8]) -> Self {
        Cached {
            keep,
            bytes: bytes.as_ptr(),
            len: bytes.len(),
        }
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the constructor's contract.
        unsafe { std::slice::from_raw_parts(self.bytes, self.len) }
    }

    pub fn keep(&self) -> &O {
        &self.keep
    }

    pub fn into_keep(self) -> O {
        self.keep
    }
}

/// The host side of the walk: what each value is. Every `unsafe` method
/// takes a `Ref` that must be alive (the walk holds whatever keeps it).
pub trait Source {
    /// A borrowed handle to a value.
    type Ref: Copy;
    /// A handle that keeps its value alive.
    type Owned: Clone;
    /// An error raised by host code (a failing `to_dict()`).
    type Error;

    fn borrow(owned: &Self::Owned) -> Self::Ref;
    /// The value's identity (cycle checks, key-order reuse).
    fn identity(value: Self::Ref) -> usize;
    /// # Safety
    /// `value` is alive; the node's bytes are used before it can go.
    unsafe fn classify<'a>(&mut self, value: Self::Ref) -> Result<Node<'a>, Self::Error>;
    /// # Safety
    /// `value` is alive.
    unsafe fn type_name(&mut self, value: Self::Ref) -> String;
    /// Element `index` of a sequence, `None` past its end (read afresh
    /// each time: host code may change it).
    ///
    /// # Safety
    /// `seq` is alive and classified [`Node::Seq`].
    unsafe fn seq_item(
        &mut self,
        seq: Self::Ref,
        index: usize,
    ) -> Option<Elem<Self::Ref, Self::Owned>>;
    /// Push the members of a mapping, in iteration order.
    ///
    /// # Safety
    /// `map` is alive and classified [`Node::Map`].
    unsafe fn map_members(
        &mut self,
        map: Self::Ref,
        out: &mut Vec<Member<Self::Owned>>,
    ) -> Result<(), Self::Error>;
    /// The UTF-8 of a mapping key, or why it is refused.
    ///
    /// # Safety
    /// `key` is alive; the bytes are used only while it is.
    unsafe fn key_text<'a>(
        &mut self,
        key: Self::Ref,
    ) -> Result<Result<&'a [u8], KeyProblem>, Self::Error>;
    /// # Safety
    /// `value` is alive and classified [`Node::Object`].
    unsafe fn to_dict(&mut self, value: Self::Ref) -> Result<Self::Owned, Self::Error>;
    /// The item's cached canonical bytes, if filled.
    ///
    /// # Safety
    /// `item` is alive and classified `Node::Object { item: true }`.
    unsafe fn item_cache(
        &mut self,
        item: Self::Ref,
    ) -> Result<Option<Cached<Self::Owned>>, Self::Error>;
    /// Fill the item's cache; returns the filled cache.
    ///
    /// # Safety
    /// As [`Source::item_cache`].
    unsafe fn store_item_cache(
        &mut self,
        item: Self::Ref,
        bytes: &[u8],
        digest: &[u8; 32],
    ) -> Result<Cached<Self::Owned>, Self::Error>;
}

/// A walk failure: a canonicalization error whose path is completed as
/// the walk unwinds, or an error raised by host code.
pub enum WalkError<E> {
    Path(PathError),
    Host(E),
}

impl<E> WalkError<E> {
    #[inline]
    pub(super) fn in_key(self, key: &[u8]) -> Self {
        match self {
            WalkError::Path(p) => WalkError::Path(p.in_key(&String::from_utf8_lossy(key))),
            other => other,
        }
    }

    #[inline]
    pub(super) fn in_index(self, index: usize) -> Self {
        match self {
            WalkError::Path(p) => WalkError::Path(p.in_index(index)),
            other => other,
        }
    }
}
