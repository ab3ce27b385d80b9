//! `shardgate fleet verify --config FILE [--schema FILE]`.

use std::path::PathBuf;

use crate::cli::runtime::runtime;
use crate::cli::{load, CliError};
use crate::ops::{configured_schema_path, read_schema, verify_with_schema};

#[derive(clap::Args)]
pub(in crate::cli) struct VerifyArgs {
    /// Config file (YAML).
    #[arg(long)]
    config: PathBuf,
    /// Schema to compare tables with (default: the config's `schema:`).
    #[arg(long)]
    schema: Option<PathBuf>,
}

/// Prints a line per problem found on the hosts, then the summary; fails
/// when there is a problem.
pub(super) fn run(args: &VerifyArgs) -> Result<(), CliError> {
    let topology = load(&args.config)?;
    let schema_sql = args
        .schema
        .clone()
        .or_else(|| configured_schema_path(&topology, Some(&args.config)))
        .map(|path| read_schema(&path))
        .transpose()?;
    let report = runtime()?
        .block_on(verify_with_schema(&topology, schema_sql.as_deref()))
        .map_err(CliError::Verify)?;
    for problem in report.problems() {
        println!("{problem}");
    }
    if report.is_ok() {
        println!("fleet verify: {report}");
        Ok(())
    } else {
        Err(CliError::VerifyProblems(Box::new(report)))
    }
}
