//! [`CloudDdlStatement`]: `CREATE INDEX` / `DROP INDEX`, `ALTER TABLE` and
//! `lance_tag` (and `lance_create_index` / `lance_drop_index`) on a `db://`
//! table, planned into one [`CloudDdlExec`] (one request when run). The
//! table functions name their table by a string: [`cloud_work`] turns what
//! such a statement does into the request, or refuses it by name;
//! [`index_ddl`] and [`alter_ddl`] do so for planned index and schema
//! changes, refusing what the service cannot express before any request.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::catalog::Session;
use datafusion::error::Result as DFResult;
use datafusion::physical_plan::ExecutionPlan;

use super::cloud::CloudTableProvider;
use super::statement::Statement;
use crate::cloud::CloudDdl;
use crate::cloud::ddl::{TagAction, json_type};
use crate::error::{Error, Result};
use crate::physical_plan::cloud_ddl::{CloudDdlExec, CloudDdlParts, ddl_schema};
use crate::physical_plan::{IndexChange, Maintenance, NewValues, SchemaChange, TagChange};

/// An index or column change of a `db://` table (a [`Statement`] returning
/// one row: the index or column, what was done, the version after).
#[derive(Debug)]
pub(crate) struct CloudDdlStatement {
    /// The table as the statement names it, quoted (an `ALTER TABLE`
    /// registers the table again by it).
    reference: String,
    target: Arc<CloudTableProvider>,
    ddl: CloudDdl,
}

impl CloudDdlStatement {
    pub(crate) fn new(reference: String, target: Arc<CloudTableProvider>, ddl: CloudDdl) -> Self {
        Self {
            reference,
            target,
            ddl,
        }
    }

    pub(crate) fn reference(&self) -> &str {
        &self.reference
    }

    pub(crate) fn target(&self) -> &CloudTableProvider {
        &self.target
    }

    pub(crate) fn ddl(&self) -> &CloudDdl {
        &self.ddl
    }
}

#[async_trait]
impl Statement for CloudDdlStatement {
    fn schema(&self) -> SchemaRef {
        ddl_schema(&self.ddl)
    }

    async fn plan(&self, _state: &dyn Session) -> DFResult<Arc<dyn ExecutionPlan>> {
        self.target.check_writable()?;
        Ok(Arc::new(CloudDdlExec::new(CloudDdlParts {
            name: self.target.name().to_string(),
            table: self.target.cloud_table().clone(),
            ddl: self.ddl.clone(),
        })))
    }

    fn changes_tables(&self) -> bool {
        true
    }
}

/// The request an index change of the `db://` table `reference` sends;
/// options the service's request has no field for are refused here, before
/// anything is sent.
pub(crate) fn index_ddl(change: IndexChange, reference: &str) -> Result<CloudDdl> {
    Ok(match change {
        IndexChange::Create(d) => {
            if d.replace {
                return Err(Error::not_supported(format!(
                    "CREATE INDEX on '{reference}': a LanceDB table's index is not rebuilt in \
                     place (WITH (replace = true)); DROP INDEX {} ON {reference} first",
                    d.name
                )));
            }
            let index_type = d.method.name().to_string();
            CloudDdl::index_request(&d.column, &index_type, &d.name, &d.options)
                .map_err(|e| e.prefixed(&format!("CREATE INDEX on '{reference}'")))?;
            CloudDdl::CreateIndex {
                name: d.name,
                column: d.column,
                index_type,
                params: d.options,
                if_not_exists: d.if_not_exists,
            }
        }
        IndexChange::Drop { name, if_exists } => CloudDdl::DropIndex { name, if_exists },
    })
}

