//! `shardgate fleet init --config FILE --schema FILE`.

use std::path::PathBuf;

use crate::cli::runtime::runtime;
use crate::cli::{load, CliError};

#[derive(clap::Args)]
pub(in crate::cli) struct InitArgs {
    /// Config file (YAML).
    #[arg(long)]
    config: PathBuf,
    /// Schema file with the per-shard CREATE TABLE statements.
    #[arg(long)]
    schema: PathBuf,
}

/// Creates every shard database and its tables, and prints what was done.
pub(super) fn run(args: &InitArgs) -> Result<(), CliError> {
    let topology = load(&args.config)?;
    let schema_sql = std::fs::read_to_string(&args.schema).map_err(|source| CliError::Read {
        path: args.schema.clone(),
        source,
    })?;
    let report = runtime()?
        .block_on(crate::ops::init(&topology, &schema_sql, true))
        .map_err(CliError::Init)?;
    println!("{report}");
    Ok(())
}
