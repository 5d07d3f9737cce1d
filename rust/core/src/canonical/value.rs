//! A pure-Rust value tree as a [`Source`]: the walk's own tests drive the
//! exact code the binding drives, with value types and cached items.

use std::cell::RefCell;

use super::source::{Cached, Elem, KeyProblem, Member, Node, Source, WalkError};
use super::walk::Walker;
use crate::error::CoreError;

/// A value as a host would present it.
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    BigInt,
    Float(f64),
    Str(String),
    /// A string with a lone surrogate.
    BadStr,
    Array(Vec<Value>),
    /// Members in insertion order; keys are usually `Str`.
    Object(Vec<(Value, Value)>),
    /// A value type: `to_dict()` returns the boxed value.
    Typed(Box<Value>),
    /// An item: a value type with a cache of its canonical bytes.
    Item(Box<Value>, RefCell<Option<Vec<u8>>>),
}

impl Value {
    pub fn item(dict: Value) -> Value {
        Value::Item(Box::new(dict), RefCell::new(None))
    }

    pub fn obj(members: Vec<(&str, Value)>) -> Value {
        Value::Object(
            members
                .into_iter()
                .map(|(k, v)| (Value::Str(k.to_owned()), v))
                .collect(),
        )
    }

    pub fn cached(&self) -> Option<Vec<u8>> {
        match self {
            Value::Item(_, cache) => cache.borrow().clone(),
            _ => None,
        }
    }
}

/// The canonical bytes of `value`.
pub fn canonical(value: &Value) -> Result<Vec<u8>, CoreError> {
    let mut w = Walker::new(Tree, Vec::new());
    match w.write_root(value as *const Value) {
        Ok(()) => Ok(w.out),
        Err(WalkError::Path(p)) => Err(p.into_error()),
        Err(WalkError::Host(e)) => Err(e),
    }
}

/// Values are borrowed from a tree that outlives the walk.
pub struct Tree;

fn at<'a>(r: *const Value) -> &'a Value {
    // SAFETY: every pointer handed out points into the caller's tree.
    unsafe { &*r }
}

impl Source for Tree {
    type Ref = *const Value;
    type Owned = *const Value;
    type Error = CoreError;

    fn borrow(owned: &*const Value) -> *const Value {
        *owned
    }

    fn identity(value: *const Value) -> usize {
        value as usize
    }

    unsafe fn classify<'a>(&mut self, value: *const Value) -> Result<Node<'a>, CoreError> {
        Ok(match at(value) {
            Value::Null => Node::Null,
            Value::Bool(b) => Node::Bool(*b),
            Value::Int(i) => Node::Int(*i),
            Value::BigInt => Node::BigInt,
            Value::Float(f) => Node::Float(*f),
            Value::Str(s) => Node::Str(s.as_bytes()),
            Value::BadStr => Node::Reject(super::REASON_SURROGATE.to_owned()),
            Value::Array(_) => Node::Seq,
            Value::Object(_) => Node::Map,
            Value::Typed(_) => Node::Object { item: false },
            Value::Item(..) => Node::Object { item: true },
        })
    }

    unsafe fn type_name(&mut self, value: *const Value) -> String {
        match at(value) {
            Value::Object(_) => "dict",
            Value::Array(_) => "list",
            Value::Str(_) => "str",
            Value::Typed(_) => "Typed",
            Value::Item(..) => "Item",
            _ => "scalar",
        }
        .to_owned()
    }

    unsafe fn seq_item(
        &mut self,
        seq: *const Value,
        index: usize,
    ) -> Option<Elem<*const Value, *const Value>> {
        match at(seq) {
            Value::Array(items) => items.get(index).map(|v| Elem::Borrowed(v as *const Value)),
            _ => None,
        }
    }

    unsafe fn map_members(
        &mut self,
        map: *const Value,
        out: &mut Vec<Member<*const Value>>,
    ) -> Result<(), CoreError> {
        if let Value::Object(members) = at(map) {
            for (k, v) in members {
                out.push(Member::new(k as *const Value, v as *const Value));
            }
        }
        Ok(())
    }

