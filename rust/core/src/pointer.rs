//! The text of a tool result truncated to a typed pointer, as
//! `ctxengine.assembly.render.render_pointer` writes it (ADR 0011: a cold
//! history renders one per tool result, so the native renderer writes them too).
//!
//! `[tool result elided under context pressure] ` and then the pointer object
//! as `json_inline` prints it: `json.dumps` with its default separators and
//! ASCII escapes (keys sorted), then `<`, `>` and `&` as `\u003c`, `\u003e`
//! and `\u0026`.

use std::fmt::Write;

const PREFIX: &str = "[tool result elided under context pressure] ";

/// `s` as `json.encoder.encode_basestring_ascii` writes it, with `< > &`
/// escaped as `json_inline` does afterwards.
fn push_ascii_json(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\0'..='\u{1f}' | '\u{7f}'.. => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            _ => out.push(c),
        }
    }
    out.push('"');
}

/// The pointer text of a tool result whose content text is `byte_length`
/// UTF-8 bytes long.
pub fn pointer_text(
    byte_length: usize,
    call_id: &str,
    seq: Option<i64>,
    is_error: bool,
    trust: &str,
) -> String {
    let mut out = String::with_capacity(PREFIX.len() + 128 + call_id.len() + trust.len());
    out.push_str(PREFIX);
    let _ = write!(out, "{{\"byte_length\": {byte_length}, \"call_id\": ");
    push_ascii_json(&mut out, call_id);
    out.push_str(", \"elided\": \"tool_result\", \"event_id\": ");
    match seq {
        Some(s) => {
            let _ = write!(out, "{s}");
        }
        None => out.push_str("null"),
    }
    out.push_str(", \"is_error\": ");
    out.push_str(if is_error { "true" } else { "false" });
    out.push_str(", \"trust\": ");
    push_ascii_json(&mut out, trust);
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointer_text_is_json_inline() {
        assert_eq!(
            pointer_text(12, "c-1", Some(7), false, "tool_output"),
            "[tool result elided under context pressure] {\"byte_length\": 12, \"call_id\": \"c-1\", \
             \"elided\": \"tool_result\", \"event_id\": 7, \"is_error\": false, \"trust\": \"tool_output\"}"
        );
        assert_eq!(
            pointer_text(0, "a\"\\\n\r\t\u{8}\u{c}\0\u{7f}é<>&\u{1F600}", None, true, "x"),
            "[tool result elided under context pressure] {\"byte_length\": 0, \"call_id\": \
             \"a\\\"\\\\\\n\\r\\t\\b\\f\\u0000\\u007f\\u00e9\\u003c\\u003e\\u0026\\ud83d\\ude00\", \
             \"elided\": \"tool_result\", \"event_id\": null, \"is_error\": true, \"trust\": \"x\"}"
        );
    }
}
