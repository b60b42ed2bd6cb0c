//! Creating Lance datasets: `CREATE EXTERNAL TABLE` with a column list at a
//! location holding no dataset, and the primary-key metadata Lance records.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::{Constraint, Constraints};
use datafusion::error::Result as DFResult;
use lance::dataset::transaction::Operation;
use lance_core::datatypes::{LANCE_UNENFORCED_PRIMARY_KEY, LANCE_UNENFORCED_PRIMARY_KEY_POSITION};

use crate::error::{Error, Result};
use crate::physical_plan::target::OpenTarget;
use crate::physical_plan::transaction::Commit;

/// DataFusion constraints for the unenforced primary key Lance records.
pub(crate) fn primary_key_constraints(
    lance_schema: &lance::datatypes::Schema,
    arrow: &Schema,
) -> Option<Constraints> {
    let mut keyed: Vec<(u32, usize)> = lance_schema
        .fields
        .iter()
        .filter_map(|f| {
            let position = f.unenforced_primary_key_position?;
            arrow.index_of(&f.name).ok().map(|i| (position, i))
        })
        .collect();
    if keyed.is_empty() {
        return None;
    }
    keyed.sort();
    Some(Constraints::new_unverified(vec![Constraint::PrimaryKey(
        keyed.into_iter().map(|(_, i)| i).collect(),
    )]))
}

/// Normalises a declared schema for Lance: view types become their plain
/// counterparts, and the primary key columns (`key`, in key order) carry
/// Lance's unenforced-primary-key metadata.
pub(crate) fn table_schema(table: &str, declared: &Schema, key: &[usize]) -> Result<SchemaRef> {
    let mut fields: Vec<Field> = declared
        .fields()
        .iter()
        .map(|f| {
            f.as_ref()
                .clone()
                .with_data_type(storable_type(f.data_type()))
        })
        .collect();
    for (position, &i) in key.iter().enumerate() {
        let field = &fields[i];
        if field.is_nullable() {
            return Err(Error::invalid_input(format!(
                "table '{table}': primary key column '{}' must be NOT NULL",
                field.name()
            )));
        }
        if !field.data_type().is_primitive()
            && !matches!(
                field.data_type(),
                DataType::Utf8
                    | DataType::LargeUtf8
                    | DataType::Binary
                    | DataType::LargeBinary
                    | DataType::Boolean
            )
        {
            return Err(Error::not_supported(format!(
                "table '{table}': primary key column '{}' has type {}, which Lance cannot key on",
                field.name(),
                field.data_type()
            )));
        }
        let mut metadata: HashMap<String, String> = field.metadata().clone();
        metadata.insert(LANCE_UNENFORCED_PRIMARY_KEY.to_string(), "true".to_string());
        metadata.insert(
            LANCE_UNENFORCED_PRIMARY_KEY_POSITION.to_string(),
            (position + 1).to_string(),
        );
        fields[i] = field.clone().with_metadata(metadata);
    }
    Ok(Arc::new(Schema::new(fields)))
}

/// The type Lance stores for a declared type (view types are not stored).
pub(crate) fn storable_type(t: &DataType) -> DataType {
    match t {
        DataType::Utf8View => DataType::Utf8,
        DataType::BinaryView => DataType::Binary,
        DataType::List(f) => DataType::List(Arc::new(
            f.as_ref()
                .clone()
                .with_data_type(storable_type(f.data_type())),
        )),
        DataType::LargeList(f) => DataType::LargeList(Arc::new(
            f.as_ref()
                .clone()
                .with_data_type(storable_type(f.data_type())),
        )),
        DataType::FixedSizeList(f, n) => DataType::FixedSizeList(
            Arc::new(
                f.as_ref()
                    .clone()
                    .with_data_type(storable_type(f.data_type())),
            ),
            *n,
        ),
        DataType::Struct(fields) => DataType::Struct(
            fields
                .iter()
                .map(|f| {
                    f.as_ref()
                        .clone()
                        .with_data_type(storable_type(f.data_type()))
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Creates the empty table `target` describes (version 1, no fragments).
pub(crate) async fn create_empty(target: &OpenTarget) -> DFResult<()> {
    let schema = lance::datatypes::Schema::try_from(target.schema.as_ref())
        .map_err(|e| Error::lance("creating", &target.location.uri, e))?;
    let operation = Operation::Overwrite {
        fragments: vec![],
        schema,
        config_upsert_values: None,
        initial_bases: None,
    };
    target.commit(Commit::new(None, operation)).await?;
    Ok(())
}
