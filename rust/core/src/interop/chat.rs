//! OpenAI Chat messages -> the cut, as a message index, without building
//! items: each message's items are written as canonical bytes straight
//! from the message ([`super::items`]) and measured by length.
//!
//! The mapping is `ctxengine.interop.openai_chat`'s for the plain shapes: a
//! system or developer message is a `SystemMessage` (trust `platform` /
//! `trusted_configuration`), a user message a `UserMessage` (its `name` the
//! principal), an assistant message an `AssistantMessage` for its content
//! and a `ToolCall` per tool call, a tool message a `ToolResult`. Anything
//! else — a field it does not know, a part that is not text, an assistant
//! message that merges with the one before it — stops at that message
//! ([`Cut::Reference`]): the reference converts it and raises its error.

use super::items::{self, Content};
use super::json::object_to_canonical;
use super::trim::message_cut;
use super::value::Value;
use crate::calibrate::{apply, Ratio};
use crate::cut::{self, ToolRole};
use crate::estimate::Profile;
use crate::CoreResult;

/// The converter's options (`openai_chat.to_items`' provenance).
#[derive(Debug, Clone, Copy)]
pub struct ChatOptions<'a> {
    /// The message key holding each message's sequence number.
    pub seq_field: Option<&'a str>,
    /// Numbers items from here (when `seq_field` is `None`).
    pub first_seq: Option<i64>,
    /// The trust of tool results.
    pub tool_trust: &'a str,
}

impl<'a> ChatOptions<'a> {
    /// The options as the converter's arguments hold them: `seq_field` a
    /// str or `None`, `first_seq` an int or `None`; `None` for any other
    /// shape (the reference refuses it).
    pub fn read<V: Value>(seq_field: &'a V, first_seq: &V, tool_trust: &'a str) -> Option<Self> {
        let seq_field = match seq_field.is_null() {
            true => None,
            false => Some(seq_field.str()?),
        };
        let first_seq = match first_seq.is_null() {
            true => None,
            false => Some(first_seq.int()?),
        };
        Some(ChatOptions {
            seq_field,
            first_seq,
            tool_trust,
        })
    }
}

/// The cut's arguments, checked.
#[derive(Debug, Clone, Copy)]
pub struct CutArgs {
    pub summary_floor: Option<i64>,
    pub history_tokens: i64,
    pub profile: Profile,
    pub factor: Ratio,
}

/// A cut over foreign messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// The cut, as a message index.
    At(usize),
    /// Message `i` is outside the fast path's shapes: the reference takes the call.
    Reference(usize),
}

/// What one item is in a tool pair (owned: the call ids outlive the values).
enum Role {
    Other,
    Call(String),
    Result(String),
}

/// The items of the messages: their raw estimates, sequence numbers, the
/// message each came from and their pair roles.
struct Measured {
    raws: Vec<i64>,
    seqs: Vec<Option<i64>>,
    owners: Vec<usize>,
    roles: Vec<Role>,
}

/// The text values of a list of exactly `{"type": "text", "text": ...}`
/// parts; `None` inside for a string.
fn parts_of<V: Value>(v: &V) -> Option<Option<Vec<V>>> {
    if v.str().is_some() {
        return Some(None);
    }
    let mut out = Vec::new();
    v.elements(|part| {
        if part.dict_len()? != 2 || part.get("type")?.str()? != "text" {
            return None;
        }
        out.push(part.get("text")?);
        Some(())
    })?;
    Some(Some(out))
}

/// Item content: the string, or the text parts [`parts_of`] found.
fn content<'a, V: Value>(v: &'a V, parts: &'a Option<Vec<V>>) -> Option<Content<'a>> {
    match parts {
        None => Some(Content::Text(v.str()?)),
        Some(list) => Some(Content::Parts(
            list.iter().map(|p| p.str()).collect::<Option<_>>()?,
        )),
    }
}

/// Sequence numbers: the message's own (its first item), or counted on.
struct Numbering {
    field: bool,
    next: Option<i64>,
    message_seq: Option<i64>,
    first: bool,
}

impl Numbering {
    fn take(&mut self) -> Option<Option<i64>> {
        if self.field {
            let s = if self.first { self.message_seq } else { None };
            self.first = false;
            return Some(s);
        }
        match self.next {
            None => Some(None),
            Some(v) => {
                self.next = Some(v.checked_add(1)?);
                Some(Some(v))
            }
        }
    }
}

/// The fields of one message the mapping reads.
struct Fields<V> {
    role: Option<V>,
    body: Option<V>,
    name: Option<V>,
    calls: Option<V>,
    call_id: Option<V>,
    seq: Option<V>,
}

