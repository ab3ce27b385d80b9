//! `shardgate config get --source zookeeper://...`.

use std::io::Write;

use crate::cli::runtime::runtime;
use crate::cli::{zookeeper_source, CliError};

/// Prints the document to stdout and its version to stderr.
pub(super) fn run(source: &str) -> Result<(), CliError> {
    let location = zookeeper_source(source)?;
    let document = runtime()?
        .block_on(crate::control::zookeeper::get(&location))
        .map_err(CliError::Get)?;
    std::io::stdout()
        .write_all(&document.bytes)
        .map_err(CliError::Write)?;
    eprintln!(
        "{location}: znode version {}, md5 {}",
        document.znode_version, document.version
    );
    Ok(())
}
