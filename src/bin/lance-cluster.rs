//! `lance-cluster`: a Ballista scheduler or executor that knows Lance.
//!
//! ```text
//! lance-cluster scheduler --bind HOST:PORT
//! lance-cluster executor --scheduler HOST:PORT --bind HOST:PORT [--slots N]
//! ```
//!
//! Both register the Lance codecs, the `lance.*` settings and the
//! process-level shared Lance session (see `datafusion_lance::cluster`).
//! `RUST_LOG=info` logs the engine's events to standard error.
//! Port 0 picks a free port. A scheduler prints the address it listens on as
//! the first line of standard output once it accepts connections; an
//! executor prints the addresses it uses as it starts (it then registers with
//! the scheduler, retrying for 30 s).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use ballista_scheduler::cluster::BallistaCluster;
use clap::{Parser, Subcommand};
use datafusion_lance::cluster::ballista::{executor_config, scheduler_config};

#[derive(Debug, Parser)]
#[clap(
    name = "lance-cluster",
    version,
    about = "Ballista scheduler and executor with Lance tables built in"
)]
struct Args {
    #[clap(subcommand)]
    role: Role,
}

#[derive(Debug, Subcommand)]
enum Role {
    /// Run a scheduler: clients (`lance-sql --cluster df://HOST:PORT`) and
    /// executors connect to it.
    Scheduler {
        /// Address to listen on (gRPC for clients and executors, and the
        /// REST API under /api). Port 0 picks a free port.
        #[clap(long, default_value = "127.0.0.1:50050")]
        bind: SocketAddr,
        /// Host name executors and clients reach this scheduler by (default:
        /// the bind host).
        #[clap(long)]
        advertise_host: Option<String>,
        /// An executor not heard from for this long is lost: its tasks run
        /// again elsewhere.
        #[clap(long, default_value = "180")]
        executor_timeout_seconds: u64,
    },
    /// Run an executor for the scheduler at `--scheduler`.
    Executor {
        /// The scheduler's HOST:PORT.
        #[clap(long)]
        scheduler: String,
        /// Address of this executor's Arrow Flight service (shuffle data).
        /// Port 0 picks a free port.
        #[clap(long, default_value = "127.0.0.1:50051")]
        bind: SocketAddr,
        /// Port of this executor's gRPC service, on the bind host (default:
        /// a free port).
        #[clap(long)]
        grpc_port: Option<u16>,
        /// Tasks run at once (default: the number of cores).
        #[clap(long)]
        slots: Option<usize>,
        /// Host name the scheduler and other executors reach this executor
        /// by (default: the bind host).
        #[clap(long)]
        advertise_host: Option<String>,
        /// Directory for shuffle files (default: a temporary directory).
        #[clap(long)]
        work_dir: Option<String>,
        /// Seconds between heartbeats to the scheduler.
        #[clap(long, default_value = "60")]
        heartbeat_seconds: u64,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    // RUST_LOG=info (or debug, ...) logs Ballista's and Lance's events to stderr.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let result = match Args::parse().role {
        Role::Scheduler {
            bind,
            advertise_host,
            executor_timeout_seconds,
        } => scheduler(bind, advertise_host, executor_timeout_seconds).await,
        Role::Executor {
            scheduler,
            bind,
            grpc_port,
            slots,
            advertise_host,
            work_dir,
            heartbeat_seconds,
        } => {
            let options = ExecutorOptions {
                grpc_port,
                slots,
                advertise_host,
                work_dir,
                heartbeat_seconds,
            };
            executor(scheduler, bind, options).await
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `bind`, with port 0 replaced by a port that is free now.
fn with_port(bind: SocketAddr) -> std::io::Result<SocketAddr> {
    if bind.port() != 0 {
        return Ok(bind);
    }
    TcpListener::bind(bind)?.local_addr()
}

/// A free port on `bind`'s host other than `bind`'s port.
fn free_port_besides(bind: SocketAddr) -> Result<u16, String> {
    for _ in 0..10 {
        let port = with_port(SocketAddr::new(bind.ip(), 0))
            .map_err(|e| format!("a gRPC port on {}: {e}", bind.ip()))?
            .port();
        if port != bind.port() {
            return Ok(port);
        }
    }
    Err(format!(
        "no free gRPC port on {} besides {}",
        bind.ip(),
        bind.port()
    ))
}

/// The host others reach a process bound to `bind` by.
fn advertised(bind: SocketAddr, advertise_host: Option<String>) -> String {
    advertise_host.unwrap_or_else(|| bind.ip().to_string())
}

async fn scheduler(
    bind: SocketAddr,
    advertise_host: Option<String>,
    executor_timeout_seconds: u64,
) -> Result<(), String> {
    let bind = with_port(bind).map_err(|e| format!("--bind {bind}: {e}"))?;
    let mut config = scheduler_config()
        .with_hostname(advertised(bind, advertise_host))
        .with_port(bind.port());
    config.bind_host = bind.ip().to_string();
    config.executor_timeout_seconds = executor_timeout_seconds;
    // Look for lost executors at least as often as they may be declared lost.
    config.expire_dead_executor_interval_seconds = config
        .expire_dead_executor_interval_seconds
        .min(executor_timeout_seconds.max(1));
    let cluster = BallistaCluster::new_from_config(&config)
        .await
        .map_err(|e| e.to_string())?;
    let server = tokio::spawn(ballista_scheduler::scheduler_process::start_server(
        cluster,
        bind,
        Arc::new(config),
    ));
    // Announce the address once it accepts connections (bounded: 10 s).
    let mut listening = false;
    for _ in 0..400 {
        if server.is_finished() {
            break;
        }
        if TcpStream::connect_timeout(&bind, Duration::from_millis(100)).is_ok() {
            println!("lance-cluster scheduler listening on {bind}");
            listening = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    if !listening && !server.is_finished() {
        server.abort();
        return Err(format!(
            "scheduler on {bind}: not accepting connections after 10 s"
        ));
    }
    tokio::select! {
        served = server => match served {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!("scheduler on {bind}: {e}")),
            Err(e) => Err(format!("scheduler on {bind}: {e}")),
        },
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}

/// The executor's flags beyond its addresses.
struct ExecutorOptions {
    grpc_port: Option<u16>,
    slots: Option<usize>,
    advertise_host: Option<String>,
    work_dir: Option<String>,
    heartbeat_seconds: u64,
}

async fn executor(
    scheduler: String,
    bind: SocketAddr,
    options: ExecutorOptions,
) -> Result<(), String> {
    let ExecutorOptions {
        grpc_port,
        slots,
        advertise_host,
        work_dir,
        heartbeat_seconds,
    } = options;
    if scheduler.contains("://") {
        return Err(format!(
            "--scheduler '{scheduler}': expected HOST:PORT (no scheme)"
        ));
    }
    if bind.ip().is_unspecified() && advertise_host.is_none() {
        return Err(format!(
            "--bind {bind}: a wildcard address needs --advertise-host (the name the \
             scheduler and the other executors reach this executor by)"
        ));
    }
    let (scheduler_host, scheduler_port) = scheduler
        .rsplit_once(':')
        .and_then(|(host, port)| Some((host.to_string(), port.parse::<u16>().ok()?)))
        .ok_or_else(|| format!("--scheduler '{scheduler}': expected HOST:PORT"))?;
    let bind = with_port(bind).map_err(|e| format!("--bind {bind}: {e}"))?;
    let grpc_port = match grpc_port {
        Some(port) => port,
        None => free_port_besides(bind)?,
    };
    if grpc_port == bind.port() {
        return Err(format!(
            "--grpc-port {grpc_port}: the Arrow Flight service already uses it (--bind {bind})"
        ));
    }
    let mut config = executor_config();
    config.bind_host = bind.ip().to_string();
    config.port = bind.port();
    config.grpc_port = grpc_port;
    config.external_host = Some(advertised(bind, advertise_host));
    config.scheduler_host = scheduler_host;
    config.scheduler_port = scheduler_port;
    // An executor may start before its scheduler: retry for 30 s.
    config.scheduler_connect_timeout_seconds = 30;
    config.work_dir = work_dir;
    config.executor_heartbeat_interval_seconds = heartbeat_seconds.max(1);
    if let Some(slots) = slots {
        if slots == 0 {
            return Err("--slots must be at least 1".into());
        }
        config.concurrent_tasks = slots;
    }
    println!(
        "lance-cluster executor starting on {bind} (gRPC port {grpc_port}), scheduler {scheduler}"
    );
    ballista_executor::executor_process::start_executor_process(Arc::new(config))
        .await
        .map_err(|e| format!("executor on {bind}: {e}"))
}
