//! `shardgate check-config FILE`.

use std::path::PathBuf;

use super::{load, CliError};

#[derive(clap::Args)]
pub(super) struct CheckConfigArgs {
    /// Config file (YAML).
    file: PathBuf,
}

/// Validates the file and prints what it holds, or every problem with its
/// line.
pub(super) fn run(args: &CheckConfigArgs) -> Result<(), CliError> {
    let topology = load(&args.file)?;
    let shards: u32 = topology.fleets.iter().map(|f| f.shard_count).sum();
    println!(
        "{}: ok ({} fleets, {} shards, {} hosts, {} tables)",
        args.file.display(),
        topology.fleets.len(),
        shards,
        topology.hosts.len(),
        topology.tables.len()
    );
    Ok(())
}
