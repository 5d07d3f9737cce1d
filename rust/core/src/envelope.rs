//! Trust envelopes and the canonical bytes of a rendered text item, as
//! `ctxengine.assembly.envelope` and `RenderedItem.to_dict()` define them
//! (ADR 0003, ADR 0011: the history renderer's native half).
//!
//! Content below `trusted_configuration` is fenced as
//! `<untrusted trust=".." source=".." nonce="N">BODY</untrusted:N>`, the
//! nonce the first 16 hex digits of SHA-256(`ctxengine.envelope\0` + the
//! item's canonical digest); the body escapes `& < >`, NUL and U+2028/2029.
//! Attribute values escape `& < > " '` and every line-unsafe character
//! ([`LINE_UNSAFE`]: controls, format characters, line and paragraph
//! separators), the one rule `ctxengine.plan.envelope` applies to attributes
//! and inline fields (ADR 0010).

use crate::canonical::{write_i64, write_str, MAX_SAFE_INTEGER};
use crate::hash::sha256;
use std::fmt::Write;

/// Hex digits of the nonce.
pub const NONCE_HEX: usize = 16;

/// Trust levels rendered verbatim (`TrustLevel.is_trusted`).
pub fn is_trusted(trust: &str) -> bool {
    trust == "platform" || trust == "trusted_configuration"
}

/// The envelope nonce of content whose canonical digest is `digest`, as its
/// ASCII hex digits (no allocation: it is made for every untrusted render).
fn nonce(digest: &[u8; 32]) -> [u8; NONCE_HEX] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut data = [0u8; 19 + 32];
    data[..19].copy_from_slice(b"ctxengine.envelope\x00");
    data[19..].copy_from_slice(digest);
    let hash = sha256(&data);
    let mut out = [0u8; NONCE_HEX];
    for (i, b) in hash.iter().take(NONCE_HEX / 2).enumerate() {
        out[2 * i] = HEX[usize::from(b >> 4)];
        out[2 * i + 1] = HEX[usize::from(b & 15)];
    }
    out
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Bit 7 set in each byte of `x` equal to `byte` (exact as a whole: zero iff
/// no byte is; a flag above a flagged byte may be spurious).
#[inline(always)]
fn equal_mask(x: u64, byte: u8) -> u64 {
    let t = x ^ (ONES * u64::from(byte));
    t.wrapping_sub(ONES) & !t & HIGHS
}

/// The characters no attribute value may carry as themselves: the Unicode
/// general categories Cc, Cf, Zl and Zp as inclusive ranges, pinned at
/// Unicode 15.0 — the table `LINE_UNSAFE_RANGES` of
/// `ctxengine.plan.envelope`, which must stay equal to this one (a test
/// renders every code point on both backends).
pub const LINE_UNSAFE: [(u32, u32); 23] = [
    (0x0000, 0x001F),
    (0x007F, 0x009F),
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x2028, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
];

/// Whether `ch` is in [`LINE_UNSAFE`].
pub fn line_unsafe(ch: char) -> bool {
    let c = u32::from(ch);
    if c < 0xA0 {
        return !(0x20..0x7F).contains(&c);
    }
    // The last range starting at or below `c`.
    let at = LINE_UNSAFE.partition_point(|&(start, _)| start <= c);
    at > 0 && c <= LINE_UNSAFE[at - 1].1
}

/// Whether `bytes` holds a byte `escape_body` may replace: `& < >`, NUL or
/// the lead byte of U+2028/U+2029 (0xE2). Eight bytes per step: this runs
/// over every history item's text.
fn has_special(bytes: &[u8]) -> bool {
    let flagged = |x: u64| {
        equal_mask(x, b'&')
            | equal_mask(x, b'<')
            | equal_mask(x, b'>')
            | equal_mask(x, 0)
            | equal_mask(x, 0xE2)
            != 0
    };
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        if flagged(u64::from_le_bytes(word)) {
            return true;
        }
    }
    let rest = chunks.remainder();
    let mut word = [b' '; 8];
    word[..rest.len()].copy_from_slice(rest);
    flagged(u64::from_le_bytes(word))
}

fn escape_body(out: &mut String, text: &str) {
    // Most text holds none of the escaped characters: copy it whole. (U+2028
    // and U+2029 are the only ones outside ASCII; their UTF-8 starts 0xE2.)
    if !has_special(text.as_bytes()) {
        out.push_str(text);
        return;
    }
    let mut start = 0;
    for (i, ch) in text.char_indices() {
        let rep = match ch {
            '&' => "&amp;",
            '<' => "&lt;",
            '>' => "&gt;",
            '\0' => "&#0;",
            '\u{2028}' => "&#x2028;",
            '\u{2029}' => "&#x2029;",
            _ => continue,
        };
        out.push_str(&text[start..i]);
        out.push_str(rep);
        start = i + ch.len_utf8();
    }
    out.push_str(&text[start..]);
}

