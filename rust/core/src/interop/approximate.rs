//! LangChain's `count_tokens_approximately` of one message with its default
//! settings (`ctxengine.reference.interop.approximate_count` is the
//! reference): a quarter token a character of the message's text, role,
//! name, tool call id and (for an assistant message with a str content) the
//! `repr` of its tool calls, rounded up, plus 85 tokens an image block and 3
//! a message.
//!
//! Lengths are Python's (`len`: code points). The binding hands a message's
//! fields in as [`Value`]s; the rules are here, pure ([`count`]), and the
//! length of a `repr` is computed from the lengths of its parts ([`repr`]).

use super::value::Value;

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

/// What a message is to the count (LangChain's message classes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaker<'a> {
    /// An `AIMessage`: its tool calls count by their `repr` (str content).
    Ai,
    /// A `ToolMessage`: its tool call id counts.
    Tool,
    /// A `SystemMessage`: its `__openai_role__`, else `system`, counts.
    System,
    /// Any other message, by its role (empty: a `ChatMessage`'s own role
    /// field, left to the reference).
    Role(&'a str),
}

/// LangChain's message classes the count tells apart, as
/// `LangChainClasses` names them, in the order a message is classified (the
/// first class it is an instance of); a message of none of them is counted
/// by the reference.
pub const CLASSES: [(&str, Speaker<'static>); 6] = [
    ("ai", Speaker::Ai),
    ("human", Speaker::Role("user")),
    ("tool", Speaker::Tool),
    ("system", Speaker::System),
    ("function", Speaker::Role("function")),
    ("chat", Speaker::Role("")),
];

impl Speaker<'_> {
    /// The message attribute [`count`] reads as `extra` (and the memo holds):
    /// `tool_calls`, `tool_call_id` or `additional_kwargs`.
    pub fn extra(self) -> &'static str {
        match self {
            Speaker::Ai => "tool_calls",
            Speaker::Tool => "tool_call_id",
            _ => "additional_kwargs",
        }
    }
}

/// `count_tokens_approximately` of one message, or `None` when a shape
/// needs the reference: `extra` is an AI message's `tool_calls`, a tool
/// message's `tool_call_id`, any other's `additional_kwargs`.
pub fn count<V: Value>(content: &V, name: &V, speaker: Speaker<'_>, extra: &V) -> Option<i64> {
    let mut count = match content.chars() {
        Some(n) => Approximate::text_content(n),
        None => {
            let mut count = Approximate::list_content();
            content.elements(|block| {
                if let Some(n) = block.chars() {
                    count.text(n);
                    return Some(());
                }
                block.dict_len()?;
                match block_kind(block.get("type")?.str()?)? {
                    BlockKind::Image => count.image(),
                    BlockKind::Text => {
                        if let Some(text) = block.get("text") {
                            count.text(text.chars()?);
                        }
                    }
                }
                Some(())
            })?;
            count
        }
    };
    match speaker {
        Speaker::Ai => {
            if count.counts_tool_calls(extra.truthy()?) {
                count.chars(repr_len(extra, 0).or_else(|| extra.repr_len())?);
            }
            count.chars("assistant".len());
        }
        Speaker::Tool => {
            count.chars(extra.chars()?);
            count.chars("tool".len());
        }
        Speaker::System => {
            extra.dict_len()?;
            count.chars(match extra.get("__openai_role__") {
                None => SYSTEM_ROLE.len(),
                Some(role) => role.chars()?,
            });
        }
        Speaker::Role("") => return None,
        Speaker::Role(role) => count.chars(role.len()),
    }
    if !name.is_null() {
        count.chars(name.chars()?);
    }
    Some(count.finish())
}

/// `len(repr(v))` for the JSON-like values tool calls hold, from the
/// lengths of their parts: ASCII strings, ints, bools, `None`, dicts with
/// string keys, lists and tuples here, anything else by the host's own
/// `repr`; `None` (the caller reprs the whole value) past a nesting depth
/// only a cycle reaches, or for a key that is not an ASCII string.
pub fn repr_len<V: Value>(v: &V, depth: usize) -> Option<usize> {
    if depth > 64 {
        return None;
    }
    if v.str().is_some() || v.chars().is_some() {
        return v.str().and_then(repr::ascii_str).or_else(|| v.repr_len());
    }
    if let Some(b) = v.bool() {
        return Some(repr::bool(b));
    }
    if v.is_null() {
        return Some(repr::NONE);
    }
    if let Some(i) = v.exact_int() {
        return Some(repr::int(i));
    }
    if let Some(n) = v.dict_len() {
        let mut parts = 0;
        v.members(|key, value| {
            parts += repr::ascii_str(key?)? + repr_len(&value, depth + 1)?;
            Some(())
        })?;
        return Some(repr::dict(n, parts));
    }
    for tuple in [false, true] {
        if let Some(len) = sequence_repr_len(v, tuple, depth) {
            return len;
        }
    }
    v.repr_len()
}

