//! The Arrow Flight SQL service (see [`crate::server`]).

mod metadata;
mod prepared;

use std::pin::Pin;
use std::sync::Arc;

use arrow_flight::decode::FlightRecordBatchStream;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_server::{FlightService, FlightServiceServer};
use arrow_flight::sql::server::{FlightSqlService, PeekableFlightDataStream};
use arrow_flight::sql::{
    ActionClosePreparedStatementRequest, ActionCreatePreparedStatementRequest,
    ActionCreatePreparedStatementResult, Any, CommandGetCatalogs, CommandGetDbSchemas,
    CommandGetSqlInfo, CommandGetTableTypes, CommandGetTables, CommandPreparedStatementQuery,
    CommandPreparedStatementUpdate, CommandStatementQuery, CommandStatementUpdate,
    DoPutPreparedStatementResult, ProstMessageExt, SqlInfo, TicketStatementQuery,
};
use arrow_flight::{
    Action, FlightDescriptor, FlightEndpoint, FlightInfo, HandshakeRequest, HandshakeResponse,
    Ticket,
};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::datatypes::Schema;
use datafusion::physical_plan::SendableRecordBatchStream;
use futures::{Stream, TryStreamExt};
use prost::Message;
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status, Streaming};

use self::prepared::Prepared;
use super::ServerSettings;
use super::auth::{Gate, Principal};
use super::sessions::{Handles, SESSION_COOKIE, Session, SessionFactory, Sessions};
use super::statement::{self, CancelSignal, Limits, Started};

type DoGetStream = Pin<Box<dyn Stream<Item = Result<arrow_flight::FlightData, Status>> + Send>>;

/// A statement started by `GetFlightInfo` (see [`statement::start`]),
/// waiting for its `DoGet`.
struct Pending(std::sync::Mutex<Option<Started>>);

/// An Arrow Flight SQL service over this crate: every statement goes
/// through [`crate::plan_sql`] and [`crate::execute_lance_plan`] in the
/// client's session. Serve it with [`super::serve_flight_sql`] or through
/// [`Self::into_server`] on a tonic server of your own.
#[derive(Clone)]
pub struct LanceFlightSqlService {
    shared: Arc<Shared>,
}

struct Shared {
    insecure: bool,
    tls: Option<super::TlsIdentity>,
    gate: Gate,
    sessions: Sessions,
    limits: Limits,
    tickets: Handles<Pending>,
    prepared: Handles<Prepared>,
}

impl std::fmt::Debug for LanceFlightSqlService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LanceFlightSqlService")
            .field("gate", &self.shared.gate)
            .field("sessions", &self.shared.sessions)
            .field("limits", &self.shared.limits)
            .finish_non_exhaustive()
    }
}

impl LanceFlightSqlService {
    /// A service whose sessions `factory` makes, bounded by `settings`.
    pub fn new(factory: SessionFactory, settings: ServerSettings) -> Self {
        let ServerSettings {
            credentials,
            max_concurrent_statements,
            statement_timeout,
            session_idle_timeout,
            max_sessions,
            insecure,
            tls,
        } = settings;
        Self {
            shared: Arc::new(Shared {
                insecure,
                tls,
                gate: Gate::new(credentials),
                sessions: Sessions::new(factory, session_idle_timeout, max_sessions),
                limits: Limits::new(max_concurrent_statements, statement_timeout),
                tickets: Handles::new(session_idle_timeout, 4 * max_sessions.max(1)),
                prepared: Handles::new(session_idle_timeout, 16 * max_sessions.max(1)),
            }),
        }
    }

