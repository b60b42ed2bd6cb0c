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
//!   WHEN MATCHED [AND <cond>] THEN UPDATE SET v = s.v, name = s.name | DELETE
//!   WHEN NOT MATCHED THEN INSERT (id, v, name) VALUES (s.id, s.v, s.name) | INSERT ROW
//!   WHEN NOT MATCHED BY SOURCE [AND <cond>] THEN DELETE
//! ```
//!
//! * `ON` must equate target and source columns of the same name (the keys).
//! * `UPDATE SET` and `INSERT` may compute values from source columns; they
//!   must name the same columns when both are present (Lance's merge-insert
//!   updates and inserts from one source row). Columns not named keep their
//!   value on update and are NULL on insert.
//! * Conditions may read target columns, keys, and source columns the
//!   statement writes unchanged (Lance evaluates them on the rows it merges).
//! * The result is one row: `inserted, updated, deleted, version`.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DFSchema, Result as DFResult, not_impl_err, plan_err};
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
    self, AssignmentTarget, ExprWithAlias, Ident, Merge, MergeAction, MergeClauseKind,
    MergeInsertKind, ObjectName, SetExpr, Statement, TableFactor,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

use crate::table::lookup::lance_table;
use crate::table::merge::{
    LanceMergeTable, MergeCondition, MergeOptions, WhenMatched, WhenNotMatched,
    WhenNotMatchedBySource, check_condition,
};

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

/// Plans expressions of the statement against both sides' columns.
struct ExprPlanner<'a> {
    state: &'a SessionState,
    schema: DFSchema,
}

impl ExprPlanner<'_> {
    fn plan(&self, expr: &ast::Expr) -> DFResult<Expr> {
        self.state.create_logical_expr_from_sql_expr(
            ExprWithAlias {
                expr: expr.clone(),
                alias: None,
            },
            &self.schema,
        )
    }
}

/// A column a clause writes: its name, its planned value and the value as
/// the statement wrote it (for messages).
#[derive(Debug, Clone)]
struct Written {
    column: String,
    value: Expr,
    text: String,
}

impl PartialEq for Written {
    fn eq(&self, other: &Self) -> bool {
        self.column == other.column && self.value == other.value
    }
}

/// The columns a clause writes.
type Columns = Vec<Written>;

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
        return plan_err!("MERGE INTO: the target must be a table");
    };
    if let Some(version) = version {
        return plan_err!(
            "MERGE INTO: '{version}' on the target '{target_name}' is not supported: a merge \
             writes the latest version"
        );
    }
    if args.is_some() {
        return plan_err!("MERGE INTO: the target must be a table, not a table function");
    }
    let reference = object_name_to_table_reference(target_name.clone(), normalize)?;
    let target = lance_table(state, &reference, "MERGE INTO").await?;
    let target_alias = alias
        .as_ref()
        .map(|a| idents.normalize(a.name.clone()))
        .unwrap_or_else(|| reference.table().to_string());
    let (source, source_alias) = plan_source(state, &merge.source, &idents, normalize).await?;
    if source_alias == target_alias {
        return plan_err!(
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
    let source = clauses.source_projection(source, &keys, &sides)?;
    let options = clauses.options(&sides, &planner.schema)?;
    let table =
        LanceMergeTable::new(reference.to_string(), source, keys, options).with_target(target);
    LogicalPlanBuilder::scan(
        format!("lance_merge({reference})"),
        provider_as_source(Arc::new(table)),
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
        return not_impl_err!(
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
                return plan_err!("MERGE INTO: the source query needs an alias");
            };
            ((**subquery).clone(), idents.normalize(alias.name.clone()))
        }
        other => return not_impl_err!("MERGE INTO: unsupported source {other}"),
    };
    let statement = DFStatement::Statement(Box::new(Statement::Query(Box::new(query))));
    Ok((state.statement_to_plan(statement).await?, alias))
}

