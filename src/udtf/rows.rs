//! `lance_rows('<table>')`: the table's rows with Lance's row identity —
//! every column, then `_rowid` (the row id: stable across compaction and
//! updates when the table was created with stable row ids, else equal to
//! the address) and `_rowaddr` (fragment id × 2³² + offset in the fragment).
//! A plain table's `SELECT *` and `INSERT` never see these columns.
//!
//! It reads like the table (same version, same pushdown); filters on the two
//! identity columns are evaluated by DataFusion.

use std::sync::Arc;

use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl};
use datafusion::datasource::TableProvider;
use datafusion::error::Result as DFResult;

use super::search::{lookup, string};
use crate::error::fail;
use crate::table::lookup::Target;
use crate::table::{ROW_ADDR, ROW_ID};

/// SQL name of the row-identity function.
pub const ROWS_FUNCTION_NAME: &str = "lance_rows";

/// `lance_rows(...)`.
#[derive(Debug, Default)]
pub struct RowsFunction {}

impl TableFunctionImpl for RowsFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DFResult<Arc<dyn TableProvider>> {
        let [name] = args.exprs() else {
            return fail!(
                invalid_input,
                "{ROWS_FUNCTION_NAME}() takes one string: a registered table name"
            );
        };
        let Some(name) = string(name) else {
            return fail!(
                invalid_input,
                "{ROWS_FUNCTION_NAME}() takes one string: a registered table name"
            );
        };
        let table = lookup(
            ROWS_FUNCTION_NAME,
            args.session(),
            name,
            &[ROW_ID, ROW_ADDR],
        )?;
        match table {
            Target::Lance(table) => Ok(Arc::new(table.with_row_identity())),
            Target::Cloud(table) => fail!(
                not_supported,
                "{ROWS_FUNCTION_NAME}('{name}'): {} is a LanceDB table, whose row ids and \
                 addresses the service does not read out",
                table.display_uri()
            ),
        }
    }
}