    /// The tonic service.
    pub fn into_server(self) -> FlightServiceServer<Self> {
        FlightServiceServer::new(self)
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20)
    }

    pub(super) fn credentials(&self) -> &super::Credentials {
        self.shared.gate.credentials()
    }

    pub(super) fn insecure(&self) -> bool {
        self.shared.insecure
    }

    /// The certificate [`super::serve_flight_sql`] serves with.
    pub(super) fn tls(&self) -> Option<&super::TlsIdentity> {
        self.shared.tls.as_ref()
    }

    /// How many client sessions are alive.
    pub fn session_count(&self) -> usize {
        self.shared.sessions.len()
    }

    /// The principal and session of a request, and the session cookie to
    /// set when the session is new.
    async fn enter(
        &self,
        metadata: &MetadataMap,
    ) -> Result<(Principal, Arc<Session>, Option<String>), Status> {
        let principal = self.shared.gate.check(metadata)?;
        let (session, new) = self.shared.sessions.of(metadata, &principal).await?;
        Ok((principal, session, new))
    }

    fn info(
        &self,
        schema: &Schema,
        ticket: Vec<u8>,
        descriptor: FlightDescriptor,
    ) -> Result<FlightInfo, Status> {
        Ok(FlightInfo::new()
            .try_with_schema(schema)
            .map_err(|e| Status::internal(format!("cannot encode a schema: {e}")))?
            .with_endpoint(FlightEndpoint::new().with_ticket(Ticket::new(ticket)))
            .with_descriptor(descriptor))
    }

    /// Starts a statement (see [`statement::start`]) and answers its
    /// `FlightInfo`, whose ticket names it.
    async fn started(
        &self,
        principal: &Principal,
        ctx: &datafusion::prelude::SessionContext,
        plan: datafusion::logical_expr::LogicalPlan,
        descriptor: FlightDescriptor,
    ) -> Result<FlightInfo, Status> {
        let started =
            statement::start(ctx, plan, &self.shared.limits, &mut CancelSignal::never()).await?;
        let schema = started.schema();
        let handle = self
            .shared
            .tickets
            .insert(principal, Pending(std::sync::Mutex::new(Some(started))));
        let ticket = TicketStatementQuery {
            statement_handle: handle.into(),
        };
        self.info(&schema, ticket.as_any().encode_to_vec(), descriptor)
    }

    /// A metadata command's `FlightInfo`: the command is its own ticket.
    async fn metadata_info(
        &self,
        command: impl ProstMessageExt,
        schema: &Schema,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let (_, _, cookie) = self.enter(request.metadata()).await?;
        let ticket = command.as_any().encode_to_vec();
        let info = self.info(schema, ticket, request.into_inner())?;
        Ok(with_cookie(Response::new(info), cookie))
    }
}

/// Streams `batches` (already computed) to the client.
fn batch_stream(batch: RecordBatch) -> Response<DoGetStream> {
    let schema = batch.schema();
    let stream = FlightDataEncoderBuilder::new()
        .with_schema(schema)
        .build(futures::stream::once(async { Ok(batch) }))
        .map_err(Status::from);
    Response::new(Box::pin(stream))
}

/// Streams a statement's rows to the client as they are produced.
fn rows(stream: SendableRecordBatchStream) -> DoGetStream {
    let schema = stream.schema();
    let batches = stream.map_err(|e| FlightError::Tonic(Box::new(statement::status(e))));
    Box::pin(
        FlightDataEncoderBuilder::new()
            .with_schema(schema)
            .build(batches)
            .map_err(Status::from),
    )
}

fn with_cookie<T>(mut response: Response<T>, session: Option<String>) -> Response<T> {
    if let Some(id) = session
        && let Ok(value) = format!("{SESSION_COOKIE}={id}; Path=/; HttpOnly").parse()
    {
        response.metadata_mut().insert("set-cookie", value);
    }
    response
}

/// The record batches a client sent with a `DoPut`.
async fn batches_of(stream: PeekableFlightDataStream) -> Result<Option<RecordBatch>, Status> {
    let batches: Vec<RecordBatch> =
        FlightRecordBatchStream::new_from_flight_data(stream.map_err(FlightError::from))
            .try_collect()
            .await
            .map_err(Status::from)?;
    match batches.first() {
        None => Ok(None),
        Some(first) => concat_batches(&first.schema(), &batches)
            .map(Some)
            .map_err(|e| Status::invalid_argument(format!("bad parameter batches: {e}"))),
    }
}

