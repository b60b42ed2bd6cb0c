//! [`PermutationBuildExec`]: the top of a `lance_build_permutation`
//! statement. Its input writes and commits the plan (a
//! [`crate::physical_plan::LanceCommitExec`] creating it: one version);
//! when the plan is a new table of a Lance catalog, it makes the table's
//! namespace entry (found through the task's session); then it opens the
//! plan it created, validates it as every reader does, and reports one row
//! per split: number, name, rows, the plan's version and identity.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, StringArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::internal_err;
use datafusion::error::Result as DFResult;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use futures::TryStreamExt;

use super::validate::PlanSummary;
use crate::location::TableLocation;
use crate::physical_plan::inputs::execute_all;
use crate::physical_plan::one_row::one_row_properties;
use crate::session::LanceSessionCache;
use crate::session::catalog_tables::{CatalogTable, catalog_tables};

/// Reports the plan its input created (see the module docs).
#[derive(Debug)]
pub struct PermutationBuildExec {
    input: Arc<dyn ExecutionPlan>,
    plan: TableLocation,
    base: TableLocation,
    catalog_table: Option<CatalogTable>,
    properties: Arc<PlanProperties>,
}

/// The rows a build reports.
pub(crate) fn build_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("split_id", DataType::UInt64, false),
        Field::new("split_name", DataType::Utf8, true),
        Field::new("rows", DataType::UInt64, false),
        Field::new("plan_version", DataType::UInt64, false),
        Field::new("identity", DataType::Utf8, false),
    ]))
}

impl PermutationBuildExec {
    /// Reports the plan at `plan` over `base` once `input` created it.
    pub(crate) fn new(
        input: Arc<dyn ExecutionPlan>,
        plan: TableLocation,
        base: TableLocation,
    ) -> Self {
        Self {
            input,
            plan,
            base,
            catalog_table: None,
            properties: one_row_properties(build_schema()),
        }
    }

    /// This build, its plan being `table` of a Lance catalog (when given).
    pub(crate) fn in_catalog(self, table: Option<CatalogTable>) -> Self {
        Self {
            catalog_table: table,
            ..self
        }
    }

    /// The catalog table the plan becomes, if it is built into one.
    pub fn catalog_table(&self) -> Option<&CatalogTable> {
        self.catalog_table.as_ref()
    }

    /// The plan built.
    pub fn plan(&self) -> &TableLocation {
        &self.plan
    }

    /// Its base.
    pub fn base(&self) -> &TableLocation {
        &self.base
    }
}

impl DisplayAs for PermutationBuildExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "PermutationBuildExec: plan={}, base={}",
            self.plan.display_uri, self.base.display_uri
        )?;
        if let Some(table) = &self.catalog_table {
            write!(f, ", table={table}")?;
        }
        Ok(())
    }
}

impl ExecutionPlan for PermutationBuildExec {
    fn name(&self) -> &str {
        "PermutationBuildExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        if children.len() != 1 {
            return internal_err!("PermutationBuildExec takes exactly one input");
        }
        Ok(Arc::new(
            Self::new(children.remove(0), self.plan.clone(), self.base.clone())
                .in_catalog(self.catalog_table.clone()),
        ))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        // A catalog this process lacks fails the build before it writes.
        let entry = match &self.catalog_table {
            Some(table) => {
                let tables = catalog_tables(context.session_config(), &table.to_string())?;
                tables.can_enter(table, &self.plan.uri)?;
                Some((tables, table.clone()))
            }
            None => None,
        };
        let inputs = execute_all("PermutationBuildExec", &self.input, partition, &context)?;
        let cache = LanceSessionCache::for_task(&context);
        let plan = self.plan.clone();
        let base = self.base.clone();
        let fut = async move {
            for input in inputs {
                input.try_collect::<Vec<_>>().await?;
            }
            if let Some((tables, table)) = entry {
                tables.created(&table, &plan.uri).await?;
            }
            // The commit created the plan: its first version.
            let summary = PlanSummary::load(&cache, &plan, Some(1), Some(&base)).await?;
            report(&summary)
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            build_schema(),
            futures::stream::once(fut),
        )))
    }
}

/// One row per split of `summary`.
fn report(summary: &PlanSummary) -> DFResult<RecordBatch> {
    let n = summary.split_count();
    let identity = summary.identity();
    Ok(RecordBatch::try_new(
        build_schema(),
        vec![
            Arc::new(UInt64Array::from_iter_values(0..n as u64)),
            Arc::new(StringArray::from_iter(
                (0..n).map(|i| summary.split_names.get(i).cloned()),
            )),
            Arc::new(UInt64Array::from(summary.split_rows.clone())),
            Arc::new(UInt64Array::from(vec![summary.plan_snapshot.version; n])),
            Arc::new(StringArray::from(vec![identity; n])),
        ],
    )?)
}