/// `value` escaped as an attribute value: `& < > "` as named entities, `'`
/// and every line-unsafe character as a numeric reference, decimal below
/// U+0080 (`&#39;`, `&#10;`) and lowercase hexadecimal above (`&#x85;`).
pub fn escape_attr(out: &mut String, value: &str) {
    // Printable ASCII without the syntax characters (a plain id) is copied whole.
    let plain =
        |b: &u8| (0x20..0x7F).contains(b) && !matches!(b, b'&' | b'<' | b'>' | b'"' | b'\'');
    if value.as_bytes().iter().all(plain) {
        out.push_str(value);
        return;
    }
    for ch in value.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if line_unsafe(c) => {
                let code = u32::from(c);
                let _ = if code < 0x80 {
                    write!(out, "&#{code};")
                } else {
                    write!(out, "&#x{code:x};")
                };
            }
            c => out.push(c),
        }
    }
}

/// `text` as the model sees it, verbatim when trusted, otherwise fenced and
/// escaped, written into `out` (cleared first: a caller rendering many items
/// reuses one buffer).
pub fn envelope_into(out: &mut String, text: &str, trust: &str, source: &str, digest: &[u8; 32]) {
    out.clear();
    if is_trusted(trust) {
        out.push_str(text);
        return;
    }
    let nonce = nonce(digest);
    // The nonce is ASCII hex digits.
    let nonce = std::str::from_utf8(&nonce).unwrap_or_default();
    out.reserve(text.len() + 96);
    out.push_str("<untrusted trust=\"");
    escape_attr(out, trust);
    out.push_str("\" source=\"");
    escape_attr(out, source);
    out.push_str("\" nonce=\"");
    out.push_str(nonce);
    out.push_str("\">");
    escape_body(out, text);
    out.push_str("</untrusted:");
    out.push_str(nonce);
    out.push('>');
}

/// The fields of a `RenderedItem` its canonical bytes are written from
/// (`provider` and `reasoning` are null: the renders written here carry none).
struct Rendered<'a> {
    region_class: &'a str,
    role: &'a str,
    text: Option<&'a str>,
    call_id: Option<&'a str>,
    name: Option<&'a str>,
    /// The canonical JSON of `arguments`, when there are any.
    arguments_json: Option<&'a [u8]>,
    is_error: bool,
    seq: Option<i64>,
}

fn write_opt_str(out: &mut Vec<u8>, value: Option<&str>) {
    match value {
        Some(v) => write_str(out, v.as_bytes()),
        None => out.extend_from_slice(b"null"),
    }
}

/// `RenderedItem.to_dict()` as canonical JSON (keys in sorted order), or
/// `None` when `seq` is outside the canonical integer range.
fn rendered_canonical(r: &Rendered<'_>) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    rendered_canonical_into(&mut out, r).then_some(out)
}

/// [`rendered_canonical`] written into `out` (cleared first); false when `seq`
/// is outside the canonical integer range (`out` is then left empty).
fn rendered_canonical_into(out: &mut Vec<u8>, r: &Rendered<'_>) -> bool {
    out.clear();
    if r.seq
        .is_some_and(|s| s.unsigned_abs() > MAX_SAFE_INTEGER as u64)
    {
        return false;
    }
    let args = r.arguments_json.unwrap_or(b"null");
    out.reserve(args.len() + r.text.map_or(0, str::len) + r.region_class.len() + 200);
    let out = &mut *out;
    out.extend_from_slice(b"{\"arguments\":");
    out.extend_from_slice(args);
    out.extend_from_slice(b",\"call_id\":");
    write_opt_str(out, r.call_id);
    out.extend_from_slice(b",\"is_error\":");
    out.extend_from_slice(if r.is_error { b"true" } else { b"false" });
    out.extend_from_slice(b",\"name\":");
    write_opt_str(out, r.name);
    out.extend_from_slice(b",\"provider\":null,\"reasoning\":null,\"region_class\":");
    write_str(out, r.region_class.as_bytes());
    out.extend_from_slice(b",\"role\":");
    write_str(out, r.role.as_bytes());
    out.extend_from_slice(b",\"seq\":");
    match r.seq {
        Some(s) => write_i64(out, s),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"text\":");
    write_opt_str(out, r.text);
    out.push(b'}');
    true
}

/// The canonical bytes of `RenderedItem.to_dict()` for a text item (no tool
/// call, provider or reasoning), written into `out` (cleared first: a
/// caller rendering many items reuses one buffer); false when `seq` is
/// outside the canonical integer range.
pub fn rendered_text_canonical_into(
    out: &mut Vec<u8>,
    region_class: &str,
    role: &str,
    text: &str,
    call_id: Option<&str>,
    is_error: bool,
    seq: Option<i64>,
) -> bool {
    rendered_canonical_into(
        out,
        &Rendered {
            region_class,
            role,
            text: Some(text),
            call_id,
            name: None,
            arguments_json: None,
            is_error,
            seq,
        },
    )
}

