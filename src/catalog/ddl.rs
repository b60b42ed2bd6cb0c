//! `CREATE TABLE`, `CREATE TABLE ... AS`, `DROP TABLE`, `CREATE SCHEMA` and
//! `DROP SCHEMA` in a [`super::LanceCatalog`].
//!
//! DataFusion plans these statements; [`plan_catalog_ddl`] takes the plans
//! whose target is a Lance catalog. A new table becomes a `COPY ... STORED
//! AS LANCE` to its location in the namespace — the parallel write path,
//! one commit, version 1 — and `CREATE OR REPLACE` of an existing table an
//! `INSERT OVERWRITE` (the old rows stay readable until the new ones are
//! committed). [`run_catalog_plan`] runs what changes the namespace: the
//! drops, the schemas, and the namespace entry of a table created in a
//! child namespace (after its data is committed; if that entry cannot be
//! made, the data is removed again). In a REST namespace the server names
//! a new table's location: the statement declares the table, writes it
//! there, and drops the declaration again if the write fails.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::catalog::TableProvider;
use datafusion::common::{SchemaReference, TableReference};
use datafusion::datasource::file_format::format_as_file_type;
use datafusion::datasource::provider_as_source;
use datafusion::error::Result as DFResult;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::dml::{CopyTo, InsertOp};
use datafusion::logical_expr::{
    CreateMemoryTable, DdlStatement, DropTable, LogicalPlan, LogicalPlanBuilder,
};
use datafusion::prelude::{DataFrame, SessionContext};
use lance_namespace::models::{
    CreateNamespaceRequest, DeclareTableRequest, DescribeNamespaceRequest, DropNamespaceRequest,
    DropTableRequest, RegisterTableRequest,
};

use super::cloud_ddl;
use super::lake::{Lake, lakes, lance_catalog};
use lance_namespace::error::ErrorCode;

use super::namespace::{NamespaceKind, code, is_not_found};
use crate::config::LanceTableOptions;
use crate::error::{Error, Result, fail};
use crate::format::LanceFormatFactory;
use crate::location::redact_uri;
use crate::name::{NameKind, check_new};

/// The plan of a DataFusion DDL `plan` whose target is a Lance catalog:
/// `CREATE TABLE` becomes a write of the new table, the others are kept
/// for [`run_catalog_plan`]; `None` for any other plan.
pub(crate) async fn plan_catalog_ddl(
    state: &SessionState,
    plan: &LogicalPlan,
) -> DFResult<Option<LogicalPlan>> {
    let LogicalPlan::Ddl(ddl) = plan else {
        return Ok(None);
    };
    let keep = |catalog: &str| match lance_catalog(state, catalog) {
        Some(lake) if lake.spec.kind == NamespaceKind::Cloud => read_only(&lake),
        found => Ok(found.map(|_| plan.clone())),
    };
    match ddl {
        DdlStatement::CreateMemoryTable(create) => plan_create(state, create).await,
        // A LanceDB catalog drops its tables through the service.
        DdlStatement::DropTable(drop) => {
            Ok(lance_catalog(state, &resolve(state, &drop.name).0).map(|_| plan.clone()))
        }
        DdlStatement::CreateCatalogSchema(create) => {
            keep(&schema_path(state, &create.schema_name).0)
        }
        DdlStatement::DropCatalogSchema(drop) => match &drop.name {
            SchemaReference::Full { catalog, .. } => keep(catalog.as_ref()),
            SchemaReference::Bare { .. } => keep(&state.config_options().catalog.default_catalog),
        },
        _ => Ok(None),
    }
}

/// `(catalog, schema, table)` of `name` in `state`.
fn resolve(state: &SessionState, name: &TableReference) -> (String, String, String) {
    let defaults = &state.config_options().catalog;
    let full = name
        .clone()
        .resolve(&defaults.default_catalog, &defaults.default_schema);
    (
        full.catalog.to_string(),
        full.schema.to_string(),
        full.table.to_string(),
    )
}

/// `(catalog, schema)` of a `CREATE SCHEMA` name (`schema` or `catalog.schema`).
fn schema_path(state: &SessionState, name: &str) -> (String, String) {
    match name.split_once('.') {
        Some((catalog, schema)) => (catalog.to_string(), schema.to_string()),
        None => (
            state.config_options().catalog.default_catalog.clone(),
            name.to_string(),
        ),
    }
}

