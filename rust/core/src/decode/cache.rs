//! An item's `_cj` cache: the canonical bytes of its `to_dict()` (with
//! `seq`) and their SHA-256.
//!
//! A stored payload is canonical JSON, so when its item object holds exactly
//! the fields `to_dict()` writes (every stored item does: the store writes
//! `to_dict()` without `seq`), those bytes are the item text itself with
//! `"seq":N,` spliced in before the members that sort after `seq` (`trust`,
//! `type`). Otherwise (defaults left out, unknown members) they are written
//! afresh from the decoded item.

use sha2::{Digest, Sha256};

use super::item::{canonical_item, Content, Item, Part, TRUST_LEVELS};
use super::json::Json;
use crate::canonical::MAX_SAFE_INTEGER;

/// The canonical bytes of an item's `to_dict()`, in at most three pieces.
#[derive(Debug, Clone, PartialEq)]
pub struct Canonical<'a> {
    head: &'a [u8],
    middle: Middle,
    tail: &'a [u8],
}

#[derive(Debug, Clone, PartialEq)]
enum Middle {
    /// `"seq":N,` (at most 6 + 17 + 1 bytes for a canonical integer).
    Seq([u8; 28], u8),
    Written(Vec<u8>),
}

impl Canonical<'_> {
    /// The pieces, to be joined in order.
    pub fn pieces(&self) -> [&[u8]; 3] {
        let middle = match &self.middle {
            Middle::Seq(buf, n) => &buf[..*n as usize],
            Middle::Written(bytes) => bytes.as_slice(),
        };
        [self.head, middle, self.tail]
    }

    pub fn len(&self) -> usize {
        self.pieces().iter().map(|p| p.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn to_vec(&self) -> Vec<u8> {
        self.pieces().concat()
    }

    /// Write the joined bytes into `out`, which is [`Canonical::len`] long.
    pub fn copy_to(&self, mut out: &mut [u8]) {
        for piece in self.pieces() {
            let (head, rest) = out.split_at_mut(piece.len());
            head.copy_from_slice(piece);
            out = rest;
        }
    }

    /// The SHA-256 of the joined bytes.
    pub fn sha256(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        for piece in self.pieces() {
            h.update(piece);
        }
        h.finalize().into()
    }
}

/// The members of `to_dict()` other than `seq`, in canonical order.
fn stored_keys(item: &Item<'_>) -> &'static [&'static str] {
    match item {
        Item::System { .. } | Item::Assistant { .. } => &["content", "trust", "type"],
        Item::User { .. } => &["content", "principal_id", "trust", "type"],
        Item::ToolCall { .. } => &["arguments", "call_id", "name", "type"],
        Item::ToolResult { .. } => &["call_id", "content", "is_error", "trust", "type"],
        Item::Reasoning { .. } => &["payload", "provider", "type"],
    }
}

/// `"seq":N,` for a canonical integer `seq`.
fn seq_member(seq: i64) -> Middle {
    // (Room for any i64, though a canonical `seq` has at most 17 characters.)
    let mut buf = [0u8; 28];
    buf[..6].copy_from_slice(b"\"seq\":");
    let mut digits = [0u8; 20];
    let text = crate::canonical::i64_text(seq, &mut digits);
    let n = 6 + text.len();
    buf[6..n].copy_from_slice(text);
    buf[n] = b',';
    Middle::Seq(buf, (n + 1) as u8)
}

/// `value` is an object with exactly the members `keys`, in that order.
fn has_exactly(value: &Json<'_>, keys: &[&str]) -> bool {
    match value {
        Json::Object(members) => {
            members.len() == keys.len() && members.iter().zip(keys).all(|((k, _), want)| k == want)
        }
        _ => false,
    }
}

/// Every content part holds exactly the members its `to_dict()` writes.
fn parts_complete(item: &Item<'_>, data: &Json<'_>) -> bool {
    let content = match item {
        Item::System { content, .. }
        | Item::User { content, .. }
        | Item::Assistant { content, .. }
        | Item::ToolResult { content, .. } => content,
        _ => return true,
    };
    let (Content::Parts(parts), Some(Json::Array(raw))) = (content, data.get("content")) else {
        return true;
    };
    parts.iter().zip(raw).all(|(part, raw)| match part {
        Part::Text(_) => has_exactly(raw, &["text", "type"]),
        Part::File { .. } => has_exactly(raw, &["artifact_id", "filename", "media_type", "type"]),
    })
}

/// The text `to_dict()` ends with after `seq`: `"trust":"…","type":"…"}` or `"type":"…"}`.
fn ending(item: &Item<'_>) -> Vec<u8> {
    let trust = match item {
        Item::System { trust, .. }
        | Item::User { trust, .. }
        | Item::Assistant { trust, .. }
        | Item::ToolResult { trust, .. } => Some(TRUST_LEVELS[*trust as usize]),
        _ => None,
    };
    let mut out = Vec::with_capacity(64);
    if let Some(t) = trust {
        out.extend_from_slice(b"\"trust\":\"");
        out.extend_from_slice(t.as_bytes());
        out.extend_from_slice(b"\",");
    }
    out.extend_from_slice(b"\"type\":\"");
    out.extend_from_slice(item.kind().as_bytes());
    out.extend_from_slice(b"\"}");
    out
}

/// The `_cj` bytes of `item`, decoded from `data` whose canonical text is
/// `text`, as event `seq`; `None` when `seq` is outside the canonical
/// integer range (the value type then fails the same way when asked).
pub fn canonical<'a>(
    item: &Item<'_>,
    data: &Json<'_>,
    text: &'a str,
    seq: i64,
) -> Option<Canonical<'a>> {
    if seq.unsigned_abs() > MAX_SAFE_INTEGER as u64 {
        return None;
    }
    if has_exactly(data, stored_keys(item)) && parts_complete(item, data) {
        let end = ending(item);
        let bytes = text.as_bytes();
        // Always so for a canonical text with these members; checked, not assumed.
        if bytes.ends_with(&end) && bytes.len() > end.len() {
            let cut = bytes.len() - end.len();
            return Some(Canonical {
                head: &bytes[..cut],
                middle: seq_member(seq),
                tail: &bytes[cut..],
            });
        }
    }
    canonical_item(item, seq).map(|written| Canonical {
        head: &[],
        middle: Middle::Written(written),
        tail: &[],
    })
}

