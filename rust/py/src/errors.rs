//! Core errors mapped once to the classes of `ctxengine.errors` (handed in
//! by `bind_errors`, each class looked up the first time it is raised), and
//! panics kept from crossing the boundary.

use std::panic::{catch_unwind, AssertUnwindSafe};

use ctxengine_core::CoreError;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyTuple, PyType};

static ERRORS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// The classes of `ctxengine_core::error::CLASSES` by index, then `ContextError`.
static CLASSES: [PyOnceLock<Py<PyType>>; 7] = [const { PyOnceLock::new() }; 7];

/// `bind_errors(module)`: the module whose classes are raised (`ctxengine.errors`);
/// the first binding stays.
#[pyfunction]
pub fn bind_errors(py: Python<'_>, module: Bound<'_, PyAny>) {
    let _ = ERRORS.set(py, module.unbind());
}

/// Class `k` (then `ContextError`) called with `args`, as an exception.
fn raise<'py>(py: Python<'py>, k: usize, args: PyResult<Bound<'py, PyTuple>>) -> PyErr {
    let name = *ctxengine_core::error::CLASSES
        .get(k)
        .unwrap_or(&"ContextError");
    let cls = CLASSES[k].get_or_try_init(py, || {
        let unbound = "ctxengine._core: import ctxengine before using its backend";
        let module = ERRORS
            .get(py)
            .ok_or_else(|| PyRuntimeError::new_err(unbound))?;
        PyResult::Ok(
            module
                .bind(py)
                .getattr(name)?
                .cast_into::<PyType>()?
                .unbind(),
        )
    });
    match cls.and_then(|cls| cls.bind(py).call1(args?)) {
        Ok(exc) => PyErr::from_value(exc),
        Err(err) => err,
    }
}

/// The Python exception for a core error: its class (`CoreError::class`)
/// called with its arguments.
pub fn to_pyerr(py: Python<'_>, err: CoreError) -> PyErr {
    let (k, args) = err.class();
    let args: PyResult<Vec<_>> = args.iter().map(|a| crate::data::to_py(py, a)).collect();
    raise(py, k, args.and_then(|a| PyTuple::new(py, a)))
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

/// A failure of a core algorithm that calls back into the binding.
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

/// A `Result` of a `CoreError`, a `HostError` or a `PyErr`, raised as the Python error.
pub trait IntoPy<T> {
    fn into_py(self, py: Python<'_>) -> PyResult<T>;
}

impl<T, E: Into<HostError>> IntoPy<T> for Result<T, E> {
    #[inline]
    fn into_py(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| match e.into() {
            HostError::Core(e) => to_pyerr(py, e),
            HostError::Py(e) => e,
        })
    }
}

/// Run `f`, turning a Rust panic into `ctxengine.errors.ContextError`
/// rather than pyo3's `PanicException` (a BaseException).
#[inline]
pub fn guard<T>(py: Python<'_>, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let detail = (payload.downcast_ref::<&str>().copied())
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("unknown panic");
        let message = format!("internal error in ctxengine._core: {detail}");
        Err(raise(py, CLASSES.len() - 1, PyTuple::new(py, [message])))
    })
}
