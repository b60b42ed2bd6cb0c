//! `MERGE INTO` for Lance tables.
//!
//! DataFusion 54 parses `MERGE` but cannot plan it. This module translates
//! the forms that map onto Lance's merge-insert into an equivalent
//! `lance_merge(...)` query; every other form is a clear "not supported".
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
//! * The result is one row: `inserted, updated, deleted, version`.

use datafusion::common::{DataFusionError, Result as DFResult, not_impl_err, plan_err};
use datafusion::sql::sqlparser::ast::{
    AssignmentTarget, BinaryOperator, Expr, Merge, MergeAction, MergeClauseKind, MergeInsertKind,
    ObjectName, TableFactor,
};

use crate::table::merge::MERGE_FUNCTION_NAME;

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The last identifier of an object name, unquoted.
fn last(name: &ObjectName) -> String {
    name.0
        .last()
        .and_then(|p| p.as_ident())
        .map(|i| i.value.clone())
        .unwrap_or_default()
}

/// `(qualifier, column)` of a column reference.
fn column_ref(expr: &Expr) -> Option<(Option<String>, String)> {
    match expr {
        Expr::Identifier(i) => Some((None, i.value.clone())),
        Expr::CompoundIdentifier(parts) if parts.len() >= 2 => Some((
            Some(parts[parts.len() - 2].value.clone()),
            parts[parts.len() - 1].value.clone(),
        )),
        Expr::Nested(inner) => column_ref(inner),
        _ => None,
    }
}

struct Names {
    target: String,
    target_alias: String,
    source_alias: String,
}

impl Names {
    fn is_target(&self, q: &Option<String>) -> bool {
        q.as_deref()
            .is_some_and(|q| q.eq_ignore_ascii_case(&self.target_alias))
    }

    fn is_source(&self, q: &Option<String>) -> bool {
        q.as_deref()
            .is_some_and(|q| q.eq_ignore_ascii_case(&self.source_alias))
    }

    /// Rewrites `<target_alias>.c` to `target.c` and `<source_alias>.c` to
    /// `source.c` (Lance's condition syntax).
    fn lance_condition(&self, expr: &Expr) -> String {
        let mut text = expr.to_string();
        for (from, to) in [
            (&self.target_alias, "target"),
            (&self.source_alias, "source"),
        ] {
            text = replace_qualifier(&text, from, to);
        }
        text
    }
}

/// Replaces the qualifier `from.` with `to.` (or removes it when `to` is
/// empty) wherever it starts an identifier.
fn replace_qualifier(text: &str, from: &str, to: &str) -> String {
    let needle = format!("{from}.");
    let mut out = String::new();
    let mut rest = text;
    while let Some(pos) = rest.find(&needle) {
        let boundary = pos == 0
            || !rest[..pos]
                .chars()
                .last()
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.');
        out.push_str(&rest[..pos]);
        match (boundary, to.is_empty()) {
            (true, true) => {}
            (true, false) => {
                out.push_str(to);
                out.push('.');
            }
            (false, _) => out.push_str(&needle),
        }
        rest = &rest[pos + needle.len()..];
    }
    out.push_str(rest);
    out
}

/// The columns `alias.<column>` mentions in `text`.
fn qualified_columns(text: &str, alias: &str) -> Vec<String> {
    let marked = replace_qualifier(text, alias, "\u{1}");
    marked
        .split('\u{1}')
        .skip(1)
        .map(|rest| {
            let rest = rest.strip_prefix('.').unwrap_or(rest);
            match rest.strip_prefix('"') {
                Some(quoted) => quoted.split('"').next().unwrap_or("").to_string(),
                None => rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect(),
            }
        })
        .collect()
}

/// Collects the key columns of `t.k = s.k [AND ...]`.
fn keys_of(on: &Expr, names: &Names, keys: &mut Vec<String>) -> DFResult<()> {
    match on {
        Expr::Nested(inner) => keys_of(inner, names, keys),
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            keys_of(left, names, keys)?;
            keys_of(right, names, keys)
        }
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } => {
            let (Some((lq, lc)), Some((rq, rc))) = (column_ref(left), column_ref(right)) else {
                return not_supported_on(on);
            };
            let same = lc.eq_ignore_ascii_case(&rc);
            let sides = (names.is_target(&lq) && names.is_source(&rq))
                || (names.is_source(&lq) && names.is_target(&rq));
            if !same || !sides {
                return not_supported_on(on);
            }
            keys.push(lc);
            Ok(())
        }
        _ => not_supported_on(on),
    }
}

