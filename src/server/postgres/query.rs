//! Statements from Postgres clients: simple queries (several statements in
//! one message) and the extended protocol (parse, bind, execute), each
//! statement through the crate's front door; what it cannot plan (the
//! `pg_catalog` queries of `psql`'s `\dt` and `\d`, `::regclass` casts,
//! `OPERATOR(pg_catalog.~)`) through datafusion-pg-catalog's rewrites.

use std::fmt::Debug;
use std::sync::Arc;

use arrow_pg::datatypes::df::deserialize_parameters;
use arrow_pg::datatypes::{arrow_schema_to_pg_fields, encode_recordbatch, into_pg_type};
use async_trait::async_trait;
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::common::ParamValues;
use datafusion::logical_expr::{DdlStatement, LogicalPlan, WriteOp};
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion_pg_catalog::pg_catalog::context::EmptyContextProvider;
use datafusion_pg_catalog::sql::PostgresCompatibilityParser;
use futures::{Sink, SinkExt, StreamExt, stream};
use pgwire::api::portal::{Format, Portal, PortalExecutionState};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::query::{send_execution_response, send_query_response, send_ready_for_query};
use pgwire::api::results::{DescribePortalResponse, FieldInfo, QueryResponse, Response, Tag};
use pgwire::api::stmt::QueryParser;
use pgwire::api::store::PortalStore;
use pgwire::api::{ClientInfo, ClientPortalStore, ConnectionHandle, Type};
use pgwire::api::{DEFAULT_NAME, PgWireConnectionState};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::data::DataRow;
use pgwire::messages::extendedquery::Execute;
use pgwire::messages::response::EmptyQueryResponse;
use pgwire::messages::simplequery::Query;
use pgwire::types::format::FormatOptions;
use tokio::sync::OnceCell;
use tonic::{Code, Status};

use crate::planner::prepared::{number_question_marks, substitute};
use crate::server::sessions::SessionFactory;
use crate::server::statement::{self, CancelSignal, Limits, Started, count_of};

/// A client connection: its session (made at its first statement) and the
/// server's limits.
pub(super) struct Connection {
    factory: SessionFactory,
    ctx: Arc<OnceCell<SessionContext>>,
    limits: Limits,
    parser: Arc<Parser>,
}

impl Connection {
    pub(super) fn new(factory: SessionFactory, limits: Limits) -> Self {
        Self {
            factory,
            ctx: Arc::new(OnceCell::new()),
            limits,
            parser: Arc::new(Parser::default()),
        }
    }

    async fn ctx(&self) -> PgWireResult<&SessionContext> {
        self.ctx
            .get_or_try_init(|| async {
                let ctx = (self.factory)().await?;
                datafusion_pg_catalog::setup_pg_catalog(&ctx, "datafusion", EmptyContextProvider)
                    .map_err(|e| *e)?;
                Ok(ctx)
            })
            .await
            .map_err(|e: datafusion::error::DataFusionError| {
                error("XX000", format!("cannot start a session: {e}"))
            })
    }

    /// Runs one statement and answers it; a cancel request from the
    /// client (`cancel`) stops it.
    async fn run(
        &self,
        sql: &str,
        format: &Format,
        options: Arc<FormatOptions>,
        mut cancel: CancelSignal,
    ) -> PgWireResult<Response> {
        if let Some(response) = transaction(sql) {
            return Ok(response);
        }
        let ctx = self.ctx().await?;
        let plan = self.parser.plan(ctx, sql).await?;
        let command = command(&plan, sql);
        let started = statement::start(ctx, plan, &self.limits, &mut cancel)
            .await
            .map_err(pg_error)?;
        if let Started::Done(schema, batches) = &started
            && !has_rows(schema)
        {
            let tag = Tag::new(&command);
            let tag = match count_of(batches) {
                Some(rows) => tag.with_rows(usize::try_from(rows).unwrap_or(0)),
                None => tag,
            };
            let tag = if command == "INSERT" {
                tag.with_oid(0)
            } else {
                tag
            };
            return Ok(Response::Execution(tag));
        }
        let schema = started.schema();
        let fields = Arc::new(arrow_schema_to_pg_fields(&schema, format, Some(options))?);
        let rows = started.rows(&self.limits, cancel).await.map_err(pg_error)?;
        let encoded = Arc::clone(&fields);
        let rows = rows
            .map(move |batch| {
                let rows: Box<dyn Iterator<Item = PgWireResult<DataRow>> + Send + Sync> =
                    match batch {
                        Ok(batch) => encode_recordbatch(Arc::clone(&encoded), batch),
                        Err(e) => Box::new(std::iter::once(Err(pg_error(statement::status(e))))),
                    };
                stream::iter(rows)
            })
            .flatten();
        Ok(Response::Query(QueryResponse::new(fields, rows)))
    }
}

