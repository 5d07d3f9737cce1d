//! `_SqliteReader`: a seed's item rows read from an SQLite store and decoded
//! in one pass, straight from SQLite's column buffers (ADR 0014).
//!
//! The statements, the row classes and every error stay Python's
//! (`ctxengine.stores.sqlite_window`): this reads only the plain case — item
//! rows of a known format, text payloads that decode, well-formed counts —
//! and answers `None` at anything else, so the caller reads the range again
//! through Python, which raises exactly as before.

mod ffi;

use std::sync::Mutex;

use pyo3::exceptions::PyTypeError;
use pyo3::ffi as py_ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple, PyType};

use crate::decode::Decoder;
use crate::errors::guard;
use ffi::{Conn, Param};

/// The item row's columns: sequence, type, payload, visibility scope and id,
/// format version, then the session's last sequence.
const COLUMNS: usize = 7;

/// The version of the SQLite library the `_sqlite3` module at `module_file`
/// runs on, or `None` when this module cannot reach it.
#[pyfunction(name = "_sqlite_library_version")]
pub fn sqlite_library_version(module_file: &str) -> Option<i64> {
    ffi::library(module_file).map(ffi::Lib::version)
}

/// A read-only connection to an SQLite store's file, on the library of the
/// `_sqlite3` module at `module_file`; `None` when that library cannot be
/// reached or the file cannot be opened (the caller reads through Python).
/// (The connection opens without the GIL: it touches the file.)
#[pyfunction(name = "_sqlite_reader")]
pub fn sqlite_reader(
    py: Python<'_>,
    module_file: &str,
    path: &str,
    busy_timeout_ms: i32,
    cache_kib: i64,
) -> Option<SqliteReader> {
    let lib = ffi::library(module_file)?;
    let conn = py
        .detach(|| Conn::open(lib, path, busy_timeout_ms, cache_kib))
        .ok()?;
    Some(SqliteReader {
        conn: Mutex::new(Some(conn)),
    })
}

#[pyclass(frozen, name = "_SqliteReader", module = "ctxengine._core")]
pub struct SqliteReader {
    conn: Mutex<Option<Conn>>,
}

/// What a read found: the rows, their items, their payloads' lengths, the tail.
type Window<'py> = (
    Bound<'py, PyList>,
    Bound<'py, PyList>,
    Vec<usize>,
    Option<i64>,
);

#[pymethods]
impl SqliteReader {
    /// Close the connection (reads then answer `None`). It waits for a read
    /// in progress without the GIL, which that read takes back to finish.
    fn close(&self, py: Python<'_>) {
        py.detach(|| {
            if let Ok(mut conn) = self.conn.lock() {
                conn.take();
            }
        });
    }

    /// The item rows of `items_sql` and their items, in one read transaction
    /// with `counts_sql` (`(sequence, count)` rows; `None`: no counts):
    /// `(rows, items, payload lengths, tail)`, or `None` at anything but the
    /// plain case. Rows are `row_type(sequence, "", visibility, count)`,
    /// their visibility classes shared through `classes`, a dict by
    /// `(scope, id)` (new ones made by `visibility(scope, id)`); items are
    /// decoded as `decode_items` does (`item_classes`, `parts`, `trust`,
    /// `extra`).
    #[pyo3(signature = (
        items_sql, params, counts_sql, counts_params, item_type, max_version,
        row_type, visibility, classes, item_classes, parts, trust, extra = None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn window<'py>(
        &self,
        py: Python<'py>,
        items_sql: &str,
        params: &Bound<'py, PyList>,
        counts_sql: Option<&str>,
        counts_params: &Bound<'py, PyList>,
        item_type: &str,
        max_version: i64,
        row_type: &Bound<'py, PyType>,
        visibility: &Bound<'py, PyAny>,
        classes: &Bound<'py, PyDict>,
        item_classes: &Bound<'py, PyDict>,
        parts: (Bound<'py, PyAny>, Bound<'py, PyAny>),
        trust: &Bound<'py, PyAny>,
        extra: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Option<Window<'py>>> {
        guard(py, || {
            let rows = Rows::new(row_type)?;
            let decoder = Decoder::new(py, item_classes, &parts, trust, extra)?;
            let (params, counts_params) = (params_of(params)?, params_of(counts_params)?);
            // Busy (another thread of the store's): read through Python.
            let Ok(mut held) = self.conn.try_lock() else {
                return Ok(None);
            };
            let Some(conn) = held.as_mut() else {
                return Ok(None);
            };
            let query = Query {
                items_sql,
                params,
                counts_sql,
                counts_params,
                item_type,
                max_version,
            };
            // SQLite's work (which may wait on a lock or the disk) without the GIL.
            let scanned = py.detach(|| scan(conn, &query));
            drop(held);
            let Some(scan) = scanned else {
                return Ok(None);
            };
            let build = Build {
                py,
                rows,
                visibility,
                classes,
                decoder,
            };
            build.run(scan)
        })
    }
}

