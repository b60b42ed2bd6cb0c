//! Time travel in queries.
//!
//! ```sql
//! SELECT * FROM t VERSION AS OF 3;                      -- a version number
//! SELECT * FROM t VERSION AS OF 'nightly';              -- a tag
//! SELECT * FROM t TIMESTAMP AS OF '2026-12-01 10:00:00'; -- the session time zone
//! SELECT * FROM t EXCEPT SELECT * FROM t VERSION AS OF 3;
//! SELECT * FROM lance_as_of('t', 3);                    -- also 'tag' or a TIMESTAMP
//! ```
//!
//! `TIMESTAMP AS OF` reads the latest version committed at or before that
//! time (compared at microseconds, the precision `lance_versions` shows); a
//! time without a zone is in the session time zone
//! (`datafusion.execution.time_zone`, UTC when unset). The clause's value may
//! be any constant expression, a scalar subquery included: it is evaluated
//! once, when the statement is planned.
//!
//! DataFusion's default dialect rejects these clauses and the dialects that
//! parse them would plan the table ignoring them, so the statement is
//! intercepted ([`crate::plan_lance_sql`]): each reference is resolved to a
//! provider pinned to its version — with the schema it had then — before
//! DataFusion plans the statement, through a relation planner that exists for
//! that one statement. A `db://` table is pinned through its service
//! (`describe`, `list_versions`, the tag's version). A clause on a table that
//! is not a Lance table is an error naming it.

mod clauses;
mod function;
mod pin;

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::common::{DataFusionError, ScalarValue, TableReference, plan_datafusion_err};
use datafusion::dataframe::DataFrame;
use datafusion::datasource::provider_as_source;
use datafusion::error::Result as DFResult;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::LogicalPlanBuilder;
use datafusion::logical_expr::planner::{
    PlannedRelation, RelationPlanner, RelationPlannerContext, RelationPlanning,
};
use datafusion::sql::parser::{CopyToSource, Statement as DFStatement};
use datafusion::sql::sqlparser::ast::{
    self, FunctionArg, FunctionArgExpr, SetExpr, Statement, TableFactor, TableFunctionArgs,
    TableVersion, Visit, Visitor,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

pub(crate) use self::clauses::{attach, cut, may_hold_clause};
pub(crate) use self::function::AsOfOutsideLanceSql;
use self::pin::{Pinned, pin};

/// SQL name of the table-function form.
pub const AS_OF_FUNCTION_NAME: &str = "lance_as_of";

/// What a time-travel reference's value means.
#[derive(Clone, Copy)]
enum Kind {
    /// `VERSION AS OF`: a version number or a tag name.
    Version,
    /// `TIMESTAMP AS OF` / `FOR SYSTEM_TIME AS OF`: a time.
    Timestamp,
    /// `lance_as_of`: decided by the value's type.
    Either,
}

/// One time-travel reference of a statement, as written.
struct Reference {
    /// The reference without its alias, as the relation planner sees it.
    key: String,
    /// The clause or call, for messages.
    clause: String,
    target: Target,
    kind: Kind,
    value: ast::Expr,
}

enum Target {
    /// `<name> VERSION AS OF ...`.
    Table(ast::ObjectName),
    /// `lance_as_of('<table or location>', ...)`.
    Named(Box<ast::Expr>),
}

/// The time-travel references of `statement` (nested statements, subqueries
/// and `EXPLAIN` included). A clause on the table a statement writes is an
/// error (see [`write_target`]).
fn references(statement: &DFStatement) -> DFResult<Vec<Reference>> {
    let mut collect = Collect::default();
    let flow = match statement {
        DFStatement::Statement(s) => {
            if let Some((kind, target)) = write_target(s)
                && let Some(clause) = clause_of(target)
            {
                let name = name_of(target);
                return Err(plan_datafusion_err!(
                    "{kind}: '{clause}' on the target '{name}' is not supported: a statement \
                     that writes changes the latest version of its table (read an older \
                     version with SELECT ... FROM {name} VERSION AS OF <n> instead)"
                ));
            }
            s.visit(&mut collect)
        }
        DFStatement::Explain(explain) => return references(&explain.statement),
        DFStatement::CopyTo(copy) => match &copy.source {
            CopyToSource::Query(query) => query.visit(&mut collect),
            CopyToSource::Relation(_) => ControlFlow::Continue(()),
        },
        DFStatement::CreateExternalTable(_) | DFStatement::Reset(_) => ControlFlow::Continue(()),
    };
    match flow {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(collect.found),
    }
}

/// The statement kind and the table it writes, for the statements whose
/// target the parser reads as a table reference (which may then carry a
/// time-travel clause or be a `lance_as_of(...)` call).
fn write_target(statement: &Statement) -> Option<(&'static str, &TableFactor)> {
    match statement {
        Statement::Delete(delete) => {
            let (ast::FromTable::WithFromKeyword(from) | ast::FromTable::WithoutKeyword(from)) =
                &delete.from;
            from.first().map(|t| ("DELETE", &t.relation))
        }
        Statement::Update(update) => Some(("UPDATE", &update.table.relation)),
        Statement::Merge(merge) => Some(("MERGE INTO", &merge.table)),
        _ => None,
    }
}

/// The time-travel clause `factor` carries (or the `lance_as_of` call it
/// is), as written.
fn clause_of(factor: &TableFactor) -> Option<String> {
    match factor {
        TableFactor::Table {
            version: Some(version),
            ..
        } => Some(version.to_string()),
        TableFactor::Table {
            name,
            args: Some(_),
            ..
        } if name.to_string().eq_ignore_ascii_case(AS_OF_FUNCTION_NAME) => Some(key(factor)),
        _ => None,
    }
}

/// The table `factor` names (the first argument of `lance_as_of`).
fn name_of(factor: &TableFactor) -> String {
    match factor {
        TableFactor::Table {
            args: Some(args), ..
        } => match args.args.first() {
            Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(ast::Expr::Value(value)))) => {
                match &value.value {
                    ast::Value::SingleQuotedString(s) => s.clone(),
                    other => other.to_string(),
                }
            }
            _ => "<table>".to_string(),
        },
        TableFactor::Table { name, .. } => name.to_string(),
        other => other.to_string(),
    }
}