/// What fires when the client's cancel request (`pg_cancel_backend` from
/// another connection, psycopg's `cancel()`, Ctrl-C in `psql`) names this
/// connection: set up afresh for each statement, so a request cancels the
/// statement that runs when it arrives.
async fn cancel_signal<C: ClientInfo>(client: &C) -> CancelSignal {
    match client.session_extensions().get::<Arc<ConnectionHandle>>() {
        Some(handle) => CancelSignal::on(handle.start_query().await),
        None => CancelSignal::never(),
    }
}

impl Connection {
    /// Runs a bound portal; `cancel` stops it.
    async fn portal<C: ClientInfo>(
        &self,
        client: &C,
        portal: &Portal<Prepared>,
        cancel: CancelSignal,
    ) -> PgWireResult<Response> {
        let options = Arc::new(FormatOptions::from_client_metadata(client.metadata()));
        let text = bound_text(portal)?;
        // Boxed, here and below: a statement's future is too deep for the
        // handlers' futures to hold inline.
        Box::pin(self.run(&text, &portal.result_column_format, options, cancel)).await
    }
}

/// Whether a statement that changes something answers with rows: not when
/// it returns nothing (DDL, `SET`) or only the `count` of a DML statement,
/// which goes in its command tag.
fn has_rows(schema: &Schema) -> bool {
    match schema.fields().as_ref() {
        [] => false,
        [only] => !(only.name() == "count" && only.data_type() == &DataType::UInt64),
        _ => true,
    }
}

/// The columns a statement answers with, as `Describe` reports them: a
/// query's always (it runs as a query), a statement that changes something
/// only when [`has_rows`].
fn described(plan: &LogicalPlan, format: &Format) -> PgWireResult<Vec<FieldInfo>> {
    let schema: &Schema = plan.schema().as_arrow();
    let changes = matches!(
        plan,
        LogicalPlan::Dml(_)
            | LogicalPlan::Ddl(_)
            | LogicalPlan::Copy(_)
            | LogicalPlan::Statement(_)
    );
    if changes && !has_rows(schema) {
        return Ok(Vec::new());
    }
    arrow_schema_to_pg_fields(schema, format, None)
}

/// `rows` read to their end, to be sent later.
async fn read_now(mut rows: QueryResponse) -> PgWireResult<QueryResponse> {
    let fields = rows.row_schema();
    let mut read = Vec::new();
    while let Some(row) = rows.data_rows().next().await {
        read.push(row?);
    }
    Ok(QueryResponse::new(
        fields,
        stream::iter(read.into_iter().map(Ok)),
    ))
}

/// `BEGIN` / `COMMIT` / `ROLLBACK`: accepted, and nothing else — each
/// statement commits on its own.
fn transaction(sql: &str) -> Option<Response> {
    let word = sql
        .split_whitespace()
        .next()?
        .trim_end_matches(';')
        .to_ascii_uppercase();
    match word.as_str() {
        "BEGIN" | "START" => Some(Response::TransactionStart(Tag::new("BEGIN"))),
        "COMMIT" | "END" => Some(Response::TransactionEnd(Tag::new("COMMIT"))),
        "ROLLBACK" | "ABORT" => Some(Response::TransactionEnd(Tag::new("ROLLBACK"))),
        _ => None,
    }
}

