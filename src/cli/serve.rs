//! `shardgate serve`: run the proxy.

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use super::runtime::{StopSignals, THREAD_STACK_BYTES};
use super::{install_zk_auth, CliError};
use crate::control::process::Process;
use crate::control::Control;
use crate::frontend::takeover::donor::TakeoverSocket;
use crate::frontend::takeover::{receiver, socket_path};
use crate::topology::bootstrap::{default_proxy_id, Bootstrap};
use crate::topology::source::{check_proxy_id, parse_source, ConfigSource};

#[derive(clap::Args)]
pub(super) struct ServeArgs {
    /// Where the config document is: a YAML file, or a znode as
    /// zookeeper://host:port[,host:port...]/path (every proxy started
    /// from it follows its changes). Required unless the bootstrap
    /// file has `config:`.
    #[arg(long)]
    config: Option<String>,
    /// A YAML file with this process's own settings: `config`,
    /// `listen`, `admin_listen`, `metrics_listen`, `proxy_id` (flags
    /// beat it).
    #[arg(long)]
    bootstrap: Option<PathBuf>,
    /// Client listen address, instead of the document's `listen`
    /// (a reload never changes it).
    #[arg(long)]
    listen: Option<String>,
    /// Admin listen address, instead of the document's `admin.listen`.
    #[arg(long)]
    admin_listen: Option<String>,
    /// Metrics listen address, instead of the document's
    /// `metrics.listen` (adds the endpoint if the document has none).
    #[arg(long)]
    metrics_listen: Option<String>,
    /// This proxy's id in the ZooKeeper registry (default: host
    /// name:process id); a second live proxy with the same id is
    /// refused.
    #[arg(long)]
    proxy_id: Option<String>,
    /// Threads that run client sessions and backend I/O (default: the
    /// machine's cores less one, at least one). One thread runs every
    /// session on a single event loop with no cross-thread wake-ups,
    /// the cheapest per statement on a small machine.
    #[arg(long, env = "SHARDGATE_THREADS")]
    threads: Option<NonZeroUsize>,
    /// Take over from the proxy running with this config: its listening
    /// sockets and client sessions move to this process over the
    /// takeover socket (`takeover.socket`), and the old process exits 0
    /// once it holds no session.
    #[arg(long)]
    takeover: bool,
}

/// Runs the proxy until SIGTERM or SIGINT, or a failure of its client
/// listener.
pub(super) fn run(
    args: ServeArgs,
    zk_auth_file: Option<PathBuf>,
    zk_allow_open_acl: bool,
) -> Result<(), CliError> {
    let flags = Bootstrap {
        config: args.config,
        listen: args.listen,
        admin_listen: args.admin_listen,
        metrics_listen: args.metrics_listen,
        proxy_id: args.proxy_id,
        zookeeper_auth_file: zk_auth_file,
        zookeeper_allow_open_acl: zk_allow_open_acl,
    };
    let settings = match args.bootstrap {
        Some(path) => Bootstrap::load(&path)?.overlaid(flags),
        None => flags,
    };
    install_zk_auth(settings.zookeeper_auth_file.as_deref())?;
    let (source, mut process) = serve_settings(settings)?;
    process.takeover = args.takeover;
    let threads = args.threads.unwrap_or_else(default_serve_threads);
    let takeover = args.takeover;
    tracing::info!(threads, "starting the runtime");
    let runtime = serve_runtime(threads)?;
    // A one-thread runtime polls every task on the thread that calls
    // `block_on`: a thread of ours, with the workers' stack size.
    // The ZooKeeper client must connect inside the runtime.
    std::thread::Builder::new()
        .name("shardgate".to_owned())
        .stack_size(THREAD_STACK_BYTES)
        .spawn(move || runtime.block_on(start_and_serve(source, process, takeover)))
        .map_err(CliError::Thread)?
        .join()
        .map_err(|_| CliError::ThreadPanicked)?
}

/// The proxy's threads when `--threads` is not given: the cores less one
/// (left to the kernel's network work and the processes beside the proxy),
/// at least one. Measured on 2 cores (BENCHMARKS.md): one thread costs
/// about a quarter less CPU per statement than two, and the server behind
/// it less too.
fn default_serve_threads() -> NonZeroUsize {
    let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
    NonZeroUsize::new(cores.saturating_sub(1)).unwrap_or(NonZeroUsize::MIN)
}

/// The proxy's runtime: with one thread, a single event loop on the main
/// thread (every session and backend connection polled there, no work
/// stealing); with more, a work-stealing pool of that many workers.
fn serve_runtime(threads: NonZeroUsize) -> Result<tokio::runtime::Runtime, CliError> {
    let mut builder = if threads.get() == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(threads.get());
        builder
    };
    builder
        .thread_stack_size(THREAD_STACK_BYTES)
        .enable_all()
        .build()
        .map_err(CliError::Runtime)
}