fn not_supported_on(on: &Expr) -> DFResult<()> {
    not_impl_err!(
        "MERGE INTO: the ON condition must equate target and source columns of the same name \
         (t.k = s.k [AND ...]); got {on}"
    )
}

/// The columns a clause writes and the source expression of each.
type Columns = Vec<(String, String)>;

fn update_columns(
    assignments: &[datafusion::sql::sqlparser::ast::Assignment],
    names: &Names,
) -> DFResult<Columns> {
    let mut columns = Vec::new();
    for a in assignments {
        let AssignmentTarget::ColumnName(name) = &a.target else {
            return not_impl_err!("MERGE INTO: tuple assignments are not supported");
        };
        if mentions_target(&a.value, names) {
            return not_impl_err!(
                "MERGE INTO: UPDATE SET {} = {} reads the target row; only values computed from \
                 the source are supported",
                name,
                a.value
            );
        }
        columns.push((last(name), a.value.to_string()));
    }
    Ok(columns)
}

fn mentions_target(expr: &Expr, names: &Names) -> bool {
    let text = expr.to_string();
    replace_qualifier(&text, &names.target_alias, "\u{1}") != text
}

/// Translates a `MERGE` statement into an equivalent `lance_merge` query.
pub fn merge_into_sql(merge: &Merge) -> DFResult<String> {
    let TableFactor::Table {
        name: target,
        alias,
        ..
    } = &merge.table
    else {
        return plan_err!("MERGE INTO: the target must be a table");
    };
    let target_name = target.to_string();
    let target_alias = alias
        .as_ref()
        .map(|a| a.name.value.clone())
        .unwrap_or_else(|| last(target));
    let (source_sql, source_alias) = match &merge.source {
        TableFactor::Table { name, alias, .. } => (
            format!("SELECT * FROM {name}"),
            alias
                .as_ref()
                .map(|a| a.name.value.clone())
                .unwrap_or_else(|| last(name)),
        ),
        TableFactor::Derived {
            subquery, alias, ..
        } => (
            subquery.to_string(),
            alias
                .as_ref()
                .map(|a| a.name.value.clone())
                .ok_or_else(|| {
                    DataFusionError::Plan("MERGE INTO: the source query needs an alias".into())
                })?,
        ),
        other => return not_impl_err!("MERGE INTO: unsupported source {other}"),
    };
    let names = Names {
        target: target_name,
        target_alias,
        source_alias,
    };
    let mut keys = Vec::new();
    keys_of(&merge.on, &names, &mut keys)?;

    let mut options: Vec<String> = vec![
        "when_matched=do_nothing".into(),
        "when_not_matched=do_nothing".into(),
    ];
    let mut written: Option<Columns> = None;
    let mut all_source_columns = false;
    let key_copy = |(column, value): &(String, String)| {
        keys.iter().any(|k| k.eq_ignore_ascii_case(column))
            && value.eq_ignore_ascii_case(&format!("{}.{column}", names.source_alias))
    };
    let mut set_columns = |columns: Columns| -> DFResult<()> {
        if let Some((column, value)) = columns
            .iter()
            .find(|c| keys.iter().any(|k| k.eq_ignore_ascii_case(&c.0)) && !key_copy(c))
        {
            return not_impl_err!(
                "MERGE INTO: key column {column} can only be written from the source's \
                 {column} ({}.{column}), not {value}",
                names.source_alias
            );
        }
        // `INSERT (id, ...) VALUES (s.id, ...)`: the key comes from the source anyway.
        let columns: Columns = columns.into_iter().filter(|c| !key_copy(c)).collect();
        match &written {
            Some(existing) if existing != &columns => not_impl_err!(
                "MERGE INTO: UPDATE SET and INSERT must write the same columns from the same \
                 source values (Lance's merge-insert updates and inserts from one source row)"
            ),
            _ => {
                written = Some(columns);
                Ok(())
            }
        }
    };
    let mut matched_condition: Option<String> = None;
    let mut seen: Vec<&'static str> = Vec::new();
    for clause in &merge.clauses {
        let kind = match clause.clause_kind {
            MergeClauseKind::Matched => "WHEN MATCHED",
            MergeClauseKind::NotMatched | MergeClauseKind::NotMatchedByTarget => "WHEN NOT MATCHED",
            MergeClauseKind::NotMatchedBySource => "WHEN NOT MATCHED BY SOURCE",
        };
        if seen.contains(&kind) {
            return not_impl_err!(
                "MERGE INTO: more than one {kind} clause is not supported (Lance's merge-insert \
                 takes one action per case)"
            );
        }
        seen.push(kind);
        match (&clause.clause_kind, &clause.action) {
            (MergeClauseKind::Matched, MergeAction::Update(update)) => {
                set_columns(update_columns(&update.assignments, &names)?)?;
                options[0] = match &clause.predicate {
                    None => "when_matched=update_all".into(),
                    Some(p) => {
                        matched_condition = Some(p.to_string());
                        format!("when_matched_if={}", names.lance_condition(p))
                    }
                };
            }
            (MergeClauseKind::Matched, MergeAction::Delete { .. }) => {
                if clause.predicate.is_some() {
                    return not_impl_err!(
                        "MERGE INTO: WHEN MATCHED AND <condition> THEN DELETE is not supported"
                    );
                }
                options[0] = "when_matched=delete".into();
            }
            (
                MergeClauseKind::NotMatched | MergeClauseKind::NotMatchedByTarget,
                MergeAction::Insert(insert),
            ) => {
                if clause.predicate.is_some() || insert.insert_predicate.is_some() {
                    return not_impl_err!(
                        "MERGE INTO: WHEN NOT MATCHED AND <condition> is not supported"
                    );
                }
                match &insert.kind {
                    MergeInsertKind::Row => all_source_columns = true,
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
                            if mentions_target(v, &names) {
                                return plan_err!(
                                    "MERGE INTO: INSERT values cannot read the target row"
                                );
                            }
                            columns.push((last(c), v.to_string()));
                        }
                        // Keys are written from the source by the merge itself.
                        set_columns(columns)?;
                    }
                }
                options[1] = "when_not_matched=insert".into();
            }
            (MergeClauseKind::NotMatchedBySource, MergeAction::Delete { .. }) => {
                options.push(match &clause.predicate {
                    None => "when_not_matched_by_source=delete".into(),
                    Some(p) => format!(
                        "when_not_matched_by_source_if={}",
                        replace_qualifier(&p.to_string(), &names.target_alias, "")
                    ),
                });
            }
            (kind, action) => {
                return not_impl_err!("MERGE INTO: WHEN {kind} THEN {action} is not supported");
            }
        }
    }

    if let (true, Some(_)) = (all_source_columns, &written) {
        return not_impl_err!(
            "MERGE INTO: INSERT ROW cannot be combined with UPDATE SET of chosen columns (Lance's \
             merge-insert updates and inserts from one source row); list the inserted columns: \
             INSERT (c, ...) VALUES ({}.c, ...)",
            names.source_alias
        );
    }
    // Lance evaluates the condition on the rows handed to it: every source
    // column it reads must reach Lance unchanged.
    if let (Some(condition), Some(columns)) = (&matched_condition, &written) {
        for column in qualified_columns(condition, &names.source_alias) {
            let is_key = keys.iter().any(|k| k.eq_ignore_ascii_case(&column));
            let copied = columns.iter().any(|c| {
                c.0.eq_ignore_ascii_case(&column)
                    && c.1
                        .eq_ignore_ascii_case(&format!("{}.{column}", names.source_alias))
            });
            if !is_key && !copied {
                return not_impl_err!(
                    "MERGE INTO: the WHEN MATCHED condition reads {}.{column}, which the \
                     statement does not write unchanged; only source columns written as \
                     {column} = {}.{column} (or keys) can be used in the condition",
                    names.source_alias,
                    names.source_alias
                );
            }
        }
    }

    let source_alias = &names.source_alias;
    let select = match (&written, all_source_columns) {
        (Some(columns), _) => {
            let mut list: Vec<String> = keys
                .iter()
                .filter(|k| !columns.iter().any(|(c, _)| c.eq_ignore_ascii_case(k)))
                .map(|k| format!("{source_alias}.{k} AS {k}"))
                .collect();
            list.extend(columns.iter().map(|(c, v)| format!("{v} AS {c}")));
            list.join(", ")
        }
        (None, _) => format!("{source_alias}.*"),
    };
    let mut args = vec![
        quote(&names.target),
        format!("(SELECT {select} FROM ({source_sql}) AS {source_alias})"),
        quote(&keys.join(",")),
    ];
    args.extend(options.iter().map(|o| quote(o)));
    Ok(format!(
        "SELECT inserted, updated, deleted, version FROM {MERGE_FUNCTION_NAME}({})",
        args.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::ast::Statement;
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn translate(sql: &str) -> DFResult<String> {
        let statements = Parser::parse_sql(&GenericDialect {}, sql).unwrap();
        let Statement::Merge(merge) = &statements[0] else {
            panic!("not a merge")
        };
        merge_into_sql(merge)
    }

    #[test]
    fn upsert_translates() {
        let sql = translate(
            "MERGE INTO t USING src AS s ON t.id = s.id \
             WHEN MATCHED THEN UPDATE SET v = s.v \
             WHEN NOT MATCHED THEN INSERT (v) VALUES (s.v)",
        )
        .unwrap();
        assert_eq!(
            sql,
            "SELECT inserted, updated, deleted, version FROM lance_merge('t', \
             (SELECT s.id AS id, s.v AS v FROM (SELECT * FROM src) AS s), 'id', \
             'when_matched=update_all', 'when_not_matched=insert')"
        );
    }

    #[test]
    fn conditions_and_deletes() {
        let sql = translate(
            "MERGE INTO t AS tt USING (SELECT * FROM src) AS s ON tt.id = s.id \
             WHEN MATCHED AND s.v > tt.v THEN UPDATE SET v = s.v \
             WHEN NOT MATCHED BY SOURCE AND tt.v < 0 THEN DELETE",
        )
        .unwrap();
        assert!(
            sql.contains("'when_matched_if=source.v > target.v'"),
            "{sql}"
        );
        assert!(
            sql.contains("'when_not_matched_by_source_if=v < 0'"),
            "{sql}"
        );
    }

    #[test]
    fn unsupported_forms_say_so() {
        let err = translate("MERGE INTO t USING s ON t.id < s.id WHEN MATCHED THEN DELETE")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("must equate target and source columns"),
            "{err}"
        );
        let err = translate(
            "MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = t.v + s.v",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("reads the target row"), "{err}");
    }

    fn error_of(sql: &str) -> String {
        translate(sql).unwrap_err().to_string()
    }

    #[test]
    fn forms_that_would_change_meaning_are_refused() {
        let err = error_of(
            "MERGE INTO t USING s ON t.id = s.id \
             WHEN MATCHED AND s.v > 0 THEN UPDATE SET v = s.v \
             WHEN MATCHED THEN UPDATE SET v = 0",
        );
        assert!(err.contains("more than one WHEN MATCHED clause"), "{err}");
        let err = error_of(
            "MERGE INTO t USING s ON t.id = s.id \
             WHEN NOT MATCHED BY SOURCE AND t.v > 0 THEN DELETE \
             WHEN NOT MATCHED BY SOURCE THEN DELETE",
        );
        assert!(
            err.contains("more than one WHEN NOT MATCHED BY SOURCE clause"),
            "{err}"
        );
        let err = error_of(
            "MERGE INTO t USING s ON t.id = s.id \
             WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT ROW",
        );
        assert!(err.contains("INSERT ROW cannot be combined"), "{err}");
        let err = error_of(
            "MERGE INTO t USING s ON t.id = s.id \
             WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id + 1, s.v)",
        );
        assert!(err.contains("key column id can only be written"), "{err}");
        let err = error_of(
            "MERGE INTO t USING s ON t.id = s.id \
             WHEN MATCHED AND s.v > t.v THEN UPDATE SET v = s.v * 10",
        );
        assert!(err.contains("condition reads s.v"), "{err}");
        let err = error_of(
            "MERGE INTO t USING s ON t.id = s.id \
             WHEN MATCHED AND s.w > 0 THEN UPDATE SET v = s.v",
        );
        assert!(err.contains("condition reads s.w"), "{err}");
    }

    #[test]
    fn conditions_on_keys_and_copied_columns_translate() {
        let sql = translate(
            "MERGE INTO t USING s ON t.id = s.id \
             WHEN MATCHED AND s.v > t.v AND s.id > 0 THEN UPDATE SET v = s.v \
             WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, s.v)",
        )
        .unwrap();
        assert!(
            sql.contains("'when_matched_if=source.v > target.v AND source.id > 0'"),
            "{sql}"
        );
    }

    #[test]
    fn qualified_columns_are_found() {
        assert_eq!(
            qualified_columns("s.a > t.b AND (s.\"C d\" = 1 OR xs.e = s.f)", "s"),
            vec!["a".to_string(), "C d".to_string(), "f".to_string()]
        );
    }
}
