//! Conversation items read from their stored payloads: the same checks, in
//! the same order, as the Python value types' `from_dict` and constructors
//! (`ctxengine.model.items`), and each item's canonical `to_dict()` bytes.

use std::borrow::Cow;

use super::json::Json;
use crate::canonical::{write_f64, write_i64, write_str, MAX_SAFE_INTEGER};

pub use crate::schema::TRUST_LEVELS;

/// An index into [`TRUST_LEVELS`].
pub type Trust = u8;

#[derive(Debug, Clone, PartialEq)]
pub enum Part<'a> {
    Text(Cow<'a, str>),
    File {
        artifact_id: Cow<'a, str>,
        media_type: Cow<'a, str>,
        filename: Option<Cow<'a, str>>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Content<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<Part<'a>>),
}

/// A JSON object's members (canonical order).
pub type Members<'a> = Vec<(Cow<'a, str>, Json<'a>)>;

#[derive(Debug, Clone, PartialEq)]
pub enum Item<'a> {
    System {
        content: Content<'a>,
        trust: Trust,
    },
    User {
        content: Content<'a>,
        trust: Trust,
        principal_id: Option<Cow<'a, str>>,
    },
    Assistant {
        content: Content<'a>,
        trust: Trust,
    },
    ToolCall {
        call_id: Cow<'a, str>,
        name: Cow<'a, str>,
        arguments: Members<'a>,
    },
    ToolResult {
        call_id: Cow<'a, str>,
        content: Content<'a>,
        is_error: bool,
        trust: Trust,
    },
    Reasoning {
        provider: Cow<'a, str>,
        payload: Members<'a>,
    },
}

/// One field's value as the host builds it (see [`Item::fields`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'i, 'a> {
    /// A text (a call id, an artifact id): a string of its own.
    Text(&'i str),
    /// A name likely to recur in a batch (a tool name, a provider).
    Name(&'i str),
    /// A name or `None`.
    OptName(Option<&'i str>),
    Content(&'i Content<'a>),
    Trust(Trust),
    /// A dict (tool arguments, a reasoning payload).
    Members(&'i Members<'a>),
    Bool(bool),
}

impl<'a> Item<'a> {
    /// The field values in the order of the schema's fields (its
    /// constructor order; `seq` last, not included).
    pub fn fields(&self) -> Vec<Value<'_, 'a>> {
        use Value as V;
        match self {
            Item::System { content, trust } | Item::Assistant { content, trust } => {
                vec![V::Content(content), V::Trust(*trust)]
            }
            Item::User {
                content,
                trust,
                principal_id,
            } => vec![
                V::Content(content),
                V::Trust(*trust),
                V::OptName(principal_id.as_deref()),
            ],
            Item::ToolCall {
                call_id,
                name,
                arguments,
            } => vec![V::Text(call_id), V::Name(name), V::Members(arguments)],
            Item::ToolResult {
                call_id,
                content,
                is_error,
                trust,
            } => vec![
                V::Text(call_id),
                V::Content(content),
                V::Bool(*is_error),
                V::Trust(*trust),
            ],
            Item::Reasoning { provider, payload } => {
                vec![V::Name(provider), V::Members(payload)]
            }
        }
    }

    /// The `kind` class attribute of the Python class.
    pub fn kind(&self) -> &'static str {
        match self {
            Item::System { .. } => "system_message",
            Item::User { .. } => "user_message",
            Item::Assistant { .. } => "assistant_message",
            Item::ToolCall { .. } => "tool_call",
            Item::ToolResult { .. } => "tool_result",
            Item::Reasoning { .. } => "reasoning",
        }
    }

    /// Its index in `schema::ITEMS` (the record its `kind` names).
    pub fn index(&self) -> usize {
        let kind = self.kind();
        (crate::schema::ITEMS.iter())
            .position(|r| r.kind == kind)
            .expect("every item kind has a schema record (fields_follow_the_schema)")
    }
}

impl<'a> Part<'a> {
    /// Its index in `schema::PARTS`.
    pub fn index(&self) -> usize {
        match self {
            Part::Text(_) => 0,
            Part::File { .. } => 1,
        }
    }

    /// The field values in the order of the schema's fields.
    pub fn fields(&self) -> Vec<Value<'_, 'a>> {
        match self {
            Part::Text(text) => vec![Value::Text(text)],
            Part::File {
                artifact_id,
                media_type,
                filename,
            } => vec![
                Value::Text(artifact_id),
                Value::Name(media_type),
                Value::OptName(filename.as_deref()),
            ],
        }
    }
}

/// `"{type}.{field}: {reason}"`, as `ModelValidationError` words it.
fn bad(type_name: &str, field: &str, reason: impl AsRef<str>) -> String {
    format!("{type_name}.{field}: {}", reason.as_ref())
}

fn expected(type_name: &str, field: &str, what: &str, got: &Json<'_>) -> String {
    bad(
        type_name,
        field,
        format!("expected {what}, got {}", got.py_type()),
    )
}

/// `d[key]`, or a "missing" error (`_get` without a default).
fn required<'j, 'a>(d: &'j Json<'a>, type_name: &str, key: &str) -> Result<&'j Json<'a>, String> {
    d.get(key).ok_or_else(|| bad(type_name, key, "missing"))
}

fn text<'a>(v: &Json<'a>, type_name: &str, field: &str) -> Result<Cow<'a, str>, String> {
    match v {
        Json::Str(s) => Ok(s.clone()),
        other => Err(expected(type_name, field, "str", other)),
    }
}

