//! The item schema, declared once (issue 38, ADR 0018): every conversation
//! item kind, the content parts and the rendered item, with each field's
//! name, type, nullability and default, in the order of the Python class's
//! constructor.
//!
//! Everything else that names these fields is generated from this table
//! (`python/ctxengine/model/schema.json`, written by the test below; the
//! binding's decoder slots; the dict shapes `mappings_cut` accepts) or held
//! to it by `tests/model/test_item_schema.py`, which names every table that
//! disagrees. [`tables`] is what the Rust side's hand-written tables say,
//! for that test to read.

/// What a field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    /// A `str`.
    Str,
    /// A `str` that must not be empty.
    Id,
    Int,
    Bool,
    /// A message's content: a `str` or a tuple of content parts.
    Content,
    /// A `TrustLevel` (its value in the dict form).
    Trust,
    /// A JSON object (`dict[str, Any]`).
    Object,
}

impl Type {
    pub const fn name(self) -> &'static str {
        match self {
            Type::Str => "str",
            Type::Id => "id",
            Type::Int => "int",
            Type::Bool => "bool",
            Type::Content => "content",
            Type::Trust => "trust",
            Type::Object => "object",
        }
    }
}

/// A field's default in the constructor and in `from_dict`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Default {
    Required,
    Null,
    False,
    /// A trust level, by value.
    Trust(&'static str),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub name: &'static str,
    pub ty: Type,
    /// `None` is a value of the field.
    pub nullable: bool,
    pub default: Default,
}

/// One record: its `kind` (the dict form's `"type"`), its Python class and
/// its fields in constructor order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub kind: &'static str,
    pub class: &'static str,
    pub fields: &'static [Field],
}

impl Record {
    pub fn field(&self, name: &str) -> Option<&'static Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The field names, in constructor order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> {
        self.fields.iter().map(|f| f.name)
    }

    /// The dict form's keys (the fields and `"type"`), in canonical order.
    pub fn dict_keys(&self) -> Vec<&'static str> {
        let mut keys: Vec<&'static str> = self.names().chain(["type"]).collect();
        keys.sort_unstable();
        keys
    }
}

const fn field(name: &'static str, ty: Type) -> Field {
    Field {
        name,
        ty,
        nullable: false,
        default: Default::Required,
    }
}

const fn optional(name: &'static str, ty: Type) -> Field {
    Field {
        name,
        ty,
        nullable: true,
        default: Default::Null,
    }
}

const fn trust(level: &'static str) -> Field {
    Field {
        name: "trust",
        ty: Type::Trust,
        nullable: false,
        default: Default::Trust(level),
    }
}

const SEQ: Field = optional("seq", Type::Int);
const CONTENT: Field = field("content", Type::Content);
const CALL_ID: Field = field("call_id", Type::Id);
const IS_ERROR: Field = Field {
    name: "is_error",
    ty: Type::Bool,
    nullable: false,
    default: Default::False,
};

/// The conversation item kinds (`ctxengine.model.items`).
pub const ITEMS: [Record; 6] = [
    Record {
        kind: "system_message",
        class: "SystemMessage",
        fields: &[CONTENT, trust("platform"), SEQ],
    },
    Record {
        kind: "user_message",
        class: "UserMessage",
        fields: &[
            CONTENT,
            trust("user"),
            optional("principal_id", Type::Str),
            SEQ,
        ],
    },
    Record {
        kind: "assistant_message",
        class: "AssistantMessage",
        fields: &[CONTENT, trust("external_untrusted"), SEQ],
    },
    Record {
        kind: "tool_call",
        class: "ToolCall",
        fields: &[
            CALL_ID,
            field("name", Type::Str),
            field("arguments", Type::Object),
            SEQ,
        ],
    },
    Record {
        kind: "tool_result",
        class: "ToolResult",
        fields: &[CALL_ID, CONTENT, IS_ERROR, trust("internal_tool"), SEQ],
    },
    Record {
        kind: "reasoning",
        class: "ReasoningItem",
        fields: &[
            field("provider", Type::Str),
            field("payload", Type::Object),
            SEQ,
        ],
    },
];

/// The content parts (`ctxengine.model.content`).
pub const PARTS: [Record; 2] = [
    Record {
        kind: "text_part",
        class: "TextPart",
        fields: &[field("text", Type::Str)],
    },
    Record {
        kind: "file_ref",
        class: "FileRef",
        fields: &[
            field("artifact_id", Type::Str),
            field("media_type", Type::Str),
            optional("filename", Type::Str),
        ],
    },
];

/// One rendered message (`ctxengine.assembly.request.RenderedItem`).
pub const RENDERED: Record = Record {
    kind: "rendered_item",
    class: "RenderedItem",
    fields: &[
        field("region_class", Type::Str),
        field("role", Type::Str),
        optional("text", Type::Str),
        optional("call_id", Type::Str),
        optional("name", Type::Str),
        optional("arguments", Type::Object),
        IS_ERROR,
        optional("provider", Type::Str),
        optional("reasoning", Type::Object),
        SEQ,
    ],
};

/// The trust levels, most trusted first (`ctxengine.model.TrustLevel`).
pub const TRUST_LEVELS: [&str; 7] = [
    "platform",
    "trusted_configuration",
    "user",
    "internal_tool",
    "external_untrusted",
    "memory",
    "knowledge",
];

/// The conversation item of kind `kind`.
pub fn item(kind: &str) -> Option<&'static Record> {
    ITEMS.iter().find(|r| r.kind == kind)
}

/// The index of the default trust level of kind `kind`'s `trust` field.
pub fn default_trust(kind: &str) -> Option<u8> {
    match item(kind)?.field("trust")?.default {
        Default::Trust(t) => trust_index(t),
        _ => None,
    }
}

