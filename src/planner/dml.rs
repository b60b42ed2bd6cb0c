//! [`LanceDmlRewrite`]: plans `DELETE` and `UPDATE` on Lance tables so that
//! the rows they touch are exactly the rows DataFusion's `WHERE` selects.
//!
//! DataFusion 54 hands a table provider's `delete_from`/`update` hooks only
//! the conjuncts it could extract from a plain `Filter`: a `WHERE` holding an
//! `IN (SELECT ...)`/`EXISTS` subquery, or one folded to `false`/`NULL`,
//! arrives as *no filter*, i.e. "every row". This rule never uses those hooks.
//! It rewrites the statement, before optimization, into a scan of a
//! [`LanceDml`](crate::table::dml::LanceDml) whose input is the
//! statement's own input plan with Lance's row address added to the target
//! scan. That plan — subqueries, joins, constant folding and all — selects the
//! rows; the statement then deletes (or rewrites) exactly those addresses.
//! On a `db://` table the statement becomes a [`CloudDml`], one request
//! whose condition is the `WHERE` clause as the service evaluates it.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, TableReference, internal_err};
use datafusion::config::ConfigOptions;
use datafusion::datasource::{DefaultTableSource, TableProvider, provider_as_source};
use datafusion::error::Result as DFResult;
use datafusion::logical_expr::{
    DmlStatement, Expr, LogicalPlan, LogicalPlanBuilder, Projection, TableScan, TableSource,
    WriteOp,
};
use datafusion::optimizer::AnalyzerRule;

use crate::table::cloud::CloudTableProvider;
use crate::table::cloud_dml::CloudDml;
use crate::table::dml::{DmlOp, LanceDml};
use crate::table::statement::StatementTable;
use crate::table::{LanceTableProvider, ROW_ADDR};

/// Rewrites `DELETE`/`UPDATE` on Lance tables (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct LanceDmlRewrite {}

impl AnalyzerRule for LanceDmlRewrite {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DFResult<LogicalPlan> {
        Ok(plan.transform_up(rewrite)?.data)
    }

    fn name(&self) -> &str {
        "lance_dml_rewrite"
    }
}

/// The Lance table behind a DML target, if it is one.
pub(crate) fn lance_target(target: &Arc<dyn TableSource>) -> Option<Arc<LanceTableProvider>> {
    let source = target.downcast_ref::<DefaultTableSource>()?;
    lance_provider(&source.table_provider)
}

fn lance_provider(provider: &Arc<dyn TableProvider>) -> Option<Arc<LanceTableProvider>> {
    let any: Arc<dyn std::any::Any + Send + Sync> = Arc::clone(provider) as _;
    any.downcast::<LanceTableProvider>().ok()
}

fn rewrite(node: LogicalPlan) -> DFResult<Transformed<LogicalPlan>> {
    let LogicalPlan::Dml(DmlStatement {
        table_name,
        target,
        op,
        input,
        ..
    }) = &node
    else {
        return Ok(Transformed::no(node));
    };
    let op = match op {
        WriteOp::Delete => DmlOp::Delete,
        WriteOp::Update => DmlOp::Update,
        _ => return Ok(Transformed::no(node)),
    };
    let Some(provider) = lance_target(target) else {
        let Some(cloud) = cloud_target(target) else {
            return Ok(Transformed::no(node));
        };
        let table = CloudDml::new(op, cloud, input.as_ref().clone());
        return statement_scan(op, table_name, StatementTable::provider(table));
    };
    let with_addresses = Arc::new(provider.with_row_addresses());
    let (input, found) = add_row_addresses(
        input.as_ref().clone(),
        table_name,
        &provider,
        &with_addresses,
    )?;
    if !found {
        return internal_err!("{op} on '{table_name}': the target table's scan was not found");
    }
    let address = Expr::Column(Column::new(Some(table_name.clone()), ROW_ADDR));
    let input = match op {
        DmlOp::Delete => LogicalPlanBuilder::from(input)
            .project(vec![address])?
            .build()?,
        DmlOp::Update => input,
    };
    let table = LanceDml::new(op, provider, input);
    statement_scan(op, table_name, StatementTable::provider(table))
}

/// The scan of a statement table standing for the DML statement.
fn statement_scan(
    op: DmlOp,
    table_name: &TableReference,
    statement: Arc<dyn TableProvider>,
) -> DFResult<Transformed<LogicalPlan>> {
    let name = TableReference::bare(format!("{op} {table_name}"));
    let scan = LogicalPlanBuilder::scan(name, provider_as_source(statement), None)?.build()?;
    Ok(Transformed::yes(scan))
}

/// The `db://` table behind a DML target, if it is one.
fn cloud_target(target: &Arc<dyn TableSource>) -> Option<Arc<CloudTableProvider>> {
    let source = target.downcast_ref::<DefaultTableSource>()?;
    let any: Arc<dyn std::any::Any + Send + Sync> = Arc::clone(&source.table_provider) as _;
    any.downcast::<CloudTableProvider>().ok()
}

/// Replaces the target's scan with one that also returns `_rowaddr`, and keeps
/// the column through every projection above it.
fn add_row_addresses(
    input: LogicalPlan,
    table_name: &TableReference,
    provider: &Arc<LanceTableProvider>,
    with_addresses: &Arc<LanceTableProvider>,
) -> DFResult<(LogicalPlan, bool)> {
    let mut found = false;
    let address = Column::new(Some(table_name.clone()), ROW_ADDR);
    let rewritten = input.transform_up(|node| match node {
        LogicalPlan::TableScan(scan)
            if scan.table_name == *table_name && is_provider(&scan.source, provider) =>
        {
            found = true;
            let index = with_addresses.schema().fields().len() - 1;
            let projection = scan.projection.map(|mut p| {
                p.push(index);
                p
            });
            let scan = TableScan::try_new(
                scan.table_name,
                provider_as_source(Arc::clone(with_addresses) as Arc<dyn TableProvider>),
                projection,
                scan.filters,
                scan.fetch,
            )?;
            Ok(Transformed::yes(LogicalPlan::TableScan(scan)))
        }
        LogicalPlan::Projection(p)
            if p.input.schema().has_column(&address) && !p.schema.has_column(&address) =>
        {
            let mut exprs = p.expr;
            exprs.push(Expr::Column(address.clone()));
            Ok(Transformed::yes(LogicalPlan::Projection(
                Projection::try_new(exprs, p.input)?,
            )))
        }
        other => Ok(Transformed::yes(other.recompute_schema()?)),
    })?;
    Ok((rewritten.data, found))
}

fn is_provider(source: &Arc<dyn TableSource>, provider: &Arc<LanceTableProvider>) -> bool {
    lance_target(source).is_some_and(|p| Arc::ptr_eq(&p, provider))
}
