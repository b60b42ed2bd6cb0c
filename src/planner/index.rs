//! `CREATE INDEX` and `DROP INDEX` on Lance tables, planned from the parsed
//! statement. DataFusion 54 parses `CREATE INDEX` but drops its `USING` and
//! `WITH` and then cannot plan it; it plans no `DROP INDEX` at all.
//!
//! ```sql
//! CREATE INDEX [[IF NOT EXISTS] <name>] ON <table> [USING <type>] (<column>) [WITH (<key> = <value>, ...)]
//! CREATE INDEX <name> ON <table> (<column>) USING <type>
//! DROP INDEX [IF EXISTS] <name> ON <table>
//! ```
//!
//! The type defaults to `BTREE` and the name to `<column>_idx`. Both plan
//! the same [`crate::physical_plan::LanceIndexExec`] as the table functions
//! `lance_create_index` and `lance_drop_index`; on a `db://` table, one
//! [`crate::physical_plan::CloudDdlExec`] (a request to the service).
//! Statements on tables that are neither are left to DataFusion.

use datafusion::common::{Result as DFResult, TableReference};
use datafusion::datasource::provider_as_source;
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::{LogicalPlan, LogicalPlanBuilder};
use datafusion::sql::planner::{IdentNormalizer, object_name_to_table_reference};
use datafusion::sql::sqlparser::ast::{
    CreateIndex, Expr as SqlExpr, IndexOption, IndexType, ObjectName, ObjectType, Statement, Value,
};

use datafusion::arrow::datatypes::Schema;

use crate::error::{Error, fail};
use crate::physical_plan::{IndexChange, IndexDefinition, IndexMethod};
use crate::session::LanceSessionCache;
use crate::table::cloud_ddl::{CloudDdlStatement, index_ddl};
use crate::table::lookup::{Target, registered_target};
use crate::table::maintain::Maintain;
use crate::table::statement::{NamedTable, StatementTable};

/// Plans `statement` when it is `CREATE INDEX` or `DROP INDEX` on a Lance
/// table; `None` otherwise.
pub(crate) async fn plan_index_statement(
    state: &SessionState,
    statement: &Statement,
) -> DFResult<Option<LogicalPlan>> {
    let normalize = state.config_options().sql_parser.enable_ident_normalization;
    let idents = IdentNormalizer::new(normalize);
    let table = match statement {
        Statement::CreateIndex(create) => &create.table_name,
        Statement::Drop {
            object_type: ObjectType::Index,
            table: Some(table),
            ..
        } => table,
        Statement::Drop {
            object_type: ObjectType::Index,
            ..
        } => {
            return fail!(
                invalid_input,
                "DROP INDEX: name the table too: DROP INDEX <name> ON <table>"
            );
        }
        _ => return Ok(None),
    };
    let reference = object_name_to_table_reference(table.clone(), normalize)?;
    let Some(target) = registered_target(state, &reference).await? else {
        return Ok(None);
    };
    let change = match statement {
        Statement::CreateIndex(create) => {
            create_change(create, &reference, &target.schema(), &idents)?
        }
        Statement::Drop {
            if_exists,
            names,
            cascade,
            restrict,
            purge,
            temporary,
            ..
        } => {
            let [name] = names.as_slice() else {
                return fail!(
                    not_supported,
                    "DROP INDEX on '{reference}': drop one index at a time"
                );
            };
            if *cascade || *restrict || *purge || *temporary {
                return fail!(
                    not_supported,
                    "DROP INDEX {name} on '{reference}': Lance indices take no CASCADE, \
                     RESTRICT, PURGE or TEMPORARY"
                );
            }
            IndexChange::Drop {
                name: index_name(name, &idents)?,
                if_exists: *if_exists,
            }
        }
        _ => return Ok(None),
    };
    let verb = match change {
        IndexChange::Create(_) => "create_index",
        IndexChange::Drop { .. } => "drop_index",
    };
    let lance = match target {
        Target::Lance(lance) => lance,
        Target::Cloud(cloud) => {
            let ddl = index_ddl(change, &reference.to_string())?;
            return Ok(Some(
                LogicalPlanBuilder::scan(
                    format!("{verb}({reference})"),
                    provider_as_source(StatementTable::provider(CloudDdlStatement::new(
                        reference.to_quoted_string(),
                        cloud,
                        ddl,
                    ))),
                    None,
                )?
                .build()?,
            ));
        }
    };
    // The node opens the table by location: with this table's store parameters.
    LanceSessionCache::for_config(state.config())
        .register_params(lance.location(), lance.store_params());
    let statement = Maintain {
        target: reference.to_string(),
        location: None,
        work: change,
    }
    .with_location(lance.location().clone());
    Ok(Some(
        LogicalPlanBuilder::scan(
            format!("{verb}({reference})"),
            provider_as_source(StatementTable::provider(statement)),
            None,
        )?
        .build()?,
    ))
}

