//! LangChain's `count_tokens_approximately` of one message with its default
//! settings (`ctxengine.reference.interop.approximate_count` is the
//! reference): a quarter token a character of the message's text, role,
//! name, tool call id and (for an assistant message with a str content) the
//! `repr` of its tool calls, rounded up, plus 85 tokens an image block and 3
//! a message.
//!
//! Lengths are Python's (`len`: code points). The binding reads a message's
//! fields and walks its tool calls; the rules are here, pure, and the length
//! of a `repr` is computed from the lengths of its parts ([`repr`]).

/// Tokens an image block counts.
pub const IMAGE_TOKENS: i64 = 85;
/// Tokens every message counts beside its characters.
pub const MESSAGE_TOKENS: i64 = 3;
/// The role of a system message without an `__openai_role__`.
pub const SYSTEM_ROLE: &str = "system";

/// A dict block of a list content, by its `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// `image` or `image_url`: [`IMAGE_TOKENS`].
    Image,
    /// `text`: its `text` (absent: none).
    Text,
}

/// The kind of a dict block whose `type` is `kind`; `None` for one the
/// reference counts by its `repr` (left to it).
pub fn block_kind(kind: &str) -> Option<BlockKind> {
    match kind {
        "image" | "image_url" => Some(BlockKind::Image),
        "text" => Some(BlockKind::Text),
        _ => None,
    }
}

/// The count of one message, its parts added as the binding reads them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Approximate {
    chars: usize,
    tokens: i64,
    list: bool,
}

impl Approximate {
    /// A message whose content is a str of `chars` code points.
    pub fn text_content(chars: usize) -> Self {
        Approximate {
            chars,
            ..Approximate::default()
        }
    }

    /// A message whose content is a list (its blocks added next).
    pub fn list_content() -> Self {
        Approximate {
            list: true,
            ..Approximate::default()
        }
    }

    /// A str block, or a text block's `text`, of `chars` code points.
    pub fn text(&mut self, chars: usize) {
        self.chars += chars;
    }

    /// An image block.
    pub fn image(&mut self) {
        self.tokens += IMAGE_TOKENS;
    }

    /// Whether an assistant message's tool calls count (by the length of their
    /// `repr`): when it has any and its content is a str.
    pub fn counts_tool_calls(&self, has_tool_calls: bool) -> bool {
        has_tool_calls && !self.list
    }

    /// Anything else the message counts by its length: the `repr` of its tool
    /// calls, a tool message's call id, its role, its name.
    pub fn chars(&mut self, chars: usize) {
        self.chars += chars;
    }

    /// The count.
    pub fn finish(self) -> i64 {
        self.tokens + self.chars.div_ceil(4) as i64 + MESSAGE_TOKENS
    }
}

/// The length of Python's `repr` of the JSON-like values a tool call holds,
/// from the lengths of their parts.
pub mod repr {
    /// `repr(None)`.
    pub const NONE: usize = 4;

    /// `repr(b)` of a bool.
    pub fn bool(b: bool) -> usize {
        if b {
            4
        } else {
            5
        }
    }

    /// `repr(i)` of an int.
    pub fn int(i: i64) -> usize {
        i.unsigned_abs()
            .checked_ilog10()
            .map_or(1, |d| d as usize + 1)
            + usize::from(i < 0)
    }

    /// `repr(s)` of an ASCII str (`None` for any other: its own `repr` measures it).
    pub fn ascii_str(s: &str) -> Option<usize> {
        let bytes = s.as_bytes();
        if !s.is_ascii() {
            return None;
        }
        // Python quotes with ' unless the text holds ' and no ".
        let quote = if bytes.contains(&b'\'') && !bytes.contains(&b'"') {
            b'"'
        } else {
            b'\''
        };
        let mut n = 2;
        for &c in bytes {
            n += match c {
                b'\\' | b'\t' | b'\n' | b'\r' => 2,
                _ if c == quote => 2,
                0..=0x1f | 0x7f => 4,
                _ => 1,
            };
        }
        Some(n)
    }

    /// `repr(d)` of a dict of `n` entries whose keys' and values' reprs add up to `parts`.
    pub fn dict(n: usize, parts: usize) -> usize {
        // `{` `}`, `: ` an entry, `, ` between entries.
        2 + 2 * n + 2 * n.saturating_sub(1) + parts
    }

    /// `repr` of a list (or, `tuple`, a tuple) of `n` values whose reprs add up to `parts`.
    pub fn sequence(tuple: bool, n: usize, parts: usize) -> usize {
        // A one-tuple's trailing comma.
        2 + usize::from(tuple && n == 1) + 2 * n.saturating_sub(1) + parts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_as_langchain_counts() {
        // HumanMessage("hello world"): 11 + len("user") = 15 chars -> 4 + 3.
        let mut m = Approximate::text_content(11);
        m.chars("user".len());
        assert_eq!(m.finish(), 7);
        // An empty message still counts its 3 tokens (and its role).
        assert_eq!(Approximate::default().finish(), 3);
        // [text "abcd", image, "xy"] from "assistant" named "bob".
        let mut m = Approximate::list_content();
        m.text(4);
        m.image();
        m.text(2);
        assert!(!m.counts_tool_calls(true));
        m.chars("assistant".len());
        m.chars("bob".len());
        // 4 + 2 + 9 + 3 = 18 chars: 5 tokens.
        assert_eq!(m.finish(), 85 + 5 + 3);
        assert!(Approximate::text_content(0).counts_tool_calls(true));
        assert!(!Approximate::text_content(0).counts_tool_calls(false));
    }

    #[test]
    fn block_kinds() {
        assert_eq!(block_kind("image"), Some(BlockKind::Image));
        assert_eq!(block_kind("image_url"), Some(BlockKind::Image));
        assert_eq!(block_kind("text"), Some(BlockKind::Text));
        assert_eq!(block_kind("tool_use"), None);
        assert_eq!(block_kind(""), None);
    }

    #[test]
    fn repr_lengths_are_pythons() {
        // Each against len(repr(value)) in Python.
        assert_eq!(repr::int(0), 1);
        assert_eq!(repr::int(-7), 2);
        assert_eq!(repr::int(1234), 4);
        assert_eq!(repr::int(i64::MIN), 20);
        assert_eq!(repr::int(i64::MAX), 19);
        assert_eq!(repr::bool(true), "True".len());
        assert_eq!(repr::bool(false), "False".len());
        assert_eq!(repr::NONE, "None".len());
        assert_eq!(repr::ascii_str("ab"), Some("'ab'".len()));
        assert_eq!(repr::ascii_str("it's"), Some("\"it's\"".len()));
        assert_eq!(repr::ascii_str("'\""), Some("'\\'\"'".len()));
        assert_eq!(
            repr::ascii_str("a\tb\\\n\x01\x7f"),
            Some("'a\\tb\\\\\\n\\x01\\x7f'".len())
        );
        assert_eq!(repr::ascii_str("é"), None);
        // {'a': 1, 'bc': None}
        let parts = 3 + 1 + 4 + 4;
        assert_eq!(repr::dict(2, parts), "{'a': 1, 'bc': None}".len());
        assert_eq!(repr::dict(0, 0), "{}".len());
        assert_eq!(repr::sequence(false, 2, 1 + 3), "[1, 'x']".len());
        assert_eq!(repr::sequence(true, 1, 1), "(1,)".len());
        assert_eq!(repr::sequence(true, 0, 0), "()".len());
        assert_eq!(repr::sequence(false, 0, 0), "[]".len());
    }
}
