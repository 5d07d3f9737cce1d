//! Exact token counts for the public OpenAI encodings (ADR 0012).
//!
//! [`Encoding`] counts with the real byte-pair encoding (`o200k_base`,
//! `cl100k_base`; the `bpe-openai` crate, whose rank tables are OpenAI's
//! published files). [`table`] maps model ids to a counting method, and
//! [`message`] is the counting recipe: what text of a value is encoded and
//! how many framing tokens a message adds.
//!
//! Counting is pure and thread-safe (`&self` on lazily built statics), so the
//! binding may count with the GIL released.

pub mod json;
pub mod message;
pub mod table;

use sha2::{Digest, Sha256};

use crate::error::{CoreError, CoreResult};

/// A public byte-pair encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// GPT-4o, GPT-4.1, GPT-5, o-series.
    O200kBase,
    /// GPT-4, GPT-3.5, text-embedding-3.
    Cl100kBase,
}

impl Encoding {
    pub const ALL: [Encoding; 2] = [Encoding::O200kBase, Encoding::Cl100kBase];

    pub fn name(self) -> &'static str {
        match self {
            Encoding::O200kBase => "o200k_base",
            Encoding::Cl100kBase => "cl100k_base",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.name() == name)
    }

    /// The encoding called `name`, else an estimator error that shows the
    /// name as `shown` (the host's repr of it).
    pub fn named(name: &str, shown: &str) -> CoreResult<Self> {
        Self::from_name(name).ok_or_else(|| {
            CoreError::estimator(format!(
                "unknown encoding {shown}; known: cl100k_base, o200k_base"
            ))
        })
    }

    fn tokenizer(self) -> &'static bpe_openai::Tokenizer {
        match self {
            Encoding::O200kBase => bpe_openai::o200k_base(),
            Encoding::Cl100kBase => bpe_openai::cl100k_base(),
        }
    }

    /// Builds the encoding's tables now; they are otherwise built on first
    /// use (tens of milliseconds), so a host can build them off its event loop.
    pub fn load(self) {
        self.tokenizer();
    }

    /// The number of tokens of `text` encoded as ordinary text (special
    /// tokens such as `<|endoftext|>` are plain text here, as in tiktoken's
    /// `encode_ordinary`).
    #[inline]
    pub fn count(self, text: &str) -> usize {
        self.tokenizer().count(text)
    }

    /// The token ids of `text` (for tests and the accuracy tools).
    pub fn encode(self, text: &str) -> Vec<u32> {
        self.tokenizer().encode(text)
    }

    /// The number of ranks (ordinary tokens) of the encoding.
    pub fn vocabulary(self) -> usize {
        self.tokenizer().bpe.num_tokens()
    }

    /// SHA-256 over every rank in order, each as one length byte and its
    /// bytes: the reference backend checks its shipped table against it.
    pub fn ranks_sha256(self) -> [u8; 32] {
        let bpe = &self.tokenizer().bpe;
        let mut h = Sha256::new();
        for id in 0..bpe.num_tokens() as u32 {
            let bytes = bpe.token_bytes(id);
            h.update([bytes.len() as u8]);
            h.update(bytes);
        }
        h.finalize().into()
    }
}

/// How a model's tokens are counted: the byte heuristic of ADR 0001, or
/// exactly with a public encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    Heuristic,
    Exact(Encoding),
}

impl Method {
    pub const HEURISTIC: &'static str = "heuristic";
    /// Every method name, sorted (the order error messages list them in).
    pub const KNOWN: [&'static str; 3] = ["cl100k_base", "heuristic", "o200k_base"];

    pub fn name(self) -> &'static str {
        match self {
            Method::Heuristic => Self::HEURISTIC,
            Method::Exact(e) => e.name(),
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        if name == Self::HEURISTIC {
            return Some(Method::Heuristic);
        }
        Encoding::from_name(name).map(Method::Exact)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for e in Encoding::ALL {
            assert_eq!(Encoding::from_name(e.name()), Some(e));
            assert_eq!(Method::from_name(e.name()), Some(Method::Exact(e)));
        }
        assert_eq!(Method::from_name("heuristic"), Some(Method::Heuristic));
        for name in Method::KNOWN {
            assert_eq!(Method::from_name(name).map(Method::name), Some(name));
        }
        assert_eq!(Method::from_name("p50k_base"), None);
        assert_eq!(Encoding::from_name("O200K_BASE"), None);
    }

    #[test]
    fn known_counts() {
        // Figures from OpenAI's tokenizer (tiktoken `encode_ordinary`).
        let o = Encoding::O200kBase;
        let c = Encoding::Cl100kBase;
        assert_eq!(o.count(""), 0);
        assert_eq!(o.count("hello world"), 2);
        assert_eq!(c.count("hello world"), 2);
        assert_eq!(o.encode("hello world"), vec![24912, 2375]);
        assert_eq!(c.encode("hello world"), vec![15339, 1917]);
        // special-token text is ordinary text
        assert!(o.count("<|endoftext|>") > 1);
        // every role of the chat recipe is one token in both encodings
        for role in ["system", "user", "assistant", "tool"] {
            assert_eq!(o.count(role), 1, "{role}");
            assert_eq!(c.count(role), 1, "{role}");
        }
    }

    #[test]
    fn vocabularies() {
        assert_eq!(Encoding::O200kBase.vocabulary(), 199_998);
        assert_eq!(Encoding::Cl100kBase.vocabulary(), 100_256);
    }
}
