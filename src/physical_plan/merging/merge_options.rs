//! The actions of a merge — `lance_merge(...)`, `INSERT OR REPLACE` and
//! `MERGE INTO` all plan into them — with their parsing and validation.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::error::Result as DFResult;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::{Expr, ExprSchemable, Operator};

use crate::error::{Error, Result};

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
        Some(what) => Err(Error::not_supported(format!(
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