fn optional_text<'a>(
    v: Option<&Json<'a>>,
    type_name: &str,
    field: &str,
) -> Result<Option<Cow<'a, str>>, String> {
    match v {
        None | Some(Json::Null) => Ok(None),
        Some(v) => text(v, type_name, field).map(Some),
    }
}

fn members<'a>(v: &Json<'a>, type_name: &str, field: &str) -> Result<Members<'a>, String> {
    match v {
        Json::Object(m) => Ok(m.clone()),
        other => Err(expected(type_name, field, "dict", other)),
    }
}

/// `trust`, or the kind's default (the schema's).
fn trust(d: &Json<'_>, type_name: &str, kind: &str) -> Result<Trust, String> {
    match d.get("trust") {
        None => Ok(crate::schema::default_trust(kind).unwrap_or(0)),
        Some(Json::Str(s)) => TRUST_LEVELS
            .iter()
            .position(|t| *t == s.as_ref())
            .map(|i| i as Trust)
            .ok_or_else(|| bad(type_name, "trust", "unknown trust level")),
        Some(_) => Err(bad(type_name, "trust", "unknown trust level")),
    }
}

/// `_content_from_json`: a str, or a list of text and file parts.
fn content<'a>(v: &Json<'a>, type_name: &str) -> Result<Content<'a>, String> {
    let parts = match v {
        Json::Str(s) => return Ok(Content::Text(s.clone())),
        Json::Array(parts) => parts,
        other => return Err(expected(type_name, "content", "str or list", other)),
    };
    let mut out = Vec::with_capacity(parts.len());
    for (i, raw) in parts.iter().enumerate() {
        let tag = match raw.get("type") {
            Some(Json::Str(s)) => s.as_ref(),
            _ => "",
        };
        out.push(match tag {
            "text_part" => Part::Text(text(
                required(raw, "TextPart", "text")?,
                "TextPart",
                "text",
            )?),
            "file_ref" => {
                let artifact = required(raw, "FileRef", "artifact_id")?;
                let media = required(raw, "FileRef", "media_type")?;
                Part::File {
                    artifact_id: text(artifact, "FileRef", "artifact_id")?,
                    media_type: text(media, "FileRef", "media_type")?,
                    filename: optional_text(raw.get("filename"), "FileRef", "filename")?,
                }
            }
            _ => {
                return Err(bad(
                    type_name,
                    &format!("content[{i}]"),
                    "unknown part type",
                ))
            }
        });
    }
    Ok(Content::Parts(out))
}

/// `call_id`: a non-empty str.
fn call_id<'a>(v: &Json<'a>, type_name: &str) -> Result<Cow<'a, str>, String> {
    let id = text(v, type_name, "call_id")?;
    if id.is_empty() {
        return Err(bad(type_name, "call_id", "must not be empty"));
    }
    Ok(id)
}

/// The item an `{"item": {...}}` payload's item object describes.
pub fn item_from_json<'a>(d: &Json<'a>) -> Result<Item<'a>, String> {
    let tag = match d.get("type") {
        Some(Json::Str(s)) => s.as_ref(),
        _ => "",
    };
    match tag {
        "system_message" => {
            let content = content(required(d, "SystemMessage", "content")?, "SystemMessage")?;
            let trust = trust(d, "SystemMessage", tag)?;
            Ok(Item::System { content, trust })
        }
        "user_message" => {
            let content = content(required(d, "UserMessage", "content")?, "UserMessage")?;
            let trust = trust(d, "UserMessage", tag)?;
            let principal_id = optional_text(d.get("principal_id"), "UserMessage", "principal_id")?;
            Ok(Item::User {
                content,
                trust,
                principal_id,
            })
        }
        "assistant_message" => {
            let n = "AssistantMessage";
            let content = content(required(d, n, "content")?, n)?;
            let trust = trust(d, n, tag)?;
            Ok(Item::Assistant { content, trust })
        }
        "tool_call" => {
            let n = "ToolCall";
            let (id, name, args) = (
                required(d, n, "call_id")?,
                required(d, n, "name")?,
                required(d, n, "arguments")?,
            );
            Ok(Item::ToolCall {
                call_id: call_id(id, n)?,
                name: text(name, n, "name")?,
                arguments: members(args, n, "arguments")?,
            })
        }
        "tool_result" => {
            let n = "ToolResult";
            let id = required(d, n, "call_id")?;
            let content = content(required(d, n, "content")?, n)?;
            let call_id = call_id(id, n)?;
            let is_error = match d.get("is_error") {
                None => false,
                Some(Json::Bool(b)) => *b,
                Some(other) => return Err(expected(n, "is_error", "bool", other)),
            };
            let trust = trust(d, n, tag)?;
            Ok(Item::ToolResult {
                call_id,
                content,
                is_error,
                trust,
            })
        }
        "reasoning" => {
            let n = "ReasoningItem";
            let (provider, payload) = (required(d, n, "provider")?, required(d, n, "payload")?);
            Ok(Item::Reasoning {
                provider: text(provider, n, "provider")?,
                payload: members(payload, n, "payload")?,
            })
        }
        _ => Err(bad("ConversationItem", "type", "unknown item type")),
    }
}

