//! Stored conversation items, decoded in one pass (ADR 0011).
//!
//! A `conversation.item.appended` event stores `{"item": {...}}` as canonical
//! JSON text. [`decode_item`] parses that text strictly ([`json`]), checks the
//! item exactly as the Python value types do ([`item`]) and finds the
//! canonical bytes of the item's `to_dict()` (with its `seq`: [`cache`]) and
//! their SHA-256, so the binding can hand Python a finished item whose `_cj`
//! cache is already filled.
//!
//! Failures are data, not exceptions: the reason says what is wrong, in the
//! reference backend's words, and the caller names the row.

pub mod cache;
pub mod item;
pub mod json;
mod scan;

pub use cache::Canonical;
pub use item::{Content, Item, Members, Part, Trust, TRUST_LEVELS};
pub use json::{parse_canonical, Json, NotCanonical};

/// Why a stored payload is not a conversation item.
pub const REASON_NOT_CANONICAL: &str = "payload is not canonical JSON";
pub const REASON_NO_ITEM: &str = "conversation item payload has no 'item' object";
/// Prefix of an item that does not decode (followed by the value type's words).
pub const REASON_ITEM_PREFIX: &str = "conversation item does not decode: ";

/// One decoded item: the value and, when `seq` is canonical, its cache.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded<'a> {
    pub item: Item<'a>,
    /// `(canonical bytes of to_dict(), their SHA-256)`.
    pub cache: Option<(Canonical<'a>, [u8; 32])>,
}

/// The payload prefix before the item object when `item` is its only member.
const ITEM_PREFIX: &str = "{\"item\":";

/// The item a stored `{"item": {...}}` payload holds, as event `seq`.
pub fn decode_item(payload: &str, seq: i64) -> Result<Decoded<'_>, String> {
    let value = parse_canonical(payload).map_err(|_| REASON_NOT_CANONICAL.to_owned())?;
    let Json::Object(_) = value else {
        return Err(REASON_NOT_CANONICAL.to_owned());
    };
    let data = match value.get("item") {
        Some(d @ Json::Object(_)) => d,
        _ => return Err(REASON_NO_ITEM.to_owned()),
    };
    let item = item::item_from_json(data).map_err(|e| format!("{REASON_ITEM_PREFIX}{e}"))?;
    // The item object's own text, when the payload holds nothing else.
    let text = match &value {
        Json::Object(members) if members.len() == 1 && payload.starts_with(ITEM_PREFIX) => {
            &payload[ITEM_PREFIX.len()..payload.len() - 1]
        }
        _ => "",
    };
    let cache = cache::canonical(&item, data, text, seq).map(|bytes| {
        let digest = bytes.sha256();
        (bytes, digest)
    });
    Ok(Decoded { item, cache })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_every_item_type_and_its_cache() {
        let d = decode_item(
            "{\"item\":{\"content\":\"hi\",\"principal_id\":null,\"trust\":\"user\",\"type\":\"user_message\"}}",
            7,
        )
        .unwrap();
        assert_eq!(d.item.kind(), "user_message");
        let bytes = d.cache.unwrap().0.to_vec();
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "{\"content\":\"hi\",\"principal_id\":null,\"seq\":7,\"trust\":\"user\",\"type\":\"user_message\"}"
        );
        let d = decode_item(
            "{\"item\":{\"arguments\":{\"q\":[1,1.5]},\"call_id\":\"c\",\"name\":\"s\",\"type\":\"tool_call\"}}",
            3,
        )
        .unwrap();
        let bytes = d.cache.unwrap().0.to_vec();
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "{\"arguments\":{\"q\":[1,1.5]},\"call_id\":\"c\",\"name\":\"s\",\"seq\":3,\"type\":\"tool_call\"}"
        );
        // Defaults fill what the payload leaves out, as from_dict does.
        let d = decode_item("{\"item\":{\"call_id\":\"c\",\"content\":[{\"artifact_id\":\"a\",\"media_type\":\"m\",\"type\":\"file_ref\"}],\"type\":\"tool_result\"}}", 4).unwrap();
        let bytes = d.cache.unwrap().0.to_vec();
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "{\"call_id\":\"c\",\"content\":[{\"artifact_id\":\"a\",\"filename\":null,\"media_type\":\"m\",\"type\":\"file_ref\"}],\"is_error\":false,\"seq\":4,\"trust\":\"internal_tool\",\"type\":\"tool_result\"}"
        );
        assert!(decode_item(
            "{\"item\":{\"content\":\"x\",\"type\":\"system_message\"}}",
            1 << 60
        )
        .unwrap()
        .cache
        .is_none());
    }

    #[test]
    fn names_what_is_wrong() {
        let reason = |p: &str| decode_item(p, 1).unwrap_err();
        assert_eq!(reason("{ }"), REASON_NOT_CANONICAL);
        assert_eq!(reason("[]"), REASON_NOT_CANONICAL);
        assert_eq!(reason("{}"), REASON_NO_ITEM);
        assert_eq!(
            reason("{\"item\":{\"content\":5,\"type\":\"user_message\"}}"),
            "conversation item does not decode: UserMessage.content: expected str or list, got int"
        );
        assert_eq!(
            reason("{\"item\":{\"type\":\"nope\"}}"),
            "conversation item does not decode: ConversationItem.type: unknown item type"
        );
        assert_eq!(
            reason("{\"item\":{\"arguments\":{},\"call_id\":\"\",\"name\":\"s\",\"type\":\"tool_call\"}}"),
            "conversation item does not decode: ToolCall.call_id: must not be empty"
        );
        assert_eq!(
            reason("{\"item\":{\"call_id\":\"c\",\"content\":\"x\",\"is_error\":1,\"type\":\"tool_result\"}}"),
            "conversation item does not decode: ToolResult.is_error: expected bool, got int"
        );
    }
}
