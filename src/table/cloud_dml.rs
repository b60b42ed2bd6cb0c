//! [`CloudDml`]: `DELETE` and `UPDATE` on a `db://` table, planned into one
//! request the service carries out (see
//! [`CloudChangeExec`](crate::physical_plan::CloudChangeExec)).
//!
//! The statement's own input plan, once optimized, says what to send: the
//! table's scan must hold the whole `WHERE` clause as pushed filters (the
//! same exact-only rule as for reads, so the service selects exactly the
//! rows DataFusion would), and an `UPDATE`'s projection must give each
//! assigned column a value Lance's SQL computes alike. Anything else — a
//! subquery, a function the service does not share — is refused with the
//! part that cannot be sent.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::datasource::source_as_provider;
use datafusion::datasource::{MemTable, TableProvider};
use datafusion::error::Result as DFResult;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::{Expr, LogicalPlan, TableScan};
use datafusion::physical_plan::ExecutionPlan;

use super::cloud::CloudTableProvider;
use super::dml::DmlOp;
use super::index_rules::ColumnIndexes;
use super::statement::{Pinner, Statement, StatementTable};
use crate::cloud::{assignment_to_lance_sql, to_lance_sql};
use crate::error::{Error, Result};
use crate::physical_plan::cloud_change::{CloudChange, CloudChangeExec, CloudChangeParts};
use crate::physical_plan::one_row::{count_batch, count_schema};

/// A `DELETE`/`UPDATE` on a `db://` table (a [`Statement`] returning one
/// `count` row).
pub(crate) struct CloudDml {
    op: DmlOp,
    target: Arc<CloudTableProvider>,
    input: LogicalPlan,
    /// Whether `input` is optimized already (by [`Statement::pin`]).
    optimized: bool,
}

impl fmt::Debug for CloudDml {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CloudDml")
            .field("op", &self.op)
            .field("table", &self.target.display_uri())
            .finish_non_exhaustive()
    }
}

impl CloudDml {
    pub(crate) fn new(op: DmlOp, target: Arc<CloudTableProvider>, input: LogicalPlan) -> Self {
        Self {
            op,
            target,
            input,
            optimized: false,
        }
    }

    /// The statement as plain parts (for codecs).
    pub(crate) fn from_parts(
        op: DmlOp,
        target: Arc<CloudTableProvider>,
        input: LogicalPlan,
        optimized: bool,
    ) -> Self {
        Self {
            op,
            target,
            input,
            optimized,
        }
    }

    pub(crate) fn op(&self) -> DmlOp {
        self.op
    }

    pub(crate) fn target(&self) -> &CloudTableProvider {
        &self.target
    }

    pub(crate) fn input(&self) -> &LogicalPlan {
        &self.input
    }

    /// Whether the input is optimized already (the statement was pinned).
    pub(crate) fn optimized(&self) -> bool {
        self.optimized
    }

    fn name(&self) -> &str {
        self.target.name()
    }

    fn refuse(&self, what: impl fmt::Display) -> Error {
        Error::not_supported(format!(
            "{} {} ({}): {what}; a statement on a LanceDB Cloud table is carried out by the \
             service, which evaluates only comparisons, AND/OR/NOT, IS [NOT] NULL, BETWEEN, IN \
             lists and LIKE over columns and literals (and + - * in SET values)",
            self.op,
            self.name(),
            self.target.display_uri()
        ))
    }

    /// The change to send, from the optimized input; `None` when the
    /// statement selects no row at all (`WHERE false`).
    fn change(&self, input: &LogicalPlan, indexes: &ColumnIndexes) -> Result<Option<CloudChange>> {
        let (assigned, below) = match (self.op, input) {
            (DmlOp::Update, LogicalPlan::Projection(p)) => (Some(&p.expr), p.input.as_ref()),
            (DmlOp::Update, _) => {
                return Err(self.refuse("the statement's plan has an unexpected shape"));
            }
            (DmlOp::Delete, plan) => (None, skip_projections(plan)),
        };
        let scan = match below {
            LogicalPlan::EmptyRelation(_) => return Ok(None),
            LogicalPlan::TableScan(scan) if self.is_target(scan) && scan.fetch.is_none() => scan,
            LogicalPlan::Filter(filter) => {
                return Err(self.refuse(format_args!(
                    "the condition `{}` cannot be sent to the service",
                    filter.predicate
                )));
            }
            _ => {
                return Err(self.refuse(
                    "its WHERE clause needs more than the table itself (a subquery or a join)",
                ));
            }
        };
        let predicate = self.predicate(&scan.filters, indexes)?;
        let Some(exprs) = assigned else {
            return Ok(Some(CloudChange::Delete { predicate }));
        };
        let schema = self.target.schema();
        let mut updates = Vec::new();
        for (expr, field) in exprs.iter().zip(schema.fields()) {
            let value = match expr {
                Expr::Alias(alias) => alias.expr.as_ref(),
                other => other,
            };
            if matches!(value, Expr::Column(c) if c.name == *field.name()) {
                continue;
            }
            let Some(sql) = assignment_to_lance_sql(value) else {
                return Err(self.refuse(format_args!(
                    "the value `{value}` for column '{}' cannot be sent to the service",
                    field.name()
                )));
            };
            updates.push((field.name().clone(), sql));
        }
        if updates.is_empty() {
            return Err(self.refuse("no column is assigned"));
        }
        Ok(Some(CloudChange::Update { predicate, updates }))
    }

