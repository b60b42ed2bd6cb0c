//! `lance-sql serve`: the CLI's SQL, tables and settings for network
//! clients (see `datafusion_lance::server`).

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::SessionContext;
use datafusion_cli::object_storage::instrumented::InstrumentedObjectStoreRegistry;
use datafusion_lance::server::{
    Credentials, LanceFlightSqlService, ServerSettings, SessionFactory, TlsIdentity, check_bind,
    serve_flight_sql_on, serve_postgres_on,
};
use futures::StreamExt;

use crate::{Args, new_context, runtime_env, startup_files};
use datafusion_lance::split_statements;

#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Serve Arrow Flight SQL (ADBC, JDBC) on HOST:PORT (port 0 picks one;
    /// the address is printed on stderr).
    #[clap(
        long,
        value_name = "HOST:PORT",
        value_parser(parse_addr),
        required_unless_present = "postgres"
    )]
    flight_sql: Option<SocketAddr>,

    /// Serve the Postgres wire protocol (psql, psycopg, JDBC) on HOST:PORT.
    #[clap(long, value_name = "HOST:PORT", value_parser(parse_addr))]
    postgres: Option<SocketAddr>,

    /// Clients must send `authorization: Bearer TOKEN` (also read from
    /// LANCE_SQL_AUTH_TOKEN, which keeps it out of the process list).
    #[clap(long, value_name = "TOKEN", conflicts_with = "users")]
    auth_token: Option<String>,

    /// Clients must authenticate as one of the users of FILE (NAME:PASSWORD
    /// lines): Basic authentication, or a Flight SQL handshake.
    #[clap(long, value_name = "FILE")]
    users: Option<PathBuf>,

    /// Serve on a non-loopback address without credentials.
    #[clap(long)]
    insecure: bool,

    /// Serve both protocols over TLS with this certificate chain (PEM);
    /// Postgres clients must then use sslmode=require or stricter.
    #[clap(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,

    /// The private key (PEM) of --tls-cert.
    #[clap(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,

    /// Statements running at once; more wait for a place.
    #[clap(long, default_value_t = 64)]
    max_concurrent_statements: usize,

    /// Seconds a statement may take (waiting for a place included); a
    /// write past it is cancelled and commits nothing. No limit by default.
    #[clap(long, value_name = "SECONDS")]
    statement_timeout: Option<f64>,

    /// Seconds after which an unused session is dropped.
    #[clap(long, value_name = "SECONDS", default_value_t = 1800.0)]
    session_idle_timeout: f64,
}

fn parse_addr(text: &str) -> std::result::Result<SocketAddr, String> {
    text.to_socket_addrs()
        .map_err(|e| format!("'{text}': {e} (expected HOST:PORT, e.g. 127.0.0.1:50051)"))?
        .next()
        .ok_or_else(|| format!("'{text}' names no address"))
}

fn seconds(value: f64, what: &str) -> Result<Duration> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| DataFusionError::Configuration(format!("{what} must be positive seconds")))
}