/// The command tag of a statement that returns no rows.
fn command(plan: &LogicalPlan, sql: &str) -> String {
    match plan {
        LogicalPlan::Dml(dml) => match dml.op {
            WriteOp::Insert(_) => "INSERT",
            WriteOp::Delete => "DELETE",
            WriteOp::Update => "UPDATE",
            WriteOp::Ctas => "SELECT",
            WriteOp::Truncate => "TRUNCATE TABLE",
        }
        .to_string(),
        LogicalPlan::Copy(_) => "COPY".to_string(),
        LogicalPlan::Ddl(
            DdlStatement::CreateExternalTable(_) | DdlStatement::CreateMemoryTable(_),
        ) => "CREATE TABLE".to_string(),
        LogicalPlan::Ddl(DdlStatement::DropTable(_)) => "DROP TABLE".to_string(),
        _ => sql
            .split_whitespace()
            .next()
            .unwrap_or("")
            .trim_end_matches(';')
            .to_ascii_uppercase(),
    }
}

/// A Postgres error: the crate's message with a SQLSTATE for its kind.
fn pg_error(status: Status) -> PgWireError {
    let message = status.message().to_string();
    let code = match status.code() {
        Code::InvalidArgument if message.contains("ParserError") => "42601",
        Code::InvalidArgument => "42000",
        Code::DeadlineExceeded | Code::Cancelled => "57014",
        Code::ResourceExhausted => "53200",
        Code::NotFound => "42P01",
        _ => "XX000",
    };
    error(code, message)
}

fn error(code: &str, message: String) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(
        "ERROR".into(),
        code.into(),
        message,
    )))
}

/// Plans statements: the front door first; when it cannot, the
/// Postgres-compatibility rewrites (catalog queries of Postgres clients).
#[derive(Default)]
pub(super) struct Parser {
    compat: PostgresCompatibilityParser,
}

impl Parser {
    async fn plan(&self, ctx: &SessionContext, sql: &str) -> PgWireResult<LogicalPlan> {
        let front = match statement::plan(ctx, sql).await {
            Ok(plan) => return Ok(plan),
            Err(e) => e,
        };
        match self.compat.parse(sql) {
            Ok(mut statements) if statements.len() == 1 => {
                let statement = DFStatement::Statement(Box::new(statements.remove(0)));
                ctx.state()
                    .statement_to_plan(statement)
                    .await
                    .map_err(|_| pg_error(front))
            }
            _ => Err(pg_error(front)),
        }
    }
}

/// A statement of the extended protocol: its text (`?` numbered `$n`),
/// its placeholders, and its plan when it plans without values.
#[derive(Clone)]
pub(super) struct Prepared {
    text: String,
    placeholders: Vec<String>,
    plan: Option<LogicalPlan>,
}

#[async_trait]
impl QueryParser for Connection {
    type Statement = Prepared;

    async fn parse_sql<C>(
        &self,
        _client: &C,
        sql: &str,
        _types: &[Option<Type>],
    ) -> PgWireResult<Prepared>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let (text, placeholders) = number_question_marks(sql, &PostgreSqlDialect {})
            .map_err(|e| pg_error(statement::status(e)))?;
        let ctx = self.ctx().await?;
        let plan = match self.parser.plan(ctx, &text).await {
            Ok(plan) => Some(plan),
            Err(e) if placeholders.is_empty() && transaction(&text).is_none() => return Err(e),
            Err(_) => None,
        };
        Ok(Prepared {
            text,
            placeholders,
            plan,
        })
    }

    fn get_parameter_types(&self, stmt: &Prepared) -> PgWireResult<Vec<Type>> {
        let types = match &stmt.plan {
            Some(plan) => plan.get_parameter_types().unwrap_or_default(),
            None => Default::default(),
        };
        stmt.placeholders
            .iter()
            .map(|p| match types.get(p).cloned().flatten() {
                Some(kind) => into_pg_type(&kind),
                None => Ok(Type::UNKNOWN),
            })
            .collect()
    }

    fn get_result_schema(
        &self,
        stmt: &Prepared,
        format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        match &stmt.plan {
            Some(plan) => described(plan, format.unwrap_or(&Format::UnifiedText)),
            None => Ok(Vec::new()),
        }
    }
}

