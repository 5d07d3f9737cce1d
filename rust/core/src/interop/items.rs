//! The canonical bytes of ctxengine items, written from their fields.
//!
//! Each writer emits exactly `canonical_json(item.to_dict())` (keys in
//! UTF-16 order, as `python/ctxengine/model.py` defines the dicts), so a
//! foreign message can be measured without constructing the item; the
//! differential tests compare both ways on every generated history.

use crate::canonical::{write_int, write_str};

/// Item content: a string, or text parts.
#[derive(Debug, Clone)]
pub enum Content<'a> {
    Text(&'a str),
    Parts(Vec<&'a str>),
}

fn content(out: &mut Vec<u8>, c: &Content<'_>) {
    match c {
        Content::Text(t) => write_str(out, t.as_bytes()),
        Content::Parts(parts) => {
            out.push(b'[');
            for (k, text) in parts.iter().enumerate() {
                if k > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(b"{\"text\":");
                write_str(out, text.as_bytes());
                out.extend_from_slice(b",\"type\":\"text_part\"}");
            }
            out.push(b']');
        }
    }
}

fn seq(out: &mut Vec<u8>, seq: Option<i64>) -> Option<()> {
    match seq {
        None => out.extend_from_slice(b"null"),
        Some(v) => write_int(out, v).ok()?,
    }
    Some(())
}

/// `SystemMessage`, `AssistantMessage` (`kind` "system_message" / "assistant_message").
pub fn message(
    out: &mut Vec<u8>,
    kind: &str,
    c: &Content<'_>,
    trust: &str,
    s: Option<i64>,
) -> Option<()> {
    out.extend_from_slice(b"{\"content\":");
    content(out, c);
    out.extend_from_slice(b",\"seq\":");
    seq(out, s)?;
    out.extend_from_slice(b",\"trust\":");
    write_str(out, trust.as_bytes());
    out.extend_from_slice(b",\"type\":");
    write_str(out, kind.as_bytes());
    out.push(b'}');
    Some(())
}

/// `UserMessage`.
pub fn user(
    out: &mut Vec<u8>,
    c: &Content<'_>,
    trust: &str,
    principal: Option<&str>,
    s: Option<i64>,
) -> Option<()> {
    out.extend_from_slice(b"{\"content\":");
    content(out, c);
    out.extend_from_slice(b",\"principal_id\":");
    match principal {
        Some(p) => write_str(out, p.as_bytes()),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"seq\":");
    seq(out, s)?;
    out.extend_from_slice(b",\"trust\":");
    write_str(out, trust.as_bytes());
    out.extend_from_slice(b",\"type\":\"user_message\"}");
    Some(())
}

/// `ToolCall`; `arguments` are canonical bytes already.
pub fn tool_call(
    out: &mut Vec<u8>,
    arguments: &[u8],
    call_id: &str,
    name: &str,
    s: Option<i64>,
) -> Option<()> {
    out.extend_from_slice(b"{\"arguments\":");
    out.extend_from_slice(arguments);
    out.extend_from_slice(b",\"call_id\":");
    write_str(out, call_id.as_bytes());
    out.extend_from_slice(b",\"name\":");
    write_str(out, name.as_bytes());
    out.extend_from_slice(b",\"seq\":");
    seq(out, s)?;
    out.extend_from_slice(b",\"type\":\"tool_call\"}");
    Some(())
}

/// `ToolResult`.
pub fn tool_result(
    out: &mut Vec<u8>,
    call_id: &str,
    c: &Content<'_>,
    is_error: bool,
    trust: &str,
    s: Option<i64>,
) -> Option<()> {
    out.extend_from_slice(b"{\"call_id\":");
    write_str(out, call_id.as_bytes());
    out.extend_from_slice(b",\"content\":");
    content(out, c);
    out.extend_from_slice(if is_error {
        b",\"is_error\":true"
    } else {
        b",\"is_error\":false"
    });
    out.extend_from_slice(b",\"seq\":");
    seq(out, s)?;
    out.extend_from_slice(b",\"trust\":");
    write_str(out, trust.as_bytes());
    out.extend_from_slice(b",\"type\":\"tool_result\"}");
    Some(())
}

/// The keys each writer here emits (`crate::schema::tables`); the
/// reasoning item has no writer.
pub(crate) fn schema_rows() -> Vec<(&'static str, &'static str, Vec<String>)> {
    let c = Content::Text("c");
    let mut rows = Vec::new();
    let mut row = |kind: &'static str, write: &dyn Fn(&mut Vec<u8>) -> Option<()>| {
        let mut out = Vec::new();
        let keys = match write(&mut out) {
            Some(()) => crate::schema::object_keys(&out),
            None => vec!["<no bytes>".to_owned()],
        };
        rows.push(("rust/core/src/interop/items.rs", kind, keys));
    };
    for kind in ["system_message", "assistant_message"] {
        row(kind, &|out| message(out, kind, &c, "memory", Some(1)));
    }
    row("user_message", &|out| {
        user(out, &c, "user", Some("p"), Some(1))
    });
    row("tool_call", &|out| {
        tool_call(out, b"{}", "id", "f", Some(1))
    });
    row("tool_result", &|out| {
        tool_result(out, "id", &c, false, "memory", Some(1))
    });
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_the_canonical_dicts() {
        let mut out = Vec::new();
        user(
            &mut out,
            &Content::Parts(vec!["a\"b"]),
            "user",
            None,
            Some(3),
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"content":[{"text":"a\"b","type":"text_part"}],"principal_id":null,"seq":3,"trust":"user","type":"user_message"}"#
        );
        let mut out = Vec::new();
        tool_result(
            &mut out,
            "c1",
            &Content::Text("ok"),
            false,
            "external_untrusted",
            None,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"call_id":"c1","content":"ok","is_error":false,"seq":null,"trust":"external_untrusted","type":"tool_result"}"#
        );
        let mut out = Vec::new();
        assert!(tool_call(&mut out, b"{}", "c", "f", Some(1 << 60)).is_none());
    }
}
