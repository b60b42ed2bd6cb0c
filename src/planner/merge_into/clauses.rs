//! The `WHEN` clauses of a `MERGE INTO`: planned against both sides'
//! columns and checked against what Lance's merge-insert can do.

use std::sync::Arc;

use datafusion::arrow::datatypes::Schema;
use datafusion::common::{Column, DFSchema, JoinType, Result as DFResult, ScalarValue};
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder, cast, col, lit, when};
use datafusion::sql::TableReference;
use datafusion::sql::planner::IdentNormalizer;
use datafusion::sql::sqlparser::ast::{
    self, AssignmentTarget, ExprWithAlias, Merge, MergeAction, MergeClauseKind, MergeInsertKind,
};

use super::{Sides, column_name, stars};
use crate::error::fail;
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

/// `columns` a clause writes, checked: a key only from the source's key (and
/// then left out: Lance takes the key from the source anyway).
fn chosen(columns: Columns, keys: &[String], sides: &Sides) -> DFResult<Columns> {
    let key_copy = |w: &Written| {
        keys.contains(&w.column) && sides.source_column(&w.value) == Some(w.column.as_str())
    };
    if let Some(w) = columns
        .iter()
        .find(|w| keys.contains(&w.column) && !key_copy(w))
    {
        let (column, text) = (&w.column, &w.text);
        return fail!(
            not_supported,
            "MERGE INTO: key column {column} can only be written from the source's {column} \
             ({}.{column}), not {text}",
            sides.source
        );
    }
    Ok(columns.into_iter().filter(|c| !key_copy(c)).collect())
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

/// What a clause writes.
#[derive(Debug, Clone, PartialEq)]
enum Assigned {
    /// `UPDATE SET *`, `INSERT *`, `INSERT ROW`: every source column.
    All,
    /// Chosen columns (keys copied from the source left out).
    Columns(Columns),
}

/// The clauses of a statement, planned and checked.
pub(super) struct Clauses {
    when_matched: WhenMatched,
    matched_condition: Option<Expr>,
    inserts: bool,
    /// What `WHEN MATCHED THEN UPDATE` writes.
    update: Option<Assigned>,
    /// What `WHEN NOT MATCHED THEN INSERT` writes.
    insert: Option<Assigned>,
    by_source: Option<Option<Expr>>,
}

/// How the source reaches Lance's merge-insert, which updates and inserts
/// from one source row.
enum SourceShape<'a> {
    /// As the query gives it.
    Whole,
    /// Keys and these columns (both clauses write the same ones).
    Columns(&'a Columns),
    /// Every column of the table: `UPDATE` and `INSERT` write different
    /// columns, so each source row is completed from the target row with
    /// its key (a matched row keeps the columns `UPDATE` does not write) or
    /// with NULLs (a new row lacks the columns `INSERT` does not write).
    FullRows,
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
            update: None,
            insert: None,
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
                return fail!(
                    not_supported,
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
                    clauses.update = Some(Assigned::All);
                    clauses.when_matched = WhenMatched::UpdateAll;
                    clauses.matched_condition = predicate;
                }
                (MergeClauseKind::Matched, MergeAction::Update(update)) => {
                    let mut columns = Vec::new();
                    for a in &update.assignments {
                        let AssignmentTarget::ColumnName(name) = &a.target else {
                            return fail!(
                                not_supported,
                                "MERGE INTO: tuple assignments are not supported"
                            );
                        };
                        let value = planner.plan(&a.value)?;
                        if sides.reads_target(&value) {
                            return fail!(
                                not_supported,
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
                    clauses.update = Some(Assigned::Columns(chosen(columns, keys, sides)?));
                    clauses.when_matched = WhenMatched::UpdateAll;
                    clauses.matched_condition = predicate;
                }
                (MergeClauseKind::Matched, MergeAction::Delete { .. }) => {
                    if predicate.is_some() {
                        return fail!(
                            not_supported,
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
                        return fail!(
                            not_supported,
                            "MERGE INTO: WHEN NOT MATCHED AND <condition> is not supported"
                        );
                    }
                    match &insert.kind {
                        MergeInsertKind::Row => clauses.insert = Some(Assigned::All),
                        MergeInsertKind::Values(values)
                            if stars::insert_all(&insert.columns, values) =>
                        {
                            clauses.insert = Some(Assigned::All)
                        }
                        MergeInsertKind::Values(values) => {
                            let [row] = values.rows.as_slice() else {
                                return fail!(
                                    not_supported,
                                    "MERGE INTO: INSERT takes one VALUES row"
                                );
                            };
                            if insert.columns.len() != row.len() {
                                return fail!(
                                    invalid_input,
                                    "MERGE INTO: INSERT names {} columns but gives {} values",
                                    insert.columns.len(),
                                    row.len()
                                );
                            }
                            let mut columns = Vec::new();
                            for (c, v) in insert.columns.iter().zip(row.content.iter()) {
                                let value = planner.plan(v)?;
                                if sides.reads_target(&value) {
                                    return fail!(
                                        not_supported,
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
                                return fail!(
                                    not_supported,
                                    "MERGE INTO: INSERT must write the key column {key} \
                                     ({key} = {}.{key}): Lance's merge-insert inserts the \
                                     source's key",
                                    sides.source
                                );
                            }
                            clauses.insert = Some(Assigned::Columns(chosen(columns, keys, sides)?));
                        }
                    }
                    clauses.inserts = true;
                }
                (MergeClauseKind::NotMatchedBySource, MergeAction::Delete { .. }) => {
                    if let Some(p) = &predicate
                        && p.column_refs().iter().any(|c| sides.is_source(c))
                    {
                        return fail!(
                            not_supported,
                            "MERGE INTO: the WHEN NOT MATCHED BY SOURCE condition can only read \
                             target columns; got {}",
                            clause.predicate.as_ref().expect("planned from it")
                        );
                    }
                    clauses.by_source = Some(predicate);
                }
                (kind, action) => {
                    return fail!(
                        not_supported,
                        "MERGE INTO: WHEN {kind} THEN {action} is not supported"
                    );
                }
            }
        }
        clauses.check_matched_condition(keys, sides)?;
        Ok(clauses)
    }

    /// How the source reaches Lance (see [`SourceShape`]).
    fn shape(&self) -> SourceShape<'_> {
        match (&self.update, &self.insert) {
            (None | Some(Assigned::All), None | Some(Assigned::All)) => SourceShape::Whole,
            (Some(Assigned::Columns(c)), None) | (None, Some(Assigned::Columns(c))) => {
                SourceShape::Columns(c)
            }
            (Some(Assigned::Columns(u)), Some(Assigned::Columns(i))) if u == i => {
                SourceShape::Columns(u)
            }
            _ => SourceShape::FullRows,
        }
    }

    /// Lance evaluates the condition on the rows handed to it: every source
    /// column it reads must reach Lance unchanged.
    fn check_matched_condition(&self, keys: &[String], sides: &Sides) -> DFResult<()> {
        // What Lance sees of a matched row's source side: what `UPDATE`
        // writes (every source column for `UPDATE SET *`).
        let (Some(condition), Some(Assigned::Columns(columns))) =
            (&self.matched_condition, &self.update)
        else {
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
                return fail!(
                    not_supported,
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
    /// `DELETE`); for [`SourceShape::FullRows`], `source` left-joined with
    /// `target` (the table at the statement's version) on the keys, every
    /// column of the table computed for matched and new rows alike.
    pub(super) fn source_projection(
        &self,
        source: LogicalPlan,
        target: LogicalPlan,
        table: &Schema,
        keys: &[String],
        sides: &Sides,
    ) -> DFResult<LogicalPlan> {
        let columns = match self.shape() {
            SourceShape::Whole => return Ok(source),
            SourceShape::Columns(columns) => columns,
            SourceShape::FullRows => return self.full_rows(source, target, table, keys, sides),
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

    /// See [`SourceShape::FullRows`].
    fn full_rows(
        &self,
        source: LogicalPlan,
        target: LogicalPlan,
        table: &Schema,
        keys: &[String],
        sides: &Sides,
    ) -> DFResult<LogicalPlan> {
        const TARGET: &str = "__lance_merge_target";
        const MATCHED: &str = "__lance_merge_matched";
        let source_schema = Arc::clone(source.schema());
        let on_source = |c: &str| Column::new(Some(TableReference::bare(sides.source.as_str())), c);
        let on_target = |c: &str| Column::new(Some(TableReference::bare(TARGET)), c);
        let from_source = |c: &str| {
            let column = on_source(c);
            source_schema
                .has_column(&column)
                .then_some(Expr::Column(column))
        };
        // The value a clause gives column `c`, if it writes it.
        let value = |assigned: &Option<Assigned>, c: &str| match assigned {
            Some(Assigned::All) => from_source(c),
            Some(Assigned::Columns(columns)) => columns
                .iter()
                .find(|w| w.column == c)
                .map(|w| w.value.clone()),
            None => None,
        };
        let target = LogicalPlanBuilder::from(target)
            .project(
                table
                    .fields()
                    .iter()
                    .map(|f| col(Column::new_unqualified(f.name())))
                    .chain([lit(true).alias(MATCHED)]),
            )?
            .alias(TARGET)?
            .build()?;
        let (left, right): (Vec<Column>, Vec<Column>) =
            keys.iter().map(|k| (on_source(k), on_target(k))).unzip();
        let joined = LogicalPlanBuilder::from(source)
            .join(target, JoinType::Left, (left, right), None)?
            .build()?;
        // `*` writes every source column: each must be one of the table's.
        if matches!(self.update, Some(Assigned::All)) || matches!(self.insert, Some(Assigned::All))
        {
            for field in source_schema.fields() {
                if table.field_with_name(field.name()).is_err() {
                    return fail!(
                        schema_mismatch,
                        "MERGE INTO: the source column '{}' is not a column of the table \
                         (INSERT * and UPDATE SET * write every source column)",
                        field.name()
                    );
                }
            }
        }
        let matched = Expr::Column(on_target(MATCHED)).is_true();
        let mut exprs = Vec::with_capacity(table.fields().len());
        for field in table.fields() {
            let c = field.name().as_str();
            let expr = if keys.iter().any(|k| k == c) {
                Expr::Column(on_source(c))
            } else {
                let on_update =
                    value(&self.update, c).unwrap_or_else(|| Expr::Column(on_target(c)));
                let on_insert = match value(&self.insert, c) {
                    Some(v) => v,
                    None if !field.is_nullable() => {
                        return fail!(
                            schema_mismatch,
                            "MERGE INTO: INSERT does not write the NOT NULL column {c}"
                        );
                    }
                    None => lit(ScalarValue::Null),
                };
                let data_type = field.data_type().clone();
                when(matched.clone(), cast(on_update, data_type.clone()))
                    .otherwise(cast(on_insert, data_type))?
            };
            exprs.push(expr.alias(c));
        }
        LogicalPlanBuilder::from(joined).project(exprs)?.build()
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
