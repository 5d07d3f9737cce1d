//! The rendered form of conversation items, as
//! `ctxengine.assembly.render.render_conversation` makes it (ADR 0011): which
//! role each kind renders as, the content text of a message (the one place
//! the Rust backend writes it; `ctxengine.model.content.content_text` is the
//! reference's), and a text item's fenced text and canonical render bytes.
//!
//! Pure: the binding reads an item's fields into a [`TextItem`] and builds
//! the `RenderedItem` from what this writes.

use std::borrow::Cow;

use crate::decode::item::{Content, Part};
use crate::envelope::{envelope_into, rendered_text_canonical_into};
use crate::pointer::pointer_text;

/// How an item of a kind renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Its content text, fenced, under this role (`tool` for a tool result).
    Text(&'static str),
    /// A tool call: the call as it is, role `assistant`, no text.
    Call,
    /// A provider's reasoning continuation: as it is, role `assistant`, no text.
    Reasoning,
}

/// The shape of an item whose class `kind` is `kind`; `None` for a kind
/// that is not a conversation item.
pub fn shape(kind: &str) -> Option<Shape> {
    Some(match kind {
        "user_message" => Shape::Text("user"),
        "assistant_message" => Shape::Text("assistant"),
        "system_message" => Shape::Text("system"),
        "tool_result" => Shape::Text("tool"),
        "tool_call" => Shape::Call,
        "reasoning" => Shape::Reasoning,
        _ => return None,
    })
}

/// The slots of the rendered item (`RenderedItem`): the schema's fields
/// ([`crate::schema::RENDERED`]) in constructor order, then its `_cj` cache.
pub fn slots() -> Vec<&'static str> {
    crate::schema::RENDERED.names().chain(["_cj"]).collect()
}

/// What a render is made from: an item of a [`Shape`], or a tool result's
/// pointer (`render_pointer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Made {
    Shape(Shape),
    Pointer,
}

/// How one slot of a rendered item is filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// The region class the items render for (a pointer: `history`).
    Region,
    /// A role (one shared string per role).
    Role(&'static str),
    /// The render's text ([`TextRender::text`], or the pointer's).
    Text,
    /// The item's own field of this name, as it is.
    Field(&'static str),
    /// The item's field of this name, as a bool.
    Truth(&'static str),
    False,
    None,
    /// The render's canonical cache, `(bytes, sha256(bytes))`, when made.
    Cache,
}

/// How a render `made` fills each of [`slots`], in order.
pub fn plan(made: Made) -> Vec<Fill> {
    slots().into_iter().map(|slot| fill(made, slot)).collect()
}

/// How a render `made` fills the rendered item's slot `slot`.
fn fill(made: Made, slot: &str) -> Fill {
    let tool = matches!(made, Made::Shape(Shape::Text("tool")) | Made::Pointer);
    let call = made == Made::Shape(Shape::Call);
    let reasoning = made == Made::Shape(Shape::Reasoning);
    match slot {
        "region_class" => Fill::Region,
        "role" => Fill::Role(match made {
            Made::Shape(Shape::Text(role)) => role,
            Made::Pointer => "tool",
            Made::Shape(Shape::Call | Shape::Reasoning) => "assistant",
        }),
        "text" if !(call || reasoning) => Fill::Text,
        "call_id" if tool || call => Fill::Field("call_id"),
        "name" | "arguments" if call => Fill::Field(slot_field(slot)),
        // (A pointer keeps the result's own value; a text render, its truth.)
        "is_error" if made == Made::Pointer => Fill::Field("is_error"),
        "is_error" if tool => Fill::Truth("is_error"),
        "is_error" => Fill::False,
        "provider" | "reasoning" if reasoning => Fill::Field(slot_field(slot)),
        "seq" => Fill::Field("seq"),
        "_cj" if matches!(made, Made::Shape(Shape::Text(_) | Shape::Call)) => Fill::Cache,
        _ => Fill::None,
    }
}

/// The item field a slot of the same meaning is filled from.
fn slot_field(slot: &str) -> &'static str {
    match slot {
        "name" => "name",
        "arguments" => "arguments",
        "provider" => "provider",
        // A reasoning item's continuation is its `payload`.
        _ => "payload",
    }
}

/// The text of a content part: a text part's text, a file reference as
/// `[file ARTIFACT_ID MEDIA_TYPE]`.
fn push_part(out: &mut String, part: &Part<'_>) {
    match part {
        Part::Text(text) => out.push_str(text),
        Part::File {
            artifact_id,
            media_type,
            ..
        } => {
            out.push_str("[file ");
            out.push_str(artifact_id);
            out.push(' ');
            out.push_str(media_type);
            out.push(']');
        }
    }
}

/// The content text of a message: a string as it is, parts joined by newlines.
pub fn content_text<'c>(content: &'c Content<'_>) -> Cow<'c, str> {
    match content {
        Content::Text(text) => Cow::Borrowed(text),
        Content::Parts(parts) => {
            let mut out = String::new();
            for (i, part) in parts.iter().enumerate() {
                if i > 0 {
                    out.push('\n');
                }
                push_part(&mut out, part);
            }
            Cow::Owned(out)
        }
    }
}

/// An item's `seq` as a render reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seq {
    Null,
    At(i64),
    /// An int outside 64 bits: the render is made, its canonical bytes are not.
    Unrepresentable,
}

