//! `shardgate fleet split --source zookeeper://...|--config FILE --shards A-B
//! --to HOST:PORT`: prepare, copy, verify, cutover, cleanup, each phase
//! recorded in a state file so `--resume` continues after a crash.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::shard_range;
use crate::cli::runtime::{runtime, StopSignals};
use crate::cli::{load, zookeeper_source, CliError};
use crate::control::cutover::{fleet_move_until, release_killed_cutover, MoveRequest, StepEvent};
use crate::control::split::place::move_on_admin_port;
use crate::control::split::{
    dry_run, open, open_claimed, run as run_split, Outcome, Place, SplitEvent, SplitOptions,
    SplitRequest, Store, DEFAULT_GRACE_SECONDS,
};
use crate::control::status::parse_config;
use crate::ops::split::state::{default_state_path, Phase};
use crate::ops::split::Login;
use crate::ops::DEFAULT_MAX_ROWS_PER_SECOND;
use crate::topology::bootstrap::default_proxy_id;
use crate::topology::source::ZkLocation;
use crate::topology::Topology;

#[derive(clap::Args)]
pub(in crate::cli) struct SplitArgs {
    /// The document: zookeeper://host:port[,host:port...]/path.
    #[arg(long)]
    source: Option<String>,
    /// The config file (the cutover is then MOVE SHARDS on the admin port
    /// of the proxy serving it: give --admin; see
    /// docs/operations/move-and-split.md).
    #[arg(long, conflicts_with = "source")]
    config: Option<PathBuf>,
    /// With --config: the admin port (HOST:PORT) of the proxy serving the
    /// file; the cutover runs MOVE SHARDS there, as the account
    /// --admin-user of the file's `admin.users`. Without it the split stops
    /// before the cutover and says what to run.
    #[arg(long, requires = "config")]
    admin: Option<String>,
    /// The `admin.users` account --admin logs in as (default: the file's
    /// first); its password is read from the file.
    #[arg(long, requires = "admin")]
    admin_user: Option<String>,
    /// The shards, `A-B` (or one shard), all on one master.
    #[arg(long)]
    shards: String,
    /// The fleet (needed when several fleets have those shards).
    #[arg(long)]
    fleet: Option<String>,
    /// The new master, HOST:PORT: an empty MariaDB server.
    #[arg(long)]
    to: String,
    /// Run the checks and list what would be copied, moved and dropped;
    /// change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Continue the split recorded in the state file.
    #[arg(long)]
    resume: bool,
    /// Source rows read per second at most, by the copy and the verify (0:
    /// no limit).
    #[arg(long, default_value_t = DEFAULT_MAX_ROWS_PER_SECOND)]
    max_rows_per_second: u64,
    /// Keep the range's databases on the source, renamed `_moved_<name>`,
    /// instead of dropping them.
    #[arg(long)]
    keep_moved: bool,
    /// Seconds between the cutover and the cleanup.
    #[arg(long, default_value_t = DEFAULT_GRACE_SECONDS)]
    grace: u64,
    /// A state file (default: `<config>.split-<fleet>-<A>-<B>.state` next
    /// to --config, or with --source the znode `<document>/splits/<fleet>-<A>-<B>`).
    #[arg(long)]
    state: Option<PathBuf>,
    /// Stop after this phase (prepare, copy, verify or cutover); `--resume`
    /// continues.
    #[arg(long, value_parser = ["prepare", "copy", "verify", "cutover"])]
    stop_after: Option<String>,
}

/// Where the config comes from and how the cutover runs.
enum Source {
    /// A config file; the cutover is `MOVE SHARDS` on the admin port of
    /// the proxy serving it (`--admin`), or the operator's.
    File {
        path: PathBuf,
        admin: Option<(String, Login)>,
    },
    /// A ZooKeeper document; the cutover is `fleet move`'s sequence.
    ZooKeeper(ZkLocation),
}

/// The split run from the command line.
struct Cli {
    source: Source,
    /// `--state`.
    state: Option<PathBuf>,
}

impl Place for Cli {
    fn holder(&self) -> String {
        format!("cli@{}", default_proxy_id())
    }