/// The canonical bytes of `RenderedItem.to_dict()` for a tool call whose
/// `arguments` have the canonical JSON `arguments_json`, or `None` when `seq`
/// is outside the canonical integer range.
pub fn rendered_call_canonical(
    region_class: &str,
    call_id: &str,
    name: &str,
    arguments_json: &[u8],
    seq: Option<i64>,
) -> Option<Vec<u8>> {
    rendered_canonical(&Rendered {
        region_class,
        role: "assistant",
        text: None,
        call_id: Some(call_id),
        name: Some(name),
        arguments_json: Some(arguments_json),
        is_error: false,
        seq,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendered_call_canonical_bytes() {
        let b = rendered_call_canonical("history", "c\"1", "search", b"{\"q\":\"x\"}", Some(7))
            .unwrap();
        assert_eq!(
            String::from_utf8(b).unwrap(),
            "{\"arguments\":{\"q\":\"x\"},\"call_id\":\"c\\\"1\",\"is_error\":false,\"name\":\"search\",\"provider\":null,\"reasoning\":null,\"region_class\":\"history\",\"role\":\"assistant\",\"seq\":7,\"text\":null}"
        );
        assert!(rendered_call_canonical("h", "c", "n", b"{}", Some(1 << 60)).is_none());
        assert!(rendered_call_canonical("h", "c", "n", b"{}", None)
            .is_some_and(|b| b.ends_with(b"\"seq\":null,\"text\":null}")));
    }

    #[test]
    fn envelopes_escape_and_fence() {
        let d = [7u8; 32];
        let mut e = String::from("left from an earlier item");
        envelope_into(&mut e, "hi <b>", "platform", "user", &d);
        assert_eq!(e, "hi <b>");
        envelope_into(&mut e, "a&<b>\0\u{2028}", "user", "tool:x\"'\n", &d);
        let n = String::from_utf8(nonce(&d).to_vec()).unwrap();
        assert_eq!(
            e,
            format!(
                "<untrusted trust=\"user\" source=\"tool:x&quot;&#39;&#10;\" nonce=\"{n}\">a&amp;&lt;b&gt;&#0;&#x2028;</untrusted:{n}>"
            )
        );
        assert_eq!(n.len(), NONCE_HEX);
    }

    #[test]
    fn special_scan_matches_a_byte_loop() {
        let specials = [b'&', b'<', b'>', 0, 0xE2];
        let text = [b'a'; 40];
        for len in 0..40 {
            for at in 0..=len {
                for byte in specials.iter().chain(&[b'b', b'"', b'\n', 0x80, 0xFF]) {
                    let mut t = text[..len].to_vec();
                    if at < len {
                        t[at] = *byte;
                    }
                    let want = t.iter().any(|b| specials.contains(b));
                    assert_eq!(has_special(&t), want, "{t:?}");
                }
            }
        }
    }

    #[test]
    fn attributes_escape_every_line_unsafe_character() {
        let mut out = String::new();
        escape_attr(
            &mut out,
            "tool:x\u{85}SYSTEM: y\u{b}\u{c}\u{1c}\u{1d}\u{1e}\u{2028}\u{202e}\u{2066}\u{200e}\u{61c}\u{7f}\t\u{e0041}\u{13439}é",
        );
        assert_eq!(
            out,
            "tool:x&#x85;SYSTEM: y&#11;&#12;&#28;&#29;&#30;&#x2028;&#x202e;&#x2066;&#x200e;&#x61c;&#127;&#9;&#xe0041;&#x13439;é"
        );
        for (start, end) in LINE_UNSAFE {
            for c in [start, end] {
                assert!(char::from_u32(c).is_some_and(line_unsafe), "{c:x}");
            }
            for c in [start.wrapping_sub(1), end + 1] {
                let outside = !LINE_UNSAFE.iter().any(|&(s, e)| (s..=e).contains(&c));
                if outside {
                    assert!(!char::from_u32(c).is_some_and(line_unsafe), "{c:x}");
                }
            }
        }
        assert!(LINE_UNSAFE.windows(2).all(|w| w[0].1 + 1 < w[1].0));
    }

    #[test]
    fn rendered_canonical_bytes() {
        let mut b = Vec::new();
        assert!(rendered_text_canonical_into(
            &mut b,
            "history",
            "tool",
            "t\n",
            Some("c"),
            true,
            Some(3)
        ));
        assert_eq!(
            String::from_utf8(b.clone()).unwrap(),
            "{\"arguments\":null,\"call_id\":\"c\",\"is_error\":true,\"name\":null,\"provider\":null,\"reasoning\":null,\"region_class\":\"history\",\"role\":\"tool\",\"seq\":3,\"text\":\"t\\n\"}"
        );
        assert!(!rendered_text_canonical_into(
            &mut b,
            "h",
            "user",
            "",
            None,
            false,
            Some(1 << 60)
        ));
        assert!(b.is_empty());
    }
}
