//! [`LanceAlterExec`]: changes a table's schema when executed (`ALTER
//! TABLE`); planning, and so `EXPLAIN`, changes nothing. Each change commits
//! one version; readers of earlier versions keep their schema.
//!
//! New values are computed by DataFusion: a `DEFAULT` constant, or an
//! expression over the existing columns (`ADD COLUMN c <type> AS (<expr>)`),
//! evaluated batch by batch while Lance writes the new column.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray, UInt64Array, new_null_array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::util::display::array_value_to_string;
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::error::{DataFusionError, Result as DFResult};
use datafusion::execution::context::ExecutionProps;
use datafusion::execution::memory_pool::MemoryPool;
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::create_physical_expr;
use lance::Dataset;
use lance::dataset::{BatchUDF, ColumnAlteration, NewColumnTransform};
use lance::index::DatasetIndexExt;

use crate::error::Error;
use crate::error::plain;
use crate::location::TableLocation;
use crate::physical_plan::maintenance::{Maintenance, MaintenanceExec};

/// The field metadata key holding a column's `DEFAULT` (its value as text,
/// cast back to the column's type).
pub const DEFAULT_METADATA_KEY: &str = "datafusion-lance:default";

/// The values a new column gets in the existing rows.
#[derive(Debug, Clone, PartialEq)]
pub enum NewValues {
    /// NULL (no data written).
    Null,
    /// The column's `DEFAULT` constant, also stored as its default for
    /// later `INSERT`s that omit the column.
    Default(ScalarValue),
    /// An expression over the existing columns (`AS (<expr>)`), computed
    /// once for the existing rows.
    Computed(Expr),
}

/// One schema change.
#[derive(Debug, Clone, PartialEq)]
pub enum SchemaChange {
    /// `ADD COLUMN [IF NOT EXISTS] <column> <type> [NOT NULL] [DEFAULT <constant> | AS (<expr>)]`.
    AddColumn {
        /// The new column.
        column: String,
        /// Its type.
        data_type: DataType,
        /// Whether it may hold NULL.
        nullable: bool,
        /// Its values in the existing rows.
        values: NewValues,
        /// Do nothing when the column exists.
        if_not_exists: bool,
    },
    /// `DROP COLUMN [IF EXISTS] <column>`.
    DropColumn {
        /// The column.
        column: String,
        /// No error when there is no such column.
        if_exists: bool,
    },
    /// `RENAME COLUMN <from> TO <to>`.
    RenameColumn {
        /// The column.
        from: String,
        /// Its new name.
        to: String,
    },
    /// `ALTER COLUMN <column> [SET DATA] TYPE <type>` (Lance rewrites the
    /// column; it refuses a column with an index, which must be dropped
    /// first).
    SetType {
        /// The column.
        column: String,
        /// Its new type.
        data_type: DataType,
    },
    /// `ALTER COLUMN <column> DROP NOT NULL`.
    DropNotNull {
        /// The column.
        column: String,
    },
    /// `ALTER COLUMN <column> SET DEFAULT <constant>` / `DROP DEFAULT`
    /// (`None`).
    SetDefault {
        /// The column.
        column: String,
        /// The new default.
        default: Option<ScalarValue>,
    },
}

impl SchemaChange {
    /// The column the change is about.
    pub fn column(&self) -> &str {
        match self {
            Self::AddColumn { column, .. }
            | Self::DropColumn { column, .. }
            | Self::SetType { column, .. }
            | Self::DropNotNull { column }
            | Self::SetDefault { column, .. } => column,
            Self::RenameColumn { from, .. } => from,
        }
    }
}

/// `value` as the text stored in a column's metadata, or `None` when the
/// text would not cast back to the same value.
pub(crate) fn default_text(value: &ScalarValue) -> Option<String> {
    let text = array_value_to_string(&value.to_array().ok()?, 0).ok()?;
    (default_value(&text, &value.data_type()).as_ref() == Some(value)).then_some(text)
}

/// The default stored as `text`, as a value of `data_type`.
pub(crate) fn default_value(text: &str, data_type: &DataType) -> Option<ScalarValue> {
    ScalarValue::Utf8(Some(text.to_string()))
        .cast_to(data_type)
        .ok()
}

/// The schema of a schema change's one-row report: the column, what was
/// done and the version the table is at afterwards.
pub(crate) fn alter_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("column", DataType::Utf8, false),
        Field::new("action", DataType::Utf8, false),
        Field::new("version", DataType::UInt64, false),
    ]))
}

/// `ALTER TABLE`: when executed, changes the schema of the latest version
/// of the table at `location` (one version).
pub type LanceAlterExec = MaintenanceExec<SchemaChange>;

impl Maintenance for SchemaChange {
    const NODE: &'static str = "LanceAlterExec";

    fn schema() -> SchemaRef {
        alter_schema()
    }

