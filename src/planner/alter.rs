//! `ALTER TABLE` on Lance tables, planned from the parsed statement
//! (DataFusion 54 plans no `ALTER TABLE`):
//!
//! ```sql
//! ALTER TABLE t ADD [COLUMN] [IF NOT EXISTS] c <type> [NOT NULL] [DEFAULT <constant>]
//! ALTER TABLE t ADD [COLUMN] c <type> [NOT NULL] AS (<expression over t's columns>)
//! ALTER TABLE t DROP [COLUMN] [IF EXISTS] c
//! ALTER TABLE t RENAME COLUMN a TO b
//! ALTER TABLE t ALTER [COLUMN] c [SET DATA] TYPE <type>
//! ALTER TABLE t ALTER [COLUMN] c DROP NOT NULL
//! ALTER TABLE t ALTER [COLUMN] c SET DEFAULT <constant> | DROP DEFAULT
//! ```
//!
//! Types, constants and expressions are planned by DataFusion from the
//! syntax tree. One change per statement, one version each (see
//! [`crate::physical_plan::LanceAlterExec`]). Statements on tables that are
//! not Lance tables are left to DataFusion.

use std::sync::Arc;

use datafusion::arrow::array::{RecordBatch, RecordBatchOptions};
use datafusion::arrow::compute::can_cast_types;
use datafusion::arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::common::tree_node::TreeNode;
use datafusion::common::{DFSchema, Result as DFResult, ScalarValue, TableReference};
use datafusion::dataframe::DataFrame;
use datafusion::datasource::{TableProvider, provider_as_source, source_as_provider};
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan, LogicalPlanBuilder};
use datafusion::optimizer::simplify_expressions::ExprSimplifier;
use datafusion::physical_expr::create_physical_expr;
use datafusion::prelude::SessionContext;
use datafusion::sql::planner::{IdentNormalizer, object_name_to_table_reference};
use datafusion::sql::sqlparser::ast::{
    AlterColumnOperation, AlterTable, AlterTableOperation, CastKind, ColumnDef, ColumnOption,
    DataType as SqlType, Expr as SqlExpr, ExprWithAlias, GeneratedExpressionMode, Statement, Value,
};

use crate::error::{Error, fail};
use crate::physical_plan::alter::default_text;
use crate::physical_plan::{NewValues, SchemaChange};
use crate::session::LanceSessionCache;
use crate::table::LanceTableProvider;
use crate::table::cloud::CloudTableProvider;
use crate::table::cloud_ddl::{CloudDdlStatement, alter_ddl};
use crate::table::create::storable_type;
use crate::table::lookup::{Target, registered_target};
use crate::table::maintain::Maintain;
use crate::table::statement::{NamedTable, StatementTable, statement_of};

