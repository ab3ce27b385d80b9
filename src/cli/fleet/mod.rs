//! `shardgate fleet init|migrate|move|split|verify`: the operator's tooling
//! over the fleet's hosts.

mod init;
mod migrate;
mod move_shards;
mod split;
mod verify;

use clap::Subcommand;

use super::CliError;

#[derive(Subcommand)]
pub(super) enum FleetCommand {
    /// Create every shard database and its tables on the master that owns it.
    Init(init::InitArgs),
    /// Apply one schema change (`ALTER TABLE pins ADD COLUMN ...`) to every
    /// shard database of the table's fleet, resumably; exit status 1 when a
    /// shard failed or the shards' definitions differ.
    Migrate(migrate::MigrateArgs),
    /// Give shards a new master through ZooKeeper, for every proxy of the
    /// document: checks (the edit, the source answers, the target is a
    /// running GTID replica of it), a fleet-wide pause, the target's
    /// catch-up, the version-checked push, the wait until every live proxy
    /// runs it, the resume. Prints each step, then what is left to clean
    /// up; exit status 1 on failure.
    Move(move_shards::MoveArgs),
    /// Take shards A-B of one master to an empty server: prepare (checks),
    /// copy (one consistent snapshot, then GTID replication), verify
    /// (every row), cutover (the `move` sequence), cleanup (replication
    /// removed, each side drops what it no longer owns). Each phase is
    /// recorded in a state file; `--resume` continues after a crash.
    Split(split::SplitArgs),
    /// Check every host: each shard database on its master and nowhere else,
    /// with the schema's tables and columns; a line per problem, exit status
    /// 1 when there is one.
    Verify(verify::VerifyArgs),
}

/// Runs one `fleet` command.
pub(super) fn run(command: FleetCommand) -> Result<(), CliError> {
    match command {
        FleetCommand::Init(args) => init::run(&args),
        FleetCommand::Migrate(args) => migrate::run(args),
        FleetCommand::Move(args) => move_shards::run(args),
        FleetCommand::Split(args) => split::run(args),
        FleetCommand::Verify(args) => verify::run(&args),
    }
}

/// The first and last shard of `--shards A-B` (or `--shards A`).
pub(super) fn shard_range(shards: &str) -> Result<(u32, u32), CliError> {
    let number = |text: &str| {
        text.trim().parse::<u32>().map_err(|_| CliError::NotAShard {
            shards: shards.to_owned(),
            text: text.to_owned(),
        })
    };
    match shards.split_once('-') {
        Some((first, last)) => Ok((number(first)?, number(last)?)),
        None => Ok((number(shards)?, number(shards)?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_range_reads_a_range_or_one_shard() {
        assert_eq!(shard_range("3-9").ok(), Some((3, 9)));
        assert_eq!(shard_range(" 7 ").ok(), Some((7, 7)));
        assert_eq!(
            shard_range("a-2").map_err(|e| e.to_string()),
            Err("--shards a-2: 'a' is not a shard number; expected A-B".to_owned())
        );
    }
}
