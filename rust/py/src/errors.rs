//! Mapping core errors to the Python classes of `ctxengine.errors`, once,
//! and keeping panics from crossing the boundary.
//!
//! This module imports nothing from `ctxengine`: the package hands it its
//! error module once (`bind_errors`, from `ctxengine.core.backends`), and
//! each class is looked up there the first time it is raised.

use std::panic::{catch_unwind, AssertUnwindSafe};

use ctxengine_core::CoreError;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyTuple, PyType};

static ERRORS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// The classes of `ctxengine_core::error::CLASSES`, by index.
static CLASSES: [PyOnceLock<Py<PyType>>; 6] = [const { PyOnceLock::new() }; 6];
static CONTEXT_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// `bind_errors(module)`: the module whose classes this module raises
/// (`ctxengine.errors`). The first binding stays.
#[pyfunction]
pub fn bind_errors(py: Python<'_>, module: Bound<'_, PyAny>) {
    let _ = ERRORS.set(py, module.unbind());
}

fn class<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<PyType>>,
    name: &str,
) -> PyResult<&'py Bound<'py, PyType>> {
    cell.get_or_try_init(py, || {
        let module = ERRORS.get(py).ok_or_else(|| {
            PyRuntimeError::new_err("ctxengine._core: import ctxengine before using its backend")
        })?;
        Ok(module
            .bind(py)
            .getattr(name)?
            .cast_into::<PyType>()?
            .unbind())
    })
    .map(|cls| cls.bind(py))
}

/// The Python exception for a core error: its class (`CoreError::class`)
/// called with its arguments.
pub fn to_pyerr(py: Python<'_>, err: CoreError) -> PyErr {
    let (k, args) = err.class();
    let args: PyResult<Vec<_>> = args.iter().map(|a| crate::data::to_py(py, a)).collect();
    let cls = class(py, &CLASSES[k], ctxengine_core::error::CLASSES[k]);
    match cls.and_then(|cls| cls.call1(PyTuple::new(py, args?)?)) {
        Ok(exc) => PyErr::from_value(exc),
        Err(err) => err,
    }
}

/// `ArgumentError(function, argument, reason)`.
pub fn argument_error(
    py: Python<'_>,
    function: &str,
    argument: impl Into<String>,
    reason: impl Into<String>,
) -> PyErr {
    to_pyerr(py, CoreError::argument(function, argument, reason))
}

/// `CanonicalizationError(path, reason)`.
pub fn canonicalization_error(py: Python<'_>, path: &str, reason: impl Into<String>) -> PyErr {
    to_pyerr(py, CoreError::canonicalization(path, reason))
}

/// A failure inside a core algorithm that calls back into this layer: a
/// core error or a Python one.
pub enum HostError {
    Core(CoreError),
    Py(PyErr),
}

impl From<CoreError> for HostError {
    fn from(e: CoreError) -> Self {
        HostError::Core(e)
    }
}

impl From<PyErr> for HostError {
    fn from(e: PyErr) -> Self {
        HostError::Py(e)
    }
}

impl HostError {
    /// `map_err(HostError::into_pyerr(py))`.
    pub fn into_pyerr(py: Python<'_>) -> impl Fn(HostError) -> PyErr + '_ {
        move |e| match e {
            HostError::Core(e) => to_pyerr(py, e),
            HostError::Py(e) => e,
        }
    }
}

/// Extension for `Result<T, CoreError>`.
pub trait IntoPy<T> {
    fn into_py(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPy<T> for Result<T, CoreError> {
    #[inline]
    fn into_py(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_pyerr(py, e))
    }
}

/// Run `f`, turning a Rust panic into `ctxengine.errors.ContextError`
/// rather than letting pyo3 raise its `PanicException` (a BaseException).
/// Every entry point of the module runs inside it.
#[inline]
pub fn guard<T>(py: Python<'_>, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let detail = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            let message = format!("internal error in ctxengine._core: {detail}");
            match class(py, &CONTEXT_ERROR, "ContextError").and_then(|cls| cls.call1((message,))) {
                Ok(exc) => Err(PyErr::from_value(exc)),
                Err(err) => Err(err),
            }
        }
    }
}