/// `stored_keys` of each kind's sample item, with `seq`: what this table
/// says the dict form holds (`crate::schema::tables`).
pub(crate) fn schema_rows() -> Vec<(&'static str, &'static str, Vec<String>)> {
    let mut rows = Vec::new();
    for r in crate::schema::ITEMS.iter() {
        let text = crate::schema::sample(r);
        let Ok(data) = super::json::parse_canonical(&text) else {
            continue;
        };
        let keys = match super::item::item_from_json(&data) {
            Ok(item) => {
                let mut keys: Vec<String> = stored_keys(&item)
                    .iter()
                    .chain(["seq"].iter())
                    .map(|k| k.to_string())
                    .collect();
                keys.sort_unstable();
                keys
            }
            Err(reason) => vec![format!("<does not decode: {reason}>")],
        };
        rows.push(("rust/core/src/decode/cache.rs", r.kind, keys));
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::super::{decode_item, item::canonical_item};
    use super::*;

    /// The cache is the written `to_dict()` bytes, spliced or not.
    fn check(payload: &str, seq: i64, spliced: bool) {
        let d = decode_item(payload, seq).unwrap_or_else(|e| panic!("{payload}: {e}"));
        let (cache, digest) = d.cache.expect("canonical seq");
        let written = canonical_item(&d.item, seq).unwrap();
        assert_eq!(cache.to_vec(), written, "{payload}");
        assert_eq!(cache.len(), written.len());
        let mut copied = vec![0; cache.len()];
        cache.copy_to(&mut copied);
        assert_eq!(copied, written);
        assert_eq!(digest, crate::hash::sha256(&written));
        assert_eq!(
            matches!(cache.middle, Middle::Seq(..)),
            spliced,
            "{payload}"
        );
    }

    #[test]
    fn splices_seq_into_complete_items_and_writes_the_rest() {
        let full = [
            r#"{"item":{"content":"s","trust":"platform","type":"system_message"}}"#,
            r#"{"item":{"content":"h\"i\n","principal_id":null,"trust":"user","type":"user_message"}}"#,
            r#"{"item":{"content":[{"text":"a","type":"text_part"},{"artifact_id":"x","filename":null,"media_type":"m","type":"file_ref"}],"principal_id":"p","trust":"memory","type":"user_message"}}"#,
            r#"{"item":{"content":"a","trust":"external_untrusted","type":"assistant_message"}}"#,
            r#"{"item":{"arguments":{"seq":1,"trust":"x","type":[1.5,{}]},"call_id":"c","name":"n","type":"tool_call"}}"#,
            r#"{"item":{"call_id":"c","content":"r","is_error":true,"trust":"internal_tool","type":"tool_result"}}"#,
            r#"{"item":{"payload":{"z":null},"provider":"p","type":"reasoning"}}"#,
        ];
        for payload in full {
            for seq in [0, 7, -3, 1 << 40, (1 << 53) - 1, -((1 << 53) - 1)] {
                check(payload, seq, true);
            }
        }
        let partial = [
            // Defaults left out: to_dict() writes them.
            r#"{"item":{"content":"s","type":"system_message"}}"#,
            r#"{"item":{"content":"h","trust":"user","type":"user_message"}}"#,
            r#"{"item":{"call_id":"c","content":"r","type":"tool_result"}}"#,
            r#"{"item":{"content":[{"artifact_id":"x","media_type":"m","type":"file_ref"}],"trust":"platform","type":"system_message"}}"#,
            // Members to_dict() does not write.
            r#"{"item":{"content":"s","seq":4,"trust":"platform","type":"system_message"}}"#,
            r#"{"item":{"content":"s","trust":"platform","type":"system_message","z":1}}"#,
            r#"{"item":{"content":[{"text":"a","type":"text_part","x":1}],"trust":"platform","type":"system_message"}}"#,
            r#"{"item":{"content":"s","trust":"platform","type":"system_message"},"z":1}"#,
            r#"{"a":1,"item":{"content":"s","trust":"platform","type":"system_message"}}"#,
        ];
        for payload in partial {
            check(payload, 5, false);
        }
        let d = decode_item(full[0], 1 << 53).unwrap();
        assert!(d.cache.is_none());
    }
}
