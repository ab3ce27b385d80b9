//! The `shardgate` command: run the proxy, check a config, encode and
//! decode IDs, create, verify and migrate the fleet's shard databases.

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

// A panic must end the one session it happened in, not the process: the
// session tasks catch it (`net::isolate`), which `panic = "abort"` would
// defeat.
#[cfg(panic = "abort")]
compile_error!("shardgate must be built with panic = \"unwind\" (see net::isolate)");

use clap::{Parser, Subcommand};
use shardgate::control::process::Process;
use shardgate::control::Control;
use shardgate::id::ObjectId;
use shardgate::topology::bootstrap::{default_proxy_id, Bootstrap};
use shardgate::topology::source::{check_proxy_id, parse_source, ConfigSource, ZkLocation};
use shardgate::topology::Topology;

#[derive(Parser)]
#[command(
    name = "shardgate",
    version,
    about = "MySQL routing proxy for a sharded MySQL/MariaDB fleet"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// A file holding `user:password` of the ZooKeeper digest identity to
    /// authenticate as; znodes this process creates are then readable and
    /// writable by that identity only (for `serve`, also the bootstrap
    /// file's `zookeeper_auth_file`).
    #[arg(
        long,
        global = true,
        env = "SHARDGATE_ZK_AUTH_FILE",
        value_name = "FILE"
    )]
    zk_auth_file: Option<PathBuf>,
    /// Accept a config znode anyone who reaches ZooKeeper can change (a
    /// test ensemble): `serve` refuses to run on one, and `config push`
    /// to write or create one, without it (for `serve`, also the
    /// bootstrap file's `zookeeper_allow_open_acl: true`).
    #[arg(long, global = true, env = "SHARDGATE_ZK_ALLOW_OPEN_ACL")]
    zk_allow_open_acl: bool,
    /// `text`, or `json`: one JSON object a line, with the session's
    /// connection id and user.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value_t,
        hide_possible_values = true
    )]
    log_format: shardgate::server::LogFormat,
}

#[derive(Subcommand)]
enum Command {
    /// Run the proxy.
    Serve {
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
    },
    /// Validate a config file; prints every problem with its line.
    CheckConfig {
        /// Config file (YAML).
        file: PathBuf,
    },
    /// Encode or decode 64-bit object IDs.
    Id {
        #[command(subcommand)]
        command: IdCommand,
    },
    /// Fleet tooling.
    Fleet {
        #[command(subcommand)]
        command: FleetCommand,
    },
    /// The config document in ZooKeeper.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Validate a config file fully (as check-config) and write it to the
    /// znode, only if nobody wrote it since it was read (and it is at
    /// `--expected-version`, when given); creates the znode and its parents
    /// if missing. Exit status 1 when refused.
    Push {
        /// Config file (YAML).
        file: PathBuf,
        /// The znode: zookeeper://host:port[,host:port...]/path.
        #[arg(long)]
        source: String,
        /// The znode version this file is based on (`config get` prints it).
        #[arg(long)]
        expected_version: Option<i32>,
    },
    /// Print the document to stdout, and its version (znode version and
    /// MD5) to stderr.
    Get {
        /// The znode: zookeeper://host:port[,host:port...]/path.
        #[arg(long)]
        source: String,
    },
}

#[derive(Subcommand)]
enum IdCommand {
    /// Split an ID into shard, type and local id.
    Decode {
        /// The 64-bit ID.
        id: String,
    },
    /// Compose an ID from shard, type and local id.
    Encode {
        /// Shard number.
        shard: u32,
        /// Type id.
        type_id: u16,
        /// Local id (the row's AUTO_INCREMENT).
        local_id: u64,
    },
}

