//! Filters as the Lance SQL text a `db://` service evaluates.
//!
//! A filter is sent only when its text means exactly the DataFusion
//! expression: columns, and literals whose SQL spelling has one reading —
//! integers, finite `Float64`s, booleans and strings without backslashes —
//! under comparisons, `AND`/`OR`/`NOT`, `IS [NOT] NULL`, `[NOT] BETWEEN`,
//! `[NOT] IN (…)` and case-sensitive `LIKE` without `ESCAPE`. Anything else
//! stays in DataFusion (the same rule as for local tables, narrowed to what
//! survives being written out).

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::expr::{Between, InList, Like};
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};

/// The Lance SQL text of `expr`, when it has an exact one.
pub(crate) fn to_lance_sql(expr: &Expr) -> Option<String> {
    write(expr, false)
}

/// [`to_lance_sql`] with each column under its relation (`source.`\`c\``,
/// `target.`\`c\``), as the conditions of a merge name them.
pub(crate) fn to_qualified_lance_sql(expr: &Expr) -> Option<String> {
    write(expr, true)
}

fn write(expr: &Expr, qualified: bool) -> Option<String> {
    let to_lance_sql = |e: &Expr| write(e, qualified);
    Some(match expr {
        Expr::Column(c) => match (&c.relation, qualified) {
            (Some(relation), true) => {
                format!("{}.{}", relation.table(), identifier(&c.name)?)
            }
            (None, true) => return None,
            (_, false) => identifier(&c.name)?,
        },
        Expr::Literal(value, _) => literal(value)?,
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let op = match op {
                Operator::Eq => "=",
                Operator::NotEq => "<>",
                Operator::Lt => "<",
                Operator::LtEq => "<=",
                Operator::Gt => ">",
                Operator::GtEq => ">=",
                Operator::And => "AND",
                Operator::Or => "OR",
                _ => return None,
            };
            format!("({} {op} {})", to_lance_sql(left)?, to_lance_sql(right)?)
        }
        Expr::Not(inner) => format!("(NOT {})", to_lance_sql(inner)?),
        Expr::IsNull(inner) => format!("({} IS NULL)", to_lance_sql(inner)?),
        Expr::IsNotNull(inner) => format!("({} IS NOT NULL)", to_lance_sql(inner)?),
        Expr::Between(Between {
            expr,
            negated,
            low,
            high,
        }) => format!(
            "({} {}BETWEEN {} AND {})",
            to_lance_sql(expr)?,
            not(*negated),
            to_lance_sql(low)?,
            to_lance_sql(high)?
        ),
        Expr::InList(InList {
            expr,
            list,
            negated,
        }) if !list.is_empty() => {
            let items = list
                .iter()
                .map(|e| match e {
                    Expr::Literal(..) => to_lance_sql(e),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()?;
            format!(
                "({} {}IN ({}))",
                to_lance_sql(expr)?,
                not(*negated),
                items.join(", ")
            )
        }
        Expr::Like(Like {
            negated,
            expr,
            pattern,
            escape_char: None,
            case_insensitive: false,
        }) if matches!(**pattern, Expr::Literal(..)) => format!(
            "({} {}LIKE {})",
            to_lance_sql(expr)?,
            not(*negated),
            to_lance_sql(pattern)?
        ),
        _ => return None,
    })
}

/// The Lance SQL text of an `UPDATE ... SET column = expr` value, which the
/// service evaluates and casts to the column's type itself: what
/// [`to_lance_sql`] writes, plus `NULL`, `+ - *` and numeric widening casts.
pub(crate) fn assignment_to_lance_sql(expr: &Expr) -> Option<String> {
    match expr {
        // The service casts the value to the column's type, as DataFusion does.
        Expr::Cast(cast) => value(&cast.expr),
        _ => value(expr),
    }
}

fn value(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Literal(v, _) if v.is_null() => Some("NULL".to_string()),
        Expr::Cast(cast) => match (&*cast.expr, cast.field.data_type()) {
            (Expr::Literal(v, _), to) => literal(&v.cast_to(to).ok()?),
            // Lance's SQL widens integers and floats as DataFusion does.
            (Expr::Column(_), DataType::Int64 | DataType::Float64) => value(&cast.expr),
            _ => None,
        },
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if matches!(op, Operator::Plus | Operator::Minus | Operator::Multiply) =>
        {
            Some(format!("({} {op} {})", value(left)?, value(right)?))
        }
        _ => to_lance_sql(expr),
    }
}

fn not(negated: bool) -> &'static str {
    if negated { "NOT " } else { "" }
}

/// A column name in backticks (names holding a backtick are not sent).
fn identifier(name: &str) -> Option<String> {
    (!name.contains('`') && !name.is_empty()).then(|| format!("`{name}`"))
}

fn literal(value: &ScalarValue) -> Option<String> {
    use ScalarValue::*;
    Some(match value {
        Boolean(Some(b)) => if *b { "TRUE" } else { "FALSE" }.to_string(),
        Int8(Some(v)) => v.to_string(),
        Int16(Some(v)) => v.to_string(),
        Int32(Some(v)) => v.to_string(),
        Int64(Some(v)) => v.to_string(),
        UInt8(Some(v)) => v.to_string(),
        UInt16(Some(v)) => v.to_string(),
        UInt32(Some(v)) => v.to_string(),
        UInt64(Some(v)) if *v <= i64::MAX as u64 => v.to_string(),
        // `Display` of an f64 never uses an exponent; a decimal point makes
        // the text a double.
        Float64(Some(v)) if v.is_finite() => {
            let text = v.to_string();
            if text.contains('.') {
                text
            } else {
                format!("{text}.0")
            }
        }
        Utf8(Some(s)) | LargeUtf8(Some(s)) | Utf8View(Some(s)) if !s.contains('\\') => {
            format!("'{}'", s.replace('\'', "''"))
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::{col, lit};

    #[test]
    fn exact_filters_are_written_out_and_others_are_not() {
        let e = col("a").gt(lit(5i64)).and(col("s").eq(lit("it's")));
        assert_eq!(to_lance_sql(&e).unwrap(), "((`a` > 5) AND (`s` = 'it''s'))");
        assert_eq!(
            to_lance_sql(&col("x").between(lit(1.0f64), lit(2.5f64))).unwrap(),
            "(`x` BETWEEN 1.0 AND 2.5)"
        );
        assert_eq!(
            to_lance_sql(&!col("s").like(lit("a%"))).unwrap(),
            "(`s` NOT LIKE 'a%')"
        );
        assert_eq!(
            to_lance_sql(&Expr::Not(Box::new(col("s").like(lit("a%"))))).unwrap(),
            "(NOT (`s` LIKE 'a%'))"
        );
        assert!(to_lance_sql(&col("f").gt(lit(0.1f32))).is_none());
        assert!(to_lance_sql(&col("s").eq(lit("a\\b"))).is_none());
        assert!(to_lance_sql(&col("s").ilike(lit("a%"))).is_none());
        assert!(to_lance_sql(&(col("a") + lit(1i64)).gt(lit(2i64))).is_none());
        let set = Expr::Cast(datafusion::logical_expr::Cast::new(
            Box::new(col("a") * lit(2i64) - lit(1i64)),
            DataType::Int32,
        ));
        assert_eq!(assignment_to_lance_sql(&set).unwrap(), "((`a` * 2) - 1)");
        assert_eq!(
            assignment_to_lance_sql(&lit(ScalarValue::Int32(None))).unwrap(),
            "NULL"
        );
        assert!(assignment_to_lance_sql(&(col("a") / lit(2i64))).is_none());
    }
}