impl Connection {
    /// The statements of one simple-protocol message, run in turn; a cancel
    /// request (`cancel`) stops the one running and ends the message.
    async fn statements<C: ClientInfo>(
        &self,
        client: &C,
        query: &str,
        cancel: CancelSignal,
    ) -> PgWireResult<Vec<Response>> {
        let options = Arc::new(FormatOptions::from_client_metadata(client.metadata()));
        let statements = crate::split_statements(query, &PostgreSqlDialect {});
        let last = statements.len().saturating_sub(1);
        let mut responses = Vec::new();
        for (i, sql) in statements.iter().enumerate() {
            match Box::pin(self.run(
                sql,
                &Format::UnifiedText,
                Arc::clone(&options),
                cancel.clone(),
            ))
            .await
            {
                // pgwire sends the responses once all have run: the rows of
                // every statement but the last are read now, so that each
                // gives its place under the concurrency cap back before the
                // next one runs.
                Ok(Response::Query(rows)) if i < last => {
                    responses.push(Response::Query(read_now(rows).await?));
                }
                Ok(response) => responses.push(response),
                // The first failure ends the message (each statement before
                // it has committed on its own, and is answered).
                Err(PgWireError::UserError(info)) => {
                    responses.push(Response::Error(info));
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        if responses.is_empty() {
            responses.push(Response::EmptyQuery);
        }
        Ok(responses)
    }
}

#[async_trait]
impl SimpleQueryHandler for Connection {
    /// pgwire's own `Query` handling races the statements against the
    /// connection's cancel request, and ends the message when the request
    /// is replaced — but it cannot see a result's rows, sent after it. A
    /// message is run here with the request passed down to the rows.
    async fn on_query<C>(&self, client: &mut C, query: Query) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if !matches!(client.state(), PgWireConnectionState::ReadyForQuery) {
            return Err(PgWireError::NotReadyForQuery);
        }
        client.set_state(PgWireConnectionState::QueryInProgress);
        let mut status = client.transaction_status();
        let cancel = cancel_signal(client).await;
        let responses = self.statements(client, &query.query, cancel).await?;
        for response in responses {
            match response {
                Response::EmptyQuery => {
                    client
                        .feed(PgWireBackendMessage::EmptyQueryResponse(
                            EmptyQueryResponse::new(),
                        ))
                        .await?
                }
                Response::Query(rows) => send_query_response(client, rows, true).await?,
                Response::Execution(tag) => send_execution_response(client, tag).await?,
                Response::TransactionStart(tag) => {
                    send_execution_response(client, tag).await?;
                    status = status.to_in_transaction_state();
                }
                Response::TransactionEnd(tag) => {
                    send_execution_response(client, tag).await?;
                    status = status.to_idle_state();
                }
                Response::Error(e) => {
                    client
                        .feed(PgWireBackendMessage::ErrorResponse((*e).into()))
                        .await?;
                    status = status.to_error_state();
                }
                // `run` answers neither.
                Response::CopyIn(_) | Response::CopyOut(_) | Response::CopyBoth(_) => {
                    return Err(error("0A000", "unexpected response to a statement".into()));
                }
            }
        }
        client.set_state(PgWireConnectionState::ReadyForQuery);
        client.set_transaction_status(status);
        send_ready_for_query(client, status).await
    }

    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        self.statements(client, query, CancelSignal::never()).await
    }
}

#[async_trait]
impl ExtendedQueryHandler for Connection {
    type Statement = Prepared;
    type QueryParser = Self;

    fn query_parser(&self) -> Arc<Self> {
        Arc::new(Self {
            factory: Arc::clone(&self.factory),
            ctx: Arc::clone(&self.ctx),
            limits: self.limits.clone(),
            parser: Arc::clone(&self.parser),
        })
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<Prepared>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        // pgwire's `Execute` (a partial fetch) races this against the
        // connection's cancel request itself.
        self.portal(client, portal, CancelSignal::never()).await
    }

