//! SQL over the network: an Arrow Flight SQL service that runs every
//! statement through this crate's front door ([`crate::plan_sql`],
//! [`crate::execute_lance_plan`]), as `lance-sql` does — `MERGE INTO`,
//! `VERSION AS OF`, index DDL and catalog DDL included. `lance-sql serve`
//! is this module with the CLI's options.
//!
//! - **Sessions**: each client gets a session (its `SET`s, registered
//!   tables, prepared statements) made by a [`SessionFactory`], named by a
//!   `lance_session` cookie the server sets on the client's first request
//!   (ADBC: `adbc.flight.sql.rpc.with_cookie_middleware=true`). A client
//!   that sends no cookie gets a new session for each request. Sessions
//!   unused for [`ServerSettings::session_idle_timeout`] are dropped.
//!   Every session shares the process's Lance session (caches), memory
//!   pool and attached catalogs.
//! - **Credentials** ([`Credentials`]): checked on every request; a server
//!   without them must listen on loopback only ([`check_bind`]).
//! - **Statements**: planned when the client asks for their `FlightInfo`
//!   (planning never writes), run when it fetches the ticket, streamed
//!   batch by batch. A query stops when the client goes away; a write runs
//!   to its end (commit or failure) on its own task. At most
//!   [`ServerSettings::max_concurrent_statements`] run at once (the others
//!   wait), each bounded by [`ServerSettings::statement_timeout`]: a query
//!   past it fails, a write past it is cancelled and fails cleanly
//!   (nothing committed).
//! - **Prepared statements** keep their text and are planned again at each
//!   execution with the bound values as literals; `?` and `$n` both work;
//!   an update binds a batch and runs once per row.
//!
//! ```no_run
//! # async fn run() -> datafusion::error::Result<()> {
//! use std::sync::Arc;
//! use datafusion::prelude::SessionContext;
//! use datafusion_lance::server::{LanceFlightSqlService, ServerSettings, serve_flight_sql};
//!
//! let factory: datafusion_lance::server::SessionFactory = Arc::new(|| {
//!     Box::pin(async {
//!         let ctx = SessionContext::new();
//!         datafusion_lance::register_lance(&ctx)?;
//!         Ok(datafusion_lance::catalogs::enable_lance_url_tables(ctx))
//!     })
//! });
//! let service = LanceFlightSqlService::new(factory, ServerSettings::default());
//! let addr = "127.0.0.1:50051".parse().unwrap();
//! serve_flight_sql(addr, service, std::future::pending()).await?;
//! # Ok(()) }
//! ```

mod auth;
mod flight_sql;
mod postgres;
mod sessions;
mod statement;
mod tls;

use std::net::SocketAddr;
use std::time::Duration;

pub use auth::Credentials;
pub use flight_sql::LanceFlightSqlService;
pub use postgres::serve_postgres_on;
pub use sessions::SessionFactory;
pub use tls::TlsIdentity;

use crate::error::{Error, Result, fail};

/// What bounds a server.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    /// What clients must present.
    pub credentials: Credentials,
    /// Statements running at once; more wait for a place.
    pub max_concurrent_statements: usize,
    /// The longest a statement may take, waiting for a place included.
    pub statement_timeout: Option<Duration>,
    /// A session unused this long is dropped.
    pub session_idle_timeout: Duration,
    /// The most sessions kept (the least recently used goes first); for
    /// Postgres, the most connections at once.
    pub max_sessions: usize,
    /// Serve without credentials on an address other than loopback (see
    /// [`check_bind`]).
    pub insecure: bool,
    /// Serve both protocols over TLS with this certificate; a Postgres
    /// client that does not ask for TLS is then refused.
    pub tls: Option<TlsIdentity>,
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            credentials: Credentials::Open,
            max_concurrent_statements: 64,
            statement_timeout: None,
            session_idle_timeout: Duration::from_secs(30 * 60),
            max_sessions: 1024,
            insecure: false,
            tls: None,
        }
    }
}

/// Refuses to serve on `addr` without credentials unless it is a loopback
/// address (or `insecure` says the caller means it).
pub fn check_bind(addr: &SocketAddr, credentials: &Credentials, insecure: bool) -> Result<()> {
    if credentials.is_open() && !addr.ip().is_loopback() && !insecure {
        return fail!(
            invalid_input,
            "refusing to serve on {addr} without credentials: give --auth-token or --users, \
             bind a loopback address (127.0.0.1, [::1]), or pass --insecure"
        );
    }
    Ok(())
}

fn local_addr(listener: &tokio::net::TcpListener) -> Result<SocketAddr> {
    listener
        .local_addr()
        .map_err(|e| Error::invalid_input(format!("cannot read the listener's address: {e}")))
}

/// Serves `service` over gRPC on `addr` until `shutdown` resolves.
pub async fn serve_flight_sql(
    addr: SocketAddr,
    service: LanceFlightSqlService,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::invalid_input(format!("cannot listen on {addr}: {e}")))?;
    serve_flight_sql_on(listener, service, shutdown).await
}

/// Serves `service` on an already bound listener (a test binds port 0 and
/// reads the port before serving).
pub async fn serve_flight_sql_on(
    listener: tokio::net::TcpListener,
    service: LanceFlightSqlService,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<()> {
    check_bind(
        &local_addr(&listener)?,
        service.credentials(),
        service.insecure(),
    )?;
    // No Nagle delay: a client's small requests (a prepared statement's
    // bind, a short result) would otherwise wait on delayed ACKs, about
    // 40 ms each.
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = service.tls() {
        builder = builder
            .tls_config(tls.tonic())
            .map_err(|e| Error::invalid_input(format!("invalid TLS settings: {e}")))?;
    }
    builder
        .add_service(service.into_server())
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
        .map_err(|e| Error::invalid_input(format!("the Flight SQL server failed: {e}")))
}
