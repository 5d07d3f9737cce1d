//! The SQLite library Python's `_sqlite3` module runs on, reached through
//! that module's own handle (ADR 0014).
//!
//! Never a second copy of SQLite: two copies in one process keep separate
//! tables of the POSIX locks they hold, so one copy closing a file drops the
//! other's locks. `dlopen(_sqlite3 module, RTLD_NOLOAD)` returns the module
//! Python already loaded, and `dlsym` on it finds the library that module
//! was linked against (or its own copy, when it exports one); a module that
//! hides its SQLite yields nothing and the caller reads through Python.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

#[cfg(unix)]
extern "C" {
    fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

#[cfg(unix)]
const RTLD_LAZY: c_int = 0x1;
#[cfg(all(unix, not(target_vendor = "apple")))]
const RTLD_NOLOAD: c_int = 0x4;
#[cfg(target_vendor = "apple")]
const RTLD_NOLOAD: c_int = 0x10;

const OK: c_int = 0;
const ROW: c_int = 100;
const DONE: c_int = 101;
const OPEN_READONLY: c_int = 0x1;
/// `SQLITE_TRANSIENT`: SQLite copies a bound text.
const TRANSIENT: isize = -1;

/// A column's storage class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Integer,
    Float,
    Text,
    Blob,
    Null,
}

type Db = c_void;
type Raw = c_void;

/// The entry points used, from one library.
pub struct Lib {
    libversion_number: unsafe extern "C" fn() -> c_int,
    open_v2: unsafe extern "C" fn(*const c_char, *mut *mut Db, c_int, *const c_char) -> c_int,
    close_v2: unsafe extern "C" fn(*mut Db) -> c_int,
    busy_timeout: unsafe extern "C" fn(*mut Db, c_int) -> c_int,
    errmsg: unsafe extern "C" fn(*mut Db) -> *const c_char,
    exec: unsafe extern "C" fn(
        *mut Db,
        *const c_char,
        *const c_void,
        *mut c_void,
        *mut *mut c_char,
    ) -> c_int,
    get_autocommit: unsafe extern "C" fn(*mut Db) -> c_int,
    prepare_v2: unsafe extern "C" fn(
        *mut Db,
        *const c_char,
        c_int,
        *mut *mut Raw,
        *mut *const c_char,
    ) -> c_int,
    bind_text: unsafe extern "C" fn(*mut Raw, c_int, *const c_char, c_int, isize) -> c_int,
    bind_int64: unsafe extern "C" fn(*mut Raw, c_int, i64) -> c_int,
    bind_null: unsafe extern "C" fn(*mut Raw, c_int) -> c_int,
    step: unsafe extern "C" fn(*mut Raw) -> c_int,
    reset: unsafe extern "C" fn(*mut Raw) -> c_int,
    clear_bindings: unsafe extern "C" fn(*mut Raw) -> c_int,
    column_count: unsafe extern "C" fn(*mut Raw) -> c_int,
    column_type: unsafe extern "C" fn(*mut Raw, c_int) -> c_int,
    column_int64: unsafe extern "C" fn(*mut Raw, c_int) -> i64,
    column_text: unsafe extern "C" fn(*mut Raw, c_int) -> *const u8,
    column_bytes: unsafe extern "C" fn(*mut Raw, c_int) -> c_int,
    finalize: unsafe extern "C" fn(*mut Raw) -> c_int,
}

/// The library of the module at `module_file` (the first path asked for;
/// `None` for another path, or when the module exports no SQLite).
pub fn library(module_file: &str) -> Option<&'static Lib> {
    static LIB: OnceLock<(String, Option<Lib>)> = OnceLock::new();
    let (path, lib) = LIB.get_or_init(|| (module_file.to_owned(), load(module_file)));
    if path != module_file {
        return None;
    }
    lib.as_ref()
}

/// (No `dlopen` here: every read goes through Python.)
#[cfg(not(unix))]
fn load(_module_file: &str) -> Option<Lib> {
    None
}

