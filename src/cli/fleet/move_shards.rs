//! `shardgate fleet move --source zookeeper://... --shards A-B --to HOST:PORT`.

use std::path::PathBuf;

use super::shard_range;
use crate::cli::runtime::{runtime, StopSignals};
use crate::cli::{zookeeper_source, CliError};
use crate::control::cutover::{fleet_move_until, MoveRequest, StepEvent};

#[derive(clap::Args)]
pub(in crate::cli) struct MoveArgs {
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
}

/// Runs the move, its steps on stderr as they go, then prints each step's
/// time and what is left to clean up.
pub(super) fn run(args: MoveArgs) -> Result<(), CliError> {
    if let Some(file) = args.config {
        return Err(CliError::MoveFromFile {
            file,
            shards: args.shards,
            fleet: args.fleet,
            to: args.to,
        });
    }
    let location = zookeeper_source(&args.source.ok_or(CliError::MoveWithoutSource)?)?;
    let (first, last) = shard_range(&args.shards)?;
    let request = MoveRequest {
        first,
        last,
        fleet: args.fleet,
        target: args.to,
        dry_run: args.dry_run,
    };
    let progress = |event: StepEvent<'_>| match event {
        StepEvent::Started(name) => eprintln!("{name} ..."),
        StepEvent::Ended(step) => eprintln!("{step}"),
    };
    let report = runtime()?
        .block_on(async {
            // Taken before the move starts: SIGINT or SIGTERM withdraws its
            // pause (before the write) or says how to resume (after).
            let mut stop = StopSignals::take();
            fleet_move_until(location, &request, &progress, stop.received()).await
        })
        .map_err(|e| CliError::Move(Box::new(e)))?;
    for step in &report.steps {
        println!("{}\t{}\t{}", step.name, step.ms, step.detail);
    }
    for cleanup in &report.cleanup {
        println!("cleanup\t\t{cleanup}");
    }
    Ok(())
}
