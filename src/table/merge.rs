//! Upserts: `lance_merge(...)`, `INSERT OR REPLACE` and `MERGE INTO` all plan
//! into a [`LanceMergeExec`](crate::physical_plan::LanceMergeExec) over a
//! source hash-partitioned on the merge key.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::Session;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, ScalarValue, TableReference};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::Result as DFResult;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan, Operator};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::expressions::{CastExpr, Column};
use datafusion::physical_plan::projection::ProjectionExec;

use super::LanceTableProvider;
use crate::error::{Error, Result};
use crate::physical_plan::LanceMergeExec;
use crate::physical_plan::target::project;
use crate::table::create::storable_type;

/// SQL name of the upsert table function.
pub const MERGE_FUNCTION_NAME: &str = "lance_merge";

/// A condition of a merge, over `target.<column>` and (for `WHEN MATCHED`)
/// `source.<column>`. Planned by DataFusion, with DataFusion's semantics,
/// before Lance evaluates it on the rows it merges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeCondition {
    /// SQL text (as given to `lance_merge`), planned when the merge is.
    Sql(String),
    /// A planned expression.
    Expr(Expr),
}

impl fmt::Display for MergeCondition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MergeCondition::Sql(sql) => f.write_str(sql),
            MergeCondition::Expr(expr) => write!(f, "{expr}"),
        }
    }
}

/// What happens to a target row whose key appears in the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WhenMatched {
    /// Replace it with the source row (columns the source lacks are kept).
    UpdateAll,
    /// Replace it only where the condition (over `source.` / `target.`
    /// columns) holds.
    UpdateIf(MergeCondition),
    /// Keep it.
    DoNothing,
    /// Delete it.
    Delete,
    /// Fail the statement.
    Fail,
}

impl fmt::Display for WhenMatched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WhenMatched::UpdateAll => f.write_str("UpdateAll"),
            WhenMatched::UpdateIf(c) => write!(f, "UpdateIf({c})"),
            WhenMatched::DoNothing => f.write_str("DoNothing"),
            WhenMatched::Delete => f.write_str("Delete"),
            WhenMatched::Fail => f.write_str("Fail"),
        }
    }
}

/// What happens to a source row whose key is not in the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WhenNotMatched {
    /// Insert it (columns the source lacks become NULL).
    InsertAll,
    /// Skip it.
    DoNothing,
}

/// What happens to a target row whose key is not in the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WhenNotMatchedBySource {
    /// Keep it.
    Keep,
    /// Delete it.
    Delete,
    /// Delete it where the condition (over `target.` columns) holds.
    DeleteIf(MergeCondition),
}

impl fmt::Display for WhenNotMatchedBySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WhenNotMatchedBySource::Keep => f.write_str("Keep"),
            WhenNotMatchedBySource::Delete => f.write_str("Delete"),
            WhenNotMatchedBySource::DeleteIf(c) => write!(f, "DeleteIf({c})"),
        }
    }
}

/// The actions of a merge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeOptions {
    /// Matched target rows.
    pub when_matched: WhenMatched,
    /// Unmatched source rows.
    pub when_not_matched: WhenNotMatched,
    /// Unmatched target rows.
    pub when_not_matched_by_source: WhenNotMatchedBySource,
}

impl Default for MergeOptions {
    /// An upsert: update matched rows, insert new ones, keep the rest.
    fn default() -> Self {
        Self {
            when_matched: WhenMatched::UpdateAll,
            when_not_matched: WhenNotMatched::InsertAll,
            when_not_matched_by_source: WhenNotMatchedBySource::Keep,
        }
    }
}

const OPTION_HELP: &str = "options are 'when_matched=update_all|do_nothing|delete|fail', \
    'when_matched_if=<condition>', 'when_not_matched=insert|do_nothing', \
    'when_not_matched_by_source=keep|delete', 'when_not_matched_by_source_if=<condition>'";

