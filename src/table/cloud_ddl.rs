//! [`CloudDdlStatement`]: `CREATE INDEX` / `DROP INDEX`, `ALTER TABLE` and
//! `lance_tag` (and `lance_create_index` / `lance_drop_index`) on a `db://`
//! table, planned into one [`CloudDdlExec`] (one request when run). The
//! table functions name their table by a string: [`cloud_work`] turns what
//! such a statement does into the request, or refuses it by name.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::error::Result as DFResult;
use datafusion::physical_plan::ExecutionPlan;

use super::cloud::CloudTableProvider;
use super::statement::Statement;
use crate::cloud::CloudDdl;
use crate::cloud::ddl::TagAction;
use crate::error::{Error, Result};
use crate::physical_plan::cloud_ddl::{CloudDdlExec, CloudDdlParts, ddl_schema};
use crate::physical_plan::{IndexChange, Maintenance, TagChange};

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
