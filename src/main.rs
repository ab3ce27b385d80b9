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
use shardgate::control::Control;
use shardgate::id::ObjectId;
use shardgate::topology::Topology;
use tracing_subscriber::EnvFilter;

#[derive(Parser)]
#[command(
    name = "shardgate",
    version,
    about = "MySQL routing proxy for a sharded MySQL/MariaDB fleet"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the proxy.
    Serve {
        /// Config file (YAML).
        #[arg(long)]
        config: PathBuf,
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
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}

fn run(command: Command) -> Result<(), String> {
    match command {
        Command::Serve { config, threads } => {
            let control = Control::from_file(config).map_err(|errors| format!("{errors}"))?;
            let threads = threads.unwrap_or_else(default_serve_threads);
            tracing::info!(threads, "starting the runtime");
            let runtime = serve_runtime(threads)?;
            // A one-thread runtime polls every task on the thread that calls
            // `block_on`: a thread of ours, with the workers' stack size.
            std::thread::Builder::new()
                .name("shardgate".to_owned())
                .stack_size(THREAD_STACK_BYTES)
                .spawn(move || runtime.block_on(serve(control)))
                .map_err(|e| format!("cannot start the proxy's thread: {e}"))?
                .join()
                .map_err(|_| "the proxy's thread panicked".to_owned())?
        }
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

/// Runs the proxy until its client listener ends (only on a failure).
async fn serve(control: Control) -> Result<(), String> {
    let running = shardgate::server::run(Arc::new(control))
        .await
        .map_err(|e| e.to_string())?;
    let listening = running.listening;
    tracing::info!(
        client = %listening.client,
        admin = ?listening.admin,
        metrics = ?listening.metrics,
        "shardgate started"
    );
    Err(format!(
        "{}; shardgate stops",
        running.client_listener_ended().await
    ))
}