#[derive(Default)]
struct Collect {
    found: Vec<Reference>,
}

impl Visitor for Collect {
    type Break = DataFusionError;

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<DataFusionError> {
        let TableFactor::Table {
            name,
            version,
            args,
            ..
        } = factor
        else {
            return ControlFlow::Continue(());
        };
        let reference = match (version, args) {
            (Some(TableVersion::VersionAsOf(value)), None) => {
                (Target::Table(name.clone()), Kind::Version, value.clone())
            }
            (
                Some(TableVersion::TimestampAsOf(value) | TableVersion::ForSystemTimeAsOf(value)),
                None,
            ) => (Target::Table(name.clone()), Kind::Timestamp, value.clone()),
            (None, Some(TableFunctionArgs { args, .. }))
                if name.to_string().eq_ignore_ascii_case(AS_OF_FUNCTION_NAME) =>
            {
                match function_args(args) {
                    Ok((table, value)) => (Target::Named(Box::new(table)), Kind::Either, value),
                    Err(e) => return ControlFlow::Break(e),
                }
            }
            // Other clauses are left to `VersionClauseGuard`'s error.
            _ => return ControlFlow::Continue(()),
        };
        let (target, kind, value) = reference;
        let clause = match (&target, version) {
            (Target::Table(_), Some(version)) => version.to_string(),
            _ => key(factor),
        };
        self.found.push(Reference {
            key: key(factor),
            clause,
            target,
            kind,
            value,
        });
        ControlFlow::Continue(())
    }
}

fn function_args(args: &[FunctionArg]) -> DFResult<(ast::Expr, ast::Expr)> {
    match args {
        [
            FunctionArg::Unnamed(FunctionArgExpr::Expr(table)),
            FunctionArg::Unnamed(FunctionArgExpr::Expr(value)),
        ] => Ok((table.clone(), value.clone())),
        _ => Err(plan_datafusion_err!(
            "{AS_OF_FUNCTION_NAME} takes two arguments: a table name or dataset location, and a \
             version number, a tag name or a TIMESTAMP; usage: {AS_OF_FUNCTION_NAME}('<table>', 3)"
        )),
    }
}