/// The config source and this process's settings from `serve`'s flags
/// laid over its bootstrap file.
fn serve_settings(settings: Bootstrap) -> Result<(ConfigSource, Process), CliError> {
    let text = settings.config.clone().ok_or(CliError::NoConfig)?;
    let source = parse_source(&text)?;
    let overrides = settings.overrides()?;
    let id = settings.proxy_id.unwrap_or_else(default_proxy_id);
    check_proxy_id(&id)?;
    let mut process = Process::new(id, overrides);
    process.allow_open_acl = settings.zookeeper_allow_open_acl;
    Ok((source, process))
}

/// Loads the config from its source (inside the runtime: a ZooKeeper
/// session is opened there) and runs the proxy.
async fn start_and_serve(
    source: ConfigSource,
    process: Process,
    takeover: bool,
) -> Result<(), CliError> {
    // Taken over before the proxy registers anywhere: a SIGTERM from then
    // on leaves the registry cleanly instead of killing the process.
    let stop = StopSignals::take();
    let control = match source {
        ConfigSource::File(path) => {
            Control::from_file_as(path, process).map_err(CliError::Config)?
        }
        ConfigSource::ZooKeeper(location) => Control::from_zookeeper(location, process)
            .await
            .map_err(CliError::ZooKeeper)?,
    };
    serve(control, stop, takeover).await
}

/// Runs the proxy until its client listener ends (only on a failure) or
/// SIGTERM or SIGINT comes: then stops gracefully
/// (`control::shutdown::drain`; a second signal cuts the sessions left).
async fn serve(control: Control, mut stop: StopSignals, takeover: bool) -> Result<(), CliError> {
    let control = Arc::new(control);
    let path = socket_path(&control.engine.topology.load().config);
    // The start-up (backends probed, columns read) before a takeover asks
    // for the listening sockets: meanwhile the old process still accepts.
    let prepared = match crate::server::prepare(&control).await {
        Ok(prepared) => prepared,
        Err(e) => {
            control.shutdown().await;
            return Err(CliError::Listen(e));
        }
    };
    let (taking, inherited) = if takeover {
        let connected = match &path {
            Some(path) => receiver::connect(path).await,
            None => Err(receiver::TakeoverError::NoSocket),
        };
        match connected {
            Ok((taking, inherited)) => (Some(taking), Some(inherited)),
            Err(e) => {
                control.shutdown().await;
                return Err(e.into());
            }
        }
    } else {
        (None, None)
    };
    let running = match crate::server::run_prepared(control.clone(), prepared, inherited).await {
        Ok(running) => running,
        Err(e) => {
            // Registered before binding: leave the registry at once, so a
            // retry with the same id is not refused for a session timeout.
            control.shutdown().await;
            return Err(CliError::Listen(e));
        }
    };
    let listening = running.listening;
    tracing::info!(
        client = %listening.client,
        admin = ?listening.admin,
        metrics = ?listening.metrics,
        proxy_id = %control.process.id,
        "shardgate started"
    );
    let donor = running.donor(&control);
    let bound = Arc::new(OnceLock::<TakeoverSocket>::new());
    let engine = control.engine.clone();
    let socket = bound.clone();
    let handed_over = async move {
        if let Some(taking) = taking {
            let received = taking.receive_sessions(engine).await;
            tracing::info!(
                sessions = received.sessions,
                completed = received.completed,
                "took over from the old process"
            );
        }
        let Some(path) = path else {
            tracing::info!("no takeover socket (client port 0, no takeover.socket)");
            return std::future::pending().await;
        };
        match TakeoverSocket::bind(&path, takeover).await {
            Ok(bound) => {
                tracing::info!(socket = %path.display(), "takeover socket ready");
                donor.serve(socket.get_or_init(|| bound)).await
            }
            Err(e) => {
                tracing::warn!(%e, "no takeover socket: this process cannot be taken over");
                std::future::pending().await
            }
        }
    };
    tokio::select! {
        done = handed_over => {
            tracing::info!("{done}");
            if control.engine.sessions.count() > 0 {
                // Sessions the hand-off could not move: a stop's drain.
                let summary = crate::control::shutdown::drain(&control, async {
                    stop.received().await;
                })
                .await;
                tracing::info!("{summary}");
                return summary.outcome().map_err(CliError::SessionsCut);
            }
            // The new process registered before it took the listeners.
            control.shutdown().await;
            Ok(())
        }
        ended = running.client_listener_ended() => {
            control.shutdown().await;
            Err(CliError::ListenerEnded(ended))
        }
        signal = stop.received() => {
            tracing::info!("{signal}: draining (a second signal cuts the sessions left)");
            let summary = crate::control::shutdown::drain(&control, async {
                stop.received().await;
            })
            .await;
            tracing::info!("{summary}");
            if let Some(socket) = bound.get() {
                socket.unbind();
            }
            summary.outcome().map_err(CliError::SessionsCut)
        }
    }
}
