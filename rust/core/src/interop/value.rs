//! A read-only view of a foreign JSON-shaped value (a message dict, its
//! content list, a string), so the conversions in this module read Python
//! objects in the binding and parsed JSON in the tests through one seam.
//!
//! Every check is exact-type, as the binding's fast path needs: a `str`
//! subclass, a `bool` where an int is expected or a dict subclass is not
//! the plain shape, and the caller hands the value to the reference.

use crate::decode::Json;

pub trait Value: Sized {
    /// An exact string (one that is valid UTF-8: no lone surrogates).
    fn str(&self) -> Option<&str>;
    /// An exact int (not a bool) within 64 bits.
    fn int(&self) -> Option<i64>;
    /// An exact bool.
    fn bool(&self) -> Option<bool>;
    fn is_null(&self) -> bool;
    /// An exact dict's member count; `None` for anything else.
    fn dict_len(&self) -> Option<usize>;
    /// An exact dict's member `key`.
    fn get(&self, key: &str) -> Option<Self>;
    /// Each member of an exact dict, in order, until `f` says stop (`None`);
    /// `None` when this is not one or `f` stopped. The key is `None` when it
    /// is not an exact string.
    fn members(&self, f: impl FnMut(Option<&str>, Self) -> Option<()>) -> Option<()>;
    /// Each element of an exact list, as [`Value::members`].
    fn elements(&self, f: impl FnMut(Self) -> Option<()>) -> Option<()>;

    /// An exact string's length in code points (Python's `len`).
    fn chars(&self) -> Option<usize> {
        self.str().map(|s| s.chars().count())
    }
    /// An exact int (not a bool, not a subclass) within 64 bits.
    fn exact_int(&self) -> Option<i64> {
        self.int()
    }
    /// Its truth, as Python's `bool(v)` (`None`: the host cannot tell).
    fn truthy(&self) -> Option<bool>;
    /// Each element of an exact tuple, as [`Value::members`].
    fn tuple_elements(&self, _f: impl FnMut(Self) -> Option<()>) -> Option<()> {
        None
    }
    /// The length of its `repr`, as the host writes it (`None`: the host
    /// cannot tell).
    fn repr_len(&self) -> Option<usize> {
        None
    }
}

/// Parsed JSON reads as the values `json.loads` gives.
impl<'j, 'a> Value for &'j Json<'a> {
    fn str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }
    fn int(&self) -> Option<i64> {
        match self {
            Json::Int(i) => Some(*i),
            _ => None,
        }
    }
    fn bool(&self) -> Option<bool> {
        match self {
            Json::Bool(b) => Some(*b),
            _ => None,
        }
    }
    fn is_null(&self) -> bool {
        matches!(self, Json::Null)
    }
    fn dict_len(&self) -> Option<usize> {
        match self {
            Json::Object(m) => Some(m.len()),
            _ => None,
        }
    }
    fn get(&self, key: &str) -> Option<Self> {
        Json::get(self, key)
    }
    fn members(&self, mut f: impl FnMut(Option<&str>, Self) -> Option<()>) -> Option<()> {
        let Json::Object(m) = self else {
            return None;
        };
        for (k, v) in m {
            f(Some(k), v)?;
        }
        Some(())
    }
    fn elements(&self, mut f: impl FnMut(Self) -> Option<()>) -> Option<()> {
        let Json::Array(a) = self else {
            return None;
        };
        for v in a {
            f(v)?;
        }
        Some(())
    }
    fn truthy(&self) -> Option<bool> {
        Some(match self {
            Json::Null => false,
            Json::Bool(b) => *b,
            Json::Int(i) => *i != 0,
            Json::Float(f) => *f != 0.0,
            Json::Str(s) => !s.is_empty(),
            Json::Array(a) => !a.is_empty(),
            Json::Object(m) => !m.is_empty(),
        })
    }
}
