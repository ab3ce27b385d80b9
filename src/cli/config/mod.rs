//! `shardgate config push|get`: the config document in ZooKeeper.

mod get;
mod push;

use std::path::PathBuf;

use clap::Subcommand;

use super::CliError;

#[derive(Subcommand)]
pub(super) enum ConfigCommand {
    /// Validate a config file fully (as check-config) and write it to the
    /// znode, only if nobody wrote it since it was read (and it is at
    /// `--expected-version`, when given); creates the znode and its parents
    /// if missing. A file that would send existing data to other shards
    /// (compared with the znode's document) is refused unless
    /// `--allow-rehome`. Exit status 1 when refused.
    Push {
        /// Config file (YAML).
        file: PathBuf,
        /// The znode: zookeeper://host:port[,host:port...]/path.
        #[arg(long)]
        source: String,
        /// The znode version this file is based on (`config get` prints it).
        #[arg(long)]
        expected_version: Option<i32>,
        /// Write it even if it would send existing data to other shards
        /// (a changed shard count or database pattern, a renumbered type,
        /// a changed mod-shard `key` or table fleet): for after the data
        /// was moved to match.
        #[arg(long)]
        allow_rehome: bool,
    },
    /// Print the document to stdout, and its version (znode version and
    /// MD5) to stderr.
    Get {
        /// The znode: zookeeper://host:port[,host:port...]/path.
        #[arg(long)]
        source: String,
    },
}

/// Runs `config push` or `config get`.
pub(super) fn run(command: ConfigCommand, allow_open_acl: bool) -> Result<(), CliError> {
    match command {
        ConfigCommand::Push {
            file,
            source,
            expected_version,
            allow_rehome,
        } => push::run(
            &file,
            &source,
            expected_version,
            allow_rehome,
            allow_open_acl,
        ),
        ConfigCommand::Get { source } => get::run(&source),
    }
}
