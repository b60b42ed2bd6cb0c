//! This crate's table functions and scalar functions as DataFusion's
//! Python bindings take foreign functions (`datafusion.TableFunction`,
//! `datafusion.udf`).

use std::sync::Arc;

use datafusion::catalog::TableFunctionImpl;
use datafusion::logical_expr::ScalarUDF;
use datafusion_ffi::udf::FFI_ScalarUDF;
use datafusion_ffi::udtf::FFI_TableFunction;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use crate::runtime::RUNTIME;
use crate::table::logical_codec;

/// A table function (`lance_vector_search`, `lance_versions`, …).
#[pyclass(module = "datafusion_lance", frozen)]
pub(crate) struct TableFunction {
    pub(crate) name: String,
    pub(crate) function: Arc<dyn TableFunctionImpl>,
}

#[pymethods]
impl TableFunction {
    /// The name SQL calls it by.
    #[getter]
    fn name(&self) -> String {
        self.name.clone()
    }

    fn __datafusion_table_function__<'py>(
        &self,
        py: Python<'py>,
        session: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let exported = FFI_TableFunction::new_with_ffi_codec(
            Arc::clone(&self.function),
            Some(RUNTIME.handle().clone()),
            logical_codec(session)?,
        );
        PyCapsule::new(py, exported, Some(c"datafusion_table_function".into()))
    }
}

/// A scalar function (`l2_distance`, …).
#[pyclass(module = "datafusion_lance", frozen)]
pub(crate) struct ScalarFunction {
    pub(crate) function: Arc<ScalarUDF>,
}

#[pymethods]
impl ScalarFunction {
    /// The name SQL calls it by.
    #[getter]
    fn name(&self) -> String {
        self.function.name().to_string()
    }

    fn __datafusion_scalar_udf__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        let exported = FFI_ScalarUDF::from(Arc::clone(&self.function));
        PyCapsule::new(py, exported, Some(c"datafusion_scalar_udf".into()))
    }
}
