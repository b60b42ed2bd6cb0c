//! The Postgres wire protocol (pgwire): `psql`, psycopg, JDBC and every
//! other Postgres client, on the same front door and sessions as the
//! Flight SQL service (see [`crate::server`]).

mod auth;
mod query;

use std::sync::Arc;

use pgwire::api::cancel::DefaultCancelHandler;
use pgwire::api::{ConnectionManager, PgWireServerHandlers};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use self::auth::Startup;
use self::query::Connection;
use super::ServerSettings;
use super::sessions::SessionFactory;
use super::statement::Limits;
use crate::error::Result;

/// The handlers of one client connection.
struct Handlers {
    connection: Arc<Connection>,
    startup: Arc<Startup>,
    cancels: Arc<DefaultCancelHandler>,
}

impl PgWireServerHandlers for Handlers {
    fn simple_query_handler(&self) -> Arc<impl pgwire::api::query::SimpleQueryHandler> {
        Arc::clone(&self.connection)
    }

    fn extended_query_handler(&self) -> Arc<impl pgwire::api::query::ExtendedQueryHandler> {
        Arc::clone(&self.connection)
    }

    fn startup_handler(&self) -> Arc<impl pgwire::api::auth::StartupHandler> {
        Arc::clone(&self.startup)
    }

    /// A cancel request (a connection of its own, sending the process id
    /// and secret key this server gave the connection to cancel at its
    /// login) cancels that connection's running statement.
    fn cancel_handler(&self) -> Arc<impl pgwire::api::cancel::CancelHandler> {
        Arc::clone(&self.cancels)
    }
}

/// Serves the Postgres wire protocol on `listener` until `shutdown`
/// resolves: a session per connection, made by `factory` when the client
/// sends its first statement; at most `settings.max_sessions` connections
/// at once (more are closed at once). With `settings.tls`, only TLS
/// connections are accepted (`sslmode=require` or stricter).
pub async fn serve_postgres_on(
    listener: TcpListener,
    factory: SessionFactory,
    settings: ServerSettings,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<()> {
    super::check_bind(
        &super::local_addr(&listener)?,
        &settings.credentials,
        settings.insecure,
    )?;
    let limits = Limits::new(
        settings.max_concurrent_statements,
        settings.statement_timeout,
    );
    let tls = settings.tls.as_ref().map(|t| t.acceptor()).transpose()?;
    let connections = Arc::new(Semaphore::new(settings.max_sessions.max(1)));
    let registry = Arc::new(ConnectionManager::new());
    let cancels = Arc::new(DefaultCancelHandler::new(Arc::clone(&registry)));
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => return Ok(()),
        };
        let Ok((socket, _)) = accepted else {
            continue;
        };
        let Ok(place) = Arc::clone(&connections).try_acquire_owned() else {
            drop(socket);
            continue;
        };
        let handlers = Handlers {
            connection: Arc::new(Connection::new(Arc::clone(&factory), limits.clone())),
            startup: Startup::new(&settings.credentials, tls.is_some(), &registry),
            cancels: Arc::clone(&cancels),
        };
        let tls = tls.clone();
        tokio::spawn(async move {
            let _place = place;
            // A client's protocol error ends its connection only.
            let _ = pgwire::tokio::process_socket(socket, tls, handlers).await;
        });
    }
}
