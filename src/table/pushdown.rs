//! Which filters Lance evaluates with exactly DataFusion's semantics.
//!
//! Lance evaluates a pushed filter with DataFusion's own physical expressions,
//! so the semantics match as long as the expression only uses operators Lance
//! hands to DataFusion unchanged. We claim `Exact` only for:
//!
//! * comparisons (`= <> < <= > >=`, `IS [NOT] DISTINCT FROM`) and `AND`/`OR`/`NOT`,
//! * `IS [NOT] NULL`, `IS [NOT] TRUE/FALSE`, `[NOT] BETWEEN`, `[NOT] IN (<literals>)`,
//! * `[NOT] [I]LIKE '<literal pattern>' [ESCAPE 'c']` on string columns,
//! * `CAST` between scalar types,
//!
//! over columns and literals of scalar types (integers, floats, decimals,
//! strings, binary, booleans, dates, times, timestamps). Everything else —
//! functions, nested types, dictionaries, subqueries, regular expressions — is
//! `Unsupported` and stays in a DataFusion `FilterExec`.
//!
//! One measured difference: Lance compares floating-point zeros the IEEE way
//! (`-0.0 = 0.0`), DataFusion by Arrow's total order (`-0.0 < 0.0`); NaN is
//! handled identically. A float comparison is therefore pushed only when it
//! compares one column with non-zero literals, where both orders agree
//! (`tests/integration/differential.rs` checks this).

use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::expr::{Between, InList, Like};
use datafusion::logical_expr::{BinaryExpr, Expr, Operator, TableProviderFilterPushDown};

/// Classifies one filter.
pub(crate) fn classify(expr: &Expr, schema: &Schema) -> TableProviderFilterPushDown {
    if is_exact(expr, schema) {
        TableProviderFilterPushDown::Exact
    } else {
        TableProviderFilterPushDown::Unsupported
    }
}

/// True when Lance evaluates `expr` exactly as DataFusion does.
pub(crate) fn is_exact(expr: &Expr, schema: &Schema) -> bool {
    predicate(expr, schema)
}

fn scalar_type(t: &DataType) -> bool {
    use DataType::*;
    matches!(
        t,
        Boolean
            | Int8
            | Int16
            | Int32
            | Int64
            | UInt8
            | UInt16
            | UInt32
            | UInt64
            | Float32
            | Float64
            | Decimal32(_, _)
            | Decimal64(_, _)
            | Decimal128(_, _)
            | Decimal256(_, _)
            | Utf8
            | LargeUtf8
            | Binary
            | LargeBinary
            | FixedSizeBinary(_)
            | Date32
            | Date64
            | Time32(_)
            | Time64(_)
            | Timestamp(_, _)
    )
}

fn string_type(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8)
}

/// A value-producing expression: column, literal or cast of one.
fn value(expr: &Expr, schema: &Schema) -> Option<DataType> {
    match expr {
        Expr::Column(c) => schema
            .field_with_name(&c.name)
            .ok()
            .map(|f| f.data_type().clone())
            .filter(scalar_type),
        Expr::Literal(v, _) => Some(v.data_type()).filter(|t| scalar_type(t) || t.is_null()),
        Expr::Cast(cast) => {
            value(&cast.expr, schema)?;
            Some(cast.field.data_type().clone()).filter(scalar_type)
        }
        _ => None,
    }
}

fn is_float(t: &DataType) -> bool {
    matches!(t, DataType::Float16 | DataType::Float32 | DataType::Float64)
}

/// A literal (possibly cast) that is not a floating-point or integer zero.
fn nonzero_literal(expr: &Expr) -> bool {
    match expr {
        Expr::Literal(v, _) => {
            if v.is_null() {
                return true;
            }
            match v.cast_to(&DataType::Float64) {
                Ok(ScalarValue::Float64(Some(x))) => x != 0.0,
                _ => false,
            }
        }
        Expr::Cast(cast) => nonzero_literal(&cast.expr),
        _ => false,
    }
}

/// Operands compared with each other: when any is a float, at most one may be
/// a non-literal and every literal must be non-zero (see the module docs).
fn zeros_agree(operands: &[&Expr], schema: &Schema) -> bool {
    let floats = operands
        .iter()
        .any(|e| value(e, schema).as_ref().is_some_and(is_float));
    if !floats {
        return true;
    }
    let non_literals = operands.iter().filter(|e| !nonzero_literal(e)).count();
    non_literals <= 1
        && operands
            .iter()
            .filter(|e| !nonzero_literal(e))
            .all(|e| !is_literal(e))
}

