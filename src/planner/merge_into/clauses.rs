//! The `WHEN` clauses of a `MERGE INTO`: planned against both sides'
//! columns and checked against what Lance's merge-insert can do.

use datafusion::common::{Column, DFSchema, Result as DFResult, not_impl_err, plan_err};
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder};
use datafusion::sql::TableReference;
use datafusion::sql::planner::IdentNormalizer;
use datafusion::sql::sqlparser::ast::{
    self, AssignmentTarget, ExprWithAlias, Merge, MergeAction, MergeClauseKind, MergeInsertKind,
};

use super::{Sides, column_name, stars};
use crate::table::merge::{
    MergeCondition, MergeOptions, WhenMatched, WhenNotMatched, WhenNotMatchedBySource,
    check_condition,
};

/// Plans expressions of the statement against both sides' columns.
pub(super) struct ExprPlanner<'a> {
    pub(super) state: &'a SessionState,
    pub(super) schema: DFSchema,
}

impl ExprPlanner<'_> {
    pub(super) fn plan(&self, expr: &ast::Expr) -> DFResult<Expr> {
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

/// The clauses of a statement, planned and checked.
pub(super) struct Clauses {
    when_matched: WhenMatched,
    matched_condition: Option<Expr>,
    inserts: bool,
    /// Columns written by `UPDATE SET` / `INSERT (...) VALUES (...)`.
    written: Option<Columns>,
    /// `INSERT ROW` / `INSERT *`: every source column.
    all_source_columns: bool,
    /// `UPDATE SET *`: every source column.
    update_all_columns: bool,
    by_source: Option<Option<Expr>>,
}

impl Clauses {
    pub(super) fn plan(
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
            update_all_columns: false,
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
                (MergeClauseKind::Matched, MergeAction::Update(update))
                    if stars::update_all(&update.assignments) =>
                {
                    clauses.update_all_columns = true;
                    clauses.when_matched = WhenMatched::UpdateAll;
                    clauses.matched_condition = predicate;
                }
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
                        MergeInsertKind::Values(values)
                            if stars::insert_all(&insert.columns, values) =>
                        {
                            clauses.all_source_columns = true
                        }
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
                "MERGE INTO: INSERT * (or INSERT ROW) cannot be combined with UPDATE SET of \
                 chosen columns (Lance's merge-insert updates and inserts from one source row); \
                 use UPDATE SET * or list the inserted columns: INSERT (c, ...) VALUES ({}.c, ...)",
                sides.source
            );
        }
        if let (true, Some(_)) = (clauses.update_all_columns, &clauses.written) {
            return not_impl_err!(
                "MERGE INTO: UPDATE SET * cannot be combined with INSERT of chosen columns \
                 (Lance's merge-insert updates and inserts from one source row); use INSERT * \
                 or list the updated columns: UPDATE SET c = {}.c, ...",
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
    /// table's column names (every source column for `*`, `INSERT ROW` or
    /// `DELETE`).
    pub(super) fn source_projection(
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
    pub(super) fn options(&self, sides: &Sides, schema: &DFSchema) -> DFResult<MergeOptions> {
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
