//! Errors as Python exceptions: [`LanceError`], carrying the crate's message.

use pyo3::PyErr;
use pyo3::create_exception;
use pyo3::exceptions::PyException;

create_exception!(
    datafusion_lance,
    LanceError,
    PyException,
    "An error of datafusion-lance or DataFusion: the message names the table, column or option."
);

/// `e` as a [`LanceError`].
pub(crate) fn to_py(e: impl std::fmt::Display) -> PyErr {
    LanceError::new_err(e.to_string())
}
