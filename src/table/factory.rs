//! [`LanceTableProviderFactory`]: `CREATE EXTERNAL TABLE ... STORED AS LANCE`.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::{Session, TableProviderFactory};
use datafusion::common::{Constraint, Constraints};
use datafusion::datasource::TableProvider;
use datafusion::error::Result as DFResult;
use datafusion::logical_expr::CreateExternalTable;

use crate::cloud::{CloudAddress, CloudOptions};
use crate::config::{LanceConfig, LanceTableOptions};
use crate::error::Error;
use crate::location::{TableLocation, normalize_uri};
use crate::physical_plan::WriteTarget;
use crate::session::LanceSessionCache;
use crate::table::cloud::CloudTableProvider;
use crate::table::{LanceTableProvider, create};

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
        check_clauses(&name, cmd)?;
        if CloudAddress::is_cloud(&cmd.location) {
            return create_cloud(name, cmd).await;
        }
        let options = LanceTableOptions::from_options(&cmd.options)?;
        let cache = LanceSessionCache::for_config(state.config());
        let declared = cmd.schema.as_arrow();
        let key = primary_key(&name, &cmd.constraints)?;
        let builder = LanceTableProvider::builder(cmd.location.clone())
            .with_name(name.clone())
            .with_table_options(options.clone());
        let provider = match builder.clone().build_with(&cache).await {
            Ok(provider) => {
                let dataset = cache
                    .open(
                        provider.uri(),
                        provider.store_params(),
                        provider.version_spec(),
                    )
                    .await?;
                check_existing(&name, &dataset, &options)?;
                provider
            }
            // No dataset yet: a column list creates an empty one.
            Err(Error::DatasetNotFound { .. })
                if !declared.fields().is_empty() && options.version.is_latest() =>
            {
                let schema = create::table_schema(&name, declared, &key)?;
                let settings = LanceConfig::from_options(state.config_options());
                let location = TableLocation::new(
                    normalize_uri(&cmd.location)?,
                    options.storage_options.clone(),
                );
                let target = Arc::new(WriteTarget::new(
                    name.clone(),
                    location,
                    None,
                    schema,
                    &settings,
                    &options,
                ));
                create::create_empty(&target.open_for(state.config())).await?;
                builder.build_with(&cache).await?
            }
            Err(e) => return Err(e.into()),
        };

        if !declared.fields().is_empty() {
            check_declared_schema(&name, declared, provider.schema().as_ref())?;
            let existing_key = provider
                .constraints()
                .and_then(|c| {
                    c.iter().find_map(|c| match c {
                        Constraint::PrimaryKey(k) => Some(k.clone()),
                        _ => None,
                    })
                })
                .unwrap_or_default();
            if !key.is_empty() && key != existing_key {
                return Err(Error::schema_mismatch(format!(
                    "table '{name}': the declared PRIMARY KEY does not match the Lance dataset's \
                     primary key ({})",
                    describe_key(provider.schema().as_ref(), &existing_key)
                ))
                .into());
            }
        }
        Ok(Arc::new(provider))
    }
}

/// `PARTITIONED BY`, `WITH ORDER` and `UNBOUNDED`, which no Lance table has.
fn check_clauses(name: &str, cmd: &CreateExternalTable) -> Result<(), Error> {
    if !cmd.table_partition_cols.is_empty() {
        return Err(Error::not_supported(format!(
            "table '{name}': PARTITIONED BY is not supported for Lance tables"
        )));
    }
    if !cmd.order_exprs.is_empty() {
        return Err(Error::not_supported(format!(
            "table '{name}': WITH ORDER is not supported for Lance tables"
        )));
    }
    if cmd.unbounded {
        return Err(Error::not_supported(format!(
            "table '{name}': Lance tables are bounded; UNBOUNDED is not supported"
        )));
    }
    Ok(())
}

/// A LanceDB Cloud or Enterprise table (`db://`): it must exist; a declared
/// column list must match it.
async fn create_cloud(name: String, cmd: &CreateExternalTable) -> DFResult<Arc<dyn TableProvider>> {
    if cmd.constraints.iter().next().is_some() {
        return Err(Error::not_supported(format!(
            "table '{name}': constraints are not supported for LanceDB tables (db://)"
        ))
        .into());
    }
    let options = CloudOptions::parse(&cmd.location, &cmd.options)?;
    let provider = CloudTableProvider::open(name.clone(), options).await?;
    let declared = cmd.schema.as_arrow();
    if !declared.fields().is_empty() {
        check_declared_schema(&name, declared, provider.schema().as_ref())?;
    }
    Ok(Arc::new(provider))
}

/// The PRIMARY KEY column indices (in key order); other constraints are errors.
fn primary_key(table: &str, constraints: &Constraints) -> Result<Vec<usize>, Error> {
    let mut key = Vec::new();
    for c in constraints.iter() {
        match c {
            Constraint::PrimaryKey(k) => key = k.clone(),
            Constraint::Unique(_) => {
                return Err(Error::not_supported(format!(
                    "table '{table}': UNIQUE constraints are not supported for Lance tables \
                     (PRIMARY KEY is recorded as Lance's unenforced primary key)"
                )));
            }
        }
    }
    Ok(key)
}

fn describe_key(schema: &Schema, key: &[usize]) -> String {
    if key.is_empty() {
        return "none".to_string();
    }
    key.iter()
        .map(|&i| schema.field(i).name().clone())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Creation-only options given for an existing dataset must agree with it.
fn check_existing(
    table: &str,
    dataset: &lance::Dataset,
    options: &LanceTableOptions,
) -> Result<(), Error> {
    if let Some(wanted) = options.data_storage_version {
        let actual = dataset.manifest().data_storage_format.lance_file_format();
        if wanted.resolve() != actual {
            return Err(Error::invalid_option(
                "lance.data_storage_version",
                wanted.to_string(),
                format!(
                    "table '{table}' already exists with storage version {actual}; the option only applies when a table is created"
                ),
            ));
        }
    }
    if let Some(wanted) = options.enable_stable_row_ids
        && wanted != dataset.manifest().uses_stable_row_ids()
    {
        return Err(Error::invalid_option(
            "lance.enable_stable_row_ids",
            wanted.to_string(),
            format!(
                "table '{table}' already exists; the option only applies when a table is created"
            ),
        ));
    }
    Ok(())
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
        Err(Error::schema_mismatch(format!(
            "table '{table}': declared columns ({}) do not match the Lance dataset's columns ({})",
            describe(declared),
            describe(actual)
        )))
    }
}

/// Types a SQL column declaration can stand for: `VARCHAR` plans as
/// `Utf8View` but names any string type, `BYTEA` any binary type, also inside
/// lists and structs.
pub(crate) fn same_sql_type(declared: &DataType, actual: &DataType) -> bool {
    normalize(declared).equals_datatype(&normalize(actual))
}

fn normalize(t: &DataType) -> DataType {
    use DataType::*;
    let field =
        |f: &Arc<Field>| Arc::new(f.as_ref().clone().with_data_type(normalize(f.data_type())));
    match t {
        Utf8 | LargeUtf8 | Utf8View => Utf8,
        Binary | LargeBinary | BinaryView => Binary,
        List(f) | LargeList(f) => List(field(f)),
        FixedSizeList(f, n) => FixedSizeList(field(f), *n),
        Struct(fields) => Struct(fields.iter().map(field).collect()),
        other => other.clone(),
    }
}