// ---------------------------------------------------------------------------
// canonical bytes of to_dict()

/// Appends `"key":` (keys here are plain ASCII).
fn key(out: &mut Vec<u8>, first: &mut bool, name: &str) {
    if !*first {
        out.push(b',');
    }
    *first = false;
    out.push(b'"');
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
}

fn string(out: &mut Vec<u8>, s: &str) {
    write_str(out, s.as_bytes());
}

/// Writes an already-canonical parsed value back (it round-trips exactly).
pub fn write_json(out: &mut Vec<u8>, v: &Json<'_>) {
    match v {
        Json::Null => out.extend_from_slice(b"null"),
        Json::Bool(true) => out.extend_from_slice(b"true"),
        Json::Bool(false) => out.extend_from_slice(b"false"),
        Json::Int(i) => write_i64(out, *i),
        Json::Float(f) => {
            // Parsed values are finite: write_f64 cannot fail on them.
            let _ = write_f64(out, *f);
        }
        Json::Str(s) => string(out, s),
        Json::Array(values) => {
            out.push(b'[');
            for (i, value) in values.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json(out, value);
            }
            out.push(b']');
        }
        Json::Object(members) => write_members(out, members),
    }
}

fn write_members(out: &mut Vec<u8>, members: &Members<'_>) {
    out.push(b'{');
    for (i, (k, value)) in members.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        string(out, k);
        out.push(b':');
        write_json(out, value);
    }
    out.push(b'}');
}

fn write_content(out: &mut Vec<u8>, content: &Content<'_>) {
    match content {
        Content::Text(s) => string(out, s),
        Content::Parts(parts) => {
            out.push(b'[');
            for (i, part) in parts.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                match part {
                    Part::Text(t) => {
                        out.extend_from_slice(b"{\"text\":");
                        string(out, t);
                        out.extend_from_slice(b",\"type\":\"text_part\"}");
                    }
                    Part::File {
                        artifact_id,
                        media_type,
                        filename,
                    } => {
                        out.extend_from_slice(b"{\"artifact_id\":");
                        string(out, artifact_id);
                        out.extend_from_slice(b",\"filename\":");
                        match filename {
                            Some(f) => string(out, f),
                            None => out.extend_from_slice(b"null"),
                        }
                        out.extend_from_slice(b",\"media_type\":");
                        string(out, media_type);
                        out.extend_from_slice(b",\"type\":\"file_ref\"}");
                    }
                }
            }
            out.push(b']');
        }
    }
}