/// The message's fields; `None` for a key the mapping does not know.
fn fields<V: Value>(d: &V, seq_field: Option<&str>) -> Option<Fields<V>> {
    let mut f = Fields {
        role: None,
        body: None,
        name: None,
        calls: None,
        call_id: None,
        seq: None,
    };
    d.members(|key, v| {
        let key = key?;
        if Some(key) == seq_field {
            f.seq = Some(v);
            return Some(());
        }
        let nullable = matches!(
            key,
            "content" | "refusal" | "audio" | "function_call" | "tool_calls" | "name"
        );
        if (nullable && v.is_null()) || key == "annotations" {
            return Some(());
        }
        let slot = match key {
            "role" => &mut f.role,
            "content" => &mut f.body,
            "name" => &mut f.name,
            "tool_calls" => &mut f.calls,
            "tool_call_id" => &mut f.call_id,
            _ => return None,
        };
        *slot = Some(v);
        Some(())
    })?;
    Some(f)
}

/// `(call_id, name)` of `{"id", "type": "function", "function": {"name",
/// "arguments"}}`, with the arguments' canonical bytes in `args`.
fn tool_call<V: Value>(call: &V, args: &mut Vec<u8>) -> Option<(String, String)> {
    if call.dict_len()? != 3 || call.get("type")?.str()? != "function" {
        return None;
    }
    let id = call.get("id")?;
    let f = call.get("function")?;
    if f.dict_len()? != 2 {
        return None;
    }
    let name = f.get("name")?;
    let arguments = f.get("arguments")?;
    let id = id.str()?;
    if id.is_empty() {
        return None;
    }
    args.clear();
    object_to_canonical(arguments.str()?, args)?;
    Some((id.to_owned(), name.str()?.to_owned()))
}

/// Every message's items measured; `Err(i)` at the first message `i` the
/// fast path does not take.
fn measure<V: Value>(
    messages: impl IntoIterator<Item = V>,
    profile: Profile,
    opts: &ChatOptions<'_>,
) -> Result<Measured, usize> {
    let mut m = Measured {
        raws: Vec::new(),
        seqs: Vec::new(),
        owners: Vec::new(),
        roles: Vec::new(),
    };
    let mut num = Numbering {
        field: opts.seq_field.is_some(),
        next: opts.first_seq,
        message_seq: None,
        first: true,
    };
    let mut buf: Vec<u8> = Vec::with_capacity(1024);
    let mut args: Vec<u8> = Vec::with_capacity(256);
    let mut prev_assistant = false;
    for (i, msg) in messages.into_iter().enumerate() {
        let role = message(
            &msg, i, profile, opts, &mut num, &mut m, &mut buf, &mut args,
        )
        .filter(|role| !(*role == "assistant!" && prev_assistant))
        .ok_or(i)?;
        prev_assistant = role.starts_with("assistant");
    }
    Ok(m)
}

