//! `shardgate fleet migrate --config FILE --sql "ALTER TABLE ..."`.

use std::path::PathBuf;

use crate::cli::runtime::runtime;
use crate::cli::{load, CliError};
use crate::ops::{migrate, plan_migration, MigrateOptions, DEFAULT_CONNECTIONS_PER_HOST};

#[derive(clap::Args)]
pub(in crate::cli) struct MigrateArgs {
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
    #[arg(long, default_value_t = DEFAULT_CONNECTIONS_PER_HOST)]
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
}

/// Plans the change, then prints the plan (`--dry-run`) or applies it and
/// prints the report; fails when a shard failed or the definitions differ.
pub(super) fn run(args: MigrateArgs) -> Result<(), CliError> {
    let mut options = MigrateOptions::new(args.sql);
    options.fleet = args.fleet;
    options.connections_per_host = args.concurrency_per_host;
    options.state = args.state;
    options.limit = args.limit;
    let topology = load(&args.config)?;
    let plan = plan_migration(&topology, &options)?;
    if args.dry_run {
        println!("{plan}\ndry run: nothing was changed");
        return Ok(());
    }
    let report = runtime()?
        .block_on(migrate(&topology, &plan, &options))
        .map_err(CliError::Migrate)?;
    if report.is_ok() {
        println!("{report}");
        Ok(())
    } else {
        Err(CliError::MigrateIncomplete(Box::new(report)))
    }
}
