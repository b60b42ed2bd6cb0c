//! `lance_as_of` as a registered table function: a clear error when a
//! statement reaches DataFusion without [`crate::plan_lance_sql`], which plans
//! the real thing (see [`super`]).

use std::sync::Arc;

use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl};
use datafusion::datasource::TableProvider;
use datafusion::error::Result as DFResult;

use super::AS_OF_FUNCTION_NAME;
use crate::error::fail;

/// `lance_as_of(...)` outside `lance_sql`: always an error saying where it
/// works.
#[derive(Debug, Default)]
pub(crate) struct AsOfOutsideLanceSql {}

impl TableFunctionImpl for AsOfOutsideLanceSql {
    fn call_with_args(&self, _args: TableFunctionArgs) -> DFResult<Arc<dyn TableProvider>> {
        fail!(
            not_supported,
            "{AS_OF_FUNCTION_NAME}(...) is planned by lance-sql, LanceSessionContextExt::lance_sql \
             and datafusion_lance::plan_lance_sql; SessionContext::sql cannot plan it"
        )
    }
}
