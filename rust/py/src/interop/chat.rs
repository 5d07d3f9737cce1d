//! `openai_chat_cut`: OpenAI Chat dict messages -> the cut, as a message
//! index, without building items: each message's items are written as
//! canonical bytes straight from the dict and measured by length.

use ctxengine_core::calibrate::apply;
use ctxengine_core::cut::{self, ToolRole};
use ctxengine_core::estimate::Profile;
use ctxengine_core::interop::items::{self, Content};
use ctxengine_core::interop::json::object_to_canonical;
use ctxengine_core::interop::trim::message_cut;
use ctxengine_core::CoreError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyString};

use super::{fast_cut, FastCut};
use crate::errors::{guard, to_pyerr};

/// What one message turned into: items of owned strings (the call ids
/// outlive the dicts' borrows).
enum Role {
    Other,
    Call(String),
    Result(String),
}

struct Measured {
    raws: Vec<i64>,
    seqs: Vec<Option<i64>>,
    owners: Vec<usize>,
    roles: Vec<Role>,
}

/// Why the fast path stopped: the reference takes over from the start.
struct Fallback;

fn text<'a>(v: &'a Bound<'_, PyAny>) -> Result<&'a str, Fallback> {
    v.cast_exact::<PyString>()
        .map_err(|_| Fallback)?
        .to_str()
        .map_err(|_| Fallback)
}

/// The text objects of a list of exactly `{"type": "text", "text": str}`
/// parts; `None` for a string.
fn parts_of<'py>(v: &Bound<'py, PyAny>) -> Result<Option<Vec<Bound<'py, PyAny>>>, Fallback> {
    if v.cast_exact::<PyString>().is_ok() {
        return Ok(None);
    }
    let list = v.cast_exact::<PyList>().map_err(|_| Fallback)?;
    let mut out = Vec::with_capacity(list.len());
    for part in list.iter() {
        let d = part.cast_exact::<PyDict>().map_err(|_| Fallback)?;
        if d.len() != 2 {
            return Err(Fallback);
        }
        let kind = d.get_item("type").map_err(|_| Fallback)?.ok_or(Fallback)?;
        if text(&kind)? != "text" {
            return Err(Fallback);
        }
        out.push(d.get_item("text").map_err(|_| Fallback)?.ok_or(Fallback)?);
    }
    Ok(Some(out))
}

/// Item content: a string, or the text parts [`parts_of`] found.
fn content<'a>(
    v: &'a Bound<'_, PyAny>,
    parts: &'a Option<Vec<Bound<'_, PyAny>>>,
) -> Result<Content<'a>, Fallback> {
    match parts {
        None => Ok(Content::Text(text(v)?)),
        Some(list) => Ok(Content::Parts(
            list.iter().map(text).collect::<Result<_, _>>()?,
        )),
    }
}

/// An int (not a bool) within 64 bits.
fn exact_int(v: &Bound<'_, PyAny>) -> Option<i64> {
    if v.is_instance_of::<PyBool>() || !v.is_instance_of::<PyInt>() {
        return None;
    }
    v.extract::<i64>().ok()
}

struct Numbering {
    field: bool,
    next: Option<i64>,
    message_seq: Option<i64>,
    first: bool,
}