    fn fmt_params(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::AddColumn {
                column,
                data_type,
                nullable,
                values,
                if_not_exists,
            } => {
                write!(f, ", add={column}, type={data_type}")?;
                if !nullable {
                    write!(f, ", not_null=true")?;
                }
                match values {
                    NewValues::Null => {}
                    NewValues::Default(v) => write!(f, ", default={v}")?,
                    NewValues::Computed(e) => write!(f, ", values={e}")?,
                }
                if *if_not_exists {
                    write!(f, ", if_not_exists=true")?;
                }
                Ok(())
            }
            Self::DropColumn { column, if_exists } => {
                write!(f, ", drop={column}")?;
                if *if_exists {
                    write!(f, ", if_exists=true")?;
                }
                Ok(())
            }
            Self::RenameColumn { from, to } => write!(f, ", rename={from}, to={to}"),
            Self::SetType { column, data_type } => {
                write!(f, ", alter={column}, type={data_type}")
            }
            Self::DropNotNull { column } => write!(f, ", alter={column}, nullable=true"),
            Self::SetDefault { column, default } => match default {
                Some(v) => write!(f, ", alter={column}, default={v}"),
                None => write!(f, ", alter={column}, default=NULL"),
            },
        }
    }

    async fn run(
        self,
        dataset: Arc<Dataset>,
        location: TableLocation,
        _memory: Arc<dyn MemoryPool>,
    ) -> DFResult<RecordBatch> {
        let column = self.column().to_string();
        let err = |e: lance::Error| {
            DataFusionError::Execution(format!(
                "ALTER TABLE '{}' column '{column}': {}",
                location.display_uri,
                plain(&e)
            ))
        };
        let fail = |kind: fn(String) -> Error, why: String| {
            Err(kind(format!(
                "ALTER TABLE '{}' column '{column}': {why}",
                location.display_uri
            ))
            .into())
        };
        let exists = |name: &str| dataset.schema().field(name).is_some();
        let mut ds = dataset.as_ref().clone();
        let action = match self {
            Self::AddColumn { if_not_exists, .. } if exists(&column) => {
                if if_not_exists {
                    "unchanged"
                } else {
                    return fail(
                        Error::already_exists,
                        "the table has a column of that name".into(),
                    );
                }
            }
            Self::AddColumn {
                data_type,
                nullable,
                values,
                ..
            } => {
                if let Err(why) = add_column(&mut ds, &column, data_type, nullable, values).await {
                    return fail(Error::invalid_input, why);
                }
                "added"
            }
            Self::DropColumn { if_exists, .. } if !exists(&column) => {
                if if_exists {
                    "unchanged"
                } else {
                    return fail(Error::not_found, "the table has no such column".into());
                }
            }
            Self::DropColumn { .. } => {
                ds.drop_columns(&[column.as_str()]).await.map_err(err)?;
                "dropped"
            }
            _ if !exists(&column) => {
                return fail(Error::not_found, "the table has no such column".into());
            }
            Self::RenameColumn { to, .. } => {
                if exists(&to) {
                    return fail(
                        Error::already_exists,
                        format!("the table has a column named '{to}'"),
                    );
                }
                ds.alter_columns(&[ColumnAlteration::new(column.clone()).rename(to)])
                    .await
                    .map_err(err)?;
                "renamed"
            }
            Self::SetType { data_type, .. } => {
                // Lance rebuilds a retyped field without its metadata.
                if let Some(field) = dataset.schema().field(&column)
                    && !field.metadata.is_empty()
                {
                    let mut keys: Vec<&String> = field.metadata.keys().collect();
                    keys.sort();
                    return fail(
                        Error::not_supported,
                        format!(
                            "Lance drops a column's metadata ({}) when it changes its type; remove \
                         it first (ALTER COLUMN {column} DROP DEFAULT for a default)",
                            keys.iter()
                                .map(|k| k.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    );
                }
                // Lance refuses to retype an indexed column (pointing at its
                // own API): name the indices and the SQL that drops them.
                let field_id = dataset.schema().field(&column).map(|f| f.id);
                let indexed: Vec<String> = ds
                    .load_indices()
                    .await
                    .map_err(err)?
                    .iter()
                    .filter(|index| field_id.is_some_and(|id| index.fields.contains(&id)))
                    .map(|index| index.name.clone())
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect();
                if !indexed.is_empty() {
                    let drops = indexed
                        .iter()
                        .map(|name| format!("DROP INDEX {name} ON <table>"))
                        .collect::<Vec<_>>()
                        .join("; ");
                    return fail(
                        Error::not_supported,
                        format!(
                            "the column has {} ({}), and Lance cannot change the type of an indexed \
                         column; drop {} first ({drops}), change the type, then create {} again",
                            if indexed.len() == 1 {
                                "an index"
                            } else {
                                "indexes"
                            },
                            indexed.join(", "),
                            if indexed.len() == 1 { "it" } else { "them" },
                            if indexed.len() == 1 { "it" } else { "them" },
                        ),
                    );
                }
                ds.alter_columns(&[ColumnAlteration::new(column.clone()).cast_to(data_type)])
                    .await
                    .map_err(err)?;
                "retyped"
            }
            Self::DropNotNull { .. } => {
                ds.alter_columns(&[ColumnAlteration::new(column.clone()).set_nullable(true)])
                    .await
                    .map_err(err)?;
                "altered"
            }
            Self::SetDefault { default, .. } => {
                let Some(field) = dataset.schema().field(&column) else {
                    return fail(Error::not_found, "the table has no such column".into());
                };
                let mut metadata: HashMap<String, String> = field.metadata.clone();
                match &default {
                    Some(value) => {
                        let value = value.cast_to(&field.data_type()).map_err(|e| {
                            DataFusionError::Execution(format!(
                                "ALTER TABLE '{}' column '{column}': DEFAULT {value}: {e}",
                                location.display_uri
                            ))
                        })?;
                        let Some(text) = default_text(&value) else {
                            return fail(
                                Error::schema_mismatch,
                                format!("a DEFAULT of type {} cannot be stored", value.data_type()),
                            );
                        };
                        metadata.insert(DEFAULT_METADATA_KEY.to_string(), text);
                    }
                    None => {
                        metadata.remove(DEFAULT_METADATA_KEY);
                    }
                }
                ds.replace_field_metadata([(field.id as u32, metadata)])
                    .await
                    .map_err(err)?;
                "altered"
            }
        };
        Ok(RecordBatch::try_new(
            alter_schema(),
            vec![
                Arc::new(StringArray::from(vec![column])),
                Arc::new(StringArray::from(vec![action])),
                Arc::new(UInt64Array::from(vec![ds.version().version])),
            ],
        )?)
    }
}

/// Adds `column` to `ds` (one version): all NULL without writing data, or
/// the values DataFusion computes for each batch of the existing rows.
async fn add_column(
    ds: &mut Dataset,
    column: &str,
    data_type: DataType,
    nullable: bool,
    values: NewValues,
) -> Result<(), String> {
    let lance_err = |e: lance::Error| plain(&e);
    let mut field = Field::new(column, data_type.clone(), nullable);
    let expr = match values {
        NewValues::Null if !nullable => {
            return Err("a NOT NULL column needs a DEFAULT or AS (<expression>)".into());
        }
        NewValues::Null => {
            let schema = Arc::new(Schema::new(vec![field]));
            return ds
                .add_columns(NewColumnTransform::AllNulls(schema), None, None)
                .await
                .map_err(lance_err);
        }
        NewValues::Default(value) => {
            let value = value
                .cast_to(&data_type)
                .map_err(|e| format!("DEFAULT {value}: {e}"))?;
            let Some(text) = default_text(&value) else {
                return Err(format!("a DEFAULT of type {data_type} cannot be stored"));
            };
            field = field.with_metadata(HashMap::from([(DEFAULT_METADATA_KEY.to_string(), text)]));
            Expr::Literal(value, None)
        }
        NewValues::Computed(expr) => expr,
    };
    // Lance hands the UDF these columns of each batch (none for a constant:
    // Lance then reads row addresses only, for the row count).
    let mut read: Vec<String> = expr.column_refs().iter().map(|c| c.name.clone()).collect();
    read.sort();
    read.dedup();
    let output = Arc::new(Schema::new(vec![field]));
    let schema = Arc::clone(&output);
    let name = column.to_string();
    let mapper = move |batch: &RecordBatch| -> lance::Result<RecordBatch> {
        let fail = |e: DataFusionError| lance::Error::invalid_input(e.to_string());
        let values = evaluate(&expr, batch, &data_type).map_err(fail)?;
        if !nullable && values.null_count() > 0 {
            return Err(lance::Error::invalid_input(format!(
                "column '{name}' is NOT NULL and the expression gives {} NULLs",
                values.null_count()
            )));
        }
        RecordBatch::try_new(Arc::clone(&schema), vec![values])
            .map_err(|e| lance::Error::invalid_input(e.to_string()))
    };
    ds.add_columns(
        NewColumnTransform::BatchUDF(BatchUDF {
            mapper: Box::new(mapper),
            output_schema: output,
            result_checkpoint: None,
        }),
        Some(read),
        None,
    )
    .await
    .map_err(lance_err)
}

/// `expr` over the rows of `batch`, as `data_type`.
fn evaluate(expr: &Expr, batch: &RecordBatch, data_type: &DataType) -> DFResult<ArrayRef> {
    if batch.num_rows() == 0 {
        return Ok(new_null_array(data_type, 0));
    }
    let schema = DFSchema::try_from(batch.schema().as_ref().clone())?;
    let physical = create_physical_expr(expr, &schema, &ExecutionProps::new())?;
    let values = physical.evaluate(batch)?.into_array(batch.num_rows())?;
    Ok(cast(&values, data_type)?)
}