/// Message `i`'s items, pushed onto `m`; its role (`"assistant!"` for an
/// assistant message of tool calls alone, which merges with an assistant
/// message right before it), or `None` off the fast path.
#[allow(clippy::too_many_arguments)]
fn message<V: Value>(
    msg: &V,
    i: usize,
    profile: Profile,
    opts: &ChatOptions<'_>,
    num: &mut Numbering,
    m: &mut Measured,
    buf: &mut Vec<u8>,
    args: &mut Vec<u8>,
) -> Option<&'static str> {
    msg.dict_len()?;
    let f = fields(msg, opts.seq_field)?;
    if opts.seq_field.is_some() {
        num.message_seq = Some(f.seq.as_ref()?.int()?);
    }
    num.first = true;
    let push = |m: &mut Measured, buf: &[u8], r: Role, seq: Option<i64>| -> Option<()> {
        m.raws.push(profile.raw(buf.len()).ok()?);
        m.seqs.push(seq);
        m.owners.push(i);
        m.roles.push(r);
        Some(())
    };
    let only = |ok: bool| ok.then_some(());
    let role = f.role.as_ref()?.str()?;
    match role {
        "system" | "developer" => {
            only(f.name.is_none() && f.calls.is_none() && f.call_id.is_none())?;
            let b = f.body.as_ref()?;
            let parts = parts_of(b)?;
            let c = content(b, &parts)?;
            let trust = if role == "system" {
                "platform"
            } else {
                "trusted_configuration"
            };
            let s = num.take()?;
            buf.clear();
            items::message(buf, "system_message", &c, trust, s)?;
            push(m, buf, Role::Other, s)?;
            Some("system")
        }
        "user" => {
            only(f.calls.is_none() && f.call_id.is_none())?;
            let b = f.body.as_ref()?;
            let parts = parts_of(b)?;
            let c = content(b, &parts)?;
            let principal = match f.name.as_ref() {
                Some(v) => Some(v.str()?),
                None => None,
            };
            let s = num.take()?;
            buf.clear();
            items::user(buf, &c, "user", principal, s)?;
            push(m, buf, Role::Other, s)?;
            Some("user")
        }
        "assistant" => {
            only(f.name.is_none() && f.call_id.is_none())?;
            if let Some(b) = f.body.as_ref() {
                let parts = parts_of(b)?;
                let c = content(b, &parts)?;
                let s = num.take()?;
                buf.clear();
                items::message(buf, "assistant_message", &c, "external_untrusted", s)?;
                push(m, buf, Role::Other, s)?;
            }
            let Some(cs) = f.calls.as_ref() else {
                // Neither content nor tool calls: the reference's to refuse.
                return f.body.is_some().then_some("assistant");
            };
            let mut any = false;
            cs.elements(|call| {
                any = true;
                let (id, name) = tool_call(&call, args)?;
                let s = num.take()?;
                buf.clear();
                items::tool_call(buf, args, &id, &name, s)?;
                push(m, buf, Role::Call(id), s)
            })?;
            only(any)?;
            Some(if f.body.is_none() {
                "assistant!"
            } else {
                "assistant"
            })
        }
        "tool" => {
            only(f.name.is_none() && f.calls.is_none())?;
            let b = f.body.as_ref()?;
            let parts = parts_of(b)?;
            let c = content(b, &parts)?;
            let id = f.call_id.as_ref()?.str()?;
            if id.is_empty() {
                return None;
            }
            let s = num.take()?;
            buf.clear();
            items::tool_result(buf, id, &c, false, opts.tool_trust, s)?;
            push(m, buf, Role::Result(id.to_owned()), s)?;
            Some("tool")
        }
        _ => None,
    }
}

