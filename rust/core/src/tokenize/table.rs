//! Model id -> counting method: a table of model-id prefixes, the longest
//! matching prefix winning, with OpenAI's model families built in and the
//! caller's entries on top (an entry may also turn exact counting off:
//! `"heuristic"`).

use super::{Encoding, Method};

/// The built-in prefixes (OpenAI's published model-to-encoding mapping).
pub const DEFAULTS: [(&str, Encoding); 13] = [
    ("openai:gpt-5", Encoding::O200kBase),
    ("openai:gpt-4.1", Encoding::O200kBase),
    ("openai:gpt-4.5", Encoding::O200kBase),
    ("openai:gpt-4o", Encoding::O200kBase),
    ("openai:chatgpt-4o", Encoding::O200kBase),
    ("openai:gpt-oss", Encoding::O200kBase),
    ("openai:o1", Encoding::O200kBase),
    ("openai:o3", Encoding::O200kBase),
    ("openai:o4", Encoding::O200kBase),
    ("openai:gpt-4", Encoding::Cl100kBase),
    ("openai:gpt-3.5", Encoding::Cl100kBase),
    ("openai:text-embedding-3", Encoding::Cl100kBase),
    ("openai:text-embedding-ada-002", Encoding::Cl100kBase),
];

/// The caller's entries (in the order given; a repeated prefix keeps its
/// last method) over [`DEFAULTS`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EncodingTable {
    extra: Vec<(String, Method)>,
}

impl EncodingTable {
    pub fn new(extra: Vec<(String, Method)>) -> Self {
        let mut table = EncodingTable { extra: Vec::new() };
        for (prefix, method) in extra {
            table.set(prefix, method);
        }
        table
    }

    pub fn set(&mut self, prefix: String, method: Method) {
        match self.extra.iter_mut().find(|(p, _)| *p == prefix) {
            Some(slot) => slot.1 = method,
            None => self.extra.push((prefix, method)),
        }
    }

    /// The caller's entries, in order.
    pub fn extra(&self) -> &[(String, Method)] {
        &self.extra
    }

    /// The method of the longest matching prefix (the caller's entry on a
    /// tie with a default); the heuristic when nothing matches.
    pub fn resolve(&self, model_id: &str) -> Method {
        let mut best: Option<(usize, Method)> = None;
        let defaults = DEFAULTS.iter().map(|(p, e)| (*p, Method::Exact(*e)));
        let extra = self.extra.iter().map(|(p, m)| (p.as_str(), *m));
        for (prefix, method) in defaults.chain(extra) {
            if model_id.starts_with(prefix) && best.is_none_or(|(len, _)| prefix.len() >= len) {
                best = Some((prefix.len(), method));
            }
        }
        best.map_or(Method::Heuristic, |(_, m)| m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_families() {
        let t = EncodingTable::default();
        let o200k = Method::Exact(Encoding::O200kBase);
        let cl100k = Method::Exact(Encoding::Cl100kBase);
        for id in [
            "openai:gpt-4o",
            "openai:gpt-4o-mini",
            "openai:gpt-4.1-nano",
            "openai:gpt-5",
            "openai:o3-mini",
            "openai:o1",
        ] {
            assert_eq!(t.resolve(id), o200k, "{id}");
        }
        for id in ["openai:gpt-4", "openai:gpt-4-turbo", "openai:gpt-3.5-turbo"] {
            assert_eq!(t.resolve(id), cl100k, "{id}");
        }
        for id in [
            "anthropic:claude-sonnet-4",
            "openai:davinci",
            "gpt-4o",
            "scripted:fake",
        ] {
            assert_eq!(t.resolve(id), Method::Heuristic, "{id}");
        }
    }

    #[test]
    fn the_caller_extends_and_overrides() {
        let t = EncodingTable::new(vec![
            ("azure:".into(), Method::Exact(Encoding::O200kBase)),
            ("openai:gpt-4o".into(), Method::Heuristic),
            ("azure:legacy".into(), Method::Exact(Encoding::Cl100kBase)),
            ("azure:legacy".into(), Method::Heuristic),
        ]);
        assert_eq!(
            t.resolve("azure:gpt-4o"),
            Method::Exact(Encoding::O200kBase)
        );
        assert_eq!(t.resolve("azure:legacy-1"), Method::Heuristic);
        assert_eq!(t.resolve("openai:gpt-4o-mini"), Method::Heuristic);
        assert_eq!(
            t.resolve("openai:gpt-4"),
            Method::Exact(Encoding::Cl100kBase)
        );
        assert_eq!(t.extra().len(), 3);
    }
}