impl From<Option<Option<i64>>> for Seq {
    /// A 64-bit `seq` or `None` (`Some(None)`); `None`: an int outside 64 bits.
    fn from(seq: Option<Option<i64>>) -> Seq {
        match seq {
            Some(Some(at)) => Seq::At(at),
            Some(None) => Seq::Null,
            None => Seq::Unrepresentable,
        }
    }
}

impl Seq {
    fn value(self) -> Option<i64> {
        match self {
            Seq::At(s) => Some(s),
            Seq::Null | Seq::Unrepresentable => None,
        }
    }
}

/// A message or tool result, as its text render reads it.
#[derive(Debug, Clone, Copy)]
pub struct TextItem<'a> {
    /// The role of its [`Shape::Text`].
    pub role: &'a str,
    /// Its content text ([`content_text`]).
    pub text: &'a str,
    pub trust: &'a str,
    /// A tool result's call id (`None` for a message).
    pub call_id: Option<&'a str>,
    pub is_error: bool,
    pub seq: Seq,
    /// The item's canonical digest (the envelope's nonce is made from it).
    pub digest: &'a [u8; 32],
}

/// The buffers a text render is written into, reused from item to item.
#[derive(Debug, Default)]
pub struct TextRender {
    /// The render's text: the content text, fenced unless trusted.
    pub text: String,
    /// `RenderedItem.to_dict()` as canonical JSON (valid when [`TextRender::render`] says so).
    pub canonical: Vec<u8>,
    source: String,
}

impl TextRender {
    /// Renders `item` for `region_class` into [`TextRender::text`] and
    /// [`TextRender::canonical`]; false when the canonical bytes cannot be made
    /// (a `seq` outside the canonical integer range: left for first use).
    pub fn render(&mut self, region_class: &str, item: &TextItem<'_>) -> bool {
        self.source.clear();
        match item.call_id {
            Some(call_id) => {
                self.source.push_str("tool:");
                self.source.push_str(call_id);
            }
            None => self.source.push_str(item.role),
        }
        envelope_into(
            &mut self.text,
            item.text,
            item.trust,
            &self.source,
            item.digest,
        );
        if item.seq == Seq::Unrepresentable {
            self.canonical.clear();
            return false;
        }
        rendered_text_canonical_into(
            &mut self.canonical,
            region_class,
            item.role,
            &self.text,
            item.call_id,
            item.is_error,
            item.seq.value(),
        )
    }
}