/// The cut over Chat messages (see `ctxengine.reference.interop`'s
/// `openai_chat_cut`) as a message index, or the message the reference
/// must take from. Orphans fall before the cut ([`cut::pair_foreign`]).
pub fn chat_cut<V: Value>(
    messages: impl IntoIterator<Item = V>,
    opts: &ChatOptions<'_>,
    args: &CutArgs,
) -> CoreResult<Cut> {
    let m = match measure(messages, args.profile, opts) {
        Ok(m) => m,
        Err(i) => return Ok(Cut::Reference(i)),
    };
    let roles: Vec<ToolRole<'_>> = m
        .roles
        .iter()
        .map(|r| match r {
            Role::Other => ToolRole::Other,
            Role::Call(id) => ToolRole::Call(id),
            Role::Result(id) => ToolRole::Result(id),
        })
        .collect();
    // Orphans fall before the cut (ADR 0019): no pairing error here.
    let (result_of, not_before) = cut::pair_foreign(&roles, &m.owners);
    let factor = args.factor;
    let c = cut::cut_after_validation(
        &m.raws,
        &m.seqs,
        &result_of,
        args.summary_floor,
        args.history_tokens as i128,
        |s| apply(s, factor),
        not_before,
    )?;
    Ok(Cut::At(message_cut(c, &m.owners, &result_of)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{parse_canonical, Json};

    fn args(history_tokens: i64) -> CutArgs {
        CutArgs {
            summary_floor: None,
            history_tokens,
            profile: Profile::new(3.0, 4).unwrap(),
            factor: (1, 1),
        }
    }

    const OPTS: ChatOptions<'static> = ChatOptions {
        seq_field: None,
        first_seq: None,
        tool_trust: "external_untrusted",
    };

    fn cut(text: &str, history_tokens: i64) -> CoreResult<Cut> {
        let v = parse_canonical(text).unwrap();
        let Json::Array(list) = &v else { panic!() };
        chat_cut(list.iter(), &OPTS, &args(history_tokens))
    }

    const HISTORY: &str = concat!(
        "[{\"content\":\"be brief\",\"role\":\"system\"},",
        "{\"content\":\"hi\",\"name\":\"ann\",\"role\":\"user\"},",
        "{\"content\":null,\"role\":\"assistant\",\"tool_calls\":[{\"function\":",
        "{\"arguments\":\"{\\\"b\\\": 1, \\\"a\\\": 2}\",\"name\":\"f\"},\"id\":\"c1\",\"type\":\"function\"}]},",
        "{\"content\":[{\"text\":\"ok\",\"type\":\"text\"}],\"role\":\"tool\",\"tool_call_id\":\"c1\"},",
        "{\"content\":\"done\",\"role\":\"assistant\"}]"
    );

    #[test]
    fn options_are_read_in_their_plain_shapes_only() {
        let v = parse_canonical("[null,\"seq\",7,true,1.5]").unwrap();
        let Json::Array(a) = &v else { panic!() };
        let a: Vec<&Json> = a.iter().collect();
        let read = |s: usize, f: usize| {
            ChatOptions::read(&a[s], &a[f], "t").map(|o| (o.seq_field, o.first_seq))
        };
        assert_eq!(read(0, 0), Some((None, None)));
        assert_eq!(read(1, 2), Some((Some("seq"), Some(7))));
        assert_eq!(read(2, 0), None); // seq_field not a str
        assert_eq!(read(0, 3), None); // first_seq a bool
        assert_eq!(read(0, 4), None); // first_seq a float
    }

    #[test]
    fn cuts_at_message_starts_and_keeps_pairs_whole() {
        assert_eq!(cut(HISTORY, 1_000_000).unwrap(), Cut::At(0));
        assert_eq!(cut(HISTORY, 0).unwrap(), Cut::At(5));
        // Room for the last message and the tool result, not the call: the
        // result goes with it.
        assert_eq!(cut(HISTORY, 60).unwrap(), Cut::At(4));
    }

    #[test]
    fn the_items_are_measured_as_their_canonical_bytes() {
        let v = parse_canonical(HISTORY).unwrap();
        let Json::Array(list) = &v else { panic!() };
        let m = measure(list.iter(), args(0).profile, &OPTS).ok().unwrap();
        let p = args(0).profile;
        let mut buf = Vec::new();
        items::tool_call(&mut buf, b"{\"a\":2,\"b\":1}", "c1", "f", None).unwrap();
        assert_eq!(m.raws[2], p.raw(buf.len()).unwrap());
        assert_eq!(m.owners, vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn other_shapes_go_to_the_reference() {
        for (text, at) in [
            (
                "[{\"content\":\"x\",\"role\":\"user\"},{\"role\":\"robot\"}]",
                1,
            ),
            ("[{\"content\":\"x\",\"extra\":1,\"role\":\"user\"}]", 0),
            (
                "[{\"content\":[{\"type\":\"image\"}],\"role\":\"user\"}]",
                0,
            ),
            (
                "[{\"content\":\"x\",\"role\":\"tool\",\"tool_call_id\":\"\"}]",
                0,
            ),
            (
                "[{\"content\":\"x\",\"role\":\"assistant\",\"tool_calls\":[]}]",
                0,
            ),
            ("[{\"role\":\"assistant\"}]", 0),
            ("[1]", 0),
        ] {
            assert_eq!(cut(text, 10).unwrap(), Cut::Reference(at), "{text}");
        }
        // Tool calls alone right after an assistant message merge with it.
        let merged = concat!(
            "[{\"content\":\"a\",\"role\":\"assistant\"},{\"content\":null,\"role\":\"assistant\",",
            "\"tool_calls\":[{\"function\":{\"arguments\":\"{}\",\"name\":\"f\"},\"id\":\"c\",\"type\":\"function\"}]}]"
        );
        assert_eq!(cut(merged, 10).unwrap(), Cut::Reference(1));
    }

    #[test]
    fn orphans_fall_before_the_cut() {
        // user, ghost result, user: the cut follows the ghost (ADR 0019)
        let text = concat!(
            "[{\"content\":\"x\",\"role\":\"user\"},",
            "{\"content\":\"r\",\"role\":\"tool\",\"tool_call_id\":\"c9\"},",
            "{\"content\":\"y\",\"role\":\"user\"}]"
        );
        assert_eq!(cut(text, 1000).unwrap(), Cut::At(2));
    }

    #[test]
    fn numbering_from_a_field_or_a_start() {
        let text = "[{\"content\":\"x\",\"n\":7,\"role\":\"user\"}]";
        let v = parse_canonical(text).unwrap();
        let Json::Array(list) = &v else { panic!() };
        let opts = ChatOptions {
            seq_field: Some("n"),
            ..OPTS
        };
        let m = measure(list.iter(), args(0).profile, &opts).ok().unwrap();
        assert_eq!(m.seqs, vec![Some(7)]);
        let opts = ChatOptions {
            first_seq: Some((1 << 53) - 1),
            ..OPTS
        };
        let two = parse_canonical(
            "[{\"content\":\"x\",\"role\":\"user\"},{\"content\":\"y\",\"role\":\"user\"}]",
        )
        .unwrap();
        let Json::Array(list) = &two else { panic!() };
        // The second item's number is past the canonical integers.
        assert_eq!(measure(list.iter(), args(0).profile, &opts).err(), Some(1));
        assert!(measure(list[..1].iter(), args(0).profile, &opts).is_ok());
    }
}
