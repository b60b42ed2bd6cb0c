//! The Postgres wire protocol (pgwire): `psql`, psycopg, JDBC and every
//! other Postgres client, on the same front door and sessions as the
//! Flight SQL service (see [`crate::server`]).

mod auth;
mod query;

use std::sync::Arc;

use pgwire::api::PgWireServerHandlers;
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
}

/// Serves the Postgres wire protocol on `listener` until `shutdown`
/// resolves: a session per connection, made by `factory` when the client
/// sends its first statement; at most `settings.max_sessions` connections
/// at once (more are closed at once).
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
    let connections = Arc::new(Semaphore::new(settings.max_sessions.max(1)));
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
            startup: Startup::new(&settings.credentials),
        };
        tokio::spawn(async move {
            let _place = place;
            // A client's protocol error ends its connection only.
            let _ = pgwire::tokio::process_socket(socket, None, handlers).await;
        });
    }
}