/// Plans `statement` when it is `ALTER TABLE` on a Lance table; `None`
/// otherwise.
pub(crate) async fn plan_alter_table(
    state: &SessionState,
    statement: &Statement,
) -> DFResult<Option<LogicalPlan>> {
    let Statement::AlterTable(alter) = statement else {
        return Ok(None);
    };
    let normalize = state.config_options().sql_parser.enable_ident_normalization;
    let reference = object_name_to_table_reference(alter.name.clone(), normalize)?;
    let lance = match registered_target(state, &reference).await? {
        None => return Ok(None),
        Some(Target::Lance(lance)) => lance,
        Some(Target::Cloud(cloud)) => {
            if let [AlterTableOperation::RenameTable { .. }] = alter.operations.as_slice() {
                return fail!(
                    not_supported,
                    "ALTER TABLE '{reference}' RENAME: renaming a LanceDB table (db://) is not \
                     supported; use CREATE TABLE ... AS SELECT * FROM {reference} and DROP TABLE \
                     {reference}"
                );
            }
            let planner = Planner {
                state,
                reference: &reference,
                schema: cloud.schema(),
                idents: IdentNormalizer::new(normalize),
            };
            let ddl = alter_ddl(planner.change(alter)?, &reference.to_string())?;
            return Ok(Some(
                LogicalPlanBuilder::scan(
                    format!("alter_table({reference})"),
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
    if !lance.version_spec().is_latest() {
        return fail!(
            read_only,
            "ALTER TABLE '{reference}': the table is pinned to {} and is read-only; register \
             the table without 'lance.version'/'lance.tag' to change it",
            lance.version_spec()
        );
    }
    // The node opens the table by location: with this table's store parameters.
    LanceSessionCache::for_config(state.config())
        .register_params(lance.location(), lance.store_params());
    let planner = Planner {
        state,
        reference: &reference,
        schema: lance.schema(),
        idents: IdentNormalizer::new(normalize),
    };
    let change = planner.change(alter)?;
    let statement = Maintain {
        // Quoted: `execute_lance_plan` finds the table again by it.
        target: reference.to_quoted_string(),
        location: None,
        work: change,
    }
    .with_location(lance.location().clone());
    Ok(Some(
        LogicalPlanBuilder::scan(
            format!("alter_table({reference})"),
            provider_as_source(StatementTable::provider(statement)),
            None,
        )?
        .build()?,
    ))
}

struct Planner<'a> {
    state: &'a SessionState,
    reference: &'a TableReference,
    schema: SchemaRef,
    idents: IdentNormalizer,
}

impl Planner<'_> {
    fn change(&self, alter: &AlterTable) -> DFResult<SchemaChange> {
        let t = self.reference;
        if alter.only || alter.location.is_some() || alter.on_cluster.is_some() {
            return fail!(
                not_supported,
                "ALTER TABLE '{t}': Lance tables take no ONLY, SET LOCATION or ON CLUSTER"
            );
        }
        if alter.table_type.is_some() {
            return fail!(
                invalid_input,
                "ALTER TABLE '{t}' is a Lance table: use ALTER TABLE"
            );
        }
        let [operation] = alter.operations.as_slice() else {
            return fail!(
                not_supported,
                "ALTER TABLE '{t}': one change per statement (each commits one version); got {}",
                alter.operations.len()
            );
        };
        let schema = &self.schema;
        let has = |c: &str| schema.field_with_name(c).is_ok();
        let change = match operation {
            AlterTableOperation::AddColumn {
                if_not_exists,
                column_def,
                column_position,
                ..
            } => {
                if column_position.is_some() {
                    return fail!(
                        not_supported,
                        "ALTER TABLE '{t}': Lance adds columns last (no FIRST / AFTER)"
                    );
                }
                self.add_column(column_def, *if_not_exists)?
            }
            AlterTableOperation::DropColumn {
                column_names,
                if_exists,
                drop_behavior,
                ..
            } => {
                let [column] = column_names.as_slice() else {
                    return fail!(
                        not_supported,
                        "ALTER TABLE '{t}': drop one column per statement"
                    );
                };
                if drop_behavior.is_some() {
                    return fail!(
                        not_supported,
                        "ALTER TABLE '{t}': Lance columns take no CASCADE or RESTRICT"
                    );
                }
                SchemaChange::DropColumn {
                    column: self.idents.normalize(column.clone()),
                    if_exists: *if_exists,
                }
            }
            AlterTableOperation::RenameColumn {
                old_column_name,
                new_column_name,
            } => SchemaChange::RenameColumn {
                from: self.idents.normalize(old_column_name.clone()),
                to: self.idents.normalize(new_column_name.clone()),
            },
            AlterTableOperation::AlterColumn { column_name, op } => {
                let column = self.idents.normalize(column_name.clone());
                match op {
                    AlterColumnOperation::DropNotNull => SchemaChange::DropNotNull { column },
                    AlterColumnOperation::SetNotNull => {
                        return fail!(
                            not_supported,
                            "ALTER TABLE '{t}' column '{column}': Lance cannot make a column NOT NULL"
                        );
                    }
                    AlterColumnOperation::SetDefault { value } => {
                        let data_type = match schema.field_with_name(&column) {
                            Ok(field) => field.data_type().clone(),
                            Err(_) => {
                                return fail!(not_found, "ALTER TABLE '{t}': no column '{column}'");
                            }
                        };
                        // SET DEFAULT NULL: what DROP DEFAULT gives.
                        let value = self.constant(&column, value, &data_type)?;
                        SchemaChange::SetDefault {
                            default: (!value.is_null()).then_some(value),
                            column,
                        }
                    }
                    AlterColumnOperation::DropDefault => SchemaChange::SetDefault {
                        column,
                        default: None,
                    },
                    AlterColumnOperation::SetDataType {
                        data_type, using, ..
                    } => {
                        if using.is_some() {
                            return fail!(
                                not_supported,
                                "ALTER TABLE '{t}' column '{column}': Lance converts types itself \
                                 (no USING)"
                            );
                        }
                        SchemaChange::SetType {
                            data_type: self.data_type(data_type)?,
                            column,
                        }
                    }
                    AlterColumnOperation::AddGenerated { .. } => {
                        return fail!(
                            not_supported,
                            "ALTER TABLE '{t}' column '{column}': Lance has no identity columns"
                        );
                    }
                }
            }
            AlterTableOperation::RenameTable { .. } => {
                return match crate::catalog::lance_catalog_of(self.state, t) {
                    Some(lake) => fail!(
                        not_supported,
                        "ALTER TABLE '{t}' RENAME: the Lance catalog '{}' is a directory \
                         namespace, which cannot rename tables (lance-namespace 14.0.2); use \
                         CREATE TABLE ... AS SELECT * FROM {t} and DROP TABLE {t}",
                        lake.name
                    ),
                    None => fail!(
                        not_supported,
                        "ALTER TABLE '{t}' RENAME: a registered Lance table is renamed by \
                         registering its location again under the new name (CREATE EXTERNAL \
                         TABLE) and dropping the old registration; the data stays where it is"
                    ),
                };
            }
            other => {
                return fail!(
                    not_supported,
                    "ALTER TABLE '{t}': '{other}' is not supported on Lance tables; use ADD \
                     COLUMN, DROP COLUMN, RENAME COLUMN or ALTER COLUMN (TYPE, DROP NOT NULL, \
                     SET DEFAULT, DROP DEFAULT)"
                );
            }
        };
        // Errors name the column now; the node checks again on the version
        // it changes.
        match &change {
            SchemaChange::AddColumn {
                column,
                if_not_exists: false,
                ..
            } if has(column) => fail!(
                already_exists,
                "ALTER TABLE '{t}': column '{column}' exists"
            ),
            SchemaChange::AddColumn { .. }
            | SchemaChange::DropColumn {
                if_exists: true, ..
            } => Ok(change),
            SchemaChange::RenameColumn { from, to } if has(from) && has(to) => {
                fail!(already_exists, "ALTER TABLE '{t}': column '{to}' exists")
            }
            other if !has(other.column()) => {
                fail!(
                    not_found,
                    "ALTER TABLE '{t}': no column '{}'",
                    other.column()
                )
            }
            _ => Ok(change),
        }
    }

    fn add_column(&self, def: &ColumnDef, if_not_exists: bool) -> DFResult<SchemaChange> {
        let t = self.reference;
        let column = self.idents.normalize(def.name.clone());
        let data_type = self.data_type(&def.data_type)?;
        let mut nullable = true;
        let mut values = NewValues::Null;
        for option in &def.options {
            let next = match &option.option {
                ColumnOption::Null => {
                    nullable = true;
                    continue;
                }
                ColumnOption::NotNull => {
                    nullable = false;
                    continue;
                }
                ColumnOption::Default(value) => {
                    match self.constant(&column, value, &data_type)? {
                        // DEFAULT NULL: what a column without a default gets.
                        v if v.is_null() => NewValues::Null,
                        v => NewValues::Default(v),
                    }
                }
                // `AS (<expr>) [STORED]`: values computed once for the
                // existing rows. `GENERATED ALWAYS` and `VIRTUAL` promise
                // values maintained on every write, which Lance does not keep.
                ColumnOption::Generated {
                    generation_expr: Some(expr),
                    sequence_options: None,
                    generated_keyword: false,
                    generation_expr_mode: None | Some(GeneratedExpressionMode::Stored),
                    ..
                } => NewValues::Computed(self.computed(&column, expr, &data_type)?),
                other => {
                    return fail!(
                        not_supported,
                        "ALTER TABLE '{t}' column '{column}': '{other}' is not supported; a new \
                         column takes NULL / NOT NULL, DEFAULT <constant> or AS (<expression>)"
                    );
                }
            };
            if values != NewValues::Null {
                return fail!(
                    invalid_input,
                    "ALTER TABLE '{t}' column '{column}': give DEFAULT or AS (<expression>), \
                     not both"
                );
            }
            values = next;
        }
        if !nullable && values == NewValues::Null {
            return fail!(
                invalid_input,
                "ALTER TABLE '{t}' column '{column}': a NOT NULL column needs a DEFAULT or AS \
                 (<expression>) for the existing rows"
            );
        }
        Ok(SchemaChange::AddColumn {
            column,
            data_type,
            nullable,
            values,
            if_not_exists,
        })
    }

    /// The Arrow type DataFusion gives a SQL type.
    fn data_type(&self, sql: &SqlType) -> DFResult<DataType> {
        let cast = SqlExpr::Cast {
            kind: CastKind::Cast,
            expr: Box::new(SqlExpr::Value(Value::Null.into())),
            data_type: sql.clone(),
            array: false,
            format: None,
        };
        let schema = DFSchema::empty();
        let expr = self.plan_expr(&cast, &schema)?;
        // Lance stores no view types (VARCHAR plans as Utf8View).
        Ok(storable_type(&expr.get_type(&schema)?))
    }

    /// `sql` planned by DataFusion against `schema`.
    fn plan_expr(&self, sql: &SqlExpr, schema: &DFSchema) -> DFResult<Expr> {
        self.state.create_logical_expr_from_sql_expr(
            ExprWithAlias {
                expr: sql.clone(),
                alias: None,
            },
            schema,
        )
    }

    /// A constant (`DEFAULT`), evaluated now and cast to `data_type`.
    fn constant(&self, column: &str, sql: &SqlExpr, data_type: &DataType) -> DFResult<ScalarValue> {
        let t = self.reference;
        let schema = DFSchema::empty();
        let expr = self.plan_expr(sql, &schema).map_err(|e| {
            Error::invalid_input(format!(
                "ALTER TABLE '{t}' column '{column}': DEFAULT {sql} must be a constant \
                 (compute values from other columns with AS (<expression>)): {e}"
            ))
        })?;
        if !expr.column_refs().is_empty() {
            return fail!(
                invalid_input,
                "ALTER TABLE '{t}' column '{column}': DEFAULT takes a constant; compute values \
                 from other columns with AS (<expression>)"
            );
        }
        let expr = self.simplify(expr, &schema)?;
        let physical = create_physical_expr(&expr, &schema, self.state.execution_props())?;
        let one_row = RecordBatch::try_new_with_options(
            Arc::new(Schema::empty()),
            vec![],
            &RecordBatchOptions::new().with_row_count(Some(1)),
        )?;
        let value = physical.evaluate(&one_row)?.into_array(1)?;
        let value = ScalarValue::try_from_array(&value, 0)?;
        let value = value.cast_to(data_type).map_err(|e| {
            Error::schema_mismatch(format!(
                "ALTER TABLE '{t}' column '{column}': DEFAULT {value} is not a {data_type}: {e}"
            ))
        })?;
        if !value.is_null() && default_text(&value).is_none() {
            return fail!(
                schema_mismatch,
                "ALTER TABLE '{t}' column '{column}': a DEFAULT of type {data_type} cannot be stored"
            );
        }
        Ok(value)
    }

    /// An expression over the table's columns (`AS (...)`), planned by
    /// DataFusion; its values must cast to `data_type`.
    fn computed(&self, column: &str, sql: &SqlExpr, data_type: &DataType) -> DFResult<Expr> {
        let t = self.reference;
        let schema = DFSchema::try_from(self.schema.as_ref().clone())?;
        let expr = self.plan_expr(sql, &schema).map_err(|e| {
            Error::invalid_input(format!(
                "ALTER TABLE '{t}' column '{column}': AS ({sql}): {e}"
            ))
        })?;
        let expr = coerce(expr, &schema)?;
        let per_row = !expr.exists(|e| {
            Ok(matches!(
                e,
                Expr::AggregateFunction(_)
                    | Expr::WindowFunction(_)
                    | Expr::ScalarSubquery(_)
                    | Expr::Exists(_)
                    | Expr::InSubquery(_)
            ))
        })?;
        if !per_row {
            return fail!(
                invalid_input,
                "ALTER TABLE '{t}' column '{column}': AS ({sql}) must compute each row from that \
                 row's columns (no aggregates, window functions or subqueries)"
            );
        }
        // Planned now against the table's columns, so an expression that
        // cannot run per row (an aggregate, a subquery) fails before any
        // row is read, also on an empty table.
        create_physical_expr(&expr, &schema, self.state.execution_props()).map_err(|e| {
            Error::invalid_input(format!(
                "ALTER TABLE '{t}' column '{column}': AS ({sql}) cannot be computed row by row: {e}"
            ))
        })?;
        let from = expr.get_type(&schema)?;
        if !can_cast_types(&from, data_type) {
            return fail!(
                invalid_input,
                "ALTER TABLE '{t}' column '{column}': AS ({sql}) gives {from}, which does not \
                 cast to {data_type}"
            );
        }
        Ok(expr)
    }
}

/// Runs the `ALTER TABLE` `plan` changing `target` now, then registers the
/// table again with its new schema (see [`super::execute_lance_plan`]).
pub(crate) async fn run_alter(
    ctx: &SessionContext,
    plan: LogicalPlan,
    target: &str,
) -> DFResult<DataFrame> {
    let batches = ctx.execute_logical_plan(plan).await?.collect().await?;
    let reference = TableReference::parse_str(target);
    let provider = ctx.table_provider(reference.clone()).await?;
    // A Lance catalog opens its tables afresh whenever they are named.
    let in_catalog = crate::catalog::lance_catalog_of(&ctx.state(), &reference).is_some();
    if let Some(table) = provider.downcast_ref::<LanceTableProvider>()
        && !in_catalog
    {
        let fresh = table
            .at_version(table.version_spec().clone(), &ctx.state())
            .await?;
        ctx.deregister_table(reference.clone())?;
        ctx.register_table(reference, Arc::new(fresh))?;
    } else if let Some(table) = provider.downcast_ref::<CloudTableProvider>()
        && !in_catalog
    {
        let fresh = table.refreshed().await?;
        ctx.deregister_table(reference.clone())?;
        ctx.register_table(reference, Arc::new(fresh))?;
    }
    ctx.read_batches(batches)
}

/// The table an `ALTER TABLE` plan changes (not under `EXPLAIN`).
pub(crate) fn altered_table(plan: &LogicalPlan) -> Option<String> {
    let LogicalPlan::TableScan(scan) = plan else {
        return None;
    };
    let provider = source_as_provider(&scan.source).ok()?;
    if let Some(cloud) = statement_of::<CloudDdlStatement>(provider.as_ref()) {
        let column = cloud.ddl().subject_kind() == crate::cloud::ddl::Subject::Column;
        return column.then(|| cloud.reference().to_string());
    }
    statement_of::<Maintain<SchemaChange>>(provider.as_ref()).map(|s| s.target.clone())
}

impl Planner<'_> {
    /// A constant expression coerced and simplified as a query's would be
    /// (`now()` becomes the statement's time).
    fn simplify(&self, expr: Expr, schema: &DFSchema) -> DFResult<Expr> {
        let context = SimplifyContext::builder()
            .with_schema(Arc::new(schema.clone()))
            .with_config_options(Arc::clone(self.state.config().options()))
            .with_current_time()
            .build();
        let simplifier = ExprSimplifier::new(context);
        simplifier.simplify(simplifier.coerce(expr, schema)?)
    }
}

/// `expr` with the casts DataFusion's type coercion adds (its physical
/// expressions expect them).
fn coerce(expr: Expr, schema: &DFSchema) -> DFResult<Expr> {
    ExprSimplifier::new(SimplifyContext::builder().build()).coerce(expr, schema)
}
