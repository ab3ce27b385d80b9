//! The `shardgate` command: run the proxy, check a config, encode and
//! decode IDs, create, verify and migrate the fleet's shard databases,
//! move shards and read or write the config document in ZooKeeper.
//!
//! One file per command; [`Cli`] is the whole clap definition (the docs
//! check reads it) and [`CliError`] every way a command fails, each printed
//! as one line on stderr with exit status 1. The top layer: nothing in the
//! library uses it.

mod check_config;
mod config;
mod error;
mod fleet;
mod health;
mod id;
mod runtime;
mod serve;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::topology::source::{parse_source, ConfigSource, ZkLocation};
use crate::topology::Topology;
use clap::{Parser, Subcommand};

pub use error::CliError;

// A panic must end the one session it happened in, not the process: the
// session tasks catch it (`net::isolate`), which `panic = "abort"` would
// defeat.
#[cfg(panic = "abort")]
compile_error!("shardgate must be built with panic = \"unwind\" (see net::isolate)");

/// The command line: a command and the options every command takes.
#[derive(Parser)]
#[command(
    name = "shardgate",
    version,
    about = "MySQL routing proxy for a sharded MySQL/MariaDB fleet"
)]
pub struct Cli {
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
    log_format: crate::server::LogFormat,
}

#[derive(Subcommand)]
enum Command {
    /// Run the proxy.
    Serve(serve::ServeArgs),
    /// Ask a running proxy's `GET /ready` (its metrics listener): exit 0
    /// when it is ready, 1 otherwise (container health checks).
    Health(health::HealthArgs),
    /// Validate a config file; prints every problem with its line.
    CheckConfig(check_config::CheckConfigArgs),
    /// Encode or decode 64-bit object IDs.
    Id {
        #[command(subcommand)]
        command: id::IdCommand,
    },
    /// Fleet tooling.
    Fleet {
        #[command(subcommand)]
        command: fleet::FleetCommand,
    },
    /// The config document in ZooKeeper.
    Config {
        #[command(subcommand)]
        command: config::ConfigCommand,
    },
}

/// Runs the command line of this process: logs to stderr, prints a
/// failure's one-line message there and exits with status 1.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    crate::server::init_logging(cli.log_format);
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}

/// Runs one parsed command line.
pub fn run(cli: Cli) -> Result<(), CliError> {
    let Cli {
        command,
        zk_auth_file,
        zk_allow_open_acl,
        log_format: _,
    } = cli;
    // `serve` installs the credentials of its flags laid over its
    // bootstrap file.
    if !matches!(command, Command::Serve(_)) {
        install_zk_auth(zk_auth_file.as_deref())?;
    }
    match command {
        Command::Serve(args) => serve::run(args, zk_auth_file, zk_allow_open_acl),
        Command::Health(args) => health::run(&args),
        Command::CheckConfig(args) => check_config::run(&args),
        Command::Id { command } => id::run(command),
        Command::Fleet { command } => fleet::run(command),
        Command::Config { command } => config::run(command, zk_allow_open_acl),
    }
}

/// Authenticates every ZooKeeper session of this process with the
/// credentials in `file`, if one is given.
fn install_zk_auth(file: Option<&Path>) -> Result<(), CliError> {
    use crate::control::zookeeper::auth::{install, ZkAuth};
    let auth = file.map(ZkAuth::load).transpose()?;
    Ok(install(auth)?)
}

/// The config file at `path`, validated.
fn load(path: &Path) -> Result<Topology, CliError> {
    Topology::load(path).map_err(CliError::Config)
}

/// The znode a `--source` flag names; a file path is refused.
fn zookeeper_source(text: &str) -> Result<ZkLocation, CliError> {
    match parse_source(text)? {
        ConfigSource::ZooKeeper(location) => Ok(location),
        ConfigSource::File(_) => Err(CliError::NotAZnode {
            text: text.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn a_file_is_not_a_znode() {
        let error = zookeeper_source("config/shardgate.yaml").map(|_| ());
        assert_eq!(
            error.map_err(|e| e.to_string()),
            Err("--source config/shardgate.yaml: give the znode as \
                 zookeeper://host:port[,host:port...]/path"
                .to_owned())
        );
        assert!(zookeeper_source("zookeeper://127.0.0.1:2281/shardgate").is_ok());
    }

    #[test]
    fn fleet_move_parses_its_flags() {
        let cli = Cli::try_parse_from([
            "shardgate",
            "fleet",
            "move",
            "--source",
            "zookeeper://h:1/p",
            "--shards",
            "3-9",
            "--to",
            "h:2",
            "--dry-run",
        ]);
        assert!(matches!(
            cli.map(|cli| cli.command),
            Ok(Command::Fleet {
                command: fleet::FleetCommand::Move(_)
            })
        ));
        let refused = Cli::try_parse_from([
            "shardgate",
            "fleet",
            "move",
            "--source",
            "zookeeper://h:1/p",
            "--config",
            "x.yaml",
            "--shards",
            "3",
            "--to",
            "h:2",
        ]);
        assert!(refused.is_err(), "--source and --config conflict");
    }
}