#[tonic::async_trait]
impl FlightSqlService for LanceFlightSqlService {
    type FlightService = Self;

    async fn do_handshake(
        &self,
        request: Request<Streaming<HandshakeRequest>>,
    ) -> Result<
        Response<Pin<Box<dyn Stream<Item = Result<HandshakeResponse, Status>> + Send>>>,
        Status,
    > {
        let token = self.shared.gate.handshake(request.metadata())?;
        let payload = token.clone().unwrap_or_default();
        let answer = HandshakeResponse {
            protocol_version: 0,
            payload: payload.into(),
        };
        let mut response: Response<Pin<Box<dyn Stream<Item = _> + Send>>> =
            Response::new(Box::pin(futures::stream::once(async { Ok(answer) })));
        if let Some(token) = token
            && let Ok(value) = format!("Bearer {token}").parse()
        {
            response.metadata_mut().insert("authorization", value);
        }
        Ok(response)
    }

    async fn get_flight_info_statement(
        &self,
        query: CommandStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let (principal, session, cookie) = self.enter(request.metadata()).await?;
        let plan = statement::plan(&session.ctx, &query.query).await?;
        let info = self
            .started(&principal, &session.ctx, plan, request.into_inner())
            .await?;
        Ok(with_cookie(Response::new(info), cookie))
    }