/// The canonical bytes of the item's `to_dict()` with `seq`, or `None`
/// when `seq` is outside the canonical integer range (the value type then
/// fails the same way when asked for its bytes).
pub fn canonical_item(item: &Item<'_>, seq: i64) -> Option<Vec<u8>> {
    if seq.unsigned_abs() > MAX_SAFE_INTEGER as u64 {
        return None;
    }
    let mut out = Vec::with_capacity(256);
    let mut first = true;
    let trust_of = |t: &Trust| TRUST_LEVELS[*t as usize];
    out.push(b'{');
    match item {
        Item::System { content, trust } | Item::Assistant { content, trust } => {
            key(&mut out, &mut first, "content");
            write_content(&mut out, content);
            key(&mut out, &mut first, "seq");
            write_i64(&mut out, seq);
            key(&mut out, &mut first, "trust");
            string(&mut out, trust_of(trust));
        }
        Item::User {
            content,
            trust,
            principal_id,
        } => {
            key(&mut out, &mut first, "content");
            write_content(&mut out, content);
            key(&mut out, &mut first, "principal_id");
            match principal_id {
                Some(p) => string(&mut out, p),
                None => out.extend_from_slice(b"null"),
            }
            key(&mut out, &mut first, "seq");
            write_i64(&mut out, seq);
            key(&mut out, &mut first, "trust");
            string(&mut out, trust_of(trust));
        }
        Item::ToolCall {
            call_id,
            name,
            arguments,
        } => {
            key(&mut out, &mut first, "arguments");
            write_members(&mut out, arguments);
            key(&mut out, &mut first, "call_id");
            string(&mut out, call_id);
            key(&mut out, &mut first, "name");
            string(&mut out, name);
            key(&mut out, &mut first, "seq");
            write_i64(&mut out, seq);
        }
        Item::ToolResult {
            call_id,
            content,
            is_error,
            trust,
        } => {
            key(&mut out, &mut first, "call_id");
            string(&mut out, call_id);
            key(&mut out, &mut first, "content");
            write_content(&mut out, content);
            key(&mut out, &mut first, "is_error");
            out.extend_from_slice(if *is_error { b"true" } else { b"false" });
            key(&mut out, &mut first, "seq");
            write_i64(&mut out, seq);
            key(&mut out, &mut first, "trust");
            string(&mut out, trust_of(trust));
        }
        Item::Reasoning { provider, payload } => {
            key(&mut out, &mut first, "payload");
            write_members(&mut out, payload);
            key(&mut out, &mut first, "provider");
            string(&mut out, provider);
            key(&mut out, &mut first, "seq");
            write_i64(&mut out, seq);
        }
    }
    key(&mut out, &mut first, "type");
    string(&mut out, item.kind());
    out.push(b'}');
    Some(out)
}

/// What this decoder reads and writes back of each kind's sample dict form
/// (`crate::schema::tables`): the keys of `canonical_item`.
pub(crate) fn schema_rows() -> Vec<(&'static str, &'static str, Vec<String>)> {
    let mut rows = Vec::new();
    for r in crate::schema::ITEMS.iter() {
        let text = crate::schema::sample(r);
        let keys = match super::json::parse_canonical(&text)
            .map_err(|_| "not canonical".to_owned())
            .and_then(|d| item_from_json(&d).map(|item| canonical_item(&item, 1)))
        {
            Ok(Some(bytes)) => crate::schema::object_keys(&bytes),
            Ok(None) => vec!["<no bytes>".to_owned()],
            Err(reason) => vec![format!("<does not decode: {reason}>")],
        };
        rows.push(("rust/core/src/decode/item.rs", r.kind, keys));
    }
    rows
}

#[cfg(test)]
mod field_order {
    use super::*;
    use crate::schema::{Type, ITEMS};

    /// `Item::fields` gives each schema field but `seq`, in the schema's
    /// order, as a value of the field's type.
    #[test]
    fn fields_follow_the_schema() {
        for r in ITEMS.iter() {
            let text = crate::schema::sample(r);
            let json = super::super::json::parse_canonical(&text).unwrap();
            let item = item_from_json(&json).unwrap();
            assert_eq!(&ITEMS[item.index()].kind, &r.kind);
            let want: Vec<_> = r.fields.iter().filter(|f| f.name != "seq").collect();
            let have = item.fields();
            assert_eq!(have.len(), want.len(), "{}", r.kind);
            for (v, f) in have.iter().zip(want) {
                let fits = match v {
                    Value::Text(_) | Value::Name(_) => matches!(f.ty, Type::Str | Type::Id),
                    Value::OptName(_) => f.nullable && matches!(f.ty, Type::Str | Type::Id),
                    Value::Content(_) => f.ty == Type::Content,
                    Value::Trust(_) => f.ty == Type::Trust,
                    Value::Members(_) => f.ty == Type::Object,
                    Value::Bool(_) => f.ty == Type::Bool,
                };
                assert!(fits, "{}.{}: {v:?}", r.kind, f.name);
            }
            assert_eq!(r.names().last(), Some("seq"), "{}", r.kind);
        }
    }

    /// `Part::fields` gives every field of its `schema::PARTS` record, in order.
    #[test]
    fn part_fields_follow_the_schema() {
        let (text, name) = (Cow::Borrowed("t"), Some(Cow::Borrowed("f")));
        let file = Part::File {
            artifact_id: text.clone(),
            media_type: text.clone(),
            filename: name,
        };
        for part in [Part::Text(text.clone()), file] {
            let r = &crate::schema::PARTS[part.index()];
            let have = part.fields();
            assert_eq!(have.len(), r.fields.len(), "{}", r.kind);
            for (v, f) in have.iter().zip(r.fields) {
                let fits = match v {
                    Value::Text(_) | Value::Name(_) => !f.nullable,
                    Value::OptName(_) => f.nullable,
                    _ => false,
                };
                assert!(fits && f.ty == Type::Str, "{}.{}: {v:?}", r.kind, f.name);
            }
        }
    }
}