async fn plan_create(
    state: &SessionState,
    create: &CreateMemoryTable,
) -> DFResult<Option<LogicalPlan>> {
    let (catalog, schema, table) = resolve(state, &create.name);
    let Some(lake) = lance_catalog(state, &catalog) else {
        return Ok(None);
    };
    let full = format!("{catalog}.{schema}.{table}");
    if create.temporary {
        return fail!(
            not_supported,
            "CREATE TEMPORARY TABLE {full}: Lance catalog tables are never temporary"
        );
    }
    if !create.constraints.is_empty() {
        return fail!(
            not_supported,
            "CREATE TABLE {full}: constraints (PRIMARY KEY, UNIQUE) are not supported in a Lance \
             catalog yet; create the table without them"
        );
    }
    if !create.column_defaults.is_empty() {
        return fail!(
            not_supported,
            "CREATE TABLE {full}: DEFAULT values are not supported in a Lance catalog yet; add \
             them with ALTER TABLE ... ADD COLUMN ... DEFAULT"
        );
    }
    if lake.spec.kind == NamespaceKind::Cloud {
        return cloud_ddl::plan_create(create, &lake, (&schema, &table)).await;
    }
    let input = Arc::clone(&create.input);
    if let Some(entry) = lake.describe(&schema, &table).await? {
        if create.if_not_exists {
            return Ok(Some(LogicalPlanBuilder::empty(false).build()?));
        }
        if !create.or_replace {
            return fail!(
                already_exists,
                "CREATE TABLE {full}: the table already exists (at '{}'); use CREATE TABLE IF \
                 NOT EXISTS, CREATE OR REPLACE TABLE or INSERT INTO",
                redact_uri(&entry.location)
            );
        }
        // Replaced by one overwrite: readers see the old rows until the new
        // ones are committed.
        let provider: Arc<dyn TableProvider> = Arc::new(lake.open(&schema, &table, &entry).await?);
        if provider.schema().fields() != input.schema().as_arrow().fields() {
            return fail!(
                schema_mismatch,
                "CREATE OR REPLACE TABLE {full}: the new columns differ from the table's, which \
                 Lance cannot replace in one version; DROP TABLE {full} first"
            );
        }
        return Ok(Some(
            LogicalPlanBuilder::insert_into(
                input.as_ref().clone(),
                TableReference::full(catalog, schema, table),
                provider_as_source(provider),
                InsertOp::Overwrite,
            )?
            .build()?,
        ));
    }
    let relative = place(&lake, &format!("CREATE TABLE {full}"), &schema, &table).await?;
    let options = LanceTableOptions {
        storage_options: lake.spec.table_storage_options(),
        ..Default::default()
    };
    let factory = Arc::new(LanceFormatFactory::with_options(options));
    Ok(Some(LogicalPlan::Copy(CopyTo::new(
        input,
        lake.spec.location_of(&relative),
        vec![],
        format_as_file_type(factory),
        Default::default(),
    ))))
}

/// Where new table `schema.table` of `lake` is stored, relative to the
/// root (for a REST namespace, the id the server is asked to declare):
/// its names become a directory (or a REST id) under the namespace's root,
/// checked before anything is written; `statement` is named in errors.
pub(super) async fn place(
    lake: &Lake,
    statement: &str,
    schema: &str,
    table: &str,
) -> Result<String> {
    let in_statement = |e: Error| Error::invalid_input(format!("{statement}: {e}"));
    check_new(NameKind::Table, table).map_err(in_statement)?;
    if schema != lake.root_schema {
        check_new(NameKind::Schema, schema).map_err(in_statement)?;
        ensure_schema(lake, &lake.name, schema).await?;
    }
    Ok(match lake.spec.kind {
        NamespaceKind::Directory if schema == lake.root_schema => format!("{table}.lance"),
        NamespaceKind::Directory => child_location(schema, table),
        // The server names the location when the statement runs.
        NamespaceKind::Rest => {
            if schema.contains(REST_DELIMITER) || table.contains(REST_DELIMITER) {
                return fail!(
                    not_supported,
                    "{statement}: names in a Lance REST namespace cannot contain \
                     '{REST_DELIMITER}'"
                );
            }
            lake.table_id(schema, table).join(REST_DELIMITER)
        }
        NamespaceKind::Cloud => {
            return fail!(
                not_supported,
                "{statement}: a LanceDB database ({}) creates its tables itself",
                lake.spec.display_root()
            );
        }
    })
}

