//! `MERGE INTO` for Lance tables, planned from the parsed statement.
//!
//! DataFusion 54 parses `MERGE` but cannot plan it. [`plan_merge_into`] turns
//! the forms that map onto Lance's merge-insert into the same typed merge
//! plan as `lance_merge(...)`: the source query and every expression of the
//! statement are planned by DataFusion from the syntax tree — never rewritten
//! as text — against the target's and the source's columns under their
//! aliases. Every other form is a clear "not supported".
//!
//! ```sql
//! MERGE INTO t USING src AS s ON t.id = s.id
//!   WHEN MATCHED [AND <cond>] THEN UPDATE SET v = s.v, name = s.name | UPDATE SET * | DELETE
//!   WHEN NOT MATCHED THEN INSERT (id, v, name) VALUES (s.id, s.v, s.name) | INSERT * | INSERT ROW
//!   WHEN NOT MATCHED BY SOURCE [AND <cond>] THEN DELETE
//! ```
//!
//! * `ON` must equate target and source columns of the same name (the keys).
//! * `UPDATE SET` and `INSERT` may compute values from source columns.
//!   Columns not named keep their value on update and are NULL on insert.
//! * `UPDATE SET *` and `INSERT *` (also `INSERT ROW`) write every source
//!   column into the target column of the same name.
//! * Lance's merge-insert updates and inserts from one source row: when the
//!   two clauses write different columns, each source row is completed from
//!   the target row with its key, read at the statement's version (see
//!   `clauses::SourceShape::FullRows`).
//! * Conditions may read target columns, keys, and source columns the
//!   statement writes unchanged (Lance evaluates them on the rows it merges).
//! * The result is one row: `inserted, updated, deleted, version`.

mod clauses;
mod stars;

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DFSchema, Result as DFResult};
use datafusion::datasource::TableProvider;
use datafusion::datasource::provider_as_source;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{BinaryExpr, Expr, LogicalPlan, LogicalPlanBuilder, Operator};
use datafusion::prelude::col;
use datafusion::sql::TableReference;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::planner::{IdentNormalizer, object_name_to_table_reference};
use datafusion::sql::sqlparser::ast::{
    self, Ident, Merge, ObjectName, SetExpr, Statement, TableFactor,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

use self::clauses::{Clauses, ExprPlanner};
pub(crate) use self::stars::{mark_stars, names_merge};
use crate::error::fail;
use crate::table::cloud_merge::CloudMerge;
use crate::table::lookup::{Target, registered_target};
use crate::table::merge::{LanceMerge, MergeOutput};
use crate::table::statement::StatementTable;
use datafusion::common::internal_err;

/// The two sides of a merge, by the names the statement gives them.
struct Sides {
    target: String,
    source: String,
}

impl Sides {
    fn is_target(&self, column: &Column) -> bool {
        column
            .relation
            .as_ref()
            .is_some_and(|r| r.table() == self.target)
    }

    fn is_source(&self, column: &Column) -> bool {
        column
            .relation
            .as_ref()
            .is_some_and(|r| r.table() == self.source)
    }

    fn reads_target(&self, expr: &Expr) -> bool {
        expr.column_refs().iter().any(|c| self.is_target(c))
    }

    /// `expr` with the statement's aliases replaced by `target` / `source`,
    /// the qualifiers of merge conditions.
    fn canonical(&self, expr: Expr) -> DFResult<Expr> {
        expr.transform(|e| match e {
            Expr::Column(c) if self.is_target(&c) => Ok(Transformed::yes(Expr::Column(
                Column::new(Some("target"), c.name),
            ))),
            Expr::Column(c) if self.is_source(&c) => Ok(Transformed::yes(Expr::Column(
                Column::new(Some("source"), c.name),
            ))),
            other => Ok(Transformed::no(other)),
        })
        .map(|t| t.data)
    }

    /// The source column `expr` is, if it is exactly one.
    fn source_column<'a>(&self, expr: &'a Expr) -> Option<&'a str> {
        match expr {
            Expr::Column(c) if self.is_source(c) => Some(c.name.as_str()),
            _ => None,
        }
    }
}