    fn is_target(&self, scan: &TableScan) -> bool {
        source_as_provider(&scan.source).is_ok_and(|provider| {
            provider
                .downcast_ref::<CloudTableProvider>()
                .is_some_and(|p| p.display_uri() == self.target.display_uri())
        })
    }

    fn predicate(&self, filters: &[Expr], indexes: &ColumnIndexes) -> Result<Option<String>> {
        let schema = self.target.schema();
        let parts = filters
            .iter()
            .map(|f| {
                if indexes.unreadable() {
                    return Err(self.refuse(format_args!(
                        "the service gave no index list for the table, so it cannot be \
                         checked that it answers the condition `{f}` as DataFusion does"
                    )));
                }
                if !indexes.allows(f, &schema) {
                    let named: Vec<String> = f
                        .column_refs()
                        .iter()
                        .flat_map(|c| indexes.names_on(&c.name).to_vec())
                        .collect();
                    return Err(self.refuse(format_args!(
                        "the service would answer the condition `{f}` from the table's \
                         index{} [{}], whose semantics differ from DataFusion's for it",
                        if named.len() == 1 { "" } else { "es" },
                        named.join(", ")
                    )));
                }
                to_lance_sql(f).ok_or_else(|| {
                    self.refuse(format_args!(
                        "the condition `{f}` cannot be sent to the service"
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((!parts.is_empty()).then(|| parts.join(" AND ")))
    }
}

/// Whether some scan of `plan` holds pushed filters.
fn filtered(plan: &LogicalPlan) -> bool {
    let mut found = false;
    let _ = plan.apply(|node| {
        found |= matches!(node, LogicalPlan::TableScan(scan) if !scan.filters.is_empty());
        Ok(if found {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    });
    found
}

fn skip_projections(plan: &LogicalPlan) -> &LogicalPlan {
    match plan {
        LogicalPlan::Projection(p) => skip_projections(&p.input),
        other => other,
    }
}

#[async_trait]
impl Statement for CloudDml {
    fn schema(&self) -> SchemaRef {
        count_schema()
    }

    async fn plan(&self, state: &dyn Session) -> DFResult<Arc<dyn ExecutionPlan>> {
        self.target.check_writable()?;
        let input = if self.optimized {
            self.input.clone()
        } else {
            match state.as_any().downcast_ref::<SessionState>() {
                Some(session) => session.optimize(&self.input)?,
                None => self.input.clone(),
            }
        };
        // The service answers the condition with the indices of the
        // version it changes: the latest.
        let indexes = if filtered(&input) {
            self.target.latest_indexes().await?
        } else {
            ColumnIndexes::default()
        };
        let Some(change) = self.change(&input, &indexes)? else {
            let none = MemTable::try_new(count_schema(), vec![vec![count_batch(0)?]])?;
            return none.scan(state, None, &[], None).await;
        };
        Ok(Arc::new(CloudChangeExec::new(CloudChangeParts {
            name: self.name().to_string(),
            table: self.target.parts().table,
            change,
        })))
    }

    async fn pin(
        &self,
        pinner: &mut dyn Pinner,
        _state: &dyn Session,
    ) -> DFResult<Option<Arc<dyn TableProvider>>> {
        if self.optimized {
            return Ok(None);
        }
        let input = pinner.plan(&self.input).await?;
        Ok(Some(StatementTable::provider(Self {
            op: self.op,
            target: Arc::clone(&self.target),
            input,
            optimized: true,
        })))
    }

    fn changes_tables(&self) -> bool {
        true
    }
}