#[cfg(unix)]
fn load(module_file: &str) -> Option<Lib> {
    let path = CString::new(module_file).ok()?;
    // SAFETY: a NUL-terminated path; RTLD_NOLOAD only returns a loaded object.
    let handle = unsafe { dlopen(path.as_ptr(), RTLD_LAZY | RTLD_NOLOAD) };
    if handle.is_null() {
        return None;
    }
    /// The symbol `name` as the function type it is declared with in sqlite3.h.
    fn sym<T: Copy>(handle: *mut c_void, name: &CStr) -> Option<T> {
        // SAFETY: a handle from dlopen and a NUL-terminated name.
        let p = unsafe { dlsym(handle, name.as_ptr()) };
        if p.is_null() {
            return None;
        }
        debug_assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
        // SAFETY: `T` is the function pointer type of the C declaration.
        Some(unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) })
    }
    Some(Lib {
        libversion_number: sym(handle, c"sqlite3_libversion_number")?,
        open_v2: sym(handle, c"sqlite3_open_v2")?,
        close_v2: sym(handle, c"sqlite3_close_v2")?,
        busy_timeout: sym(handle, c"sqlite3_busy_timeout")?,
        errmsg: sym(handle, c"sqlite3_errmsg")?,
        exec: sym(handle, c"sqlite3_exec")?,
        get_autocommit: sym(handle, c"sqlite3_get_autocommit")?,
        prepare_v2: sym(handle, c"sqlite3_prepare_v2")?,
        bind_text: sym(handle, c"sqlite3_bind_text")?,
        bind_int64: sym(handle, c"sqlite3_bind_int64")?,
        bind_null: sym(handle, c"sqlite3_bind_null")?,
        step: sym(handle, c"sqlite3_step")?,
        reset: sym(handle, c"sqlite3_reset")?,
        clear_bindings: sym(handle, c"sqlite3_clear_bindings")?,
        column_count: sym(handle, c"sqlite3_column_count")?,
        column_type: sym(handle, c"sqlite3_column_type")?,
        column_int64: sym(handle, c"sqlite3_column_int64")?,
        column_text: sym(handle, c"sqlite3_column_text")?,
        column_bytes: sym(handle, c"sqlite3_column_bytes")?,
        finalize: sym(handle, c"sqlite3_finalize")?,
    })
}

impl Lib {
    /// `sqlite3_libversion_number()`: e.g. 3040001.
    pub fn version(&self) -> i64 {
        // SAFETY: no arguments, no state.
        i64::from(unsafe { (self.libversion_number)() })
    }
}

/// A bound parameter.
pub enum Param {
    Text(String),
    Int(i64),
    Null,
}

/// A read-only connection with its prepared statements (used by one thread at
/// a time: the caller holds it under a lock).
pub struct Conn {
    lib: &'static Lib,
    db: *mut Db,
    statements: Vec<(String, *mut Raw)>,
}

// SAFETY: SQLite connections may move between threads (the library is built
// thread-safe, as Python's module requires); `Conn` is never shared unlocked.
unsafe impl Send for Conn {}

impl Conn {
    /// Open `path` read-only.
    pub fn open(
        lib: &'static Lib,
        path: &str,
        busy_ms: i32,
        cache_kib: i64,
    ) -> Result<Conn, String> {
        let c = CString::new(path).map_err(|_| "path holds a NUL".to_owned())?;
        let mut db = std::ptr::null_mut();
        // SAFETY: a NUL-terminated path and an out pointer.
        let rc = unsafe { (lib.open_v2)(c.as_ptr(), &mut db, OPEN_READONLY, std::ptr::null()) };
        let conn = Conn {
            lib,
            db,
            statements: Vec::new(),
        };
        if rc != OK || db.is_null() {
            return Err(conn.error("open"));
        }
        // SAFETY: an open connection.
        unsafe { (lib.busy_timeout)(db, busy_ms) };
        conn.exec(&format!("PRAGMA cache_size = -{cache_kib}"))?;
        Ok(conn)
    }

    fn error(&self, what: &str) -> String {
        if self.db.is_null() {
            return format!("{what}: out of memory");
        }
        // SAFETY: an open connection's message, NUL-terminated, valid until the next call.
        let msg = unsafe { CStr::from_ptr((self.lib.errmsg)(self.db)) };
        format!("{what}: {}", msg.to_string_lossy())
    }