/// The request the table function doing `work` on the `db://` table
/// `reference` sends: tag and index changes; the other maintenance
/// (compaction, cleanup) is the service's own, refused by name.
pub(crate) fn cloud_work<M: Maintenance>(work: &M, reference: &str) -> Result<CloudDdl> {
    let any: &dyn std::any::Any = work;
    if let Some(change) = any.downcast_ref::<TagChange>() {
        return Ok(CloudDdl::Tag {
            action: match change.action {
                crate::physical_plan::TagAction::Create => TagAction::Create,
                crate::physical_plan::TagAction::Update => TagAction::Update,
                crate::physical_plan::TagAction::Delete => TagAction::Delete,
            },
            tag: change.tag.clone(),
            version: change.version,
        });
    }
    if let Some(change) = any.downcast_ref::<IndexChange>() {
        return index_ddl(change.clone(), reference);
    }
    let function = match M::NODE {
        "LanceVacuumExec" => "lance_vacuum",
        "LanceOptimizeExec" => "lance_optimize",
        node => node,
    };
    Err(Error::not_supported(format!(
        "'{reference}' is a LanceDB table (db://): {function} is not supported for it (the \
         service compacts and cleans up its tables itself)"
    )))
}

/// The request a schema change of a `db://` table sends: the service adds
/// a column from a Lance SQL expression and alters a column's name, type or
/// nullability; what it cannot express (a stored `DEFAULT`, a value without
/// an exact Lance SQL form, a new `NOT NULL` column) is refused here, before
/// anything is sent.
pub(crate) fn alter_ddl(change: SchemaChange, t: &str) -> Result<CloudDdl> {
    let refuse = |what: String| -> Result<CloudDdl> {
        Err(Error::not_supported(format!(
            "ALTER TABLE '{t}': {what} on a LanceDB table (db://), whose service stores no \
             column defaults and computes new columns from Lance SQL"
        )))
    };
    Ok(match change {
        SchemaChange::AddColumn {
            column,
            data_type,
            nullable,
            values,
            if_not_exists,
        } => {
            if !nullable {
                return refuse(format!("column '{column}' cannot be added NOT NULL"));
            }
            let Some(sql_type) = lance_sql_type(&data_type) else {
                return refuse(format!(
                    "column '{column}' of type {data_type} cannot be added (Lance SQL casts to \
                     integers, floats, strings, booleans and dates)"
                ));
            };
            let value = match values {
                NewValues::Null => "NULL".to_string(),
                NewValues::Default(_) => {
                    return refuse(format!(
                        "column '{column}': DEFAULT is not supported (AS (<constant>) fills \
                         the existing rows)"
                    ));
                }
                NewValues::Computed(expr) => match crate::cloud::assignment_to_lance_sql(&expr) {
                    Some(sql) => sql,
                    None => {
                        return refuse(format!(
                            "column '{column}': AS ({expr}) has no exact Lance SQL form"
                        ));
                    }
                },
            };
            CloudDdl::AddColumn {
                name: column,
                expression: format!("CAST({value} AS {sql_type})"),
                if_not_exists,
            }
        }
        SchemaChange::DropColumn { column, if_exists } => CloudDdl::DropColumn {
            name: column,
            if_exists,
        },
        SchemaChange::RenameColumn { from, to } => CloudDdl::AlterColumn {
            column: from,
            rename: Some(to),
            data_type: None,
            nullable: None,
        },
        SchemaChange::SetType { column, data_type } => match json_type(&data_type) {
            Some(json) => CloudDdl::AlterColumn {
                column,
                rename: None,
                data_type: Some(json),
                nullable: None,
            },
            None => return refuse(format!("column '{column}' cannot become {data_type}")),
        },
        SchemaChange::DropNotNull { column } => CloudDdl::AlterColumn {
            column,
            rename: None,
            data_type: None,
            nullable: Some(true),
        },
        SchemaChange::SetDefault { column, .. } => {
            return refuse(format!(
                "column '{column}': SET / DROP DEFAULT is not supported"
            ));
        }
    })
}

/// The Lance SQL name of `data_type` in a `CAST`, for the types whose
/// spelling reads back as the same Arrow type.
fn lance_sql_type(data_type: &DataType) -> Option<&'static str> {
    Some(match data_type {
        DataType::Boolean => "BOOLEAN",
        DataType::Int8 => "TINYINT",
        DataType::Int16 => "SMALLINT",
        DataType::Int32 => "INT",
        DataType::Int64 => "BIGINT",
        DataType::Float32 => "FLOAT",
        DataType::Float64 => "DOUBLE",
        DataType::Utf8 => "STRING",
        DataType::Date32 => "DATE",
        _ => return None,
    })
}
