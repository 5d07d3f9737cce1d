//! One pass over a history: for every item its kind, canonical length and
//! digest (from the `_cj` cache when filled), its `seq` and its tool-pair
//! role. Type-level facts are looked up once per type and call; slotted
//! attributes of plain slotted classes are read straight from the member
//! slot (exactly what `getattr` does for them, without the lookup).

use std::os::raw::c_int;
use std::ptr::addr_of_mut;

use ctxengine_core::hash::sha256;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyList, PyString, PyTuple, PyType};

use crate::conversions::{has_item_cache, read_cache, utf8, Walker};

static TOOL_CALL: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static TOOL_RESULT: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// What an item is to the pairing rules.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Other,
    Call,
    Result,
}

/// How a value of some type is canonicalized and estimated.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sort {
    /// `str` and subclasses: kind "text".
    Text,
    /// dict, list, tuple, numbers, None: kind "json".
    Json,
    /// Conversation items and `ToolSpec`: the `_cj` cache.
    Item,
    /// Any other object (value types walked through `to_dict()`).
    Object,
}

/// How to read one attribute of instances of a type.
#[derive(Clone, Copy)]
enum Attr {
    /// A `__slots__` member: the object pointer at this offset (NULL if unset).
    Slot(isize),
    /// Anything else: a real `getattr`.
    Lookup,
}

struct TypeInfo {
    tp: *mut ffi::PyTypeObject,
    sort: Sort,
    /// Index into `Types::kinds`.
    kind: usize,
    role: Role,
    cj: Attr,
    seq: Attr,
    call_id: Attr,
}

/// Type-level facts, cached per type pointer for one call, and the
/// distinct kind names met.
pub struct Types {
    infos: Vec<TypeInfo>,
    last: usize,
    pub kinds: Vec<String>,
    tool_call: *mut ffi::PyTypeObject,
    tool_result: *mut ffi::PyTypeObject,
}

/// The member-slot offset of `name` on instances of `tp`, when reading the
/// slot is exactly what `getattr` would do: generic attribute access and a
/// plain object member descriptor.
fn slot_offset(py: Python<'_>, ty: &Bound<'_, PyType>, name: &Bound<'_, PyString>) -> PyResult<Attr> {
    unsafe {
        let tp = ty.as_ptr() as *mut ffi::PyTypeObject;
        // libpython's own function: its address is unique.
        let generic = ffi::PyObject_GenericGetAttr as ffi::getattrofunc as usize;
        if (*tp).tp_getattro.map(|f| f as usize) != Some(generic) {
            return Ok(Attr::Lookup);
        }
        let Some(descr) = ty.getattr_opt(name)? else {
            return Ok(Attr::Lookup);
        };
        if ffi::Py_TYPE(descr.as_ptr()) != addr_of_mut!(ffi::PyMemberDescr_Type) {
            return Ok(Attr::Lookup);
        }
        let member = (*(descr.as_ptr() as *mut ffi::PyMemberDescrObject)).d_member;
        if member.is_null() || (*member).type_code != ffi::Py_T_OBJECT_EX {
            return Ok(Attr::Lookup);
        }
        let _ = py;
        Ok(Attr::Slot((*member).offset))
    }
}

impl Types {
    pub fn new(py: Python<'_>) -> PyResult<Self> {
        let tool_call = TOOL_CALL.import(py, "ctxengine.model", "ToolCall")?.as_ptr();
        let tool_result = TOOL_RESULT.import(py, "ctxengine.model", "ToolResult")?.as_ptr();
        Ok(Types {
            infos: Vec::with_capacity(8),
            last: usize::MAX,
            kinds: vec!["text".to_owned(), "json".to_owned()],
            tool_call: tool_call as *mut ffi::PyTypeObject,
            tool_result: tool_result as *mut ffi::PyTypeObject,
        })
    }