impl MergeOptions {
    /// Parses `key=value` option strings.
    pub fn parse(options: &[String]) -> Result<Self> {
        let mut parsed = Self::default();
        for option in options {
            let Some((key, value)) = option.split_once('=') else {
                return Err(Error::invalid_option(
                    MERGE_FUNCTION_NAME,
                    option.as_str(),
                    format!("expected key=value; {OPTION_HELP}"),
                ));
            };
            let (key, raw) = (key.trim().to_ascii_lowercase(), value.trim());
            let value = raw.to_ascii_lowercase();
            let bad = || Error::invalid_option(key.as_str(), raw, OPTION_HELP);
            match key.as_str() {
                "when_matched" => {
                    parsed.when_matched = match value.as_str() {
                        "update_all" | "update" => WhenMatched::UpdateAll,
                        "do_nothing" | "nothing" => WhenMatched::DoNothing,
                        "delete" => WhenMatched::Delete,
                        "fail" => WhenMatched::Fail,
                        _ => return Err(bad()),
                    }
                }
                "when_matched_if" => {
                    parsed.when_matched =
                        WhenMatched::UpdateIf(MergeCondition::Sql(raw.to_string()))
                }
                "when_not_matched" => {
                    parsed.when_not_matched = match value.as_str() {
                        "insert" | "insert_all" => WhenNotMatched::InsertAll,
                        "do_nothing" | "nothing" => WhenNotMatched::DoNothing,
                        _ => return Err(bad()),
                    }
                }
                "when_not_matched_by_source" => {
                    parsed.when_not_matched_by_source = match value.as_str() {
                        "keep" => WhenNotMatchedBySource::Keep,
                        "delete" => WhenNotMatchedBySource::Delete,
                        _ => return Err(bad()),
                    }
                }
                "when_not_matched_by_source_if" => {
                    parsed.when_not_matched_by_source =
                        WhenNotMatchedBySource::DeleteIf(MergeCondition::Sql(raw.to_string()))
                }
                _ => {
                    return Err(Error::UnknownOption {
                        key,
                        hint: format!(" for {MERGE_FUNCTION_NAME}; {OPTION_HELP}"),
                    });
                }
            }
        }
        Ok(parsed)
    }

    /// True when unmatched source rows are inserted.
    pub(crate) fn inserts(&self) -> bool {
        self.when_not_matched == WhenNotMatched::InsertAll
    }

    /// The options with every condition planned by DataFusion against the
    /// target's columns (`target.c`) and the source's (`source.c`).
    pub(crate) fn planned(
        &self,
        state: &SessionState,
        target: &Schema,
        source: &Schema,
    ) -> DFResult<Self> {
        let targets = DFSchema::try_from_qualified_schema("target", target)?;
        let both = targets.join(&DFSchema::try_from_qualified_schema("source", source)?)?;
        let plan = |condition: &MergeCondition, schema: &DFSchema| -> DFResult<MergeCondition> {
            let expr = match condition {
                MergeCondition::Sql(sql) => state.create_logical_expr(sql, schema)?,
                MergeCondition::Expr(expr) => expr.clone(),
            };
            check_condition(&expr, schema)?;
            Ok(MergeCondition::Expr(expr))
        };
        let mut planned = self.clone();
        if let WhenMatched::UpdateIf(c) = &self.when_matched {
            planned.when_matched = WhenMatched::UpdateIf(plan(c, &both)?);
        }
        if let WhenNotMatchedBySource::DeleteIf(c) = &self.when_not_matched_by_source {
            planned.when_not_matched_by_source =
                WhenNotMatchedBySource::DeleteIf(plan(c, &targets)?);
        }
        Ok(planned)
    }
}

