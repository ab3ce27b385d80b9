//! `shardgate fleet verify --config FILE [--schema FILE]`, and with
//! `--rows --shards A-B --against HOST:PORT` the row-level compare.

use std::path::PathBuf;

use super::shard_range;
use crate::cli::runtime::runtime;
use crate::cli::{load, CliError};
use crate::ops::{
    configured_schema_path, read_schema, verify_rows, verify_with_schema, RowVerifyRequest,
    DEFAULT_MAX_ROWS_PER_SECOND,
};

#[derive(clap::Args)]
pub(in crate::cli) struct VerifyArgs {
    /// Config file (YAML).
    #[arg(long)]
    config: PathBuf,
    /// Schema to compare tables with (default: the config's `schema:`).
    #[arg(long)]
    schema: Option<PathBuf>,
    /// Compare the rows of the shards' databases between their master
    /// and --against instead (docs/reference/cli.md).
    #[arg(long, requires_all = ["shards", "against"])]
    rows: bool,
    /// With --rows: the shards, `A-B`, all on one master.
    #[arg(long, requires = "rows")]
    shards: Option<String>,
    /// With --rows: the fleet (needed when several fleets have those shards).
    #[arg(long, requires = "rows")]
    fleet: Option<String>,
    /// With --rows: the other server, HOST:PORT (a replica or a split target).
    #[arg(long, requires = "rows")]
    against: Option<String>,
    /// With --rows: source rows read per second at most (0: no limit).
    #[arg(long, requires = "rows", default_value_t = DEFAULT_MAX_ROWS_PER_SECOND)]
    max_rows_per_second: u64,
}

/// Prints a line per problem (or differing chunk) found, then the summary;
/// fails when there is one.
pub(super) fn run(args: &VerifyArgs) -> Result<(), CliError> {
    match (args.rows, &args.shards, &args.against) {
        (true, Some(shards), Some(against)) => verify_rows_of(args, shards, against),
        _ => verify_fleet(args),
    }
}

fn verify_fleet(args: &VerifyArgs) -> Result<(), CliError> {
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

fn verify_rows_of(args: &VerifyArgs, shards: &str, against: &str) -> Result<(), CliError> {
    let (first, last) = shard_range(shards)?;
    let mut request = RowVerifyRequest::new(first, last, against.to_owned());
    request.fleet = args.fleet.clone();
    request.max_rows_per_second = args.max_rows_per_second;
    request.progress = true;
    let topology = load(&args.config)?;
    let report = runtime()?
        .block_on(verify_rows(&topology, &request))
        .map_err(|e| CliError::VerifyRows(Box::new(e)))?;
    for difference in &report.differences {
        println!("{difference}");
    }
    if report.is_ok() {
        println!("fleet verify --rows: {report}");
        Ok(())
    } else {
        Err(CliError::RowDifferences(Box::new(report)))
    }
}
