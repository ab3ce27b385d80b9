//! Every way a command of the command line fails, each with the one line
//! it prints.

use std::io;
use std::path::PathBuf;

use crate::control::cutover::FleetMoveError;
use crate::control::zookeeper::auth::AuthError;
use crate::control::zookeeper::ZkError;
use crate::id::IdError;
use crate::ops::{MigrateReport, OpsError, RowVerifyError, RowVerifyReport, VerifyReport};
use crate::topology::bootstrap::BootstrapError;
use crate::topology::source::{ProxyIdError, SourceError};
use crate::topology::ConfigErrors;

/// Why a command failed; its `Display` is the line printed on stderr.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The `--zk-auth-file` credentials cannot be read or installed.
    #[error(transparent)]
    ZkAuth(#[from] AuthError),
    /// The config file cannot be read or is invalid (every problem, one per
    /// line).
    #[error("{0}")]
    Config(ConfigErrors),
    /// A file the command needs cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A `--config` or `--source` text is neither a file nor a znode.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// A `--source` names a file where a znode is needed.
    #[error("--source {text}: give the znode as zookeeper://host:port[,host:port...]/path")]
    NotAZnode {
        /// The flag's value.
        text: String,
    },
    /// The tokio runtime cannot be built.
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] io::Error),

    /// `serve` without a config source.
    #[error(
        "give the config: --config FILE or --config zookeeper://host:port/path, \
         or a --bootstrap file with `config:`"
    )]
    NoConfig,
    /// `serve`'s bootstrap file or listen addresses are unusable.
    #[error(transparent)]
    Bootstrap(#[from] BootstrapError),
    /// `serve`'s proxy id cannot name a registry entry.
    #[error(transparent)]
    ProxyId(#[from] ProxyIdError),
    /// The proxy's thread cannot be started.
    #[error("cannot start the proxy's thread: {0}")]
    Thread(#[source] io::Error),
    /// The proxy's thread panicked.
    #[error("the proxy's thread panicked")]
    ThreadPanicked,
    /// The config document cannot be read from ZooKeeper at start.
    #[error(transparent)]
    ZooKeeper(ZkError),
    /// A port cannot be listened on.
    #[error(transparent)]
    Listen(io::Error),
    /// The client listener ended (only on a failure).
    #[error("{0}; shardgate stops")]
    ListenerEnded(String),
    /// `serve --takeover` could not take over (the running proxy goes on).
    #[error("{0}")]
    Takeover(#[from] crate::frontend::takeover::receiver::TakeoverError),
    /// A graceful stop had to cut sessions (its summary line).
    #[error("{0}")]
    SessionsCut(String),
    /// `health`: the proxy is not ready, or could not be asked (why).
    #[error("{0}")]
    NotReady(String),

    /// `id decode` of a text that is not a number.
    #[error("'{0}' is not a 64-bit unsigned integer")]
    NotAnId(String),
    /// An ID or its fields out of range.
    #[error(transparent)]
    Id(#[from] IdError),
    /// `id --fleet` names no fleet of the config.
    #[error("unknown fleet '{fleet}' (fleets: {known})")]
    UnknownFleet {
        /// The name given.
        fleet: String,
        /// The config's fleets.
        known: String,
    },

    /// A schema file or a migration that cannot be used, before anything
    /// is done.
    #[error(transparent)]
    Ops(#[from] OpsError),
    /// `fleet init` failed on a host.
    #[error("fleet init failed: {0}")]
    Init(#[source] OpsError),
    /// `fleet migrate` could not run.
    #[error("fleet migrate failed: {0}")]
    Migrate(#[source] OpsError),
    /// `fleet migrate` ran, and a shard failed or the definitions differ.
    #[error("{0}")]
    MigrateIncomplete(Box<MigrateReport>),
    /// `fleet verify` could not read the hosts.
    #[error("fleet verify failed: {0}")]
    Verify(#[source] OpsError),
    /// `fleet verify` found problems (printed above it, one per line).
    #[error("fleet verify: {0}")]
    VerifyProblems(Box<VerifyReport>),
    /// `fleet verify --rows` could not compare.
    #[error("fleet verify --rows failed: {0}")]
    VerifyRows(#[source] Box<RowVerifyError>),
    /// `fleet verify --rows` found differences (printed above it, one per
    /// line).
    #[error("fleet verify --rows: {0}")]
    RowDifferences(Box<RowVerifyReport>),
    /// `fleet move --config`: a file-sourced proxy moves shards itself.
    #[error(
        "fleet move works on a ZooKeeper document (--source zookeeper://...); a proxy started \
         from the config file {} moves shards itself: run MOVE SHARDS {shards}{} TO {to} on its \
         admin port",
        file.display(),
        fleet.as_deref().map_or_else(String::new, |f| format!(" IN {f}"))
    )]
    MoveFromFile {
        /// The `--config` file.
        file: PathBuf,
        /// The `--shards` value.
        shards: String,
        /// The `--fleet` value.
        fleet: Option<String>,
        /// The `--to` value.
        to: String,
    },
    /// `fleet move` without `--source`.
    #[error("give the document: --source zookeeper://host:port/path")]
    MoveWithoutSource,
    /// A `--shards` bound that is not a number.
    #[error("--shards {shards}: '{text}' is not a shard number; expected A-B")]
    NotAShard {
        /// The `--shards` value.
        shards: String,
        /// The bound that is not a number.
        text: String,
    },
    /// The move failed or was interrupted.
    #[error(transparent)]
    Move(Box<FleetMoveError>),
    /// `fleet split` stopped: the phase, what happened and how to go on.
    #[error("fleet split: {0}")]
    Split(String),

    /// `config push` was refused.
    #[error("config push refused: {0}")]
    Push(#[source] ZkError),
    /// `config get` failed.
    #[error("config get failed: {0}")]
    Get(#[source] ZkError),
    /// The document cannot be written to stdout.
    #[error("cannot write the document: {0}")]
    Write(#[source] io::Error),
}