#[derive(Subcommand)]
enum FleetCommand {
    /// Create every shard database and its tables on the master that owns it.
    Init {
        /// Config file (YAML).
        #[arg(long)]
        config: PathBuf,
        /// Schema file with the per-shard CREATE TABLE statements.
        #[arg(long)]
        schema: PathBuf,
    },
    /// Apply one schema change (`ALTER TABLE pins ADD COLUMN ...`) to every
    /// shard database of the table's fleet, resumably; exit status 1 when a
    /// shard failed or the shards' definitions differ.
    Migrate {
        /// Config file (YAML).
        #[arg(long)]
        config: PathBuf,
        /// The schema change, naming its table unqualified.
        #[arg(long)]
        sql: String,
        /// The table's fleet (needed for a table the config does not name).
        #[arg(long)]
        fleet: Option<String>,
        /// Concurrent connections per host.
        #[arg(long, default_value_t = shardgate::fleet::DEFAULT_CONNECTIONS_PER_HOST)]
        concurrency_per_host: usize,
        /// Print the plan (hosts, shard counts, the statement per shard) and
        /// change nothing.
        #[arg(long)]
        dry_run: bool,
        /// The state file recording the shard databases done (default:
        /// `shardgate-migrate-<fleet>-<table>-<hash>.state` in the working
        /// directory); a rerun skips them.
        #[arg(long)]
        state: Option<PathBuf>,
        /// Stop after this many shard databases changed, as an interruption
        /// would (the rest on the next run).
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Give shards a new master through ZooKeeper, for every proxy of the
    /// document: checks (the edit, the source answers, the target is a
    /// running GTID replica of it), a fleet-wide pause, the target's
    /// catch-up, the version-checked push, the wait until every live proxy
    /// runs it, the resume. Prints each step, then what is left to clean
    /// up; exit status 1 on failure.
    Move {
        /// The document: zookeeper://host:port[,host:port...]/path.
        #[arg(long)]
        source: Option<String>,
        /// Refused: a file-sourced proxy moves shards with MOVE SHARDS on
        /// its admin port.
        #[arg(long, conflicts_with = "source")]
        config: Option<PathBuf>,
        /// The shards, `A-B` (or one shard).
        #[arg(long)]
        shards: String,
        /// The fleet (needed when several fleets have those shards).
        #[arg(long)]
        fleet: Option<String>,
        /// The new master, HOST:PORT: a running GTID replica of the
        /// shards' master.
        #[arg(long)]
        to: String,
        /// Run the checks and say what would happen; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Check every host: each shard database on its master and nowhere else,
    /// with the schema's tables and columns; a line per problem, exit status
    /// 1 when there is one.
    Verify {
        /// Config file (YAML).
        #[arg(long)]
        config: PathBuf,
        /// Schema to compare tables with (default: the config's `schema:`).
        #[arg(long)]
        schema: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    shardgate::server::init_logging(cli.log_format);
    match run(cli.command, cli.zk_auth_file, cli.zk_allow_open_acl) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}

/// Authenticates every ZooKeeper session of this process with the
/// credentials in `file`, if one is given.
fn install_zk_auth(file: Option<&std::path::Path>) -> Result<(), String> {
    let auth = file
        .map(shardgate::control::zookeeper::auth::ZkAuth::load)
        .transpose()
        .map_err(|e| e.to_string())?;
    shardgate::control::zookeeper::auth::install(auth).map_err(|e| e.to_string())
}

fn run(
    command: Command,
    zk_auth_file: Option<PathBuf>,
    zk_allow_open_acl: bool,
) -> Result<(), String> {
    if !matches!(command, Command::Serve { .. }) {
        install_zk_auth(zk_auth_file.as_deref())?;
    }
    match command {
        Command::Serve {
            config,
            bootstrap,
            listen,
            admin_listen,
            metrics_listen,
            proxy_id,
            threads,
        } => {
            let flags = Bootstrap {
                config,
                listen,
                admin_listen,
                metrics_listen,
                proxy_id,
                zookeeper_auth_file: zk_auth_file,
                zookeeper_allow_open_acl: zk_allow_open_acl,
            };
            let settings = match bootstrap {
                Some(path) => Bootstrap::load(&path)?.overlaid(flags),
                None => flags,
            };
            install_zk_auth(settings.zookeeper_auth_file.as_deref())?;
            let (source, process) = serve_settings(settings)?;
            let threads = threads.unwrap_or_else(default_serve_threads);
            tracing::info!(threads, "starting the runtime");
            let runtime = serve_runtime(threads)?;
            // A one-thread runtime polls every task on the thread that calls
            // `block_on`: a thread of ours, with the workers' stack size.
            // The ZooKeeper client must connect inside the runtime.
            std::thread::Builder::new()
                .name("shardgate".to_owned())
                .stack_size(THREAD_STACK_BYTES)
                .spawn(move || runtime.block_on(start_and_serve(source, process)))
                .map_err(|e| format!("cannot start the proxy's thread: {e}"))?
                .join()
                .map_err(|_| "the proxy's thread panicked".to_owned())?
        }
        Command::Config { command } => config_command(command, zk_allow_open_acl),
        Command::CheckConfig { file } => {
            let topology = load(&file)?;
            let shards: u32 = topology.fleets.iter().map(|f| f.shard_count).sum();
            println!(
                "{}: ok ({} fleets, {} shards, {} hosts, {} tables)",
                file.display(),
                topology.fleets.len(),
                shards,
                topology.hosts.len(),
                topology.tables.len()
            );
            Ok(())
        }
        Command::Id { command } => id_command(command),
        Command::Fleet {
            command: FleetCommand::Init { config, schema },
        } => {
            let topology = load(&config)?;
            let schema_sql = std::fs::read_to_string(&schema)
                .map_err(|e| format!("cannot read {}: {e}", schema.display()))?;
            let report = runtime()?
                .block_on(shardgate::fleet::init(&topology, &schema_sql, true))
                .map_err(|e| format!("fleet init failed: {e}"))?;
            println!("{report}");
            Ok(())
        }
        Command::Fleet {
            command: FleetCommand::Verify { config, schema },
        } => fleet_verify(&config, schema.as_deref()),
        Command::Fleet {
            command:
                FleetCommand::Move {
                    source,
                    config,
                    shards,
                    fleet,
                    to,
                    dry_run,
                },
        } => fleet_move_command(source, config, &shards, fleet, to, dry_run),
        Command::Fleet {
            command:
                FleetCommand::Migrate {
                    config,
                    sql,
                    fleet,
                    concurrency_per_host,
                    dry_run,
                    state,
                    limit,
                },
        } => {
            let mut options = shardgate::fleet::MigrateOptions::new(sql);
            options.fleet = fleet;
            options.connections_per_host = concurrency_per_host;
            options.state = state;
            options.limit = limit;
            fleet_migrate(&config, &options, dry_run)
        }
    }
}

fn fleet_migrate(
    config: &Path,
    options: &shardgate::fleet::MigrateOptions,
    dry_run: bool,
) -> Result<(), String> {
    let topology = load(config)?;
    let plan = shardgate::fleet::plan_migration(&topology, options).map_err(|e| e.to_string())?;
    if dry_run {
        println!("{plan}\ndry run: nothing was changed");
        return Ok(());
    }
    let report = runtime()?
        .block_on(shardgate::fleet::migrate(&topology, &plan, options))
        .map_err(|e| format!("fleet migrate failed: {e}"))?;
    if report.is_ok() {
        println!("{report}");
        Ok(())
    } else {
        Err(report.to_string())
    }
}

fn fleet_move_command(
    source: Option<String>,
    config: Option<PathBuf>,
    shards: &str,
    fleet: Option<String>,
    to: String,
    dry_run: bool,
) -> Result<(), String> {
    use shardgate::control::cutover::{fleet_move_until, MoveRequest, StepEvent};
    if let Some(file) = config {
        return Err(format!(
            "fleet move works on a ZooKeeper document (--source zookeeper://...); a proxy started from \
             the config file {} moves shards itself: run MOVE SHARDS {shards}{} TO {to} on its admin port",
            file.display(),
            fleet
                .as_deref()
                .map_or_else(String::new, |f| format!(" IN {f}"))
        ));
    }
    let location =
        zookeeper_source(&source.ok_or("give the document: --source zookeeper://host:port/path")?)?;
    let number = |text: &str| {
        text.trim()
            .parse::<u32>()
            .map_err(|_| format!("--shards {shards}: '{text}' is not a shard number; expected A-B"))
    };
    let (first, last) = match shards.split_once('-') {
        Some((first, last)) => (number(first)?, number(last)?),
        None => (number(shards)?, number(shards)?),
    };
    let request = MoveRequest {
        first,
        last,
        fleet,
        target: to,
        dry_run,
    };
    let progress = |event: StepEvent<'_>| match event {
        StepEvent::Started(name) => eprintln!("{name} ..."),
        StepEvent::Ended(step) => eprintln!("{step}"),
    };
    let report = runtime()?
        .block_on(async {
            // Taken before the move starts: SIGINT or SIGTERM withdraws its
            // pause (before the write) or says how to resume (after).
            let stop = StopSignals::take();
            fleet_move_until(location, &request, &progress, stop.received()).await
        })
        .map_err(|e| e.to_string())?;
    for step in &report.steps {
        println!("{}\t{}\t{}", step.name, step.ms, step.detail);
    }
    for cleanup in &report.cleanup {
        println!("cleanup\t\t{cleanup}");
    }
    Ok(())
}

fn fleet_verify(config: &Path, schema: Option<&Path>) -> Result<(), String> {
    let topology = load(config)?;
    let schema_sql = schema
        .map(Path::to_path_buf)
        .or_else(|| shardgate::fleet::configured_schema_path(&topology, Some(config)))
        .map(|path| shardgate::fleet::read_schema(&path))
        .transpose()
        .map_err(|e| e.to_string())?;
    let report = runtime()?
        .block_on(shardgate::fleet::verify_with_schema(
            &topology,
            schema_sql.as_deref(),
        ))
        .map_err(|e| format!("fleet verify failed: {e}"))?;
    for problem in report.problems() {
        println!("{problem}");
    }
    if report.is_ok() {
        println!("fleet verify: {report}");
        Ok(())
    } else {
        Err(format!("fleet verify: {report}"))
    }
}

fn id_command(command: IdCommand) -> Result<(), String> {
    match command {
        IdCommand::Decode { id } => {
            let raw: u64 = id
                .trim()
                .parse()
                .map_err(|_| format!("'{id}' is not a 64-bit unsigned integer"))?;
            let fields = ObjectId::decode(raw).map_err(|e| e.to_string())?;
            println!(
                "shard={} type={} local={}",
                fields.shard, fields.type_id, fields.local_id
            );
            Ok(())
        }
        IdCommand::Encode {
            shard,
            type_id,
            local_id,
        } => {
            let id = ObjectId {
                shard,
                type_id,
                local_id,
            }
            .encode()
            .map_err(|e| e.to_string())?;
            println!("{id}");
            Ok(())
        }
    }
}

fn load(path: &Path) -> Result<Topology, String> {
    Topology::load(path).map_err(|errors| format!("{errors}"))
}

/// Stack of the runtime's worker and blocking threads. The router keeps its
/// recursion within a fraction of 2 MiB (the nesting limits); the rest is
/// margin for the session futures, which are polled on these stacks.
const THREAD_STACK_BYTES: usize = 8 * 1024 * 1024;

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .thread_stack_size(THREAD_STACK_BYTES)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
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
fn serve_runtime(threads: NonZeroUsize) -> Result<tokio::runtime::Runtime, String> {
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
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

/// The config source and this process's settings from `serve`'s flags
/// laid over its bootstrap file.
fn serve_settings(settings: Bootstrap) -> Result<(ConfigSource, Process), String> {
    let text = settings.config.clone().ok_or(
        "give the config: --config FILE or --config zookeeper://host:port/path, \
         or a --bootstrap file with `config:`",
    )?;
    let source = parse_source(&text).map_err(|e| e.to_string())?;
    let overrides = settings.overrides()?;
    let id = settings.proxy_id.unwrap_or_else(default_proxy_id);
    check_proxy_id(&id)?;
    let mut process = Process::new(id, overrides);
    process.allow_open_acl = settings.zookeeper_allow_open_acl;
    Ok((source, process))
}

/// Loads the config from its source (inside the runtime: a ZooKeeper
/// session is opened there) and runs the proxy.
async fn start_and_serve(source: ConfigSource, process: Process) -> Result<(), String> {
    // Taken over before the proxy registers anywhere: a SIGTERM from then
    // on leaves the registry cleanly instead of killing the process.
    let stop = StopSignals::take();
    let control = match source {
        ConfigSource::File(path) => {
            Control::from_file_as(path, process).map_err(|errors| format!("{errors}"))?
        }
        ConfigSource::ZooKeeper(location) => Control::from_zookeeper(location, process)
            .await
            .map_err(|e| format!("{e}"))?,
    };
    serve(control, stop).await
}

/// Runs the proxy until its client listener ends (only on a failure) or
/// SIGTERM or SIGINT comes (a ZooKeeper-sourced proxy leaves the registry
/// first).
async fn serve(control: Control, stop: StopSignals) -> Result<(), String> {
    let control = Arc::new(control);
    let running = match shardgate::server::run(control.clone()).await {
        Ok(running) => running,
        Err(e) => {
            // Registered before binding: leave the registry at once, so a
            // retry with the same id is not refused for a session timeout.
            control.shutdown().await;
            return Err(e.to_string());
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
    tokio::select! {
        ended = running.client_listener_ended() => {
            control.shutdown().await;
            Err(format!("{ended}; shardgate stops"))
        }
        signal = stop.received() => {
            tracing::info!("{signal}: stopping (a ZooKeeper-sourced proxy leaves the registry first)");
            control.shutdown().await;
            Ok(())
        }
    }
}

/// SIGTERM and SIGINT, handled by the process from the moment they are
/// taken (a signal that came meanwhile is kept until [`StopSignals::received`]).
struct StopSignals(Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>);

impl StopSignals {
    fn take() -> Self {
        use tokio::signal::unix::{signal, SignalKind};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(term), Ok(int)) => Self(Some((term, int))),
            _ => Self(None),
        }
    }

    /// Waits for one; its name.
    async fn received(self) -> &'static str {
        match self.0 {
            Some((mut term, mut int)) => tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            },
            None => std::future::pending().await,
        }
    }
}

/// `shardgate config push|get`.
fn config_command(command: ConfigCommand, allow_open_acl: bool) -> Result<(), String> {
    match command {
        ConfigCommand::Push {
            file,
            source,
            expected_version,
        } => {
            let location = zookeeper_source(&source)?;
            let bytes = shardgate::topology::prescan::read_bounded(&file)
                .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            let name = file.display().to_string();
            let pushed = runtime()?
                .block_on(async {
                    shardgate::control::zookeeper::refuse_open_document(&location, allow_open_acl)
                        .await?;
                    shardgate::control::zookeeper::push(&location, &bytes, &name, expected_version)
                        .await
                })
                .map_err(|e| format!("config push refused: {e}"))?;
            let previous = pushed
                .previous
                .map_or_else(|| "created".to_owned(), |v| format!("was {v}"));
            println!(
                "{name}: pushed to {location}: znode version {} ({previous}), md5 {}",
                pushed.znode_version, pushed.version
            );
            Ok(())
        }
        ConfigCommand::Get { source } => {
            let location = zookeeper_source(&source)?;
            let document = runtime()?
                .block_on(shardgate::control::zookeeper::get(&location))
                .map_err(|e| format!("config get failed: {e}"))?;
            use std::io::Write;
            std::io::stdout()
                .write_all(&document.bytes)
                .map_err(|e| format!("cannot write the document: {e}"))?;
            eprintln!(
                "{location}: znode version {}, md5 {}",
                document.znode_version, document.version
            );
            Ok(())
        }
    }
}

fn zookeeper_source(text: &str) -> Result<ZkLocation, String> {
    match parse_source(text).map_err(|e| e.to_string())? {
        ConfigSource::ZooKeeper(location) => Ok(location),
        ConfigSource::File(_) => Err(format!(
            "--source {text}: give the znode as zookeeper://host:port[,host:port...]/path"
        )),
    }
}