    async fn topology(&self) -> Result<Arc<Topology>, String> {
        match &self.source {
            Source::File { path, .. } => load(path).map(Arc::new).map_err(|e| e.to_string()),
            Source::ZooKeeper(location) => {
                let document = crate::control::zookeeper::get(location)
                    .await
                    .map_err(|e| CliError::Get(e).to_string())?;
                parse_config(&document.bytes, &location.to_string())
                    .map(Arc::new)
                    .map_err(|e| CliError::Config(e).to_string())
            }
        }
    }

    fn store(&self, fleet: &str, first: u32, last: u32) -> Result<Store, String> {
        Ok(match (&self.state, &self.source) {
            (Some(path), _) => Store::File(path.clone()),
            (None, Source::ZooKeeper(location)) => Store::znode(location, fleet, first, last),
            (None, Source::File { path, .. }) => {
                Store::File(default_state_path(path, fleet, first, last))
            }
        })
    }

    async fn release_killed(&self, request: &MoveRequest) -> Result<Option<String>, String> {
        match &self.source {
            Source::ZooKeeper(location) => release_killed_cutover(location, request).await,
            Source::File { .. } => Ok(None),
        }
    }

    async fn cut_over(
        &self,
        request: &MoveRequest,
        progress: &(dyn Fn(StepEvent<'_>) + Send + Sync),
    ) -> Result<Vec<String>, String> {
        match &self.source {
            Source::File {
                path,
                admin: Some((admin, login)),
            } => {
                eprintln!(
                    "split: cutover: {} on the admin port {admin} (the proxy serving {}) ...",
                    request.describe(),
                    path.display()
                );
                move_on_admin_port(admin, login, request).await
            }
            Source::File { path, admin: None } => Err(format!(
                "{} is a config file: give --admin HOST:PORT (the admin port of the proxy serving it) to run \
                 the cutover from here, or run MOVE SHARDS {}-{} IN {} TO {} on that admin port yourself (it \
                 pauses, waits for {} to catch up and rewrites the file); then the same fleet split with --resume",
                path.display(),
                request.first,
                request.last,
                request.fleet.as_deref().unwrap_or_default(),
                request.target,
                request.target
            )),
            Source::ZooKeeper(location) => {
                let mut stop = StopSignals::take();
                let report = fleet_move_until(location.clone(), request, progress, stop.received())
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(report
                    .steps
                    .iter()
                    .map(|step| format!("{}\t{}\t{}", step.name, step.ms, step.detail))
                    .collect())
            }
        }
    }
}

/// The admin port and the account of `--admin`: `--admin-user` (or the
/// first) of the file's `admin.users`, with its password.
fn admin_login(
    topology: &Topology,
    admin: &str,
    user: Option<&str>,
    config: &std::path::Path,
) -> Result<(String, Login), CliError> {
    let users = topology
        .config
        .admin
        .as_ref()
        .map(|a| a.users.as_slice())
        .unwrap_or_default();
    let account = match user {
        Some(name) => users.iter().find(|u| u.name == name),
        None => users.first(),
    };
    let Some(account) = account else {
        return Err(CliError::Split(format!(
            "--admin {admin}: {} has no admin.users account{}: the cutover logs in to the admin port with one",
            config.display(),
            user.map_or_else(String::new, |u| format!(" named {u}"))
        )));
    };
    let operations = Login::operations(topology);
    Ok((
        admin.to_owned(),
        Login {
            user: account.name.clone(),
            password: account.password.clone(),
            timeout: operations.timeout,
        },
    ))
}

/// How the copy's progress is shown: a bar with its ETA on a terminal,
/// else a line a second (logs and tests read the lines).
struct CopyDisplay {
    last_line: Instant,
    bar: Option<indicatif::ProgressBar>,
}

impl CopyDisplay {
    fn new() -> Self {
        Self {
            last_line: Instant::now(),
            bar: None,
        }
    }
}

/// A progress line on stderr for `event` (the copy's as a bar on a
/// terminal); results on stdout.
fn show(event: SplitEvent<'_>, copy: &std::sync::Mutex<CopyDisplay>) {
    match event {
        SplitEvent::Started(_, what) => eprintln!("split: {what}"),
        SplitEvent::Note(text) => eprintln!("split: {text}"),
        SplitEvent::Line(text) => println!("{text}"),
        SplitEvent::Ended(phase, took, detail) => eprintln!(
            "split: {phase} done in {:.1}s: {detail}",
            took.as_secs_f64()
        ),
        SplitEvent::Copy(p) => {
            let mut copy = crate::sync::lock(copy);
            let bar = copy.bar.get_or_insert_with(|| {
                crate::ops::progress_bar(
                    true,
                    p.databases,
                    "split: copy [{elapsed_precise}] {wide_bar} {pos}/{len} databases, {msg} (eta {eta})",
                )
            });
            if !bar.is_hidden() {
                bar.set_position(p.databases_done as u64);
                bar.set_message(format!("{} rows, {:.1} MB", p.rows, p.bytes as f64 / 1e6));
                if p.databases_done == p.databases {
                    bar.finish_and_clear();
                }
                return;
            }
            if copy.last_line.elapsed() >= Duration::from_secs(1) || p.databases_done == p.databases
            {
                copy.last_line = Instant::now();
                eprintln!(
                    "split: copy {}/{} databases, {} rows, {:.1} MB, {:.1}s, eta {}",
                    p.databases_done,
                    p.databases,
                    p.rows,
                    p.bytes as f64 / 1e6,
                    p.elapsed.as_secs_f64(),
                    p.eta()
                        .map_or_else(|| "?".to_owned(), |d| format!("{:.0}s", d.as_secs_f64()))
                );
            }
        }
    }
}

/// Runs (or continues) the split, a line per phase on stderr.
pub(super) fn run(args: SplitArgs) -> Result<(), CliError> {
    let (first, last) = shard_range(&args.shards)?;
    let request = SplitRequest {
        fleet: args.fleet.clone(),
        first,
        last,
        target: args.to.clone(),
    };
    let stop_after = match args.stop_after.as_deref() {
        Some("prepare") => Some(Phase::Prepared),
        Some("copy") => Some(Phase::Copied),
        Some("verify") => Some(Phase::Verified),
        Some("cutover") => Some(Phase::CutOver),
        _ => None,
    };
    let mut options = SplitOptions {
        resume: args.resume,
        max_rows_per_second: args.max_rows_per_second,
        keep_moved: args.keep_moved,
        grace_seconds: args.grace,
        stop_after,
        resume_hint: "--resume",
    };
    runtime()?.block_on(async {
        let source = match (&args.source, &args.config) {
            (Some(text), _) => Source::ZooKeeper(zookeeper_source(text)?),
            (None, Some(file)) => {
                let admin = match &args.admin {
                    Some(admin) => Some(admin_login(
                        &load(file)?,
                        admin,
                        args.admin_user.as_deref(),
                        file,
                    )?),
                    None => None,
                };
                Source::File {
                    path: file.clone(),
                    admin,
                }
            }
            (None, None) => {
                return Err(CliError::Split(
                    "give the config: --source zookeeper://host:port/path or --config FILE"
                        .to_owned(),
                ))
            }
        };
        let place = Cli {
            source,
            state: args.state.clone(),
        };
        if args.dry_run {
            let opened = open(&place, &request)
                .await
                .map_err(|e| CliError::Split(e.to_string()))?;
            let found = dry_run(opened, &request, &options)
                .await
                .map_err(|e| CliError::Split(e.to_string()))?;
            for line in &found.lines {
                println!("{line}");
            }
            println!("dry run: nothing was changed");
            return if found.failures.is_empty() {
                Ok(())
            } else {
                Err(CliError::Split(format!(
                    "prepare: {} check(s) failed (above)",
                    found.failures.len()
                )))
            };
        }
        let (opened, claim) = open_claimed(&place, &request)
            .await
            .map_err(|e| CliError::Split(e.to_string()))?;
        if options.resume && opened.recorded.is_none() {
            // Killed before its prepare recorded anything: nothing was
            // changed, so it starts over.
            eprintln!(
                "split: no split recorded in {}: starting from the prepare",
                opened.store.describe()
            );
            options.resume = false;
        }
        let record = opened.store.describe();
        let copy_display = std::sync::Mutex::new(CopyDisplay::new());
        let events = |event: SplitEvent<'_>| show(event, &copy_display);
        let result = run_split(&place, opened, &claim, &request, &options, &events).await;
        claim.release().await;
        match result.map_err(|e| CliError::Split(e.to_string()))? {
            Outcome::Done(_) => Ok(()),
            Outcome::Stopped(state) => {
                eprintln!(
                    "split: stopped after {} (--stop-after); --resume continues ({record})",
                    state.phase.name()
                );
                Ok(())
            }
        }
    })
}
