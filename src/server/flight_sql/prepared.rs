//! Flight SQL prepared statements: kept as their text and planned again at
//! each execution with the bound values as literals — as the crate's own
//! `PREPARE` does for statements whose plan depends on their parameters —
//! so every statement the front door plans (a search's query vector, a
//! version clause, `MERGE INTO`) can be prepared.

use std::sync::{Arc, Mutex};

use arrow_flight::IpcMessage;
use arrow_flight::SchemaAsIpc;
use arrow_flight::sql::ActionCreatePreparedStatementResult;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::ipc::writer::IpcWriteOptions;
use datafusion::common::ScalarValue;
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::dialect::{Dialect, dialect_from_str};
use tonic::Status;

use crate::planner::prepared::{number_question_marks, substitute};
use crate::server::statement::{plan, status};

/// A prepared statement of one session.
pub(super) struct Prepared {
    pub(super) ctx: SessionContext,
    /// The statement, its `?` numbered `$1`, `$2`, ….
    text: String,
    /// Its placeholders in order: a bound batch's columns, by position.
    placeholders: Vec<String>,
    /// Its result's schema, when it plans without values.
    dataset_schema: Option<SchemaRef>,
    parameter_schema: SchemaRef,
    /// The values a `DoPut` bound last.
    parameters: Mutex<Option<RecordBatch>>,
}

impl Prepared {
    /// Prepares `sql`: a statement without placeholders must plan now; one
    /// with them is planned now where it can be (to tell the client its
    /// result's and parameters' types), else at its first execution.
    pub(super) async fn new(ctx: SessionContext, sql: &str) -> Result<Self, Status> {
        let (text, placeholders) = {
            let dialect = dialect_of(&ctx)?;
            number_question_marks(sql, dialect.as_ref()).map_err(status)?
        };
        let planned = plan(&ctx, &text).await;
        let (dataset_schema, types) = match planned {
            Ok(plan) => {
                let types = plan.get_parameter_types().map_err(status)?;
                (Some(Arc::clone(plan.schema().inner())), types)
            }
            Err(e) if placeholders.is_empty() => return Err(e),
            Err(_) => (None, Default::default()),
        };
        let fields: Vec<Field> = placeholders
            .iter()
            .map(|p| {
                let kind = types.get(p).cloned().flatten().unwrap_or(DataType::Null);
                Field::new(p, kind, true)
            })
            .collect();
        Ok(Self {
            ctx,
            text,
            placeholders,
            dataset_schema,
            parameter_schema: Arc::new(Schema::new(fields)),
            parameters: Mutex::new(None),
        })
    }

    /// What `CreatePreparedStatement` answers.
    pub(super) fn created(
        &self,
        handle: String,
    ) -> Result<ActionCreatePreparedStatementResult, Status> {
        let dataset_schema = match &self.dataset_schema {
            Some(schema) => ipc(schema)?,
            None => Default::default(),
        };
        Ok(ActionCreatePreparedStatementResult {
            prepared_statement_handle: handle.into(),
            dataset_schema,
            parameter_schema: ipc(&self.parameter_schema)?,
        })
    }

    /// Binds the values of `batch` (columns by position; a query uses its
    /// first row, an update runs once per row).
    pub(super) fn bind(&self, batch: RecordBatch) -> Result<(), Status> {
        self.check(&batch)?;
        *self.parameters.lock().unwrap_or_else(|p| p.into_inner()) = Some(batch);
        Ok(())
    }

    /// The statements to run: the text once per row of `batch` (or of the
    /// bound values), each placeholder replaced by its value.
    pub(super) fn texts(&self, batch: Option<RecordBatch>) -> Result<Vec<String>, Status> {
        if self.placeholders.is_empty() {
            return Ok(vec![self.text.clone()]);
        }
        let batch = match batch {
            Some(batch) => {
                self.check(&batch)?;
                batch
            }
            None => self
                .parameters
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
                .ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "the prepared statement has {} parameter(s) and none were bound",
                        self.placeholders.len()
                    ))
                })?,
        };
        let dialect = dialect_of(&self.ctx)?;
        (0..batch.num_rows())
            .map(|row| {
                let values = self
                    .placeholders
                    .iter()
                    .zip(batch.columns())
                    .map(|(name, column)| {
                        ScalarValue::try_from_array(column, row)
                            .map(|value| (name.clone(), value))
                            .map_err(status)
                    })
                    .collect::<Result<Vec<_>, Status>>()?;
                substitute(&self.text, &values, dialect.as_ref()).map_err(status)
            })
            .collect()
    }

    fn check(&self, batch: &RecordBatch) -> Result<(), Status> {
        if batch.num_columns() != self.placeholders.len() {
            return Err(Status::invalid_argument(format!(
                "the prepared statement has {} parameter(s); {} were bound",
                self.placeholders.len(),
                batch.num_columns()
            )));
        }
        Ok(())
    }
}

fn dialect_of(ctx: &SessionContext) -> Result<Box<dyn Dialect>, Status> {
    let name = ctx.state().config_options().sql_parser.dialect;
    dialect_from_str(name)
        .ok_or_else(|| Status::invalid_argument(format!("unknown SQL dialect '{name}'")))
}

/// `schema` as the IPC message Flight SQL carries schemas in.
pub(super) fn ipc(schema: &Schema) -> Result<bytes::Bytes, Status> {
    let message: Result<IpcMessage, _> =
        SchemaAsIpc::new(schema, &IpcWriteOptions::default()).try_into();
    message
        .map(|IpcMessage(bytes)| bytes)
        .map_err(|e| Status::internal(format!("cannot encode a schema: {e}")))
}