    /// Run `sql` (no rows wanted).
    pub fn exec(&self, sql: &str) -> Result<(), String> {
        let c = CString::new(sql).map_err(|_| "statement holds a NUL".to_owned())?;
        // SAFETY: an open connection and a NUL-terminated statement; no callback.
        let rc = unsafe {
            (self.lib.exec)(
                self.db,
                c.as_ptr(),
                std::ptr::null(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        if rc == OK {
            Ok(())
        } else {
            Err(self.error(sql))
        }
    }

    /// Whether no transaction is open.
    pub fn autocommit(&self) -> bool {
        // SAFETY: an open connection.
        unsafe { (self.lib.get_autocommit)(self.db) != 0 }
    }

    /// `sql` prepared (once per connection) with `params` bound.
    pub fn statement(&mut self, sql: &str, params: &[Param]) -> Result<Statement<'_>, String> {
        let at = match self.statements.iter().position(|(s, _)| s == sql) {
            Some(at) => at,
            None => {
                let c = CString::new(sql).map_err(|_| "statement holds a NUL".to_owned())?;
                let mut raw = std::ptr::null_mut();
                // SAFETY: an open connection, a NUL-terminated statement, an out pointer.
                let rc = unsafe {
                    (self.lib.prepare_v2)(self.db, c.as_ptr(), -1, &mut raw, std::ptr::null_mut())
                };
                if rc != OK || raw.is_null() {
                    return Err(self.error("prepare"));
                }
                self.statements.push((sql.to_owned(), raw));
                self.statements.len() - 1
            }
        };
        let statement = Statement {
            lib: self.lib,
            raw: self.statements[at].1,
            conn: self,
        };
        for (i, p) in params.iter().enumerate() {
            let i = c_int::try_from(i + 1).map_err(|_| "too many parameters".to_owned())?;
            let raw = statement.raw;
            // SAFETY: a prepared statement, reset (a fresh one, or by the last
            // statement's drop); the text is copied (`TRANSIENT`).
            let rc = unsafe {
                match p {
                    Param::Text(s) => {
                        let n = c_int::try_from(s.len())
                            .map_err(|_| "parameter too long".to_owned())?;
                        (statement.lib.bind_text)(raw, i, s.as_ptr().cast(), n, TRANSIENT)
                    }
                    Param::Int(v) => (statement.lib.bind_int64)(raw, i, *v),
                    Param::Null => (statement.lib.bind_null)(raw, i),
                }
            };
            if rc != OK {
                return Err(statement.conn.error("bind"));
            }
        }
        Ok(statement)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // SAFETY: each statement once, then the connection (close_v2 waits for none).
        unsafe {
            for (_, raw) in self.statements.drain(..) {
                (self.lib.finalize)(raw);
            }
            if !self.db.is_null() {
                (self.lib.close_v2)(self.db);
            }
        }
    }
}

/// A prepared statement of a [`Conn`], reset and unbound when dropped.
pub struct Statement<'c> {
    lib: &'static Lib,
    raw: *mut Raw,
    conn: &'c Conn,
}

impl Statement<'_> {
    /// The next row: `Ok(true)` on one, `Ok(false)` when done.
    pub fn step(&mut self) -> Result<bool, String> {
        // SAFETY: a prepared statement.
        match unsafe { (self.lib.step)(self.raw) } {
            ROW => Ok(true),
            DONE => Ok(false),
            _ => Err(self.conn.error("step")),
        }
    }

    pub fn columns(&self) -> usize {
        // SAFETY: a prepared statement.
        usize::try_from(unsafe { (self.lib.column_count)(self.raw) }).unwrap_or(0)
    }

    /// Column `i`'s storage class in the current row.
    pub fn kind(&self, i: c_int) -> Type {
        // SAFETY: a statement on a row; an out-of-range column reads NULL.
        match unsafe { (self.lib.column_type)(self.raw, i) } {
            1 => Type::Integer,
            2 => Type::Float,
            3 => Type::Text,
            4 => Type::Blob,
            _ => Type::Null,
        }
    }

    /// Column `i` of the current row as an integer, if it is one.
    pub fn int(&self, i: c_int) -> Option<i64> {
        // SAFETY: a statement on a row.
        (self.kind(i) == Type::Integer).then(|| unsafe { (self.lib.column_int64)(self.raw, i) })
    }

    /// Column `i` of the current row as UTF-8 text, if it is text (valid until
    /// the next step: the borrow of `self` says so).
    pub fn text(&self, i: c_int) -> Option<&str> {
        if self.kind(i) != Type::Text {
            return None;
        }
        // SAFETY: a statement on a row whose column is text: SQLite returns its
        // bytes (NUL-terminated; `column_bytes` after `column_text` is their length).
        let bytes = unsafe {
            let p = (self.lib.column_text)(self.raw, i);
            let n = (self.lib.column_bytes)(self.raw, i);
            if p.is_null() {
                return if n == 0 { Some("") } else { None };
            }
            std::slice::from_raw_parts(p, usize::try_from(n).ok()?)
        };
        std::str::from_utf8(bytes).ok()
    }
}

impl Drop for Statement<'_> {
    fn drop(&mut self) {
        // SAFETY: a prepared statement; reset ends its read, the bindings go.
        unsafe {
            (self.lib.reset)(self.raw);
            (self.lib.clear_bindings)(self.raw);
        }
    }
}