/// Plans a `MERGE INTO` statement on a Lance table (see the module docs).
pub(crate) async fn plan_merge_into(state: &SessionState, merge: &Merge) -> DFResult<LogicalPlan> {
    let normalize = state.config_options().sql_parser.enable_ident_normalization;
    let idents = IdentNormalizer::new(normalize);
    let TableFactor::Table {
        name: target_name,
        alias,
        version,
        args,
        ..
    } = &merge.table
    else {
        return fail!(invalid_input, "MERGE INTO: the target must be a table");
    };
    if let Some(version) = version {
        return fail!(
            not_supported,
            "MERGE INTO: '{version}' on the target '{target_name}' is not supported: a merge \
             writes the latest version"
        );
    }
    if args.is_some() {
        return fail!(
            invalid_input,
            "MERGE INTO: the target must be a table, not a table function"
        );
    }
    let reference = object_name_to_table_reference(target_name.clone(), normalize)?;
    let found = registered_target(state, &reference).await?;
    let Some(found) = found else {
        return fail!(
            not_found,
            "MERGE INTO: '{reference}' is not a registered Lance table"
        );
    };
    let target: Arc<dyn TableProvider> = match &found {
        Target::Lance(table) => Arc::clone(table) as _,
        Target::Cloud(table) => Arc::clone(table) as _,
    };
    let target_alias = alias
        .as_ref()
        .map(|a| idents.normalize(a.name.clone()))
        .unwrap_or_else(|| reference.table().to_string());
    let (source, source_alias) = plan_source(state, &merge.source, &idents, normalize).await?;
    if source_alias == target_alias {
        return fail!(
            invalid_input,
            "MERGE INTO: the target and the source are both called '{target_alias}'; give one \
             of them another alias"
        );
    }
    let sides = Sides {
        target: target_alias,
        source: source_alias,
    };
    let source = LogicalPlanBuilder::from(source)
        .alias(TableReference::bare(sides.source.as_str()))?
        .build()?;
    let target_schema = DFSchema::try_from_qualified_schema(
        TableReference::bare(sides.target.as_str()),
        &target.schema(),
    )?;
    let planner = ExprPlanner {
        state,
        schema: target_schema.join(source.schema())?,
    };

    let keys = keys_of(&planner.plan(&merge.on)?, &sides)?;
    let clauses = Clauses::plan(merge, &planner, &sides, &keys, &idents)?;
    let target_scan = LogicalPlanBuilder::scan(
        reference.clone(),
        provider_as_source(Arc::clone(&target)),
        None,
    )?
    .build()?;
    let source = clauses.source_projection(source, target_scan, &target.schema(), &keys, &sides)?;
    let options = clauses.options(&sides, &planner.schema)?;
    let table = match found {
        Target::Lance(table) => StatementTable::provider(
            LanceMerge::new(reference.to_string(), source, keys, options).with_target(table),
        ),
        Target::Cloud(table) => StatementTable::provider(CloudMerge::new(
            table,
            source,
            keys,
            options,
            MergeOutput::Stats,
        )),
    };
    LogicalPlanBuilder::scan(
        format!("lance_merge({reference})"),
        provider_as_source(table),
        None,
    )?
    .project(["inserted", "updated", "deleted", "version"].map(col))?
    .build()
}

/// Plans the source as a query, returning it with its alias.
async fn plan_source(
    state: &SessionState,
    factor: &TableFactor,
    idents: &IdentNormalizer,
    normalize: bool,
) -> DFResult<(LogicalPlan, String)> {
    if let TableFactor::Table { alias: Some(a), .. } | TableFactor::Derived { alias: Some(a), .. } =
        factor
        && !a.columns.is_empty()
    {
        return fail!(
            not_supported,
            "MERGE INTO: column names in the source alias ({a}) are not supported; name the \
             columns in the source query instead"
        );
    }
    let (query, alias) = match factor {
        TableFactor::Table { name, alias, .. } => {
            let alias = match alias {
                Some(a) => idents.normalize(a.name.clone()),
                None => object_name_to_table_reference(name.clone(), normalize)?
                    .table()
                    .to_string(),
            };
            let mut table = factor.clone();
            if let TableFactor::Table { alias, .. } = &mut table {
                *alias = None;
            }
            (select_star_from(table)?, alias)
        }
        TableFactor::Derived {
            subquery, alias, ..
        } => {
            let Some(alias) = alias else {
                return fail!(invalid_input, "MERGE INTO: the source query needs an alias");
            };
            ((**subquery).clone(), idents.normalize(alias.name.clone()))
        }
        other => return fail!(not_supported, "MERGE INTO: unsupported source {other}"),
    };
    let statement = DFStatement::Statement(Box::new(Statement::Query(Box::new(query))));
    Ok((state.statement_to_plan(statement).await?, alias))
}

/// `SELECT * FROM <table>`, built on the syntax tree.
fn select_star_from(table: TableFactor) -> DFResult<ast::Query> {
    let parsed = Parser::parse_sql(&GenericDialect {}, "SELECT * FROM merge_source")
        .map_err(|e| datafusion::error::DataFusionError::Internal(e.to_string()))?;
    let Some(Statement::Query(mut query)) = parsed.into_iter().next() else {
        return internal_err!("MERGE INTO: internal error building the source query");
    };
    let SetExpr::Select(select) = query.body.as_mut() else {
        return internal_err!("MERGE INTO: internal error building the source query");
    };
    select.from[0].relation = table;
    Ok(*query)
}

/// The key columns of `t.k = s.k [AND ...]`.
fn keys_of(on: &Expr, sides: &Sides) -> DFResult<Vec<String>> {
    let mut keys = Vec::new();
    for conjunct in split_conjunction(on) {
        let Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Eq,
            right,
        }) = conjunct
        else {
            return not_supported_on(on);
        };
        let (Expr::Column(l), Expr::Column(r)) = (left.as_ref(), right.as_ref()) else {
            return not_supported_on(on);
        };
        let sides_ok = (sides.is_target(l) && sides.is_source(r))
            || (sides.is_source(l) && sides.is_target(r));
        if !sides_ok || l.name != r.name {
            return not_supported_on(on);
        }
        keys.push(l.name.clone());
    }
    Ok(keys)
}

fn not_supported_on<T>(on: &Expr) -> DFResult<T> {
    fail!(
        not_supported,
        "MERGE INTO: the ON condition must equate target and source columns of the same name \
         (t.k = s.k [AND ...]); got {on}"
    )
}

fn column_name(name: &ObjectName, idents: &IdentNormalizer) -> String {
    name.0
        .last()
        .and_then(|p| p.as_ident())
        .map(|i: &Ident| idents.normalize(i.clone()))
        .unwrap_or_default()
}