/// [`repr_len`] of an exact list (`tuple`: tuple); `None` for another value,
/// `Some(None)` when an element's length is not known.
fn sequence_repr_len<V: Value>(v: &V, tuple: bool, depth: usize) -> Option<Option<usize>> {
    let (mut n, mut parts, mut stopped) = (0, 0, false);
    let add = |x: V| {
        n += 1;
        parts += repr_len(&x, depth + 1).or_else(|| {
            stopped = true;
            None
        })?;
        Some(())
    };
    let walked = if tuple {
        v.tuple_elements(add)
    } else {
        v.elements(add)
    };
    if stopped {
        return Some(None);
    }
    walked?;
    Some(Some(repr::sequence(tuple, n, parts)))
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
    fn each_class_names_what_it_counts() {
        let extra: Vec<_> = CLASSES.iter().map(|(n, s)| (*n, s.extra())).collect();
        assert_eq!(extra[0], ("ai", "tool_calls"));
        assert_eq!(extra[2], ("tool", "tool_call_id"));
        assert_eq!(extra[3], ("system", "additional_kwargs"));
        assert_eq!(CLASSES[1].1, Speaker::Role("user"));
    }

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

    fn json(text: &str) -> crate::decode::Json<'_> {
        crate::decode::parse_canonical(text).expect("canonical json")
    }

    #[test]
    fn messages_count_natively_as_langchain_counts() {
        let (null, s) = (json("null"), json("\"hello world\""));
        // HumanMessage("hello world"): 11 + len("user") chars -> 4 + 3.
        assert_eq!(
            count(&&s, &&null, Speaker::Role("user"), &&json("{}")),
            Some(7)
        );
        // [text "abcd", image] from an AI message named "bob" (tool calls not counted).
        let blocks = json(r#"[{"text":"abcd","type":"text"},{"type":"image_url"},"xy"]"#);
        let calls = json(r#"[{"id":"c1"}]"#);
        let bob = json("\"bob\"");
        assert_eq!(
            count(&&blocks, &&bob, Speaker::Ai, &&calls),
            Some(85 + 5 + 3)
        );
        // An AI message with str content counts its tool calls' repr:
        // "[{'id': 'c1'}]" is 14 chars, + 9 for the role.
        assert_eq!(
            count(&&json("\"\""), &&null, Speaker::Ai, &&calls),
            Some(6 + 3)
        );
        // A tool message counts its call id; a system message its role.
        assert_eq!(
            count(&&json("\"abc\""), &&null, Speaker::Tool, &&json("\"id-1\"")),
            Some(3 + 3)
        );
        let role = json(r#"{"__openai_role__":"developer"}"#);
        assert_eq!(count(&&s, &&null, Speaker::System, &&role), Some(5 + 3));
        assert_eq!(
            count(&&s, &&null, Speaker::System, &&json("{}")),
            Some(5 + 3)
        );
        // Shapes left to the reference.
        assert_eq!(count(&&s, &&null, Speaker::Role(""), &&json("{}")), None);
        assert_eq!(
            count(
                &&json("[{\"type\":\"tool_use\"}]"),
                &&null,
                Speaker::Role("user"),
                &&null
            ),
            None
        );
        assert_eq!(
            count(&&json("3"), &&null, Speaker::Role("user"), &&null),
            None
        );
        assert_eq!(count(&&s, &&json("1"), Speaker::Role("user"), &&null), None);
        assert_eq!(count(&&s, &&null, Speaker::Tool, &&json("1")), None);
    }

    #[test]
    fn repr_lengths_of_nested_values() {
        let v = json(r#"[{"args":{"a":[1,true,null],"b":"x'y"},"id":-12}]"#);
        let python = "[{'args': {'a': [1, True, None], 'b': \"x'y\"}, 'id': -12}]";
        assert_eq!(repr_len(&&v, 0), Some(python.len()));
        // A float or a non-ASCII string: the host's repr (none here).
        assert_eq!(repr_len(&&json("[1.5]"), 0), None);
        assert_eq!(repr_len(&&json(r#"{"é":1}"#), 0), None);
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