    unsafe fn key_text<'a>(
        &mut self,
        key: *const Value,
    ) -> Result<Result<&'a [u8], KeyProblem>, CoreError> {
        Ok(match at(key) {
            Value::Str(s) => Ok(s.as_bytes()),
            Value::BadStr => Err(KeyProblem::Surrogate("'\\ud800'".into())),
            Value::Int(i) => Err(KeyProblem::NotStr(i.to_string())),
            _ => Err(KeyProblem::NotStr("?".into())),
        })
    }

    unsafe fn to_dict(&mut self, value: *const Value) -> Result<*const Value, CoreError> {
        match at(value) {
            Value::Typed(inner) | Value::Item(inner, _) => Ok(inner.as_ref() as *const Value),
            _ => Err(CoreError::estimator("not a value type")),
        }
    }

    unsafe fn item_cache(
        &mut self,
        item: *const Value,
    ) -> Result<Option<Cached<*const Value>>, CoreError> {
        Ok(match at(item) {
            Value::Item(_, cache) => cache.borrow().as_ref().map(|b| Cached::new(item, b)),
            _ => None,
        })
    }

    unsafe fn store_item_cache(
        &mut self,
        item: *const Value,
        bytes: &[u8],
        _digest: &[u8; 32],
    ) -> Result<Cached<*const Value>, CoreError> {
        match at(item) {
            Value::Item(_, cache) => {
                *cache.borrow_mut() = Some(bytes.to_vec());
                let held = cache.borrow();
                let b = held.as_ref().map(|b| b.as_slice()).unwrap_or_default();
                Ok(Cached::new(item, b))
            }
            _ => Err(CoreError::estimator("not an item")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{REASON_DEPTH, REASON_NAN};
    use super::*;

    fn err(path: &str, reason: &str) -> Result<Vec<u8>, CoreError> {
        Err(CoreError::canonicalization(path, reason))
    }

    #[test]
    fn values_canonicalize_with_paths() {
        let v = Value::obj(vec![
            (
                "b",
                Value::Array(vec![Value::Int(1), Value::Float(2.5), Value::Null]),
            ),
            ("a", Value::Bool(true)),
        ]);
        assert_eq!(canonical(&v).unwrap(), b"{\"a\":true,\"b\":[1,2.5,null]}");
        let bad = Value::obj(vec![(
            "x",
            Value::Array(vec![Value::Int(0), Value::Float(f64::NAN)]),
        )]);
        assert_eq!(canonical(&bad), err("$.x[1]", REASON_NAN));
        let key = Value::Object(vec![(Value::Int(3), Value::Null)]);
        assert_eq!(canonical(&key), err("$", "object key 3 is not a string"));
        assert_eq!(
            canonical(&Value::BigInt),
            err("$", super::super::REASON_INT_RANGE)
        );
        let surrogate = Value::Array(vec![Value::Null, Value::BadStr]);
        let reason = super::super::REASON_SURROGATE;
        assert_eq!(canonical(&surrogate), err("$[1]", reason));
        let key = Value::Object(vec![(Value::BadStr, Value::Null)]);
        let reason = "lone surrogate in object key '\\ud800'";
        assert_eq!(canonical(&key), err("$", reason));
    }

    fn nested(levels: usize, wrap: impl Fn(Value) -> Value) -> Value {
        let mut v = Value::Null;
        for _ in 0..levels {
            v = wrap(v);
        }
        v
    }

    #[test]
    fn depth_limit() {
        let v = nested(128, |v| Value::Array(vec![v]));
        assert!(canonical(&v).is_ok());
        let v = Value::Array(vec![v]);
        let want_path = format!("${}", "[0]".repeat(128));
        assert_eq!(canonical(&v), err(&want_path, REASON_DEPTH));
    }

    #[test]
    fn value_types_are_one_level_each() {
        // 64 value types over 64 dicts: 128 levels.
        let wrap = |v| {
            Value::Typed(Box::new(Value::obj(vec![(
                "x",
                Value::obj(vec![("y", v)]),
            )])))
        };
        let ok = nested(64, wrap);
        assert!(canonical(&ok).is_ok());
        let deep = Value::Array(vec![ok]);
        let path = format!("$[0]{}", ".x.y".repeat(63));
        assert_eq!(canonical(&deep), err(&format!("{path}.x"), REASON_DEPTH));
    }

    #[test]
    fn items_share_the_budget_of_the_enclosing_value() {
        let wrap = |v| Value::item(Value::obj(vec![("args", Value::obj(vec![("x", v)]))]));
        let items = nested(64, wrap);
        let bytes = canonical(&items).unwrap();
        // A cached item counts the levels its bytes nest, wherever it goes.
        assert_eq!(items.cached(), Some(bytes.clone()));
        let one_deeper = Value::Array(vec![items]);
        let path = format!("$[0]{}", ".args.x".repeat(63));
        assert_eq!(
            canonical(&one_deeper),
            err(&format!("{path}.args"), REASON_DEPTH)
        );
        // And freshly, with no cache: the same error, the same path.
        let fresh = Value::Array(vec![nested(64, wrap)]);
        assert_eq!(
            canonical(&fresh),
            err(&format!("{path}.args"), REASON_DEPTH)
        );
        // A long chain stops at the budget instead of running down the stack.
        let chain = nested(1000, wrap);
        let path = format!("${}", ".args.x".repeat(63));
        assert_eq!(
            canonical(&chain),
            err(&format!("{path}.args.x"), REASON_DEPTH)
        );
    }

    #[test]
    fn to_dict_must_return_a_dict() {
        let v = Value::obj(vec![("t", Value::Typed(Box::new(Value::Array(vec![]))))]);
        assert_eq!(
            canonical(&v),
            err("$.t", "Typed.to_dict() returned list, not a dict")
        );
        let chain = Value::Typed(Box::new(Value::Typed(Box::new(Value::obj(vec![])))));
        assert_eq!(
            canonical(&chain),
            err("$", "Typed.to_dict() returned Typed, not a dict")
        );
    }
}