fn is_literal(expr: &Expr) -> bool {
    match expr {
        Expr::Literal(..) => true,
        Expr::Cast(cast) => is_literal(&cast.expr),
        _ => false,
    }
}

fn literal_string(expr: &Expr) -> bool {
    match expr {
        Expr::Literal(v, _) => v.data_type().is_null() || string_type(&v.data_type()),
        _ => false,
    }
}

/// A boolean-valued expression Lance evaluates exactly.
fn predicate(expr: &Expr, schema: &Schema) -> bool {
    match expr {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
            Operator::And | Operator::Or => predicate(left, schema) && predicate(right, schema),
            Operator::Eq
            | Operator::NotEq
            | Operator::Lt
            | Operator::LtEq
            | Operator::Gt
            | Operator::GtEq
            | Operator::IsDistinctFrom
            | Operator::IsNotDistinctFrom => {
                value(left, schema).is_some()
                    && value(right, schema).is_some()
                    && zeros_agree(&[left, right], schema)
            }
            _ => false,
        },
        Expr::Not(inner) => predicate(inner, schema),
        Expr::IsNull(inner) | Expr::IsNotNull(inner) => value(inner, schema).is_some(),
        Expr::IsTrue(inner)
        | Expr::IsFalse(inner)
        | Expr::IsNotTrue(inner)
        | Expr::IsNotFalse(inner) => predicate(inner, schema),
        Expr::Between(Between {
            expr, low, high, ..
        }) => {
            value(expr, schema).is_some()
                && value(low, schema).is_some()
                && value(high, schema).is_some()
                && zeros_agree(&[expr, low, high], schema)
        }
        Expr::InList(InList { expr, list, .. }) => {
            value(expr, schema).is_some()
                && list
                    .iter()
                    .all(|e| matches!(e, Expr::Literal(..)) && value(e, schema).is_some())
                && zeros_agree(
                    &std::iter::once(expr.as_ref())
                        .chain(list.iter())
                        .collect::<Vec<_>>(),
                    schema,
                )
        }
        // Lance's planner rejects escape characters other than the backslash.
        Expr::Like(Like {
            expr,
            pattern,
            escape_char,
            ..
        }) => {
            value(expr, schema).as_ref().is_some_and(string_type)
                && literal_string(pattern)
                && matches!(escape_char, None | Some('\\'))
        }
        Expr::Column(_) => value(expr, schema) == Some(DataType::Boolean),
        Expr::Literal(v, _) => matches!(v.data_type(), DataType::Boolean | DataType::Null),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::Field;
    use datafusion::functions::expr_fn::abs;
    use datafusion::prelude::{col, lit};

    fn schema() -> Schema {
        Schema::new(vec![
            Field::new("i", DataType::Int64, true),
            Field::new("f", DataType::Float64, true),
            Field::new("s", DataType::Utf8, true),
            Field::new("b", DataType::Boolean, true),
            Field::new(
                "l",
                DataType::List(std::sync::Arc::new(Field::new(
                    "item",
                    DataType::Int32,
                    true,
                ))),
                true,
            ),
        ])
    }

    #[test]
    fn exact_and_unsupported() {
        let s = schema();
        let exact = [
            col("i").gt(lit(3)),
            col("i")
                .eq(lit(3))
                .and(col("f").lt_eq(lit(1.5)))
                .or(col("b")),
            col("s").like(lit("a%")),
            col("s").not_like(lit("a\\%")),
            col("i").between(lit(1), lit(5)),
            col("i").in_list(vec![lit(1), lit(2)], true),
            !col("f").is_null(),
            col("b").is_true(),
            col("f").lt(lit(0.5)),
            col("f").in_list(vec![lit(1.0), lit(f64::NAN)], true),
        ];
        for e in exact {
            assert!(is_exact(&e, &s), "{e}");
        }
        let unsupported = [
            abs(col("i")).gt(lit(3)),
            col("i") + lit(1),
            col("l").is_null(),
            col("i").in_list(vec![col("i")], false),
            col("s").like(col("s")),
            col("i").gt(lit(1)).and(abs(col("f")).lt(lit(1.0))),
            // signed zeros compare differently in Lance
            col("f").lt(lit(0.0)),
            col("f").eq(lit(-0.0)),
            col("f").between(lit(0.0), lit(1.0)),
            col("f").in_list(vec![lit(1.0), lit(0.0)], false),
            col("f").eq(col("f")),
            Expr::Like(Like::new(
                false,
                Box::new(col("s")),
                Box::new(lit("a!%")),
                Some('!'),
                false,
            )),
        ];
        for e in unsupported {
            assert!(!is_exact(&e, &s), "{e}");
        }
    }
}