/// The refusal of schema DDL in a LanceDB catalog (`db://`).
fn read_only<T>(lake: &Lake) -> DFResult<T> {
    fail!(
        not_supported,
        "catalog '{}' ({}): a LanceDB database is one schema; its schemas cannot be created \
         or dropped",
        lake.name,
        lake.spec.display_root()
    )
}

/// How the ids of a REST namespace's tables are joined in the placeholder
/// location of a `CREATE TABLE` plan (the client's default delimiter).
const REST_DELIMITER: &str = "$";

/// Where a new table of child namespace `schema` is stored, relative to the
/// root: `<8 hex digits>_<schema>$<table>`, as Lance's directory namespace
/// names them.
fn child_location(schema: &str, table: &str) -> String {
    let random = uuid::Uuid::new_v4().as_u128() as u32;
    format!("{random:08x}_{schema}${table}")
}

/// The namespace id of a table stored at `relative` (see [`child_location`]).
pub(super) fn child_id(relative: &str) -> Option<Vec<String>> {
    let (hex, object) = relative.split_once('_')?;
    if hex.len() != 8 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let (schema, table) = object.split_once('$')?;
    Some(vec![schema.to_string(), table.to_string()])
}

async fn ensure_schema(lake: &Lake, catalog: &str, schema: &str) -> Result<()> {
    let request = DescribeNamespaceRequest {
        id: Some(lake.namespace_id(schema)),
        ..Default::default()
    };
    match lake.namespace.describe_namespace(request).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Err(Error::not_found(format!(
            "schema '{catalog}.{schema}' does not exist; CREATE SCHEMA {catalog}.{schema} first"
        ))),
        Err(e) => Err(lake.spec.error(&format!("looking up schema '{schema}'"), e)),
    }
}

/// Runs `plan` when it changes a Lance catalog (a drop, a schema, a table
/// created in one); `None` when it does not.
pub(crate) async fn run_catalog_plan(
    ctx: &SessionContext,
    plan: &LogicalPlan,
) -> DFResult<Option<DataFrame>> {
    // Only these can change a catalog: other statements (every query) go
    // on without a copy of the session state.
    let candidate = matches!(
        plan,
        LogicalPlan::Ddl(
            DdlStatement::DropTable(_)
                | DdlStatement::CreateCatalogSchema(_)
                | DdlStatement::DropCatalogSchema(_)
        ) | LogicalPlan::Copy(_)
    ) || (matches!(plan, LogicalPlan::Dml(_)) && cloud_ddl::creates(plan));
    if !candidate {
        return Ok(None);
    }
    let state = ctx.state();
    let (lake, result) = match plan {
        LogicalPlan::Ddl(DdlStatement::DropTable(drop)) => {
            let (catalog, schema, table) = resolve(&state, &drop.name);
            let Some(lake) = lance_catalog(&state, &catalog) else {
                return Ok(None);
            };
            if lake.spec.kind == NamespaceKind::Cloud {
                cloud_ddl::drop_table(&lake, drop, &schema, &table).await?;
            } else {
                drop_table(&lake, drop, &schema, &table).await?;
            }
            (lake, None)
        }
        LogicalPlan::Ddl(DdlStatement::CreateCatalogSchema(create)) => {
            let (catalog, schema) = schema_path(&state, &create.schema_name);
            let Some(lake) = lance_catalog(&state, &catalog) else {
                return Ok(None);
            };
            create_schema(&lake, &catalog, &schema, create.if_not_exists).await?;
            (lake, None)
        }
        LogicalPlan::Ddl(DdlStatement::DropCatalogSchema(drop)) => {
            let (catalog, schema) = match &drop.name {
                SchemaReference::Full { catalog, schema } => {
                    (catalog.to_string(), schema.to_string())
                }
                SchemaReference::Bare { schema } => (
                    state.config_options().catalog.default_catalog.clone(),
                    schema.to_string(),
                ),
            };
            let Some(lake) = lance_catalog(&state, &catalog) else {
                return Ok(None);
            };
            drop_schema(&lake, &catalog, &schema, drop.if_exists, drop.cascade).await?;
            (lake, None)
        }
        LogicalPlan::Copy(copy) => {
            let Some((lake, relative)) = created_in(&state, &copy.output_url) else {
                return Ok(None);
            };
            let batches = match lake.spec.kind {
                NamespaceKind::Directory => {
                    let batches = ctx
                        .execute_logical_plan(plan.clone())
                        .await?
                        .collect()
                        .await?;
                    if let Some(id) = child_id(&relative) {
                        register(&lake, id, &relative, &copy.output_url).await?;
                    }
                    batches
                }
                NamespaceKind::Rest => create_declared(ctx, &lake, copy, &relative).await?,
                NamespaceKind::Cloud => return read_only(&lake),
            };
            (lake, Some(batches))
        }
        LogicalPlan::Dml(dml) if cloud_ddl::creates(plan) => {
            let (catalog, ..) = resolve(&state, &dml.table_name);
            let Some(lake) = lance_catalog(&state, &catalog) else {
                return Ok(None);
            };
            let batches = ctx
                .execute_logical_plan(plan.clone())
                .await?
                .collect()
                .await?;
            (lake, Some(batches))
        }
        _ => return Ok(None),
    };
    lake.refresh().await?;
    let frame = match result {
        Some(batches) => ctx.read_batches(batches)?,
        None => DataFrame::new(state, LogicalPlanBuilder::empty(false).build()?),
    };
    Ok(Some(frame))
}

