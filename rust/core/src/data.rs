//! Plain data the core hands back to a host in one piece (a snapshot, a
//! table of numbers): the binding converts a [`Data`] to Python objects in
//! one place, so no output needs a hand-written builder of its own.

/// A JSON-like value with insertion-ordered mappings (a Python dict's order).
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    None,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    List(Vec<Data>),
    Dict(Vec<(String, Data)>),
}

impl Data {
    /// A dict of `(key, value)` pairs, in order.
    pub fn dict<K: Into<String>>(pairs: impl IntoIterator<Item = (K, Data)>) -> Data {
        Data::Dict(pairs.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    /// An int.
    pub fn int(n: impl Into<i128>) -> Data {
        Data::Int(n.into())
    }

    /// A mapping member's value (`None`: not a dict, or no such key).
    pub fn get(&self, key: &str) -> Option<&Data> {
        match self {
            Data::Dict(pairs) => pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

impl From<&str> for Data {
    fn from(s: &str) -> Data {
        Data::Str(s.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dicts_keep_their_order() {
        let d = Data::dict([("b", Data::int(1u8)), ("a", Data::from("x"))]);
        assert_eq!(d.get("a"), Some(&Data::Str("x".to_owned())));
        assert_eq!(d.get("c"), None);
        let Data::Dict(pairs) = &d else {
            panic!("a dict")
        };
        assert_eq!(pairs[0].0, "b");
        assert_eq!(Data::int(u64::MAX), Data::Int(u64::MAX as i128));
    }
}