/// A table reference without its alias, written out: what identifies it
/// between collection and planning (both see the same syntax tree).
fn key(factor: &TableFactor) -> String {
    let mut factor = factor.clone();
    if let TableFactor::Table { alias, .. } = &mut factor {
        *alias = None;
    }
    factor.to_string()
}

/// Plans the time-travel references of one statement: each one resolved to a
/// provider pinned to its version (see the module docs).
#[derive(Debug)]
pub(crate) struct PinnedRelations {
    tables: Vec<(String, TableReference, Pinned)>,
}

impl PinnedRelations {
    /// Resolves every time-travel reference of `statement`; `None` when it
    /// has none.
    pub(crate) async fn resolve(
        state: &SessionState,
        statement: &DFStatement,
    ) -> DFResult<Option<Self>> {
        let mut tables: Vec<(String, TableReference, Pinned)> = Vec::new();
        for reference in references(statement)? {
            if tables.iter().any(|(key, ..)| *key == reference.key) {
                continue;
            }
            let (name, table) = pin(state, &reference).await?;
            tables.push((reference.key, name, table));
        }
        Ok((!tables.is_empty()).then_some(Self { tables }))
    }
}

impl RelationPlanner for PinnedRelations {
    fn plan_relation(
        &self,
        relation: TableFactor,
        _context: &mut dyn RelationPlannerContext,
    ) -> DFResult<RelationPlanning> {
        let TableFactor::Table { alias, .. } = &relation else {
            return Ok(RelationPlanning::Original(Box::new(relation)));
        };
        let key = key(&relation);
        let Some((_, name, table)) = self.tables.iter().find(|(k, ..)| *k == key) else {
            return Ok(RelationPlanning::Original(Box::new(relation)));
        };
        // DataFusion tells scans apart by their names alone (not by what
        // they read): two versions of one table must not share a name, or
        // its rewrites take one for the other (scalar subqueries, CSE). The
        // scan is named by the version it reads; the columns keep the
        // table's name (or the alias).
        let scan_name = TableReference::bare(format!("{name}@v{}", table.version));
        let plan = LogicalPlanBuilder::scan(
            scan_name,
            provider_as_source(Arc::clone(&table.table)),
            None,
        )?
        .alias(name.clone())?
        .build()?;
        Ok(RelationPlanning::Planned(Box::new(PlannedRelation::new(
            plan,
            alias.clone(),
        ))))
    }
}

/// The value of a constant expression (a scalar subquery included), planned
/// and run by DataFusion.
async fn evaluate(state: &SessionState, expr: &ast::Expr, clause: &str) -> DFResult<ScalarValue> {
    let mut parsed = Parser::parse_sql(&GenericDialect {}, "SELECT NULL")
        .map_err(|e| DataFusionError::Internal(e.to_string()))?;
    let Some(Statement::Query(mut query)) = parsed.pop() else {
        return Err(DataFusionError::Internal("SELECT did not parse".into()));
    };
    let SetExpr::Select(select) = query.body.as_mut() else {
        return Err(DataFusionError::Internal("SELECT did not parse".into()));
    };
    select.projection = vec![ast::SelectItem::UnnamedExpr(expr.clone())];
    let statement = DFStatement::Statement(Box::new(Statement::Query(query)));
    let plan = state.statement_to_plan(statement).await?;
    let batches = DataFrame::new(state.clone(), plan).collect().await?;
    let mut values = batches
        .iter()
        .filter(|b| b.num_rows() > 0)
        .flat_map(|b| (0..b.num_rows()).map(move |row| (b, row)));
    match (values.next(), values.next()) {
        (Some((batch, row)), None) if batch.num_columns() == 1 => {
            ScalarValue::try_from_array(batch.column(0), row)
        }
        _ => Err(plan_datafusion_err!(
            "{clause}: '{expr}' must give exactly one value"
        )),
    }
}