    fn kind_index(&mut self, kind: &str) -> usize {
        match self.kinds.iter().position(|k| k == kind) {
            Some(i) => i,
            None => {
                self.kinds.push(kind.to_owned());
                self.kinds.len() - 1
            }
        }
    }

    #[inline]
    fn info(&mut self, obj: &Bound<'_, PyAny>) -> PyResult<usize> {
        let tp = unsafe { ffi::Py_TYPE(obj.as_ptr()) };
        if let Some(t) = self.infos.get(self.last) {
            if t.tp == tp {
                return Ok(self.last);
            }
        }
        let i = match self.infos.iter().position(|t| t.tp == tp) {
            Some(i) => i,
            None => self.info_slow(obj, tp)?,
        };
        self.last = i;
        Ok(i)
    }

    #[cold]
    fn info_slow(&mut self, obj: &Bound<'_, PyAny>, tp: *mut ffi::PyTypeObject) -> PyResult<usize> {
        let py = obj.py();
        let ptr = obj.as_ptr();
        let plain_json = unsafe {
            ptr == ffi::Py_None()
                || ffi::PyDict_Check(ptr) != 0
                || ffi::PyList_Check(ptr) != 0
                || ffi::PyTuple_Check(ptr) != 0
                || ffi::PyLong_Check(ptr) != 0
                || ffi::PyFloat_Check(ptr) != 0
        };
        let simple = |sort, kind| TypeInfo {
            tp,
            sort,
            kind,
            role: Role::Other,
            cj: Attr::Lookup,
            seq: Attr::Lookup,
            call_id: Attr::Lookup,
        };
        let info = if unsafe { ffi::PyUnicode_Check(ptr) } != 0 {
            simple(Sort::Text, 0)
        } else if plain_json {
            simple(Sort::Json, 1)
        } else {
            let ty = obj.get_type();
            let item = has_item_cache(obj)?;
            // Items use their class `kind`; other value types theirs when
            // they have `to_dict()`; anything else is "json".
            let kind = match ty.getattr_opt(intern!(py, "kind"))? {
                Some(k) if k.is_instance_of::<PyString>() && (item || obj.hasattr(intern!(py, "to_dict"))?) => {
                    let k = k.cast_into::<PyString>()?;
                    let k = k.to_str()?.to_owned();
                    self.kind_index(&k)
                }
                _ => 1,
            };
            let role = unsafe {
                if ffi::PyType_IsSubtype(tp, self.tool_call) != 0 {
                    Role::Call
                } else if ffi::PyType_IsSubtype(tp, self.tool_result) != 0 {
                    Role::Result
                } else {
                    Role::Other
                }
            };
            TypeInfo {
                tp,
                sort: if item { Sort::Item } else { Sort::Object },
                kind,
                role,
                cj: slot_offset(py, &ty, intern!(py, "_cj"))?,
                seq: slot_offset(py, &ty, intern!(py, "seq"))?,
                call_id: slot_offset(py, &ty, intern!(py, "call_id"))?,
            }
        };
        self.infos.push(info);
        Ok(self.infos.len() - 1)
    }
}

/// Read an attribute: the slot directly, or `getattr` (None when absent).
#[inline]
fn read_attr<'py>(
    obj: &Bound<'py, PyAny>,
    how: Attr,
    name: &Bound<'py, PyString>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    match how {
        Attr::Slot(offset) => unsafe {
            let p = *((obj.as_ptr() as *mut u8).offset(offset) as *mut *mut ffi::PyObject);
            Ok(Bound::from_borrowed_ptr_or_opt(obj.py(), p))
        },
        Attr::Lookup => obj.getattr_opt(name),
    }
}