impl Numbering {
    fn take(&mut self) -> Result<Option<i64>, Fallback> {
        if self.field {
            let s = if self.first { self.message_seq } else { None };
            self.first = false;
            return Ok(s);
        }
        match self.next {
            None => Ok(None),
            Some(v) => {
                self.next = Some(v.checked_add(1).ok_or(Fallback)?);
                Ok(Some(v))
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn measure(
    list: &Bound<'_, PyList>,
    profile: Profile,
    seq_field: Option<&str>,
    first_seq: Option<i64>,
    tool_trust: &str,
) -> Result<Measured, (usize, Fallback)> {
    let n = list.len();
    let mut m = Measured {
        raws: Vec::with_capacity(n + n / 4),
        seqs: Vec::with_capacity(n + n / 4),
        owners: Vec::with_capacity(n + n / 4),
        roles: Vec::with_capacity(n + n / 4),
    };
    let mut num = Numbering {
        field: seq_field.is_some(),
        next: first_seq,
        message_seq: None,
        first: true,
    };
    let mut buf: Vec<u8> = Vec::with_capacity(1024);
    let mut args: Vec<u8> = Vec::with_capacity(256);
    let mut prev_assistant = false;
    for (i, msg) in list.iter().enumerate() {
        let at = |f: Fallback| (i, f);
        let d = msg.cast_exact::<PyDict>().map_err(|_| (i, Fallback))?;
        let (mut role, mut body, mut name, mut calls, mut call_id, mut seq) =
            (None, None, None, None, None, None);
        for (k, v) in d.iter() {
            let key = text(&k).map_err(at)?;
            if Some(key) == seq_field {
                seq = Some(v);
                continue;
            }
            let nullable = matches!(
                key,
                "content" | "refusal" | "audio" | "function_call" | "tool_calls" | "name"
            );
            if (nullable && v.is_none()) || key == "annotations" {
                continue;
            }
            match key {
                "role" => role = Some(v),
                "content" => body = Some(v),
                "name" => name = Some(v),
                "tool_calls" => calls = Some(v),
                "tool_call_id" => call_id = Some(v),
                _ => return Err((i, Fallback)),
            }
        }
        if seq_field.is_some() {
            let v = seq.ok_or((i, Fallback))?;
            num.message_seq = Some(exact_int(&v).ok_or((i, Fallback))?);
        }
        num.first = true;
        let role = role.ok_or((i, Fallback))?;
        let role = text(&role).map_err(at)?;
        let push = |m: &mut Measured,
                    buf: &[u8],
                    r: Role,
                    seq: Option<i64>|
         -> Result<(), (usize, Fallback)> {
            m.raws
                .push(profile.raw(buf.len()).map_err(|_| (i, Fallback))?);
            m.seqs.push(seq);
            m.owners.push(i);
            m.roles.push(r);
            Ok(())
        };
        let allowed_extra = |ok: bool| if ok { Ok(()) } else { Err((i, Fallback)) };
        match role {
            "system" | "developer" => {
                allowed_extra(name.is_none() && calls.is_none() && call_id.is_none())?;
                let b = body.as_ref().ok_or((i, Fallback))?;
                let parts = parts_of(b).map_err(at)?;
                let c = content(b, &parts).map_err(at)?;
                let trust = if role == "system" {
                    "platform"
                } else {
                    "trusted_configuration"
                };
                let s = num.take().map_err(at)?;
                buf.clear();
                items::message(&mut buf, "system_message", &c, trust, s).ok_or((i, Fallback))?;
                push(&mut m, &buf, Role::Other, s)?;
            }
            "user" => {
                allowed_extra(calls.is_none() && call_id.is_none())?;
                let b = body.as_ref().ok_or((i, Fallback))?;
                let parts = parts_of(b).map_err(at)?;
                let c = content(b, &parts).map_err(at)?;
                let principal = match name.as_ref() {
                    Some(v) => Some(text(v).map_err(at)?),
                    None => None,
                };
                let s = num.take().map_err(at)?;
                buf.clear();
                items::user(&mut buf, &c, "user", principal, s).ok_or((i, Fallback))?;
                push(&mut m, &buf, Role::Other, s)?;
            }
            "assistant" => {
                allowed_extra(name.is_none() && call_id.is_none())?;
                if body.is_none() && calls.is_some() && prev_assistant {
                    return Err((i, Fallback)); // merges with the assistant message before it
                }
                if let Some(b) = body.as_ref() {
                    let parts = parts_of(b).map_err(at)?;
                    let c = content(b, &parts).map_err(at)?;
                    let s = num.take().map_err(at)?;
                    buf.clear();
                    items::message(&mut buf, "assistant_message", &c, "external_untrusted", s)
                        .ok_or((i, Fallback))?;
                    push(&mut m, &buf, Role::Other, s)?;
                }
                match calls.as_ref() {
                    Some(cs) => {
                        let cs = cs.cast_exact::<PyList>().map_err(|_| (i, Fallback))?;
                        if cs.is_empty() {
                            return Err((i, Fallback));
                        }
                        for call in cs.iter() {
                            let (id, fname) = tool_call(&call, &mut args).map_err(at)?;
                            let s = num.take().map_err(at)?;
                            buf.clear();
                            items::tool_call(&mut buf, &args, &id, &fname, s)
                                .ok_or((i, Fallback))?;
                            push(&mut m, &buf, Role::Call(id), s)?;
                        }
                    }
                    None if body.is_none() => return Err((i, Fallback)),
                    None => {}
                }
            }
            "tool" => {
                allowed_extra(name.is_none() && calls.is_none())?;
                let b = body.as_ref().ok_or((i, Fallback))?;
                let parts = parts_of(b).map_err(at)?;
                let c = content(b, &parts).map_err(at)?;
                let id = text(call_id.as_ref().ok_or((i, Fallback))?).map_err(at)?;
                if id.is_empty() {
                    return Err((i, Fallback));
                }
                let s = num.take().map_err(at)?;
                buf.clear();
                items::tool_result(&mut buf, id, &c, false, tool_trust, s).ok_or((i, Fallback))?;
                push(&mut m, &buf, Role::Result(id.to_owned()), s)?;
            }
            _ => return Err((i, Fallback)),
        }
        prev_assistant = role == "assistant";
    }
    Ok(m)
}

/// `(call_id, name)` of `{"id", "type": "function", "function": {"name", "arguments"}}`,
/// with the arguments' canonical bytes in `args`.
fn tool_call(call: &Bound<'_, PyAny>, args: &mut Vec<u8>) -> Result<(String, String), Fallback> {
    let d = call.cast_exact::<PyDict>().map_err(|_| Fallback)?;
    if d.len() != 3
        || text(&d.get_item("type").map_err(|_| Fallback)?.ok_or(Fallback)?)? != "function"
    {
        return Err(Fallback);
    }
    let id = d.get_item("id").map_err(|_| Fallback)?.ok_or(Fallback)?;
    let f = d
        .get_item("function")
        .map_err(|_| Fallback)?
        .ok_or(Fallback)?;
    let f = f.cast_exact::<PyDict>().map_err(|_| Fallback)?;
    if f.len() != 2 {
        return Err(Fallback);
    }
    let name = f.get_item("name").map_err(|_| Fallback)?.ok_or(Fallback)?;
    let arguments = f
        .get_item("arguments")
        .map_err(|_| Fallback)?
        .ok_or(Fallback)?;
    let id = text(&id)?;
    if id.is_empty() {
        return Err(Fallback);
    }
    args.clear();
    object_to_canonical(text(&arguments)?, args).ok_or(Fallback)?;
    Ok((id.to_owned(), text(&name)?.to_owned()))
}

/// The cut over Chat messages as a message index (see
/// `ctxengine.reference.interop.openai_chat_cut`); `-1 - i` when message
/// `i` needs the reference (which raises its error), `-1` for input the
/// fast path does not take at all (not a list, another estimator,
/// provenance options off the fast path's shapes). The cut's arguments are
/// checked as `select_history` checks them, before any message is read.
#[pyfunction]
#[pyo3(signature = (messages, summary_floor, history_tokens, estimator, model_id, seq_field, first_seq, tool_trust))]
#[allow(clippy::too_many_arguments)]
pub fn openai_chat_cut(
    py: Python<'_>,
    messages: &Bound<'_, PyAny>,
    summary_floor: &Bound<'_, PyAny>,
    history_tokens: &Bound<'_, PyAny>,
    estimator: &Bound<'_, PyAny>,
    model_id: &Bound<'_, PyAny>,
    seq_field: &Bound<'_, PyAny>,
    first_seq: &Bound<'_, PyAny>,
    tool_trust: &str,
) -> PyResult<i64> {
    guard(py, || {
        let Some(FastCut {
            list,
            summary_floor,
            history_tokens,
            profile,
            factor,
        }) = fast_cut(messages, summary_floor, history_tokens, estimator, model_id)?
        else {
            return Ok(-1);
        };
        // The converter's own options: anything but the plain shapes is the
        // reference's to refuse.
        let seq_field = if seq_field.is_none() {
            None
        } else {
            match text(seq_field) {
                Ok(s) => Some(s),
                Err(Fallback) => return Ok(-1),
            }
        };
        let first_seq = if first_seq.is_none() {
            None
        } else {
            match exact_int(first_seq) {
                Some(v) => Some(v),
                None => return Ok(-1),
            }
        };
        let m = match measure(&list, profile, seq_field, first_seq, tool_trust) {
            Ok(m) => m,
            Err((i, Fallback)) => return Ok(-1 - i as i64),
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
        let result_of = match cut::validate_tool_pairs(&roles) {
            Ok(r) => r,
            Err(CoreError::OrphanedToolPair {
                call_id,
                index,
                reason,
            }) => {
                let message = m.owners.get(index).copied().unwrap_or(list.len());
                return Err(to_pyerr(py, CoreError::orphan(&call_id, message, &reason)));
            }
            Err(e) => return Err(to_pyerr(py, e)),
        };
        let c = cut::cut_after_validation(
            &m.raws,
            &m.seqs,
            &result_of,
            summary_floor,
            history_tokens as i128,
            |s| apply(s, factor),
        )
        .map_err(|e| to_pyerr(py, e))?;
        Ok(message_cut(c, &m.owners, &result_of) as i64)
    })
}