/// Checks that Lance evaluates a merge condition exactly like DataFusion:
/// no subqueries, aggregates or window functions, and no floating-point
/// comparison with zero (Lance compares ±0.0 the IEEE way, DataFusion by
/// total order).
pub(crate) fn check_condition(expr: &Expr, schema: &DFSchema) -> DFResult<()> {
    let mut problem: Option<String> = None;
    expr.apply(|e| {
        problem = match e {
            Expr::ScalarSubquery(_)
            | Expr::Exists(_)
            | Expr::InSubquery(_)
            | Expr::SetComparison(_) => Some("a subquery".to_string()),
            Expr::AggregateFunction(_) => Some("an aggregate".to_string()),
            Expr::WindowFunction(_) => Some("a window function".to_string()),
            Expr::BinaryExpr(b) if is_comparison(b.op) => float_zero(&[&b.left, &b.right], schema),
            Expr::Between(b) => float_zero(&[&b.expr, &b.low, &b.high], schema),
            Expr::InList(l) => {
                let operands: Vec<&Expr> =
                    std::iter::once(l.expr.as_ref()).chain(&l.list).collect();
                float_zero(&operands, schema)
            }
            _ => None,
        };
        Ok(if problem.is_some() {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    })?;
    match problem {
        Some(what) => Err(Error::unsupported(format!(
            "merge condition {expr}: {what} cannot be evaluated by Lance's merge-insert"
        ))
        .into()),
        None => Ok(()),
    }
}

fn is_comparison(op: Operator) -> bool {
    matches!(
        op,
        Operator::Eq
            | Operator::NotEq
            | Operator::Lt
            | Operator::LtEq
            | Operator::Gt
            | Operator::GtEq
            | Operator::IsDistinctFrom
            | Operator::IsNotDistinctFrom
    )
}

/// A comparison of a floating-point value with a zero literal.
fn float_zero(operands: &[&Expr], schema: &DFSchema) -> Option<String> {
    let float = operands
        .iter()
        .any(|e| e.get_type(schema).is_ok_and(|t| t.is_floating()));
    let zero = operands.iter().any(|e| match e {
        Expr::Literal(v, _) => matches!(
            v.cast_to(&DataType::Float64),
            Ok(ScalarValue::Float64(Some(x))) if x == 0.0
        ),
        _ => false,
    });
    (float && zero).then(|| {
        "a floating-point comparison with zero (Lance treats -0.0 and 0.0 as equal, \
         DataFusion orders -0.0 first)"
            .to_string()
    })
}

/// What a merge node reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeOutput {
    /// `inserted, updated, deleted, version` (for `lance_merge`).
    Stats,
    /// `count` = inserted + updated (for `INSERT OR REPLACE`).
    Count,
}

/// Schema of `lance_merge(...)`'s one-row result.
pub(crate) fn stats_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("inserted", DataType::UInt64, false),
        Field::new("updated", DataType::UInt64, false),
        Field::new("deleted", DataType::UInt64, false),
        Field::new("version", DataType::UInt64, false),
    ]))
}

/// `lance_merge('<table>', (<query>), '<keys>', '<option>', ...)` as a
/// one-row table: scanning it plans the source and returns the merge node.
pub(crate) struct LanceMergeTable {
    target: String,
    /// The target table once resolved (by the query planner or `MERGE INTO`).
    target_table: Option<Arc<LanceTableProvider>>,
    source: LogicalPlan,
    keys: Vec<String>,
    options: MergeOptions,
}

impl fmt::Debug for LanceMergeTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LanceMergeTable")
            .field("target", &self.target)
            .field("keys", &self.keys)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl LanceMergeTable {
    pub(crate) fn new(
        target: String,
        source: LogicalPlan,
        keys: Vec<String>,
        options: MergeOptions,
    ) -> Self {
        Self {
            target,
            target_table: None,
            source,
            keys,
            options,
        }
    }

    /// The same merge into an already resolved target table.
    pub(crate) fn with_target(mut self, target: Arc<LanceTableProvider>) -> Self {
        self.target_table = Some(target);
        self
    }

    /// The source plan.
    pub(crate) fn source(&self) -> &LogicalPlan {
        &self.source
    }

    /// The target table: the one resolved already, or the Lance table
    /// registered under the target name.
    pub(crate) async fn resolve_target(
        &self,
        state: &dyn Session,
    ) -> Result<Arc<LanceTableProvider>> {
        match &self.target_table {
            Some(table) => Ok(Arc::clone(table)),
            None => resolve_lance_table(state, &self.target).await,
        }
    }

    /// The same merge into `target` (resolved) from `source`.
    pub(crate) fn with_parts(&self, target: Arc<LanceTableProvider>, source: LogicalPlan) -> Self {
        Self {
            target: self.target.clone(),
            target_table: Some(target),
            source,
            keys: self.keys.clone(),
            options: self.options.clone(),
        }
    }
}

#[async_trait]
impl TableProvider for LanceMergeTable {
    fn schema(&self) -> SchemaRef {
        stats_schema()
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let target = self.resolve_target(state).await?;
        let Some(session) = state.as_any().downcast_ref::<SessionState>() else {
            return Err(Error::unsupported(format!(
                "{MERGE_FUNCTION_NAME}: needs a DataFusion SessionState"
            ))
            .into());
        };
        let options =
            self.options
                .planned(session, &target.schema(), self.source.schema().as_arrow())?;
        let source = state.create_physical_plan(&self.source).await?;
        let merge = target
            .plan_merge(state, source, &self.keys, options, MergeOutput::Stats)
            .await?;
        project(merge, projection)
    }
}

