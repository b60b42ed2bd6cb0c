//! `datafusion_lance._native`: this crate's tables, catalogs, functions and
//! SQL front door for DataFusion's Python bindings (`datafusion` 54.1 on
//! PyPI), through `datafusion-ffi` 54.1.
//!
//! Tables, catalogs and functions cross into a Python `SessionContext` as
//! FFI capsules; statements that need this crate's front door (MERGE INTO,
//! time travel, DDL, DELETE/UPDATE) run in an [`engine::Engine`] that the
//! Python package keeps beside each context. Everything runs on one Tokio
//! runtime of this library and one process-level Lance session.

use pyo3::prelude::*;

mod catalog;
mod describe;
mod engine;
mod errors;
mod functions;
mod insert;
mod result;
mod runtime;
mod table;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<table::LanceTable>()?;
    m.add_class::<catalog::LanceCatalog>()?;
    m.add_class::<engine::Engine>()?;
    m.add_class::<result::LanceResult>()?;
    m.add_class::<functions::TableFunction>()?;
    m.add_class::<functions::ScalarFunction>()?;
    m.add("LanceError", m.py().get_type::<errors::LanceError>())?;
    Ok(())
}
