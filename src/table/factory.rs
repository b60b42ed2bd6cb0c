//! [`LanceTableProviderFactory`]: `CREATE EXTERNAL TABLE ... STORED AS LANCE`.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::catalog::{Session, TableProviderFactory};
use datafusion::datasource::TableProvider;
use datafusion::error::Result as DFResult;
use datafusion::logical_expr::CreateExternalTable;

use crate::config::LanceTableOptions;
use crate::error::Error;
use crate::session::LanceSessionCache;
use crate::table::LanceTableProvider;

/// Creates [`LanceTableProvider`]s for `CREATE EXTERNAL TABLE ... STORED AS LANCE`.
///
/// ```sql
/// CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '/data/t.lance';
/// CREATE EXTERNAL TABLE t_v3 STORED AS LANCE LOCATION '/data/t.lance'
///   OPTIONS ('lance.version' '3');
/// ```
///
/// # Errors
///
/// * an option key that is not a Lance option, or a bad value (the error names the key);
/// * no dataset at the location;
/// * a declared column list that does not match the dataset's schema;
/// * `PARTITIONED BY`, `WITH ORDER` and `UNBOUNDED`, which Lance tables do not support.
#[derive(Debug, Default, Clone)]
pub struct LanceTableProviderFactory {}

impl LanceTableProviderFactory {
    /// Creates the factory.
    pub fn new() -> Self {
        Self {}
    }
}

#[async_trait]
impl TableProviderFactory for LanceTableProviderFactory {
    async fn create(
        &self,
        state: &dyn Session,
        cmd: &CreateExternalTable,
    ) -> DFResult<Arc<dyn TableProvider>> {
        let name = cmd.name.to_string();
        let options = LanceTableOptions::from_options(&cmd.options)?;
        if !cmd.table_partition_cols.is_empty() {
            return Err(Error::unsupported(format!(
                "table '{name}': PARTITIONED BY is not supported for Lance tables"
            ))
            .into());
        }
        if !cmd.order_exprs.is_empty() {
            return Err(Error::unsupported(format!(
                "table '{name}': WITH ORDER is not supported for Lance tables"
            ))
            .into());
        }
        if cmd.unbounded {
            return Err(Error::unsupported(format!(
                "table '{name}': Lance tables are bounded; UNBOUNDED is not supported"
            ))
            .into());
        }
        let cache = LanceSessionCache::for_config(state.config());
        let provider = LanceTableProvider::builder(cmd.location.clone())
            .with_table_options(options)
            .build_with(&cache)
            .await?;

        let declared = cmd.schema.as_arrow();
        if !declared.fields().is_empty() {
            check_declared_schema(&name, declared, provider.schema().as_ref())?;
        }
        Ok(Arc::new(provider))
    }
}

/// A declared column list must name the dataset's columns, in order, with
/// the same types.
fn check_declared_schema(table: &str, declared: &Schema, actual: &Schema) -> Result<(), Error> {
    let describe = |s: &Schema| {
        s.fields()
            .iter()
            .map(|f| format!("{} {}", f.name(), f.data_type()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let matches = declared.fields().len() == actual.fields().len()
        && declared
            .fields()
            .iter()
            .zip(actual.fields())
            .all(|(d, a)| d.name() == a.name() && same_sql_type(d.data_type(), a.data_type()));
    if matches {
        Ok(())
    } else {
        Err(Error::unsupported(format!(
            "table '{table}': declared columns ({}) do not match the Lance dataset's columns ({})",
            describe(declared),
            describe(actual)
        )))
    }
}

/// Types a SQL column declaration can stand for: `VARCHAR` plans as
/// `Utf8View` but names any string type, `BYTEA` any binary type.
pub(crate) fn same_sql_type(declared: &DataType, actual: &DataType) -> bool {
    use DataType::*;
    let family = |t: &DataType| match t {
        Utf8 | LargeUtf8 | Utf8View => Some(0),
        Binary | LargeBinary | BinaryView => Some(1),
        _ => None,
    };
    match (family(declared), family(actual)) {
        (Some(a), Some(b)) => a == b,
        _ => declared.equals_datatype(actual),
    }
}