/// The catalog a `COPY` to `url` creates a table in, and the table's
/// location relative to the catalog's root.
fn created_in(state: &SessionState, url: &str) -> Option<(Arc<Lake>, String)> {
    lakes(state).into_iter().find_map(|lake| {
        let relative = url.strip_prefix(&lake.spec.location_of(""))?;
        (!relative.contains('/')).then(|| (lake, relative.to_string()))
    })
}

/// Creates the table of a REST namespace that `copy` writes: the server
/// declares it and names its location, the rows are written there in one
/// commit; if they cannot be, the declaration is dropped again.
async fn create_declared(
    ctx: &SessionContext,
    lake: &Lake,
    copy: &CopyTo,
    relative: &str,
) -> DFResult<Vec<RecordBatch>> {
    let id: Vec<String> = relative.split(REST_DELIMITER).map(str::to_string).collect();
    let name = format!("{}.{}", lake.name, id.join("."));
    let request = DeclareTableRequest {
        id: Some(id.clone()),
        ..Default::default()
    };
    let declared = lake
        .namespace
        .declare_table(request)
        .await
        .map_err(|e| lake.spec.error(&format!("CREATE TABLE {name}"), e))?;
    let written = match declared.location {
        Some(location) => {
            let entry = lake.entry(location, declared.storage_options);
            let options = LanceTableOptions {
                storage_options: entry.storage_options,
                ..Default::default()
            };
            let factory = Arc::new(LanceFormatFactory::with_options(options));
            let write = LogicalPlan::Copy(CopyTo::new(
                Arc::clone(&copy.input),
                entry.location,
                vec![],
                format_as_file_type(factory),
                Default::default(),
            ));
            match ctx.execute_logical_plan(write).await {
                Ok(frame) => frame.collect().await,
                Err(e) => Err(e),
            }
        }
        None => Err(Error::namespace(format!(
            "CREATE TABLE {name}: the Lance namespace at '{}' declared the table without a \
             location",
            lake.spec.display_root()
        ))
        .into()),
    };
    if written.is_err() {
        let request = DropTableRequest {
            id: Some(id),
            ..Default::default()
        };
        if let Err(e) = lake.namespace.drop_table(request).await {
            log::warn!(
                "table '{name}' could not be written and its declaration not dropped: {}",
                crate::error::plain(&e)
            );
        }
    }
    written
}

