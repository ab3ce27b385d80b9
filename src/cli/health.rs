//! `shardgate health`: a container health check without curl.

use std::path::PathBuf;

use super::CliError;

#[derive(clap::Args)]
pub(super) struct HealthArgs {
    /// The proxy's config file: its `metrics.listen` is asked.
    #[arg(long)]
    config: Option<PathBuf>,
    /// The metrics listen address to ask, instead of the config's.
    #[arg(long)]
    metrics_listen: Option<String>,
}

/// Asks the running proxy's `GET /ready`; prints its body when ready.
pub(super) fn run(args: &HealthArgs) -> Result<(), CliError> {
    let body = crate::control::readiness::check_ready(
        args.config.as_deref(),
        args.metrics_listen.as_deref(),
    )
    .map_err(CliError::NotReady)?;
    println!("ready: {}", body.trim_end());
    Ok(())
}