/// A list, a tuple, or the items of any other iterable; indexed access that
/// stays safe if Python code run mid-pass changes a list.
pub enum Items<'py> {
    List(Bound<'py, PyList>),
    Tuple(Bound<'py, PyTuple>),
    Other(Vec<Bound<'py, PyAny>>),
}

impl<'py> Items<'py> {
    pub fn new(items: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(list) = items.cast::<PyList>() {
            return Ok(Items::List(list.clone()));
        }
        if let Ok(tuple) = items.cast::<PyTuple>() {
            return Ok(Items::Tuple(tuple.clone()));
        }
        Ok(Items::Other(items.try_iter()?.collect::<PyResult<_>>()?))
    }

    pub fn len(&self) -> usize {
        match self {
            Items::List(l) => l.len(),
            Items::Tuple(t) => t.len(),
            Items::Other(v) => v.len(),
        }
    }

    #[inline]
    pub fn get(&self, i: usize) -> Option<Bound<'py, PyAny>> {
        unsafe {
            match self {
                Items::List(l) => {
                    let p = l.as_ptr();
                    if (i as ffi::Py_ssize_t) < ffi::PyList_GET_SIZE(p) {
                        Some(Bound::from_borrowed_ptr(l.py(), ffi::PyList_GET_ITEM(p, i as ffi::Py_ssize_t)))
                    } else {
                        None
                    }
                }
                Items::Tuple(t) => {
                    let p = t.as_ptr();
                    if (i as ffi::Py_ssize_t) < ffi::PyTuple_GET_SIZE(p) {
                        Some(Bound::from_borrowed_ptr(t.py(), ffi::PyTuple_GET_ITEM(p, i as ffi::Py_ssize_t)))
                    } else {
                        None
                    }
                }
                Items::Other(v) => v.get(i).cloned(),
            }
        }
    }

    /// As a Python sequence (for estimators outside this module).
    pub fn to_object(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(match self {
            Items::List(l) => l.clone().into_any(),
            Items::Tuple(t) => t.clone().into_any(),
            Items::Other(v) => PyList::new(py, v)?.into_any(),
        })
    }
}

/// What the estimator needs of one value.
#[derive(Clone, Copy)]
pub struct Facts {
    /// Index into `Types::kinds`.
    pub kind: usize,
    pub len: usize,
    pub digest: [u8; 32],
}

/// Everything one pass learns about a history.
pub struct Scan<'py> {
    pub roles: Vec<Role>,
    /// The call ids of the items whose role is not `Other`, in order (owned,
    /// so the cut can borrow `&str`s).
    pub call_ids: Vec<Bound<'py, PyAny>>,
    pub seqs: Vec<Option<i64>>,
    pub facts: Vec<Facts>,
    /// Values whose facts still need canonicalization: (index, value).
    pending: Vec<(usize, Bound<'py, PyAny>)>,
}

/// An int as i64, saturating beyond the range (only comparisons use it).
pub fn saturating_i64(obj: &Bound<'_, PyAny>) -> Option<i64> {
    let ptr = obj.as_ptr();
    unsafe {
        if ffi::PyLong_Check(ptr) == 0 || ffi::PyBool_Check(ptr) != 0 {
            return None;
        }
        let mut overflow: c_int = 0;
        let v = ffi::PyLong_AsLongLongAndOverflow(ptr, &mut overflow);
        if overflow > 0 {
            Some(i64::MAX)
        } else if overflow < 0 {
            Some(i64::MIN)
        } else if v == -1 && !ffi::PyErr_Occurred().is_null() {
            ffi::PyErr_Clear();
            None
        } else {
            Some(v)
        }
    }
}

/// What a pass collects.
#[derive(Clone, Copy)]
pub struct Want {
    pub pairs: bool,
    pub seqs: bool,
    pub facts: bool,
}

/// One pass over `items`. Facts of items with a filled cache are read
/// here; the rest wait for [`Scan::finish_facts`] (so a pairing error is
/// raised before any canonicalization, as the contract orders it).
pub fn scan<'py>(py: Python<'py>, types: &mut Types, items: &Items<'py>, want: Want) -> PyResult<Scan<'py>> {
    let n = items.len();
    let mut s = Scan {
        roles: Vec::with_capacity(if want.pairs { n } else { 0 }),
        call_ids: Vec::new(),
        seqs: Vec::with_capacity(if want.seqs { n } else { 0 }),
        facts: Vec::with_capacity(if want.facts { n } else { 0 }),
        pending: Vec::new(),
    };
    let cj_name = intern!(py, "_cj");
    let seq_name = intern!(py, "seq");
    let call_id_name = intern!(py, "call_id");
    let mut i = 0;
    while let Some(item) = items.get(i) {
        let t = types.info(&item)?;
        let info = &types.infos[t];
        let (sort, kind, role) = (info.sort, info.kind, info.role);
        let (cj_how, seq_how, call_id_how) = (info.cj, info.seq, info.call_id);
        if want.pairs {
            if role != Role::Other {
                let id = read_attr(&item, call_id_how, call_id_name)?
                    .ok_or_else(|| pyo3::exceptions::PyAttributeError::new_err("call_id"))?;
                let id = if id.is_instance_of::<PyString>() {
                    id
                } else {
                    id.str()?.into_any()
                };
                s.call_ids.push(id);
            }
            s.roles.push(role);
        }
        if want.seqs {
            let seq = if matches!(sort, Sort::Item | Sort::Object) {
                read_attr(&item, seq_how, seq_name)?.and_then(|v| saturating_i64(&v))
            } else {
                None
            };
            s.seqs.push(seq);
        }
        if want.facts {
            let cached = if sort == Sort::Item {
                read_attr(&item, cj_how, cj_name)
                    .ok()
                    .flatten()
                    .and_then(|cj| unsafe { read_cache(cj.as_ptr()) })
            } else {
                None
            };
            match cached {
                Some((len, digest)) => s.facts.push(Facts { kind, len, digest }),
                None => {
                    s.facts.push(Facts {
                        kind,
                        len: 0,
                        digest: [0; 32],
                    });
                    s.pending.push((i, item));
                }
            }
        }
        i += 1;
    }
    Ok(s)
}

impl<'py> Scan<'py> {
    /// The core's view of the pairing roles, borrowing the call ids.
    pub fn tool_roles(&self) -> Vec<ctxengine_core::cut::ToolRole<'_>> {
        use ctxengine_core::cut::ToolRole;
        let mut ids = self.call_ids.iter();
        self.roles
            .iter()
            .map(|r| match r {
                Role::Other => ToolRole::Other,
                Role::Call | Role::Result => {
                    let id = ids
                        .next()
                        .and_then(|b| unsafe { utf8(b.as_ptr()) })
                        .and_then(|s| std::str::from_utf8(s).ok())
                        .unwrap_or("");
                    if *r == Role::Call {
                        ToolRole::Call(id)
                    } else {
                        ToolRole::Result(id)
                    }
                }
            })
            .collect()
    }

    /// Canonicalize what the pass could not read from a cache, filling the
    /// `_cj` caches of items seen for the first time.
    pub fn finish_facts(&mut self, py: Python<'py>, types: &mut Types) -> PyResult<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut walker = Walker::new(py, Vec::with_capacity(1024));
        for (i, item) in std::mem::take(&mut self.pending) {
            let t = types.info(&item)?;
            let sort = types.infos[t].sort;
            let f = &mut self.facts[i];
            if sort == Sort::Item {
                let tuple = walker.item_tuple(&item).map_err(|e| e.into_pyerr(py))?;
                let (len, digest) = unsafe { read_cache(tuple.as_ptr()) }.unwrap_or((0, [0; 32]));
                f.len = len;
                f.digest = digest;
            } else {
                walker.out.clear();
                walker.write_root(&item).map_err(|e| e.into_pyerr(py))?;
                f.len = walker.out.len();
                f.digest = sha256(&walker.out);
            }
        }
        Ok(())
    }
}