/// The Lance table registered as `name`.
pub(crate) async fn resolve_lance_table(
    state: &dyn Session,
    name: &str,
) -> Result<Arc<LanceTableProvider>> {
    lance_table(state, TableReference::from(name))
        .await
        .map_err(|_| {
            Error::unsupported(format!(
                "{MERGE_FUNCTION_NAME}: '{name}' is not a registered Lance table"
            ))
        })
}

/// The Lance table `reference` names (already normalised), or `None`.
pub(crate) async fn lance_table(
    state: &dyn Session,
    reference: TableReference,
) -> Result<Arc<LanceTableProvider>> {
    let not_found = || Error::unsupported(format!("'{reference}' is not a registered Lance table"));
    let state = state
        .as_any()
        .downcast_ref::<SessionState>()
        .ok_or_else(not_found)?;
    let schema = state
        .schema_for_ref(reference.clone())
        .map_err(|_| not_found())?;
    let table = schema
        .table(reference.table())
        .await?
        .ok_or_else(not_found)?;
    let any: Arc<dyn std::any::Any + Send + Sync> = table;
    any.downcast::<LanceTableProvider>()
        .map_err(|_| not_found())
}

impl LanceTableProvider {
    /// Plans a merge of `source` into this table on `keys`.
    pub(crate) async fn plan_merge(
        &self,
        state: &dyn Session,
        source: Arc<dyn ExecutionPlan>,
        keys: &[String],
        options: MergeOptions,
        output: MergeOutput,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let target = self.write_target(state).await?;
        let source = conform_source(&self.name, &self.schema, source, keys, &options)?;
        Ok(Arc::new(LanceMergeExec::new(
            source,
            target,
            keys.to_vec(),
            options,
            output,
        )))
    }
}

/// Checks the source against the table and casts its columns to the table's
/// types: every source column must be a table column, keys must have the
/// table's type, and when rows can be inserted every NOT NULL column must be
/// present.
fn conform_source(
    table: &str,
    schema: &Schema,
    source: Arc<dyn ExecutionPlan>,
    keys: &[String],
    options: &MergeOptions,
) -> Result<Arc<dyn ExecutionPlan>> {
    if keys.is_empty() {
        return Err(Error::unsupported(format!(
            "merge into '{table}': at least one key column is required"
        )));
    }
    let source_schema = source.schema();
    for key in keys {
        let Ok(column) = schema.field_with_name(key) else {
            return Err(Error::unsupported(format!(
                "merge into '{table}': key column '{key}' is not a column of the table"
            )));
        };
        let Ok(given) = source_schema.field_with_name(key) else {
            return Err(Error::unsupported(format!(
                "merge into '{table}': the source has no key column '{key}'"
            )));
        };
        if storable_type(given.data_type()) != *column.data_type() {
            return Err(Error::unsupported(format!(
                "merge into '{table}': key column '{key}' is {} in the source but {} in the table",
                given.data_type(),
                column.data_type()
            )));
        }
    }
    let mut exprs: Vec<(Arc<dyn PhysicalExpr>, String)> = Vec::new();
    for (i, field) in source_schema.fields().iter().enumerate() {
        let Ok(column) = schema.field_with_name(field.name()) else {
            return Err(Error::unsupported(format!(
                "merge into '{table}': the source column '{}' is not a column of the table",
                field.name()
            )));
        };
        let expr: Arc<dyn PhysicalExpr> = Arc::new(Column::new(field.name(), i));
        let expr = if field.data_type() == column.data_type() {
            expr
        } else {
            Arc::new(CastExpr::new(expr, column.data_type().clone(), None))
        };
        exprs.push((expr, field.name().clone()));
    }
    if options.inserts() {
        let missing: Vec<&str> = schema
            .fields()
            .iter()
            .filter(|f| !f.is_nullable() && source_schema.field_with_name(f.name()).is_err())
            .map(|f| f.name().as_str())
            .collect();
        if !missing.is_empty() {
            return Err(Error::unsupported(format!(
                "merge into '{table}': the source lacks NOT NULL column(s) {} which inserted \
                 rows need (or use 'when_not_matched=do_nothing')",
                missing.join(", ")
            )));
        }
    }
    Ok(Arc::new(ProjectionExec::try_new(exprs, source)?))
}
