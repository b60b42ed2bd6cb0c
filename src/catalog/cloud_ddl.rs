//! `CREATE TABLE ... AS`, `CREATE OR REPLACE TABLE ... AS` and `DROP TABLE`
//! in a LanceDB catalog (`db://DATABASE`), through the service.
//!
//! A new table is an `INSERT` into a table that does not exist yet: its
//! first request is `create_table` (with the first rows), the rest are
//! `insert`s — one version per request, as for `INSERT` (the table and
//! the rows of the requests that succeeded stay if a later one fails; the
//! error says so). `CREATE OR REPLACE` of an existing table is an `INSERT
//! OVERWRITE` (one request or none). A LanceDB database is one schema.

use std::sync::Arc;

use datafusion::common::TableReference;
use datafusion::datasource::{TableProvider, provider_as_source};
use datafusion::error::Result as DFResult;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{
    CreateMemoryTable, DmlStatement, DropTable, LogicalPlan, LogicalPlanBuilder, WriteOp,
};

use super::lake::Lake;
use crate::cloud::{CloudClient, CloudOptions};
use crate::error::{Error, Result, fail};
use crate::name::{NameKind, check_new};
use crate::table::cloud::CloudTableProvider;

/// Table `table` of schema `schema` of the LanceDB catalog `lake`.
fn options(lake: &Lake, schema: &str, table: &str) -> Result<CloudOptions> {
    if schema != lake.root_schema {
        return Err(Error::not_found(format!(
            "schema '{}.{schema}': a LanceDB database has one schema, '{}.{}'",
            lake.name, lake.name, lake.root_schema
        )));
    }
    lake.spec.cloud_table(&lake.namespace_id(schema), table)
}

/// The plan of `CREATE [OR REPLACE] TABLE ... AS` named `full` in the
/// LanceDB catalog `lake`.
pub(super) async fn plan_create(
    create: &CreateMemoryTable,
    lake: &Lake,
    (schema, table): (&str, &str),
) -> DFResult<Option<LogicalPlan>> {
    let full = format!("{}.{schema}.{table}", lake.name);
    let options = options(lake, schema, table)?;
    let input = create.input.as_ref().clone();
    let name = TableReference::full(lake.name.as_str(), schema, table);
    match CloudTableProvider::open(full.clone(), options.clone()).await {
        Ok(existing) => {
            if create.if_not_exists {
                return Ok(Some(LogicalPlanBuilder::empty(false).build()?));
            }
            if !create.or_replace {
                return fail!(
                    already_exists,
                    "CREATE TABLE {full}: the table already exists ({}); use CREATE TABLE IF NOT \
                     EXISTS, CREATE OR REPLACE TABLE or INSERT INTO",
                    existing.display_uri()
                );
            }
            if existing.schema().fields() != input.schema().as_arrow().fields() {
                return fail!(
                    schema_mismatch,
                    "CREATE OR REPLACE TABLE {full}: the new columns differ from the table's, \
                     which one overwrite cannot change; DROP TABLE {full} first"
                );
            }
            let provider: Arc<dyn TableProvider> = Arc::new(existing);
            Ok(Some(
                LogicalPlanBuilder::insert_into(
                    input,
                    name,
                    provider_as_source(provider),
                    InsertOp::Overwrite,
                )?
                .build()?,
            ))
        }
        Err(Error::NotFound { .. }) => {
            check_new(NameKind::Table, table)
                .map_err(|e| Error::invalid_input(format!("CREATE TABLE {full}: {e}")))?;
            let schema = Arc::new(input.schema().as_arrow().clone());
            let provider: Arc<dyn TableProvider> =
                Arc::new(CloudTableProvider::creating(full, options.table, schema));
            Ok(Some(
                LogicalPlanBuilder::insert_into(
                    input,
                    name,
                    provider_as_source(provider),
                    InsertOp::Append,
                )?
                .build()?,
            ))
        }
        Err(e) => Err(e.into()),
    }
}

/// Whether `plan` creates a table of a LanceDB catalog (see
/// [`plan_create`]): the catalogs' listings are refreshed after it runs.
pub(super) fn creates(plan: &LogicalPlan) -> bool {
    let LogicalPlan::Dml(DmlStatement {
        target,
        op: WriteOp::Insert(_),
        ..
    }) = plan
    else {
        return false;
    };
    target
        .downcast_ref::<datafusion::datasource::DefaultTableSource>()
        .and_then(|s| s.table_provider.downcast_ref::<CloudTableProvider>())
        .is_some_and(CloudTableProvider::creates)
}

/// `DROP TABLE` of table `table` of the LanceDB catalog `lake`.
pub(super) async fn drop_table(
    lake: &Lake,
    drop: &DropTable,
    schema: &str,
    table: &str,
) -> Result<()> {
    let full = format!("{}.{schema}.{table}", lake.name);
    let options = options(lake, schema, table)?;
    let client = CloudClient::connect(&options.table)?;
    match client.drop_table().await {
        Ok(true) => Ok(()),
        Ok(false) if drop.if_exists => Ok(()),
        Ok(false) => Err(Error::not_found(format!(
            "DROP TABLE {full}: no such table in the LanceDB database {}",
            lake.spec.display_root()
        ))),
        Err(e) => Err(e.prefixed(&format!("DROP TABLE {full}"))),
    }
}