/// The index a `CREATE INDEX` on a table of `schema` builds. Errors name
/// the clause Lance has no use for.
fn create_change(
    create: &CreateIndex,
    reference: &TableReference,
    schema: &Schema,
    idents: &IdentNormalizer,
) -> DFResult<IndexChange> {
    let unsupported = [
        (create.unique, "UNIQUE"),
        (create.concurrently, "CONCURRENTLY"),
        (!create.include.is_empty(), "INCLUDE"),
        (create.nulls_distinct.is_some(), "NULLS [NOT] DISTINCT"),
        (create.predicate.is_some(), "WHERE"),
        (!create.alter_options.is_empty(), "ALGORITHM / LOCK"),
        (
            create.columns.iter().any(|c| c.operator_class.is_some()),
            "operator class (use WITH (metric = 'l2' | 'cosine' | 'dot'))",
        ),
        (
            create
                .columns
                .iter()
                .any(|c| c.column.options.asc.is_some() || c.column.options.nulls_first.is_some()),
            "ASC / DESC / NULLS",
        ),
    ];
    if let Some((_, clause)) = unsupported.iter().find(|(present, _)| *present) {
        return fail!(
            not_supported,
            "CREATE INDEX on '{reference}': Lance indices have no {clause} clause"
        );
    }
    let [column] = create.columns.as_slice() else {
        return fail!(
            not_supported,
            "CREATE INDEX on '{reference}': Lance indexes one column; got {}",
            create.columns.len()
        );
    };
    let column = match &column.column.expr {
        SqlExpr::Identifier(ident) => idents.normalize(ident.clone()),
        other => {
            return fail!(
                invalid_input,
                "CREATE INDEX on '{reference}': index a column by name, not '{other}'"
            );
        }
    };
    if schema.field_with_name(&column).is_err() {
        return fail!(
            not_found,
            "CREATE INDEX on '{reference}': no column '{column}'"
        );
    }
    let mut using = create.using.clone();
    for option in &create.index_options {
        match option {
            IndexOption::Using(kind) => using = Some(kind.clone()),
            other => {
                return fail!(
                    not_supported,
                    "CREATE INDEX on '{reference}': '{other}' is not supported"
                );
            }
        }
    }
    let in_statement = |e: Error| e.prefixed(&format!("CREATE INDEX on '{reference}'"));
    let method = match using {
        None => IndexMethod::BTree,
        Some(kind) => IndexMethod::parse(&index_type_name(&kind)).map_err(in_statement)?,
    };
    let mut options = Vec::new();
    for expr in &create.with {
        options.push(with_option(expr).ok_or_else(|| {
            Error::invalid_input(format!(
                "CREATE INDEX on '{reference}': WITH takes <key> = <value> pairs; got '{expr}'"
            ))
        })?);
    }
    let name = match &create.name {
        Some(name) => index_name(name, idents)?,
        None => format!("{column}_idx"),
    };
    Ok(IndexChange::Create(
        IndexDefinition::new(name, column, method, options, create.if_not_exists)
            .map_err(in_statement)?,
    ))
}

/// The SQL spelling of a `USING` type.
fn index_type_name(kind: &IndexType) -> String {
    match kind {
        IndexType::Custom(ident) => ident.value.clone(),
        other => other.to_string(),
    }
}

/// An index name: one identifier.
fn index_name(name: &ObjectName, idents: &IdentNormalizer) -> DFResult<String> {
    match name.0.as_slice() {
        [part] => match part.as_ident() {
            Some(ident) => Ok(idents.normalize(ident.clone())),
            None => fail!(not_found, "'{name}' is not an index name"),
        },
        _ => fail!(
            invalid_input,
            "index names are not qualified: '{name}'; name the table with ON <table>"
        ),
    }
}

/// `key = value` of a `WITH` list, the value a literal or a word.
fn with_option(expr: &SqlExpr) -> Option<(String, String)> {
    let SqlExpr::BinaryOp { left, op, right } = expr else {
        return None;
    };
    if *op != datafusion::sql::sqlparser::ast::BinaryOperator::Eq {
        return None;
    }
    let SqlExpr::Identifier(key) = left.as_ref() else {
        return None;
    };
    let value = match right.as_ref() {
        SqlExpr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => s.clone(),
            Value::Number(n, _) => n.clone(),
            Value::Boolean(b) => b.to_string(),
            _ => return None,
        },
        SqlExpr::Identifier(word) => word.value.clone(),
        _ => return None,
    };
    Some((key.value.clone(), value))
}
