//! The cut over a history kept as the items' `to_dict()` mappings. A
//! mapping that is exactly an item's dict form — the keys and value types
//! the item schema ([`crate::schema`]) declares, nothing else — has the
//! item's canonical bytes, so it is measured as it stands, by length, with
//! no item built. Anything else stops at that mapping ([`Cut::Reference`]):
//! the reference decodes each mapping with `item_from_dict` and raises its
//! error.

use super::chat::{Cut, CutArgs};
use super::value::Value;
use crate::calibrate::apply;
use crate::cut::{self, ToolRole};
use crate::schema::{self, Field, Record, Type};
use crate::CoreResult;

/// A value of the field's type, as the dict form holds it.
fn fits<V: Value>(v: &V, f: &Field) -> Option<()> {
    if f.nullable && v.is_null() {
        return Some(());
    }
    match f.ty {
        Type::Str => v.str().map(|_| ()),
        Type::Id => (!v.str()?.is_empty()).then_some(()),
        Type::Int => v.int().map(|_| ()),
        Type::Bool => v.bool().map(|_| ()),
        Type::Trust => schema::trust_index(v.str()?).map(|_| ()),
        Type::Object => v.dict_len().map(|_| ()),
        Type::Content => {
            if v.str().is_some() {
                return Some(());
            }
            v.elements(|part| {
                let kind = part.get("type")?;
                let spec = schema::PARTS.iter().find(|r| Some(r.kind) == kind.str())?;
                exactly(&part, spec)
            })
        }
    }
}

/// `d` holds exactly the record's dict form: `type` and each field, fitting.
fn exactly<V: Value>(d: &V, spec: &Record) -> Option<()> {
    if d.dict_len()? != spec.fields.len() + 1 {
        return None;
    }
    for f in spec.fields {
        fits(&d.get(f.name)?, f)?;
    }
    Some(())
}

/// A tool call (`true`) or result (`false`) and its call id.
type PairRole = Option<(bool, String)>;

/// `(role, seq)` of a mapping that is exactly an item's dict form.
fn check<V: Value>(d: &V) -> Option<(PairRole, Option<i64>)> {
    let kind = d.get("type")?;
    let spec = schema::item(kind.str()?)?;
    exactly(d, spec)?;
    let role = match spec.kind {
        "tool_call" | "tool_result" => {
            let id = d.get("call_id")?;
            Some((spec.kind == "tool_call", id.str()?.to_owned()))
        }
        _ => None,
    };
    let seq = d.get("seq")?;
    let seq = if seq.is_null() {
        None
    } else {
        Some(seq.int()?)
    };
    Some((role, seq))
}

/// The cut over item dicts (see `ctxengine.interop.mappings.select_history`);
/// `canonical_len` gives a mapping's canonical JSON length (`None`: it has
/// none, and the reference raises why).
pub fn mappings_cut<V: Value>(
    mappings: impl IntoIterator<Item = V>,
    args: &CutArgs,
    mut canonical_len: impl FnMut(&V) -> Option<usize>,
) -> CoreResult<Cut> {
    let mut raws = Vec::new();
    let mut seqs = Vec::new();
    let mut ids: Vec<PairRole> = Vec::new();
    for (i, m) in mappings.into_iter().enumerate() {
        let Some((role, seq)) = check(&m) else {
            return Ok(Cut::Reference(i));
        };
        let Some(raw) = canonical_len(&m).and_then(|n| args.profile.raw(n).ok()) else {
            return Ok(Cut::Reference(i));
        };
        raws.push(raw);
        seqs.push(seq);
        ids.push(role);
    }
    let roles: Vec<ToolRole<'_>> = ids
        .iter()
        .map(|r| match r {
            None => ToolRole::Other,
            Some((true, id)) => ToolRole::Call(id),
            Some((false, id)) => ToolRole::Result(id),
        })
        .collect();
    let result_of = cut::validate_tool_pairs(&roles)?;
    let factor = args.factor;
    let c = cut::cut_after_validation(
        &raws,
        &seqs,
        &result_of,
        args.summary_floor,
        args.history_tokens as i128,
        |s| apply(s, factor),
        0,
    )?;
    Ok(Cut::At(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{parse_canonical, Json};
    use crate::estimate::Profile;

    fn cut(text: &str, history_tokens: i64) -> CoreResult<Cut> {
        let v = parse_canonical(text).unwrap();
        let Json::Array(list) = &v else { panic!() };
        let args = CutArgs {
            summary_floor: None,
            history_tokens,
            profile: Profile::new(3.0, 4).unwrap(),
            factor: (1, 1),
        };
        // Parsed canonical text: a member's length is its text's.
        let len = |j: &&Json<'_>| {
            let mut out = Vec::new();
            crate::decode::item::write_json(&mut out, j);
            Some(out.len())
        };
        mappings_cut(list.iter(), &args, len)
    }

    #[test]
    fn every_kinds_sample_is_taken() {
        let call = schema::sample(schema::item("tool_call").unwrap());
        let result = schema::sample(schema::item("tool_result").unwrap());
        for r in schema::ITEMS.iter() {
            let text = match r.kind {
                "tool_call" | "tool_result" => format!("[{call},{result}]"),
                _ => format!("[{}]", schema::sample(r)),
            };
            assert_eq!(cut(&text, 1_000_000).unwrap(), Cut::At(0), "{}", r.kind);
        }
    }

    #[test]
    fn anything_else_goes_to_the_reference() {
        for text in [
            "[{\"content\":\"x\",\"seq\":null,\"trust\":\"nobody\",\"type\":\"system_message\"}]",
            "[{\"content\":\"x\",\"seq\":null,\"trust\":\"user\",\"type\":\"system_message\",\"z\":1}]",
            "[{\"content\":\"x\",\"trust\":\"user\",\"type\":\"system_message\"}]",
            "[{\"content\":[{\"text\":1,\"type\":\"text_part\"}],\"seq\":null,\"trust\":\"user\",\"type\":\"system_message\"}]",
            "[{\"content\":\"x\",\"seq\":true,\"trust\":\"user\",\"type\":\"system_message\"}]",
            "[{\"type\":\"robot\"}]",
            "[[]]",
        ] {
            assert_eq!(cut(text, 10).unwrap(), Cut::Reference(0), "{text}");
        }
        let text = "[{\"content\":\"x\",\"seq\":3,\"trust\":\"user\",\"type\":\"system_message\"}]";
        assert_eq!(cut(text, 0).unwrap(), Cut::At(1));
    }
}