/// The text of a tool result's pointer render (`render_pointer`): `None`
/// for a message (no call id) or a `seq` outside 64 bits (the caller
/// renders those).
pub fn pointer(item: &TextItem<'_>) -> Option<String> {
    if item.seq == Seq::Unrepresentable {
        return None;
    }
    let (length, seq) = (item.text.len(), item.seq.value());
    Some(pointer_text(
        length,
        item.call_id?,
        seq,
        item.is_error,
        item.trust,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file<'a>(id: &'a str, media: &'a str) -> Part<'a> {
        Part::File {
            artifact_id: Cow::Borrowed(id),
            media_type: Cow::Borrowed(media),
            filename: Some(Cow::Borrowed("ignored.png")),
        }
    }

    #[test]
    fn every_render_fills_every_slot() {
        use Fill::*;
        assert_eq!(
            slots(),
            [
                "region_class",
                "role",
                "text",
                "call_id",
                "name",
                "arguments",
                "is_error",
                "provider",
                "reasoning",
                "seq",
                "_cj"
            ]
        );
        let none3 = [None, None, None];
        let user = plan(Made::Shape(Shape::Text("user")));
        assert_eq!(
            user,
            [
                Region,
                Role("user"),
                Text,
                None,
                None,
                None,
                False,
                None,
                None,
                Field("seq"),
                Cache
            ]
        );
        let tool = plan(Made::Shape(Shape::Text("tool")));
        assert_eq!(
            tool[3..7],
            [Field("call_id"), None, None, Truth("is_error")]
        );
        let call = plan(Made::Shape(Shape::Call));
        assert_eq!(
            call,
            [
                Region,
                Role("assistant"),
                None,
                Field("call_id"),
                Field("name"),
                Field("arguments"),
                False,
                None,
                None,
                Field("seq"),
                Cache
            ]
        );
        let reasoning = plan(Made::Shape(Shape::Reasoning));
        assert_eq!(reasoning[2..7], [None, None, None, None, False]);
        assert_eq!(
            reasoning[7..],
            [Field("provider"), Field("payload"), Field("seq"), None]
        );
        let pointer = plan(Made::Pointer);
        assert_eq!(pointer[..4], [Region, Role("tool"), Text, Field("call_id")]);
        assert_eq!(pointer[4..7], [None, None, Field("is_error")]);
        assert_eq!(pointer[7..], [none3[0], None, Field("seq"), None]);
    }

    #[test]
    fn content_text_joins_parts_and_writes_file_references() {
        // As `ctxengine.model.content.content_text` writes them.
        assert_eq!(content_text(&Content::Text(Cow::Borrowed("a\nb"))), "a\nb");
        assert!(matches!(
            content_text(&Content::Text(Cow::Borrowed("x"))),
            Cow::Borrowed("x")
        ));
        assert_eq!(content_text(&Content::Parts(vec![])), "");
        let parts = Content::Parts(vec![
            Part::Text(Cow::Borrowed("see")),
            file("art-1", "image/png"),
            Part::Text(Cow::Borrowed("")),
            file("é ]", ""),
        ]);
        assert_eq!(
            content_text(&parts),
            "see\n[file art-1 image/png]\n\n[file é ] ]"
        );
    }

    #[test]
    fn shapes_of_the_item_kinds() {
        assert_eq!(shape("user_message"), Some(Shape::Text("user")));
        assert_eq!(shape("assistant_message"), Some(Shape::Text("assistant")));
        assert_eq!(shape("system_message"), Some(Shape::Text("system")));
        assert_eq!(shape("tool_result"), Some(Shape::Text("tool")));
        assert_eq!(shape("tool_call"), Some(Shape::Call));
        assert_eq!(shape("reasoning"), Some(Shape::Reasoning));
        assert_eq!(shape("text_part"), None);
    }

    #[test]
    fn a_trusted_message_renders_verbatim() {
        let mut r = TextRender::default();
        let item = TextItem {
            role: "user",
            text: "hi <b>",
            trust: "platform",
            call_id: None,
            is_error: false,
            seq: Seq::At(3),
            digest: &[1; 32],
        };
        assert!(r.render("history", &item));
        assert_eq!(r.text, "hi <b>");
        // `RenderedItem("history", "user", text="hi <b>", seq=3).to_dict()`, canonical.
        assert_eq!(
            String::from_utf8(r.canonical.clone()).unwrap(),
            "{\"arguments\":null,\"call_id\":null,\"is_error\":false,\"name\":null,\
             \"provider\":null,\"reasoning\":null,\"region_class\":\"history\",\
             \"role\":\"user\",\"seq\":3,\"text\":\"hi <b>\"}"
        );
    }

    fn hex32(hex: &str) -> [u8; 32] {
        let mut out = [0u8; 32];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
        }
        out
    }

    #[test]
    fn renders_equal_the_reference_renderer() {
        // `render_conversation(item, "history")` of the reference backend: its text
        // and `canonical_json(rendered.to_dict())`, for the item whose digest is given.
        let mut r = TextRender::default();
        // ToolResult("c1", "a<b", is_error=True, trust=TrustLevel.INTERNAL_TOOL, seq=9)
        let digest = hex32("676caaf0b408880515878ea44663c2c1772278340045c77c618ff26618741337");
        let item = TextItem {
            role: "tool",
            text: "a<b",
            trust: "internal_tool",
            call_id: Some("c1"),
            is_error: true,
            seq: Seq::At(9),
            digest: &digest,
        };
        assert!(r.render("history", &item));
        assert_eq!(
            r.text,
            "<untrusted trust=\"internal_tool\" source=\"tool:c1\" nonce=\"44020d75d4bdb126\">\
             a&lt;b</untrusted:44020d75d4bdb126>"
        );
        assert_eq!(
            String::from_utf8(r.canonical.clone()).unwrap(),
            r#"{"arguments":null,"call_id":"c1","is_error":true,"name":null,"provider":null,"reasoning":null,"region_class":"history","role":"tool","seq":9,"text":"<untrusted trust=\"internal_tool\" source=\"tool:c1\" nonce=\"44020d75d4bdb126\">a&lt;b</untrusted:44020d75d4bdb126>"}"#
        );
        // UserMessage((TextPart("see"), FileRef("art-1", "image/png")), trust=TrustLevel.USER, seq=4)
        let digest = hex32("e24db4d12f88a157b96b3b163dc6d67e3f17f6c3ac2a51b59ff9ff3500d4fe39");
        let content = Content::Parts(vec![
            Part::Text(Cow::Borrowed("see")),
            file("art-1", "image/png"),
        ]);
        let text = content_text(&content);
        let item = TextItem {
            role: "user",
            text: &text,
            trust: "user",
            call_id: None,
            is_error: false,
            seq: Seq::At(4),
            digest: &digest,
        };
        assert!(r.render("history", &item));
        assert_eq!(
            r.text,
            "<untrusted trust=\"user\" source=\"user\" nonce=\"2461ac590b46bf68\">\
             see\n[file art-1 image/png]</untrusted:2461ac590b46bf68>"
        );
        assert_eq!(
            String::from_utf8(r.canonical.clone()).unwrap(),
            r#"{"arguments":null,"call_id":null,"is_error":false,"name":null,"provider":null,"reasoning":null,"region_class":"history","role":"user","seq":4,"text":"<untrusted trust=\"user\" source=\"user\" nonce=\"2461ac590b46bf68\">see\n[file art-1 image/png]</untrusted:2461ac590b46bf68>"}"#
        );
    }

    #[test]
    fn a_seq_as_read() {
        assert_eq!(Seq::from(Some(Some(3))), Seq::At(3));
        assert_eq!(Seq::from(Some(None)), Seq::Null);
        assert_eq!(Seq::from(None), Seq::Unrepresentable);
    }

    #[test]
    fn a_huge_seq_leaves_the_canonical_bytes_for_first_use() {
        let mut r = TextRender::default();
        let mut item = TextItem {
            role: "system",
            text: "x",
            trust: "platform",
            call_id: None,
            is_error: false,
            seq: Seq::Unrepresentable,
            digest: &[0; 32],
        };
        assert!(!r.render("history", &item));
        assert_eq!(r.text, "x");
        item.seq = Seq::At(1 << 60);
        assert!(!r.render("history", &item));
        item.seq = Seq::Null;
        assert!(r.render("history", &item));
        assert!(r.canonical.ends_with(b"\"seq\":null,\"text\":\"x\"}"));
    }

    #[test]
    fn a_pointer_measures_the_content_text() {
        let parts = Content::Parts(vec![Part::Text(Cow::Borrowed("é")), file("a", "b")]);
        let text = content_text(&parts);
        let mut item = TextItem {
            role: "tool",
            text: &text,
            trust: "user",
            call_id: Some("c"),
            is_error: false,
            seq: Seq::At(2),
            digest: &[0; 32],
        };
        // "é\n[file a b]" is 2 + 1 + 10 bytes.
        assert_eq!(
            pointer(&item),
            Some(pointer_text(13, "c", Some(2), false, "user"))
        );
        item.seq = Seq::Unrepresentable;
        assert_eq!(pointer(&item), None, "the caller renders it");
        item.seq = Seq::Null;
        item.call_id = None;
        assert_eq!(pointer(&item), None, "a message has no pointer");
    }
}
