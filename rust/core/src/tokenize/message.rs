//! The counting recipe for exact encodings (ADR 0012): what is encoded of a
//! value, and the framing a message adds, after OpenAI's published recipe
//! for chat messages (3 tokens per message, the role and every field value
//! encoded, 3 tokens priming the reply).
//!
//! An exact raw count is a function of (encoding, kind, canonical bytes)
//! only, which is what the memo is keyed by:
//!
//! * `rendered_item` (a message as the model sees it): 3 + role + text +
//!   call id + tool name + the canonical JSON of the arguments and of an
//!   opaque reasoning payload (each when present);
//! * `text` (a string): 4 + the string (a message of that text: 3, plus one
//!   token for its role);
//! * anything else, tool definitions included (OpenAI's serialisation of
//!   tools is not public): 4 + its canonical JSON.

use super::json::{object_members, string_value, Value};
use super::Encoding;
use crate::error::{CoreError, CoreResult};

/// The version of this recipe: part of a stored exact count's counter id
/// (`Counter::stored_id`), so a count stored under another recipe is never
/// read back as this one's. Change it with any change to what is counted.
pub const RECIPE_VERSION: u32 = 1;
/// Tokens every message adds besides its field values.
pub const TOKENS_PER_MESSAGE: i64 = 3;
/// Tokens that prime the model's reply, once per request.
pub const REPLY_PRIMING_TOKENS: i64 = 3;
/// A value counted as one message of its own: the per-message tokens and a
/// one-token role.
pub const VALUE_FRAMING_TOKENS: i64 = TOKENS_PER_MESSAGE + 1;

/// The exact raw count of a value of `kind` whose canonical JSON is `canonical`.
pub fn exact_raw(encoding: Encoding, kind: &str, canonical: &[u8]) -> CoreResult<i64> {
    let text = std::str::from_utf8(canonical)
        .map_err(|_| CoreError::estimator("canonical bytes are not UTF-8"))?;
    let counted = match kind {
        "rendered_item" => message_tokens(encoding, text),
        "text" => string_value(text).map(|s| VALUE_FRAMING_TOKENS + encoding.count(&s) as i64),
        _ => None,
    };
    Ok(counted.unwrap_or_else(|| VALUE_FRAMING_TOKENS + encoding.count(text) as i64))
}

/// The recipe's count of a rendered message, or `None` when `text` is not
/// one (no string `role`, or a text field that is neither a string nor null).
fn message_tokens(encoding: Encoding, text: &str) -> Option<i64> {
    let members = object_members(text)?;
    // A repeated key counts once, with its last value (as a JSON decoder reads it).
    let field = |name: &str| {
        members
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    };
    let role = match field("role")? {
        Value::Str(s, _) => s,
        _ => return None,
    };
    let mut tokens = TOKENS_PER_MESSAGE + encoding.count(role) as i64;
    for name in ["text", "call_id", "name"] {
        match field(name) {
            None | Some(Value::Null) => {}
            Some(Value::Str(s, _)) => tokens += encoding.count(s) as i64,
            Some(Value::Raw(_)) => return None,
        }
    }
    for name in ["arguments", "reasoning"] {
        match field(name) {
            None | Some(Value::Null) => {}
            // Any other value counts as written (a string with its quotes).
            Some(Value::Str(_, raw) | Value::Raw(raw)) => tokens += encoding.count(raw) as i64,
        }
    }
    Some(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    const O: Encoding = Encoding::O200kBase;

    fn count(s: &str) -> i64 {
        O.count(s) as i64
    }

    #[test]
    fn text_is_a_message_of_its_own() {
        assert_eq!(exact_raw(O, "text", br#""hello world""#).unwrap(), 4 + 2);
        assert_eq!(exact_raw(O, "text", br#""""#).unwrap(), 4);
        let escaped = exact_raw(O, "text", br#""a\nb\"c""#).unwrap();
        assert_eq!(escaped, 4 + count("a\nb\"c"));
    }

    #[test]
    fn rendered_messages() {
        let user = br#"{"arguments":null,"call_id":null,"is_error":false,"name":null,"provider":null,"reasoning":null,"region_class":"history","role":"user","seq":4,"text":"hello world"}"#;
        assert_eq!(exact_raw(O, "rendered_item", user).unwrap(), 3 + 1 + 2);
        let call = br#"{"arguments":{"path":"a.txt"},"call_id":"c1","is_error":false,"name":"read_file","provider":null,"reasoning":null,"region_class":"history","role":"assistant","seq":5,"text":null}"#;
        assert_eq!(
            exact_raw(O, "rendered_item", call).unwrap(),
            3 + 1 + count("c1") + count("read_file") + count(r#"{"path":"a.txt"}"#)
        );
        let result = br#"{"arguments":null,"call_id":"c1","is_error":true,"name":null,"provider":null,"reasoning":null,"region_class":"history","role":"tool","seq":6,"text":"no such file"}"#;
        assert_eq!(
            exact_raw(O, "rendered_item", result).unwrap(),
            3 + 1 + count("c1") + count("no such file")
        );
    }

    #[test]
    fn anything_else_is_its_json() {
        let spec =
            br#"{"description":"Read a file","input_schema":{"type":"object"},"name":"read_file"}"#;
        let want = 4 + count(std::str::from_utf8(spec).unwrap());
        assert_eq!(exact_raw(O, "tool_spec", spec).unwrap(), want);
        assert_eq!(exact_raw(O, "json", spec).unwrap(), want);
        // a "rendered_item" that is not a message falls back to its JSON
        let odd = br#"{"role":7,"text":"x"}"#;
        assert_eq!(
            exact_raw(O, "rendered_item", odd).unwrap(),
            4 + count(std::str::from_utf8(odd).unwrap())
        );
        let odd = br#"{"role":"user","text":[1]}"#;
        assert_eq!(
            exact_raw(O, "rendered_item", odd).unwrap(),
            4 + count(std::str::from_utf8(odd).unwrap())
        );
        // a "text" whose bytes are not one string, likewise
        assert_eq!(exact_raw(O, "text", b"12").unwrap(), 4 + count("12"));
        assert!(exact_raw(O, "text", b"\xff").is_err());
    }

    #[test]
    fn string_valued_arguments_count_their_quoted_form() {
        let v = br#"{"arguments":"a\"b","role":"assistant"}"#;
        assert_eq!(
            exact_raw(O, "rendered_item", v).unwrap(),
            3 + 1 + count(r#""a\"b""#)
        );
    }
}