    async fn do_get_statement(
        &self,
        ticket: TicketStatementQuery,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let principal = self.shared.gate.check(request.metadata())?;
        let pending = self
            .shared
            .tickets
            .take(&principal, &ticket.statement_handle)?;
        let started = pending
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| Status::not_found("this statement's rows were read already"))?;
        let stream = started
            .rows(&self.shared.limits, CancelSignal::never())
            .await?;
        Ok(Response::new(rows(stream)))
    }

    async fn do_put_statement_update(
        &self,
        command: CommandStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        let (_, session, _) = self.enter(request.metadata()).await?;
        let plan = statement::plan(&session.ctx, &command.query).await?;
        statement::execute_update(&session.ctx, plan, &self.shared.limits).await
    }

    async fn do_action_create_prepared_statement(
        &self,
        query: ActionCreatePreparedStatementRequest,
        request: Request<Action>,
    ) -> Result<ActionCreatePreparedStatementResult, Status> {
        let (principal, session, _) = self.enter(request.metadata()).await?;
        let prepared = Prepared::new(session.ctx.clone(), &query.query).await?;
        let created = prepared.created(String::new())?;
        let handle = self.shared.prepared.insert(&principal, prepared);
        Ok(ActionCreatePreparedStatementResult {
            prepared_statement_handle: handle.into(),
            ..created
        })
    }

    async fn do_action_close_prepared_statement(
        &self,
        query: ActionClosePreparedStatementRequest,
        request: Request<Action>,
    ) -> Result<(), Status> {
        let principal = self.shared.gate.check(request.metadata())?;
        // Closing twice (or after expiry) is not an error.
        let _ = self
            .shared
            .prepared
            .take(&principal, &query.prepared_statement_handle);
        Ok(())
    }

    async fn do_put_prepared_statement_query(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<DoPutPreparedStatementResult, Status> {
        let principal = self.shared.gate.check(request.metadata())?;
        let prepared = self
            .shared
            .prepared
            .get(&principal, &query.prepared_statement_handle)?;
        if let Some(batch) = batches_of(request.into_inner()).await? {
            prepared.bind(batch)?;
        }
        Ok(DoPutPreparedStatementResult {
            prepared_statement_handle: Some(query.prepared_statement_handle),
        })
    }

    async fn get_flight_info_prepared_statement(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let principal = self.shared.gate.check(request.metadata())?;
        let prepared = self
            .shared
            .prepared
            .get(&principal, &query.prepared_statement_handle)?;
        let text = one_text(prepared.texts(None)?)?;
        let plan = statement::plan(&prepared.ctx, &text).await?;
        let info = self
            .started(&principal, &prepared.ctx, plan, request.into_inner())
            .await?;
        Ok(Response::new(info))
    }

    async fn do_get_prepared_statement(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let principal = self.shared.gate.check(request.metadata())?;
        let prepared = self
            .shared
            .prepared
            .get(&principal, &query.prepared_statement_handle)?;
        let text = one_text(prepared.texts(None)?)?;
        let plan = statement::plan(&prepared.ctx, &text).await?;
        let started = statement::start(
            &prepared.ctx,
            plan,
            &self.shared.limits,
            &mut CancelSignal::never(),
        )
        .await?;
        let stream = started
            .rows(&self.shared.limits, CancelSignal::never())
            .await?;
        Ok(Response::new(rows(stream)))
    }

    async fn do_put_prepared_statement_update(
        &self,
        query: CommandPreparedStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        let principal = self.shared.gate.check(request.metadata())?;
        let prepared = self
            .shared
            .prepared
            .get(&principal, &query.prepared_statement_handle)?;
        let batch = batches_of(request.into_inner()).await?;
        let mut total: Option<i64> = None;
        // One statement per row of values, in order; the first failure
        // stops the rest (those before it have committed).
        for text in prepared.texts(batch)? {
            let plan = statement::plan(&prepared.ctx, &text).await?;
            let count = statement::execute_update(&prepared.ctx, plan, &self.shared.limits).await?;
            if count >= 0 {
                total = Some(total.unwrap_or(0) + count);
            }
        }
        Ok(total.unwrap_or(-1))
    }

    async fn get_flight_info_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder().schema();
        self.metadata_info(query, &schema, request).await
    }

    async fn do_get_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let (_, session, cookie) = self.enter(request.metadata()).await?;
        let batch = metadata::catalogs(&session.ctx, query)?;
        Ok(with_cookie(batch_stream(batch), cookie))
    }

    async fn get_flight_info_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder().schema();
        self.metadata_info(query, &schema, request).await
    }

    async fn do_get_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let (_, session, cookie) = self.enter(request.metadata()).await?;
        let batch = metadata::schemas(&session.ctx, query)?;
        Ok(with_cookie(batch_stream(batch), cookie))
    }

    async fn get_flight_info_tables(
        &self,
        query: CommandGetTables,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder().schema();
        self.metadata_info(query, &schema, request).await
    }

    async fn do_get_tables(
        &self,
        query: CommandGetTables,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let (_, session, cookie) = self.enter(request.metadata()).await?;
        let batch = metadata::tables(&session.ctx, query).await?;
        Ok(with_cookie(batch_stream(batch), cookie))
    }

    async fn get_flight_info_table_types(
        &self,
        query: CommandGetTableTypes,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder().schema();
        self.metadata_info(query, &schema, request).await
    }

    async fn do_get_table_types(
        &self,
        query: CommandGetTableTypes,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        self.shared.gate.check(request.metadata())?;
        Ok(batch_stream(metadata::table_types(query)?))
    }

    async fn get_flight_info_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder(&metadata::SQL_INFO).schema();
        self.metadata_info(query, &schema, request).await
    }

    async fn do_get_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        self.shared.gate.check(request.metadata())?;
        let batch = query
            .into_builder(&metadata::SQL_INFO)
            .build()
            .map_err(|e| Status::internal(e.to_string()))?;
        Ok(batch_stream(batch))
    }

    async fn do_get_fallback(
        &self,
        request: Request<Ticket>,
        message: Any,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        self.shared.gate.check(request.metadata())?;
        Err(Status::unimplemented(format!(
            "this server does not answer {}",
            message.type_url
        )))
    }

    async fn register_sql_info(&self, _id: i32, _result: &SqlInfo) {}
}

/// The one statement a query runs (a query binds one row of values).
fn one_text(mut texts: Vec<String>) -> Result<String, Status> {
    match texts.len() {
        1 => Ok(texts.remove(0)),
        0 => Err(Status::invalid_argument("no parameter values were bound")),
        n => Err(Status::invalid_argument(format!(
            "a prepared query runs with one row of parameter values; {n} were bound"
        ))),
    }
}
