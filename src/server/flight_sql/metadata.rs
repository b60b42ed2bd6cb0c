//! The catalog commands of Flight SQL (`GetCatalogs`, `GetDbSchemas`,
//! `GetTables`, `GetTableTypes`, `GetSqlInfo`) answered from a session's
//! catalogs.

use std::sync::{Arc, LazyLock};

use arrow_flight::sql::metadata::{SqlInfoData, SqlInfoDataBuilder};
use arrow_flight::sql::{
    CommandGetCatalogs, CommandGetDbSchemas, CommandGetTableTypes, CommandGetTables, SqlInfo,
    SqlSupportedTransaction,
};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::Schema;
use datafusion::prelude::SessionContext;
use tonic::Status;

/// The table types this server lists.
const TABLE_TYPES: [&str; 3] = ["TABLE", "VIEW", "TEMPORARY"];

static EMPTY: LazyLock<Arc<Schema>> = LazyLock::new(|| Arc::new(Schema::empty()));

/// What `GetSqlInfo` answers.
pub(super) static SQL_INFO: LazyLock<SqlInfoData> = LazyLock::new(|| {
    let mut info = SqlInfoDataBuilder::new();
    info.append(SqlInfo::FlightSqlServerName, "lance-sql");
    info.append(SqlInfo::FlightSqlServerVersion, env!("CARGO_PKG_VERSION"));
    info.append(SqlInfo::FlightSqlServerArrowVersion, "58");
    info.append(SqlInfo::FlightSqlServerReadOnly, false);
    info.append(SqlInfo::FlightSqlServerSql, true);
    info.append(SqlInfo::FlightSqlServerSubstrait, false);
    info.append(
        SqlInfo::FlightSqlServerTransaction,
        SqlSupportedTransaction::None as i32,
    );
    info.append(SqlInfo::FlightSqlServerCancel, false);
    info.append(SqlInfo::SqlDdlCatalog, false);
    info.append(SqlInfo::SqlDdlSchema, true);
    info.append(SqlInfo::SqlDdlTable, true);
    info.append(SqlInfo::SqlIdentifierQuoteChar, "\"");
    // Infallible: every value above has a type the builder takes.
    info.build().unwrap_or_else(|e| panic!("SqlInfo: {e}"))
});

fn arrow_status(error: impl std::fmt::Display) -> Status {
    Status::internal(format!("cannot build the metadata result: {error}"))
}

pub(super) fn catalogs(
    ctx: &SessionContext,
    query: CommandGetCatalogs,
) -> Result<RecordBatch, Status> {
    let mut builder = query.into_builder();
    let mut names = ctx.catalog_names();
    names.sort();
    for name in names {
        builder.append(name);
    }
    builder.build().map_err(arrow_status)
}

pub(super) fn schemas(
    ctx: &SessionContext,
    query: CommandGetDbSchemas,
) -> Result<RecordBatch, Status> {
    let wanted = query.catalog.clone();
    let mut builder = query.into_builder();
    for (catalog_name, catalog) in catalogs_of(ctx, wanted.as_deref()) {
        let mut schemas = catalog.schema_names();
        schemas.sort();
        for schema in schemas {
            builder.append(&catalog_name, schema);
        }
    }
    builder.build().map_err(arrow_status)
}

pub(super) async fn tables(
    ctx: &SessionContext,
    query: CommandGetTables,
) -> Result<RecordBatch, Status> {
    let wanted = query.catalog.clone();
    let include_schema = query.include_schema;
    let mut builder = query.into_builder();
    for (catalog_name, catalog) in catalogs_of(ctx, wanted.as_deref()) {
        let mut schema_names = catalog.schema_names();
        schema_names.sort();
        for schema_name in schema_names {
            let Some(schema) = catalog.schema(&schema_name) else {
                continue;
            };
            let mut names = schema.table_names();
            names.sort();
            for name in names {
                let (kind, table_schema) = if include_schema {
                    match schema.table(&name).await {
                        Ok(Some(table)) => (table_type(table.table_type()), table.schema()),
                        // Listed but gone, or unreadable: not listed.
                        _ => continue,
                    }
                } else {
                    // As information_schema.tables does: cheap where the
                    // schema knows types without opening tables.
                    match schema.table_type(&name).await {
                        Ok(Some(kind)) => (table_type(kind), Arc::clone(&EMPTY)),
                        _ => continue,
                    }
                };
                builder
                    .append(&catalog_name, &schema_name, &name, kind, &table_schema)
                    .map_err(arrow_status)?;
            }
        }
    }
    builder.build().map_err(arrow_status)
}

pub(super) fn table_types(query: CommandGetTableTypes) -> Result<RecordBatch, Status> {
    let mut builder = query.into_builder();
    for kind in TABLE_TYPES {
        builder.append(kind);
    }
    builder.build().map_err(arrow_status)
}

fn table_type(kind: datafusion::datasource::TableType) -> &'static str {
    use datafusion::datasource::TableType;
    match kind {
        TableType::Base => TABLE_TYPES[0],
        TableType::View => TABLE_TYPES[1],
        TableType::Temporary => TABLE_TYPES[2],
    }
}

fn catalogs_of(
    ctx: &SessionContext,
    wanted: Option<&str>,
) -> Vec<(String, Arc<dyn datafusion::catalog::CatalogProvider>)> {
    let mut names = ctx.catalog_names();
    names.sort();
    names
        .into_iter()
        .filter(|name| wanted.is_none_or(|w| w == name))
        .filter_map(|name| ctx.catalog(&name).map(|c| (name, c)))
        .collect()
}