    /// pgwire's own `Execute` collects all of a portal's rows before
    /// sending any (its `Portal::fetch`); a whole result then sits in the
    /// server's memory. An `Execute` of a whole query (`max_rows` 0, as
    /// psycopg, JDBC and most drivers send) is streamed here instead; a
    /// partial fetch goes to pgwire's.
    async fn on_execute<C>(&self, client: &mut C, message: Execute) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
        let portal = match client.portal_store().get_portal(name) {
            Some(portal)
                if message.max_rows == 0
                    && transaction(&portal.statement.statement.text).is_none()
                    && matches!(client.state(), PgWireConnectionState::ReadyForQuery)
                    && matches!(*portal.state().lock().await, PortalExecutionState::Initial) =>
            {
                portal
            }
            _ => return self._on_execute(client, message).await,
        };
        client.set_state(PgWireConnectionState::QueryInProgress);
        let cancel = cancel_signal(client).await;
        match self.portal(client, portal.as_ref(), cancel).await? {
            Response::Query(rows) => send_query_response(client, rows, false).await?,
            Response::Execution(tag) => send_execution_response(client, tag).await?,
            Response::TransactionStart(tag) | Response::TransactionEnd(tag) => {
                send_execution_response(client, tag).await?
            }
            Response::Error(e) => {
                client
                    .send(PgWireBackendMessage::ErrorResponse((*e).into()))
                    .await?
            }
            // `run` answers neither.
            Response::EmptyQuery
            | Response::CopyIn(_)
            | Response::CopyOut(_)
            | Response::CopyBoth(_) => {
                return Err(error("0A000", "unexpected response to a statement".into()));
            }
        }
        *portal.state().lock().await = PortalExecutionState::Finished;
        client.set_state(PgWireConnectionState::ReadyForQuery);
        Ok(())
    }

    async fn do_describe_portal<C>(
        &self,
        _client: &mut C,
        portal: &Portal<Prepared>,
    ) -> PgWireResult<DescribePortalResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let format = &portal.result_column_format;
        let prepared = &portal.statement.statement;
        let fields = match &prepared.plan {
            // Without placeholders the plan is the one that runs.
            Some(plan) if prepared.placeholders.is_empty() => described(plan, format)?,
            // With values, it runs planned with them (their literals' types,
            // a version clause, a search's arguments): planned so now to
            // describe the columns it will send.
            _ => {
                let text = bound_text(portal)?;
                if transaction(&text).is_some() {
                    Vec::new()
                } else {
                    let ctx = self.ctx().await?;
                    described(&self.parser.plan(ctx, &text).await?, format)?
                }
            }
        };
        Ok(DescribePortalResponse::new(fields))
    }
}

/// The statement of `portal` with its bound values as literals.
fn bound_text(portal: &Portal<Prepared>) -> PgWireResult<String> {
    let prepared = &portal.statement.statement;
    if prepared.placeholders.is_empty() {
        return Ok(prepared.text.clone());
    }
    let types = prepared
        .plan
        .as_ref()
        .map(|plan| plan.get_parameter_types().unwrap_or_default())
        .unwrap_or_default();
    let ordered: Vec<Option<DataType>> = prepared
        .placeholders
        .iter()
        .map(|p| types.get(p).cloned().flatten())
        .collect();
    let refs: Vec<Option<&DataType>> = ordered.iter().map(Option::as_ref).collect();
    let values = match deserialize_parameters(portal, &refs)? {
        ParamValues::List(values) => values,
        ParamValues::Map(_) => {
            return Err(error("42000", "named parameters are not supported".into()));
        }
    };
    let values: Vec<_> = prepared
        .placeholders
        .iter()
        .cloned()
        .zip(values.into_iter().map(|v| v.value))
        .collect();
    substitute(&prepared.text, &values, &PostgreSqlDialect {})
        .map_err(|e| pg_error(statement::status(e)))
}