/// Makes the namespace entry of a table just created at `relative`; on
/// failure removes the table's data again.
pub(super) async fn register(
    lake: &Lake,
    id: Vec<String>,
    relative: &str,
    uri: &str,
) -> Result<()> {
    let request = RegisterTableRequest {
        id: Some(id.clone()),
        location: relative.to_string(),
        ..Default::default()
    };
    let Err(e) = lake.namespace.register_table(request).await else {
        return Ok(());
    };
    if let Err(cleanup) = remove_dir(lake, uri).await {
        log::warn!(
            "table '{}' could not be registered and its data at '{}' not removed: {cleanup}",
            id.join("."),
            redact_uri(uri)
        );
    }
    Err(lake
        .spec
        .error(&format!("registering table '{}'", id.join(".")), e))
}

async fn drop_table(lake: &Lake, drop: &DropTable, schema: &str, table: &str) -> Result<()> {
    let full = format!("{}.{schema}.{table}", lake.name);
    let Some(entry) = lake.describe(schema, table).await? else {
        if drop.if_exists {
            return Ok(());
        }
        return Err(Error::not_found(format!(
            "DROP TABLE {full}: no such table in the Lance namespace at '{}'",
            lake.spec.display_root()
        )));
    };
    let request = DropTableRequest {
        id: Some(lake.table_id(schema, table)),
        ..Default::default()
    };
    match lake.namespace.drop_table(request).await {
        Ok(_) => {}
        // A table of the root found by listing its directory only (written
        // by a plain dataset write): the directory is the table.
        Err(e)
            if is_not_found(&e)
                && schema == lake.root_schema
                && lake.spec.kind == NamespaceKind::Directory =>
        {
            remove_dir(lake, &entry.location).await?;
        }
        Err(e) => return Err(lake.spec.error(&format!("DROP TABLE {full}"), e)),
    }
    lake.cache.forget(&entry.location);
    Ok(())
}

async fn remove_dir(lake: &Lake, uri: &str) -> Result<()> {
    let params = crate::session::store_params(&lake.spec.storage_options);
    let (store, path) = lance_io::object_store::ObjectStore::from_uri_and_params(
        lake.cache.session().store_registry(),
        uri,
        &params,
    )
    .await
    .map_err(|e| Error::lance("opening the store of", uri, e))?;
    store
        .remove_dir_all(path)
        .await
        .map_err(|e| Error::lance("removing", uri, e))
}

async fn create_schema(
    lake: &Lake,
    catalog: &str,
    schema: &str,
    if_not_exists: bool,
) -> Result<()> {
    if schema == lake.root_schema {
        return if if_not_exists {
            Ok(())
        } else {
            Err(Error::not_supported(format!(
                "CREATE SCHEMA {catalog}.{schema}: it is the root of the Lance namespace and \
                 always exists"
            )))
        };
    }
    check_new(NameKind::Schema, schema)
        .map_err(|e| Error::invalid_input(format!("CREATE SCHEMA {catalog}.{schema}: {e}")))?;
    let request = CreateNamespaceRequest {
        id: Some(lake.namespace_id(schema)),
        ..Default::default()
    };
    match lake.namespace.create_namespace(request).await {
        Ok(_) => Ok(()),
        Err(e) if if_not_exists && code(&e) == Some(ErrorCode::NamespaceAlreadyExists) => Ok(()),
        Err(e) => Err(lake
            .spec
            .error(&format!("CREATE SCHEMA {catalog}.{schema}"), e)),
    }
}

async fn drop_schema(
    lake: &Lake,
    catalog: &str,
    schema: &str,
    if_exists: bool,
    cascade: bool,
) -> Result<()> {
    let full = format!("{catalog}.{schema}");
    if schema == lake.root_schema {
        return Err(Error::not_supported(format!(
            "DROP SCHEMA {full}: it is the root of the Lance namespace, which cannot be dropped"
        )));
    }
    if cascade {
        return Err(Error::not_supported(format!(
            "DROP SCHEMA {full} CASCADE is not supported; drop its tables first"
        )));
    }
    let request = DropNamespaceRequest {
        id: Some(lake.namespace_id(schema)),
        mode: Some(if if_exists { "Skip" } else { "Fail" }.to_string()),
        behavior: Some("Restrict".to_string()),
        ..Default::default()
    };
    match lake.namespace.drop_namespace(request).await {
        Ok(_) => Ok(()),
        Err(e) if if_exists && is_not_found(&e) => Ok(()),
        Err(e) => Err(lake.spec.error(&format!("DROP SCHEMA {full}"), e)),
    }
}