/// `SELECT * FROM <table>`, built on the syntax tree.
fn select_star_from(table: TableFactor) -> DFResult<ast::Query> {
    let parsed = Parser::parse_sql(&GenericDialect {}, "SELECT * FROM merge_source")
        .map_err(|e| datafusion::error::DataFusionError::Internal(e.to_string()))?;
    let Some(Statement::Query(mut query)) = parsed.into_iter().next() else {
        return plan_err!("MERGE INTO: internal error building the source query");
    };
    let SetExpr::Select(select) = query.body.as_mut() else {
        return plan_err!("MERGE INTO: internal error building the source query");
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
    not_impl_err!(
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

/// The clauses of a statement, planned and checked.
struct Clauses {
    when_matched: WhenMatched,
    matched_condition: Option<Expr>,
    inserts: bool,
    /// Columns written by `UPDATE SET` / `INSERT (...) VALUES (...)`.
    written: Option<Columns>,
    /// `INSERT ROW`: every source column.
    all_source_columns: bool,
    by_source: Option<Option<Expr>>,
}

impl Clauses {
    fn plan(
        merge: &Merge,
        planner: &ExprPlanner<'_>,
        sides: &Sides,
        keys: &[String],
        idents: &IdentNormalizer,
    ) -> DFResult<Self> {
        let mut clauses = Clauses {
            when_matched: WhenMatched::DoNothing,
            matched_condition: None,
            inserts: false,
            written: None,
            all_source_columns: false,
            by_source: None,
        };
        let mut seen: Vec<&'static str> = Vec::new();
        for clause in &merge.clauses {
            let kind = match clause.clause_kind {
                MergeClauseKind::Matched => "WHEN MATCHED",
                MergeClauseKind::NotMatched | MergeClauseKind::NotMatchedByTarget => {
                    "WHEN NOT MATCHED"
                }
                MergeClauseKind::NotMatchedBySource => "WHEN NOT MATCHED BY SOURCE",
            };
            if seen.contains(&kind) {
                return not_impl_err!(
                    "MERGE INTO: more than one {kind} clause is not supported (Lance's \
                     merge-insert takes one action per case)"
                );
            }
            seen.push(kind);
            let predicate = clause
                .predicate
                .as_ref()
                .map(|p| planner.plan(p))
                .transpose()?;
            match (&clause.clause_kind, &clause.action) {
                (MergeClauseKind::Matched, MergeAction::Update(update)) => {
                    let mut columns = Vec::new();
                    for a in &update.assignments {
                        let AssignmentTarget::ColumnName(name) = &a.target else {
                            return not_impl_err!(
                                "MERGE INTO: tuple assignments are not supported"
                            );
                        };
                        let value = planner.plan(&a.value)?;
                        if sides.reads_target(&value) {
                            return not_impl_err!(
                                "MERGE INTO: UPDATE SET {name} = {} reads the target row; only \
                                 values computed from the source are supported",
                                a.value
                            );
                        }
                        columns.push(Written {
                            column: column_name(name, idents),
                            value,
                            text: a.value.to_string(),
                        });
                    }
                    clauses.write(columns, keys, sides)?;
                    clauses.when_matched = WhenMatched::UpdateAll;
                    clauses.matched_condition = predicate;
                }
                (MergeClauseKind::Matched, MergeAction::Delete { .. }) => {
                    if predicate.is_some() {
                        return not_impl_err!(
                            "MERGE INTO: WHEN MATCHED AND <condition> THEN DELETE is not supported"
                        );
                    }
                    clauses.when_matched = WhenMatched::Delete;
                }
                (
                    MergeClauseKind::NotMatched | MergeClauseKind::NotMatchedByTarget,
                    MergeAction::Insert(insert),
                ) => {
                    if predicate.is_some() || insert.insert_predicate.is_some() {
                        return not_impl_err!(
                            "MERGE INTO: WHEN NOT MATCHED AND <condition> is not supported"
                        );
                    }
                    match &insert.kind {
                        MergeInsertKind::Row => clauses.all_source_columns = true,
                        MergeInsertKind::Values(values) => {
                            let [row] = values.rows.as_slice() else {
                                return not_impl_err!("MERGE INTO: INSERT takes one VALUES row");
                            };
                            if insert.columns.len() != row.len() {
                                return plan_err!(
                                    "MERGE INTO: INSERT names {} columns but gives {} values",
                                    insert.columns.len(),
                                    row.len()
                                );
                            }
                            let mut columns = Vec::new();
                            for (c, v) in insert.columns.iter().zip(row.content.iter()) {
                                let value = planner.plan(v)?;
                                if sides.reads_target(&value) {
                                    return plan_err!(
                                        "MERGE INTO: INSERT values cannot read the target row"
                                    );
                                }
                                columns.push(Written {
                                    column: column_name(c, idents),
                                    value,
                                    text: v.to_string(),
                                });
                            }
                            // Lance inserts the source's key: SQL would insert
                            // NULL for a key the list leaves out.
                            if let Some(key) = keys
                                .iter()
                                .find(|k| !columns.iter().any(|w| w.column == **k))
                            {
                                return not_impl_err!(
                                    "MERGE INTO: INSERT must write the key column {key} \
                                     ({key} = {}.{key}): Lance's merge-insert inserts the \
                                     source's key",
                                    sides.source
                                );
                            }
                            clauses.write(columns, keys, sides)?;
                        }
                    }
                    clauses.inserts = true;
                }
                (MergeClauseKind::NotMatchedBySource, MergeAction::Delete { .. }) => {
                    if let Some(p) = &predicate
                        && p.column_refs().iter().any(|c| sides.is_source(c))
                    {
                        return plan_err!(
                            "MERGE INTO: the WHEN NOT MATCHED BY SOURCE condition can only read \
                             target columns; got {}",
                            clause.predicate.as_ref().expect("planned from it")
                        );
                    }
                    clauses.by_source = Some(predicate);
                }
                (kind, action) => {
                    return not_impl_err!("MERGE INTO: WHEN {kind} THEN {action} is not supported");
                }
            }
        }
        if let (true, Some(_)) = (clauses.all_source_columns, &clauses.written) {
            return not_impl_err!(
                "MERGE INTO: INSERT ROW cannot be combined with UPDATE SET of chosen columns \
                 (Lance's merge-insert updates and inserts from one source row); list the \
                 inserted columns: INSERT (c, ...) VALUES ({}.c, ...)",
                sides.source
            );
        }
        clauses.check_matched_condition(keys, sides)?;
        Ok(clauses)
    }

    /// Records the columns a clause writes: keys only from the source's key,
    /// and the same columns and values for `UPDATE SET` and `INSERT`.
    fn write(&mut self, columns: Columns, keys: &[String], sides: &Sides) -> DFResult<()> {
        let key_copy = |w: &Written| {
            keys.contains(&w.column) && sides.source_column(&w.value) == Some(w.column.as_str())
        };
        if let Some(w) = columns
            .iter()
            .find(|w| keys.contains(&w.column) && !key_copy(w))
        {
            let (column, text) = (&w.column, &w.text);
            return not_impl_err!(
                "MERGE INTO: key column {column} can only be written from the source's {column} \
                 ({}.{column}), not {text}",
                sides.source
            );
        }
        // `INSERT (id, ...) VALUES (s.id, ...)`: the key comes from the source anyway.
        let columns: Columns = columns.into_iter().filter(|c| !key_copy(c)).collect();
        match &self.written {
            Some(existing) if existing != &columns => not_impl_err!(
                "MERGE INTO: UPDATE SET and INSERT must write the same columns from the same \
                 source values (Lance's merge-insert updates and inserts from one source row)"
            ),
            _ => {
                self.written = Some(columns);
                Ok(())
            }
        }
    }

    /// Lance evaluates the condition on the rows handed to it: every source
    /// column it reads must reach Lance unchanged.
    fn check_matched_condition(&self, keys: &[String], sides: &Sides) -> DFResult<()> {
        let (Some(condition), Some(columns)) = (&self.matched_condition, &self.written) else {
            return Ok(());
        };
        for column in condition.column_refs() {
            if !sides.is_source(column) || keys.contains(&column.name) {
                continue;
            }
            let copied = columns.iter().any(|w| {
                w.column == column.name && sides.source_column(&w.value) == Some(w.column.as_str())
            });
            if !copied {
                return not_impl_err!(
                    "MERGE INTO: the WHEN MATCHED condition reads {}.{}, which the statement \
                     does not write unchanged; only source columns written as {} = {}.{} (or \
                     keys) can be used in the condition",
                    sides.source,
                    column.name,
                    column.name,
                    sides.source,
                    column.name
                );
            }
        }
        Ok(())
    }

    /// The source as Lance receives it: keys and written columns under the
    /// table's column names (every source column for `INSERT ROW` or `DELETE`).
    fn source_projection(
        &self,
        source: LogicalPlan,
        keys: &[String],
        sides: &Sides,
    ) -> DFResult<LogicalPlan> {
        let Some(columns) = &self.written else {
            return Ok(source);
        };
        let key_column = |k: &String| {
            Column::new(
                Some(TableReference::bare(sides.source.as_str())),
                k.as_str(),
            )
        };
        let mut exprs: Vec<Expr> = keys
            .iter()
            .filter(|k| !columns.iter().any(|w| w.column == **k))
            .map(|k| Expr::Column(key_column(k)).alias(k.as_str()))
            .collect();
        exprs.extend(
            columns
                .iter()
                .map(|w| w.value.clone().alias(w.column.as_str())),
        );
        LogicalPlanBuilder::from(source).project(exprs)?.build()
    }

    /// The merge options, conditions qualified by `target` / `source`.
    fn options(&self, sides: &Sides, schema: &DFSchema) -> DFResult<MergeOptions> {
        let condition = |e: &Expr| -> DFResult<MergeCondition> {
            check_condition(e, schema)?;
            Ok(MergeCondition::Expr(sides.canonical(e.clone())?))
        };
        let when_matched = match (&self.when_matched, &self.matched_condition) {
            (WhenMatched::UpdateAll, Some(c)) => WhenMatched::UpdateIf(condition(c)?),
            (other, _) => other.clone(),
        };
        let when_not_matched_by_source = match &self.by_source {
            None => WhenNotMatchedBySource::Keep,
            Some(None) => WhenNotMatchedBySource::Delete,
            Some(Some(c)) => WhenNotMatchedBySource::DeleteIf(condition(c)?),
        };
        Ok(MergeOptions {
            when_matched,
            when_not_matched: if self.inserts {
                WhenNotMatched::InsertAll
            } else {
                WhenNotMatched::DoNothing
            },
            when_not_matched_by_source,
        })
    }
}

/// True when `sql` starts a statement this module plans (`MERGE`, or an
/// `EXPLAIN` that may hold one).
fn may_be_merge(sql: &str) -> bool {
    let trimmed = sql.trim_start();
    ["merge", "explain"].iter().any(|word| {
        trimmed
            .get(..word.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(word))
    })
}

/// Plans `sql` if it is a `MERGE INTO` statement (or an `EXPLAIN` of one);
/// `None` for any other SQL.
pub async fn plan_merge_sql(state: &SessionState, sql: &str) -> DFResult<Option<LogicalPlan>> {
    use datafusion::sql::parser::DFParser;
    if !may_be_merge(sql) {
        return Ok(None);
    }
    let parsed = {
        let dialect = state.config_options().sql_parser.dialect;
        let Some(dialect) = datafusion::sql::sqlparser::dialect::dialect_from_str(dialect) else {
            return plan_err!("unknown SQL dialect '{dialect}'");
        };
        DFParser::parse_sql_with_dialect(sql, dialect.as_ref())
    };
    let mut statements = match parsed {
        Ok(statements) => statements,
        // Not ours to report: DataFusion gives the same parse error.
        Err(_) => return Ok(None),
    };
    if statements.len() != 1 {
        return Ok(None);
    }
    let statement = statements.pop_front().expect("one statement");
    let merge = |s: &DFStatement| match s {
        DFStatement::Statement(s) => match s.as_ref() {
            Statement::Merge(m) => Some(m.clone()),
            _ => None,
        },
        _ => None,
    };
    match &statement {
        DFStatement::Explain(explain) => {
            let Some(m) = merge(&explain.statement) else {
                return Ok(None);
            };
            let plan = plan_merge_into(state, &m).await?;
            let mut option = datafusion::logical_expr::ExplainOption::default()
                .with_verbose(explain.verbose)
                .with_analyze(explain.analyze);
            if let Some(format) = &explain.format {
                option = option.with_format(format.parse()?);
            }
            Ok(Some(
                LogicalPlanBuilder::from(plan)
                    .explain_option_format(option)?
                    .build()?,
            ))
        }
        other => match merge(other) {
            Some(m) => Ok(Some(plan_merge_into(state, &m).await?)),
            None => Ok(None),
        },
    }
}