/// What the read found, checked: every row's sequence, visibility class
/// and payload (a range of `text`), the classes, the counts, the tail.
#[derive(Default)]
struct Scan {
    rows: Vec<(i64, usize, std::ops::Range<usize>)>,
    text: String,
    classes: Vec<(String, Option<String>)>,
    counts: Vec<(i64, i64)>,
    tail: Option<i64>,
}

/// What `window` reads: the item rows' statement and the counts' (see there).
struct Query<'a> {
    items_sql: &'a str,
    params: Vec<Param>,
    counts_sql: Option<&'a str>,
    counts_params: Vec<Param>,
    item_type: &'a str,
    max_version: i64,
}

/// The read transaction: `None` at anything but the plain case.
fn scan(conn: &mut Conn, query: &Query<'_>) -> Option<Scan> {
    if !conn.autocommit() || conn.exec("BEGIN").is_err() {
        return None;
    }
    let mut txn = Txn(conn);
    let found = scan_rows(txn.0, query);
    txn.end();
    found
}

fn scan_rows(conn: &mut Conn, query: &Query<'_>) -> Option<Scan> {
    let (item_type, max_version) = (query.item_type, query.max_version);
    let mut out = Scan::default();
    // The counts first (the same snapshot), by sequence.
    if let Some(sql) = query.counts_sql {
        let mut st = conn.statement(sql, &query.counts_params).ok()?;
        while st.step().ok()? {
            match (st.int(0), st.int(1)) {
                (Some(seq), Some(count)) if count >= 0 => out.counts.push((seq, count)),
                _ => return None,
            }
        }
        out.counts.sort_unstable();
    }
    let mut st = conn.statement(query.items_sql, &query.params).ok()?;
    if st.columns() != COLUMNS {
        return None;
    }
    while st.step().ok()? {
        let (seq, kind, version) = (st.int(0)?, st.text(1)?, st.int(5)?);
        if seq < 1 || kind != item_type || !(1..=max_version).contains(&version) {
            return None;
        }
        let (payload, scope) = (st.text(2)?, st.text(3)?);
        let id = match st.kind(4) {
            ffi::Type::Null => None,
            _ => Some(st.text(4)?),
        };
        if out.rows.is_empty() {
            out.tail = st.int(6);
        }
        let class = match out
            .classes
            .iter()
            .position(|(s, i)| s == scope && i.as_deref() == id)
        {
            Some(at) => at,
            None => {
                out.classes.push((scope.to_owned(), id.map(str::to_owned)));
                out.classes.len() - 1
            }
        };
        let start = out.text.len();
        out.text.push_str(payload);
        out.rows.push((seq, class, start..out.text.len()));
    }
    Some(out)
}

/// A read transaction, ended however the read ends.
struct Txn<'c>(&'c mut Conn);

impl Txn<'_> {
    fn end(&mut self) {
        if !self.0.autocommit() && self.0.exec("COMMIT").is_err() {
            let _ = self.0.exec("ROLLBACK");
        }
    }
}

impl Drop for Txn<'_> {
    fn drop(&mut self) {
        self.end();
    }
}

/// The Python values of a [`Scan`].
struct Build<'a, 'py> {
    py: Python<'py>,
    rows: Rows<'py>,
    visibility: &'a Bound<'py, PyAny>,
    classes: &'a Bound<'py, PyDict>,
    decoder: Decoder<'py>,
}