/// Serves until Ctrl-C or SIGTERM.
pub(crate) async fn run(args: &Args, serve: &ServeArgs) -> Result<()> {
    let token = serve
        .auth_token
        .clone()
        .or_else(|| std::env::var("LANCE_SQL_AUTH_TOKEN").ok())
        .filter(|t| !t.is_empty());
    let credentials = match (&token, &serve.users) {
        (Some(_), Some(_)) => {
            return Err(DataFusionError::Configuration(
                "give either a token (--auth-token or LANCE_SQL_AUTH_TOKEN) or --users, not both"
                    .into(),
            ));
        }
        (Some(token), None) => Credentials::Token(token.clone()),
        (None, Some(file)) => Credentials::from_users_file(file)?,
        (None, None) => Credentials::Open,
    };
    let tls = match (&serve.tls_cert, &serve.tls_key) {
        (Some(cert), Some(key)) => Some(TlsIdentity::from_files(cert, key)?),
        _ => None,
    };
    for addr in serve.flight_sql.iter().chain(&serve.postgres) {
        check_bind(addr, &credentials, serve.insecure)?;
        if !credentials.is_open() && tls.is_none() && !addr.ip().is_loopback() {
            eprintln!(
                "lance-sql: warning: credentials to {addr} travel unencrypted; \
                 give --tls-cert/--tls-key or put a TLS proxy in front"
            );
        }
    }
    let settings = ServerSettings {
        credentials,
        max_concurrent_statements: serve.max_concurrent_statements,
        statement_timeout: serve
            .statement_timeout
            .map(|s| seconds(s, "--statement-timeout"))
            .transpose()?,
        session_idle_timeout: seconds(serve.session_idle_timeout, "--session-idle-timeout")?,
        insecure: serve.insecure,
        tls,
        ..ServerSettings::default()
    };
    let runtime = runtime_env(args, Arc::new(InstrumentedObjectStoreRegistry::new()))?;
    let template = Arc::new(Template {
        args: args_for_sessions(args),
        runtime,
        rc: startup_files(args),
    });
    // The first session is made now, so that a bad --catalog or startup
    // file fails the command instead of every client's first request.
    template.session().await?;
    let factory: SessionFactory = Arc::new(move || {
        let template = Arc::clone(&template);
        Box::pin(async move { template.session().await })
    });
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let until_stopped = move || {
        let mut stopped = stopped.clone();
        async move {
            let _ = stopped.wait_for(|s| *s).await;
        }
    };
    let mut servers = Vec::new();
    if let Some(addr) = serve.flight_sql {
        let listener = listen(addr).await?;
        eprintln!(
            "lance-sql: Flight SQL listening on {}{}",
            listener.local_addr()?,
            if settings.tls.is_some() { " (TLS)" } else { "" }
        );
        let service = LanceFlightSqlService::new(Arc::clone(&factory), settings.clone());
        servers.push(tokio::spawn(serve_flight_sql_on(
            listener,
            service,
            until_stopped(),
        )));
    }
    if let Some(addr) = serve.postgres {
        let listener = listen(addr).await?;
        eprintln!(
            "lance-sql: Postgres listening on {}{}",
            listener.local_addr()?,
            if settings.tls.is_some() { " (TLS)" } else { "" }
        );
        servers.push(tokio::spawn(serve_postgres_on(
            listener,
            Arc::clone(&factory),
            settings.clone(),
            until_stopped(),
        )));
    }
    shutdown().await;
    let _ = stop.send(true);
    for server in servers {
        server
            .await
            .map_err(|e| DataFusionError::External(Box::new(e)))??;
    }
    Ok(())
}

async fn listen(addr: SocketAddr) -> Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| DataFusionError::Configuration(format!("cannot listen on {addr}: {e}")))
}

/// What every session is made from.
struct Template {
    args: Args,
    runtime: Arc<datafusion::execution::runtime_env::RuntimeEnv>,
    rc: Vec<String>,
}

impl Template {
    /// A new session: the CLI's context with the `--catalog`s attached and
    /// the startup files run.
    async fn session(&self) -> Result<SessionContext> {
        let ctx = new_context(&self.args, Arc::clone(&self.runtime)).await?;
        for (name, root) in &self.args.catalogs {
            datafusion_lance::register_lance_catalog(&ctx, name, root, Default::default()).await?;
        }
        for file in &self.rc {
            let text = std::fs::read_to_string(file)?;
            let dialect = ctx.state().config_options().sql_parser.dialect;
            let statements = match datafusion::sql::sqlparser::dialect::dialect_from_str(dialect) {
                Some(dialect) => split_statements(&text, dialect.as_ref()),
                None => vec![text],
            };
            for sql in statements {
                let run = async {
                    let plan = datafusion_lance::plan_sql(&ctx.state(), &sql).await?;
                    let mut stream = datafusion_lance::execute_lance_plan(&ctx, plan)
                        .await?
                        .execute_stream()
                        .await?;
                    while let Some(batch) = stream.next().await {
                        batch?;
                    }
                    Ok::<_, DataFusionError>(())
                };
                run.await
                    .map_err(|e| DataFusionError::Configuration(format!("{file}: {e}")))?;
            }
        }
        Ok(ctx)
    }
}

/// The options of `args` that make a session.
fn args_for_sessions(args: &Args) -> Args {
    Args {
        mode: None,
        command: Vec::new(),
        file: Vec::new(),
        rc: args.rc.clone(),
        catalogs: args.catalogs.clone(),
        batch_size: args.batch_size,
        cluster: args.cluster.clone(),
        memory_limit: args.memory_limit,
        mem_pool_type: args.mem_pool_type.clone(),
        disk_limit: args.disk_limit,
        data_path: None,
        format: args.format,
        quiet: true,
        maxrows: args.maxrows,
        color: false,
        progress: args.progress,
    }
}

async fn shutdown() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            eprintln!("lance-sql: shutting down");
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
    eprintln!("lance-sql: shutting down");
}
