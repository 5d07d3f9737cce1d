//! Values measured in the reference's lookup order, with their facts.

use pyo3::intern;
use pyo3::prelude::*;

use super::line_state::Entry;
use crate::canonical::digest_of;
use crate::items::{canonicalize_pending, read_attr, Facts, Sort, Types};

thread_local! {
    /// The last call's fact and count buffers, emptied: a 10,000-item fit
    /// needs about 700 KB of them, which the allocator would otherwise map
    /// and fault in anew on every call.
    static SPARE: std::cell::Cell<(Vec<Facts>, Vec<i64>)> = const { std::cell::Cell::new((Vec::new(), Vec::new())) };
}

/// A value measured: a line state entry's render (held by the entry for
/// the call: no reference taken per render), or one held here.
enum Obj<'e, 'py> {
    Entry(&'e Py<PyAny>),
    Own(Bound<'py, PyAny>),
}

/// Every value the fit measures, in the order the reference measures it.
pub struct Gather<'e, 'py> {
    py: Python<'py>,
    pub types: Types,
    objs: Vec<Obj<'e, 'py>>,
    facts: Vec<Facts>,
    /// The raw count of each value (`measure_and_fit` fills it).
    pub raws: Vec<i64>,
    /// Each value's `_cj` tuple, when `facts` read it.
    cjs: Vec<Option<Bound<'py, PyAny>>>,
    /// The fresh canonical bytes `facts` read.
    keep: Vec<Py<PyAny>>,
    /// Values whose facts still need canonicalization: (index, value).
    pending: Vec<(usize, Bound<'py, PyAny>)>,
}

impl<'e, 'py> Gather<'e, 'py> {
    /// A gather for about `n` values.
    pub fn new(py: Python<'py>, types: Types, n: usize) -> Self {
        let (mut facts, raws) = SPARE.with(std::cell::Cell::take);
        facts.reserve(n);
        Gather {
            py,
            types,
            objs: Vec::with_capacity(n),
            cjs: Vec::with_capacity(n),
            facts,
            raws,
            keep: Vec::new(),
            pending: Vec::new(),
        }
    }

    pub fn facts(&self) -> &[Facts] {
        &self.facts
    }

    pub fn obj(&self, i: usize) -> &Bound<'py, PyAny> {
        match &self.objs[i] {
            Obj::Entry(p) => p.bind(self.py),
            Obj::Own(b) => b,
        }
    }

    /// Value `i`'s filled `_cj` tuple: the one its facts were read from, else (it
    /// may have been canonicalized since) the one it holds now.
    pub fn cj(&mut self, i: usize) -> Option<Bound<'py, PyAny>> {
        if let Some(cj) = &self.cjs[i] {
            return Some(cj.clone());
        }
        let obj = self.obj(i).clone();
        let t = self.types.info(&obj).ok()?;
        let how = self.types.infos[t].cj;
        let cj = read_attr(&obj, how, intern!(self.py, "_cj")).ok().flatten();
        cj.filter(|cj| digest_of(cj).is_some())
    }

    /// Add a value to measure; returns its index.
    pub fn push(&mut self, obj: Bound<'py, PyAny>) -> PyResult<usize> {
        let t = self.types.info(&obj)?;
        let info = &self.types.infos[t];
        let kind = info.kind;
        let cj = if info.sort == Sort::Item {
            read_attr(&obj, info.cj, intern!(self.py, "_cj"))
                .ok()
                .flatten()
        } else {
            None
        };
        let i = self.facts.len();
        match cj.as_ref().and_then(digest_of) {
            Some((digest, bytes)) => {
                // The length is read on a memo miss only: `keep` holds the
                // tuple, and so its canonical bytes, until then.
                self.facts.push(Facts::of_bytes(kind, digest, bytes));
                self.cjs.push(cj);
            }
            None => {
                self.facts.push(Facts::pending(kind));
                self.pending.push((i, obj.clone()));
                self.cjs.push(None);
            }
        }
        self.objs.push(Obj::Own(obj));
        Ok(i)
    }

    /// Add the render of a line state's entry (which holds its canonical
    /// bytes for the call); returns its index.
    pub fn push_entry(&mut self, e: &'e Entry) -> PyResult<usize> {
        let t = self.types.info(e.render.bind(self.py))?;
        let kind = self.types.infos[t].kind;
        let i = self.facts.len();
        self.facts
            .push(Facts::of_bytes(kind, e.facts.digest, e.bytes.as_ptr()));
        self.objs.push(Obj::Entry(&e.render));
        self.cjs.push(None);
        Ok(i)
    }

    /// Canonicalize what no cache held (the reference's `raw_estimates`
    /// does it at the same point).
    pub fn finish(&mut self) -> PyResult<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut self.pending);
        let (facts, keep) = (&mut self.facts, &mut self.keep);
        canonicalize_pending(self.py, &mut self.types, facts, keep, pending)
    }
}

impl Drop for Gather<'_, '_> {
    fn drop(&mut self) {
        let (mut facts, mut raws) = (
            std::mem::take(&mut self.facts),
            std::mem::take(&mut self.raws),
        );
        facts.clear();
        raws.clear();
        SPARE.with(|s| s.set((facts, raws)));
    }
}