impl<'py> Build<'_, 'py> {
    fn run(&self, scan: Scan) -> PyResult<Option<Window<'py>>> {
        let py = self.py;
        let mut classes = Vec::with_capacity(scan.classes.len());
        for (scope, id) in &scan.classes {
            let Some(class) = self.class(scope, id.as_deref())? else {
                return Ok(None);
            };
            classes.push(class);
        }
        let (rows, items) = (PyList::empty(py), PyList::empty(py));
        let mut lengths = Vec::with_capacity(scan.rows.len());
        let empty = pyo3::types::PyString::new(py, "").into_any();
        for (seq, class, range) in scan.rows {
            let count = match scan.counts.binary_search_by_key(&seq, |c| c.0) {
                Ok(at) => scan.counts[at].1.into_pyobject(py)?.into_any(),
                Err(_) => py.None().into_bound(py),
            };
            let seq_obj = seq.into_pyobject(py)?.into_any();
            let payload = &scan.text[range];
            let Ok(item) = self.decoder.item(payload, seq, &seq_obj)? else {
                return Ok(None);
            };
            lengths.push(payload.len());
            rows.append(self.rows.make([
                seq_obj,
                empty.clone(),
                classes[class].clone(),
                count,
            ])?)?;
            items.append(item)?;
        }
        Ok(Some((rows, items, lengths, scan.tail)))
    }

    /// The shared visibility class `(scope, id)`, made if new; `None` when it
    /// does not validate (Python's read names the row).
    fn class(&self, scope: &str, id: Option<&str>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let key = PyTuple::new(self.py, [Some(scope), id])?;
        if let Some(class) = self.classes.get_item(&key)? {
            return Ok(Some(class));
        }
        match self.visibility.call1((scope, id)) {
            Ok(class) => {
                self.classes.set_item(key, &class)?;
                Ok(Some(class))
            }
            Err(_) => Ok(None),
        }
    }
}

/// Rows of a tuple subclass of four fields (a `NamedTuple`), made as
/// `tuple.__new__` makes them.
struct Rows<'py> {
    cls: Bound<'py, PyType>,
}

impl<'py> Rows<'py> {
    fn new(cls: &Bound<'py, PyType>) -> PyResult<Self> {
        let py = cls.py();
        let tuple = py.get_type::<PyTuple>();
        let same = |name: &str| -> PyResult<bool> { cls.getattr(name)?.eq(tuple.getattr(name)?) };
        if !cls.is_subclass(&tuple)? || !same("__basicsize__")? || !same("__itemsize__")? {
            return Err(PyTypeError::new_err(
                "row_type: expected a NamedTuple class",
            ));
        }
        Ok(Rows { cls: cls.clone() })
    }

    fn make(&self, fields: [Bound<'py, PyAny>; 4]) -> PyResult<Bound<'py, PyAny>> {
        let py = self.cls.py();
        let tp = self.cls.as_ptr().cast::<py_ffi::PyTypeObject>();
        // SAFETY: a tuple subclass with the tuple's layout (checked): allocated
        // by its own `tp_alloc` with four item slots, each set once.
        unsafe {
            let alloc = (*tp).tp_alloc.unwrap_or(py_ffi::PyType_GenericAlloc);
            let obj = Bound::from_owned_ptr_or_err(py, alloc(tp, 4))?;
            for (i, f) in fields.into_iter().enumerate() {
                py_ffi::PyTuple_SET_ITEM(obj.as_ptr(), i as py_ffi::Py_ssize_t, f.into_ptr());
            }
            Ok(obj)
        }
    }
}

fn params_of(list: &Bound<'_, PyList>) -> PyResult<Vec<Param>> {
    list.iter()
        .map(|v| {
            if v.is_none() {
                Ok(Param::Null)
            } else if let Ok(s) = v.cast::<pyo3::types::PyString>() {
                Ok(Param::Text(s.to_str()?.to_owned()))
            } else if v.is_instance_of::<pyo3::types::PyBool>() {
                Err(PyTypeError::new_err("params: a bool"))
            } else {
                Ok(Param::Int(v.extract()?))
            }
        })
        .collect()
}
