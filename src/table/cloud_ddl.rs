//! [`CloudDdlStatement`]: `CREATE INDEX` / `DROP INDEX` and `ALTER TABLE` on
//! a `db://` table, planned into one [`CloudDdlExec`] (one request when
//! run).

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::error::Result as DFResult;
use datafusion::physical_plan::ExecutionPlan;

use super::cloud::CloudTableProvider;
use super::statement::Statement;
use crate::cloud::CloudDdl;
use crate::physical_plan::cloud_ddl::{CloudDdlExec, CloudDdlParts, ddl_schema};

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