/// The index of a trust level in [`TRUST_LEVELS`].
pub fn trust_index(value: &str) -> Option<u8> {
    TRUST_LEVELS
        .iter()
        .position(|t| *t == value)
        .map(|i| i as u8)
}

fn record_json(out: &mut String, r: &Record) {
    out.push_str(&format!(
        "    {{\"kind\": \"{}\", \"class\": \"{}\", \"fields\": [\n",
        r.kind, r.class
    ));
    for (i, f) in r.fields.iter().enumerate() {
        let default = match f.default {
            Default::Required => String::new(),
            Default::Null => ", \"default\": null".to_owned(),
            Default::False => ", \"default\": false".to_owned(),
            Default::Trust(t) => format!(", \"default\": \"{t}\""),
        };
        out.push_str(&format!(
            "      {{\"name\": \"{}\", \"type\": \"{}\", \"nullable\": {}{default}}}{}\n",
            f.name,
            f.ty.name(),
            f.nullable,
            if i + 1 < r.fields.len() { "," } else { "" }
        ));
    }
    out.push_str("    ]}");
}

fn records_json(out: &mut String, name: &str, records: &[Record], last: bool) {
    out.push_str(&format!("  \"{name}\": [\n"));
    for (i, r) in records.iter().enumerate() {
        record_json(out, r);
        out.push_str(if i + 1 < records.len() { ",\n" } else { "\n" });
    }
    out.push_str(if last { "  ]\n" } else { "  ],\n" });
}

/// The schema as JSON text: `{"trust_levels": [...], "items": [...],
/// "parts": [...], "rendered": [...]}`, each record `{"kind", "class",
/// "fields": [{"name", "type", "nullable", "default"?}]}` (no `default`:
/// required). One field a line, so a change reads as a one-line diff.
pub fn to_json() -> String {
    let mut out = String::from("{\n  \"trust_levels\": [");
    for (i, t) in TRUST_LEVELS.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&format!("\"{t}\""));
    }
    out.push_str("],\n");
    records_json(&mut out, "items", &ITEMS, false);
    records_json(&mut out, "parts", &PARTS, false);
    records_json(&mut out, "rendered", &[RENDERED], true);
    out.push_str("}\n");
    out
}

/// What the Rust side's hand-written item tables say: `(table, kind, the
/// keys of the dict form it writes or reads, in canonical order)`, one row
/// per table and kind it covers. The Python test holds each to [`ITEMS`].
pub fn tables() -> Vec<(&'static str, &'static str, Vec<String>)> {
    let mut rows = crate::decode::cache::schema_rows();
    rows.extend(crate::decode::item::schema_rows());
    rows.extend(crate::interop::items::schema_rows());
    rows
}

/// A canonical dict form of `r` with every field set (a non-default trust,
/// content of both part kinds), for the tables to read or write.
pub(crate) fn sample(r: &Record) -> String {
    let value = |f: &Field| {
        match f.ty {
        Type::Str => "\"s\"".to_owned(),
        Type::Id => "\"id-1\"".to_owned(),
        Type::Int => "1".to_owned(),
        Type::Bool => "true".to_owned(),
        Type::Trust => "\"memory\"".to_owned(),
        Type::Object => "{\"k\":1}".to_owned(),
        Type::Content => concat!(
            "[{\"artifact_id\":\"a\",\"filename\":null,\"media_type\":\"m\",\"type\":\"file_ref\"},",
            "{\"text\":\"t\",\"type\":\"text_part\"}]"
        )
        .to_owned(),
    }
    };
    let members: Vec<String> = r
        .dict_keys()
        .iter()
        .map(|k| match r.field(k) {
            Some(f) => format!("\"{k}\":{}", value(f)),
            None => format!("\"type\":\"{}\"", r.kind),
        })
        .collect();
    format!("{{{}}}", members.join(","))
}

/// The keys of a canonical JSON object's top level, in order.
pub(crate) fn object_keys(canonical: &[u8]) -> Vec<String> {
    match crate::decode::parse_canonical(std::str::from_utf8(canonical).unwrap_or("")) {
        Ok(crate::decode::Json::Object(members)) => {
            members.iter().map(|(k, _)| k.to_string()).collect()
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checked-in copy Python reads without the extension.
    const JSON_PATH: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../python/ctxengine/model/schema.json"
    );

    #[test]
    fn the_json_copy_is_current() {
        let want = to_json();
        if std::env::var_os("CTXENGINE_WRITE_SCHEMA").is_some() {
            std::fs::write(JSON_PATH, &want).expect("write schema.json");
        }
        let have = std::fs::read_to_string(JSON_PATH).unwrap_or_default();
        assert!(
            have == want,
            "python/ctxengine/model/schema.json is stale: rerun with CTXENGINE_WRITE_SCHEMA=1 \
             cargo test -p ctxengine-core schema"
        );
    }

    #[test]
    fn the_rust_tables_agree() {
        let mut wrong = Vec::new();
        for (table, kind, keys) in tables() {
            let want: Vec<String> = item(kind)
                .map(|r| r.dict_keys().iter().map(|k| k.to_string()).collect())
                .unwrap_or_default();
            if keys != want {
                wrong.push(format!("{table}: {kind}: {keys:?} != {want:?}"));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn every_kind_has_unique_fields_and_a_class() {
        for r in ITEMS.iter().chain(PARTS.iter()).chain([&RENDERED]) {
            let mut names: Vec<_> = r.names().collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), r.fields.len(), "{}", r.kind);
            assert!(!r.class.is_empty());
            assert!(r.field("type").is_none(), "{}: `type` is the kind", r.kind);
        }
        assert_eq!(trust_index("user"), Some(2));
        assert_eq!(item("tool_call").unwrap().class, "ToolCall");
    }
}
