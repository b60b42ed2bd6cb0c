//! [`CloudDdlExec`]: `CREATE INDEX` / `DROP INDEX`, `ALTER TABLE` and
//! `lance_tag` on a LanceDB Cloud or Enterprise table (`db://`), each one
//! request the service carries out when executed; planning, and so
//! `EXPLAIN`, sends nothing.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, StringArray, UInt64Array};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::internal_err;
use datafusion::error::Result as DFResult;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};

use super::alter::alter_schema;
use super::index::index_schema;
use crate::cloud::ddl::{Subject, TagAction};
use crate::cloud::{CloudClient, CloudDdl, CloudTable};
use crate::error::Result;
use crate::physical_plan::one_row::one_row_properties;
use crate::physical_plan::tag::tag_schema;

/// Everything a [`CloudDdlExec`] does, as plain data.
#[derive(Debug, Clone)]
pub(crate) struct CloudDdlParts {
    /// The table as the statement names it.
    pub name: String,
    pub table: CloudTable,
    pub ddl: CloudDdl,
}

/// Sends one index or column change; the service applies it to the latest
/// version (one new version). Returns one row as the local nodes do: the
/// index or column, what was done, and the latest version afterwards.
#[derive(Debug)]
pub struct CloudDdlExec {
    parts: CloudDdlParts,
    properties: Arc<PlanProperties>,
}

impl CloudDdlExec {
    pub(crate) fn new(parts: CloudDdlParts) -> Self {
        let schema = ddl_schema(&parts.ddl);
        Self {
            parts,
            properties: one_row_properties(schema),
        }
    }

    /// Everything the node does.
    pub(crate) fn parts(&self) -> &CloudDdlParts {
        &self.parts
    }
}

/// The one-row report of `ddl`: as `CREATE INDEX`, `ALTER TABLE` or
/// `lance_tag` on a local table reports.
pub(crate) fn ddl_schema(ddl: &CloudDdl) -> SchemaRef {
    match ddl.subject_kind() {
        Subject::Index => index_schema(),
        Subject::Column => alter_schema(),
        Subject::Tag => tag_schema(),
    }
}

impl DisplayAs for CloudDdlExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.parts;
        let sep = if matches!(t, DisplayFormatType::TreeRender) {
            "\n"
        } else {
            ", "
        };
        if !matches!(t, DisplayFormatType::TreeRender) {
            write!(f, "CloudDdlExec: ")?;
        }
        write!(f, "table={}{sep}", p.table.location.display_uri)?;
        match &p.ddl {
            CloudDdl::CreateIndex {
                name,
                column,
                index_type,
                params,
                if_not_exists,
            } => {
                write!(
                    f,
                    "create_index={name}{sep}column={column}{sep}type={index_type}"
                )?;
                for (key, value) in params {
                    write!(f, "{sep}{key}={value}")?;
                }
                if *if_not_exists {
                    write!(f, "{sep}if_not_exists=true")?;
                }
            }
            CloudDdl::DropIndex { name, if_exists } => {
                write!(f, "drop_index={name}")?;
                if *if_exists {
                    write!(f, "{sep}if_exists=true")?;
                }
            }
            CloudDdl::AddColumn {
                name,
                expression,
                if_not_exists,
            } => {
                write!(f, "add_column={name}{sep}expression={expression}")?;
                if *if_not_exists {
                    write!(f, "{sep}if_not_exists=true")?;
                }
            }
            CloudDdl::DropColumn { name, if_exists } => {
                write!(f, "drop_column={name}")?;
                if *if_exists {
                    write!(f, "{sep}if_exists=true")?;
                }
            }
            CloudDdl::AlterColumn {
                column,
                rename,
                data_type,
                nullable,
            } => {
                write!(f, "alter_column={column}")?;
                if let Some(to) = rename {
                    write!(f, "{sep}rename={to}")?;
                }
                if let Some(t) = data_type {
                    write!(f, "{sep}type={t}")?;
                }
                if let Some(n) = nullable {
                    write!(f, "{sep}nullable={n}")?;
                }
            }
            CloudDdl::Tag {
                action,
                tag,
                version,
            } => {
                let action = match action {
                    TagAction::Create => "create",
                    TagAction::Update => "update",
                    TagAction::Delete => "delete",
                };
                write!(f, "tag={tag}{sep}action={action}")?;
                if let Some(v) = version {
                    write!(f, "{sep}version={v}")?;
                }
            }
        }
        Ok(())
    }
}

impl ExecutionPlan for CloudDdlExec {
    fn name(&self) -> &str {
        "CloudDdlExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        if !children.is_empty() {
            return internal_err!("CloudDdlExec has no children");
        }
        Ok(self)
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        if partition != 0 {
            return internal_err!("CloudDdlExec has one partition, {partition} requested");
        }
        let parts = self.parts.clone();
        let schema = ddl_schema(&parts.ddl);
        let stream = futures::stream::once(async move { Ok(apply(&parts).await?) });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

async fn apply(parts: &CloudDdlParts) -> Result<RecordBatch> {
    let client = CloudClient::connect(&parts.table)?;
    let subject = parts.ddl.subject();
    let statement = match parts.ddl.subject_kind() {
        Subject::Index => format!("{} '{subject}' on {}", parts.ddl.request(), parts.name),
        Subject::Column => format!("ALTER TABLE {} (column '{subject}')", parts.name),
        Subject::Tag => format!("lance_tag '{subject}' on {}", parts.name),
    };
    let applied = client
        .apply(&parts.ddl)
        .await
        .map_err(|e| e.prefixed(&statement))?;
    let schema = ddl_schema(&parts.ddl);
    let subject = Arc::new(StringArray::from(vec![subject.to_string()]));
    if parts.ddl.subject_kind() == Subject::Tag {
        let version = Arc::new(UInt64Array::from(vec![applied.version]));
        return Ok(RecordBatch::try_new(schema, vec![subject, version])?);
    }
    let version = match applied.version {
        Some(version) => version,
        None => {
            let described = client.describe(None).await.map_err(|e| {
                e.prefixed(&format!(
                    "{statement}: {} (done), but reading the table's version after it failed",
                    applied.action
                ))
            })?;
            described.0
        }
    };
    Ok(RecordBatch::try_new(
        schema,
        vec![
            subject,
            Arc::new(StringArray::from(vec![applied.action])),
            Arc::new(UInt64Array::from(vec![version])),
        ],
    )?)
}
