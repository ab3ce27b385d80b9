//! `shardgate fleet split --source zookeeper://...|--config FILE --shards A-B
//! --to HOST:PORT`: prepare, copy, verify, cutover, cleanup, each phase
//! recorded in a state file so `--resume` continues after a crash.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::shard_range;
use crate::cli::runtime::{runtime, StopSignals};
use crate::cli::{load, zookeeper_source, CliError};
use crate::control::cutover::{fleet_move_until, release_killed_cutover, MoveRequest, StepEvent};
use crate::control::status::parse_config;
use crate::ops::split::state::{
    decode, default_state_path, encode, read_state, write_state, Phase, SplitState,
};
use crate::ops::split::{
    cleanup, cleanup_plan, copy, ensure_replicating, plan, prepare, CopyOptions, CopyProgress,
    Login, SplitError,
};
use crate::ops::{verify_rows, RowVerifyRequest, DEFAULT_MAX_ROWS_PER_SECOND};
use crate::topology::source::ZkLocation;
use crate::topology::Topology;

/// `--grace` by default: how long the source keeps the moved databases
/// (and the target its replication) after the cutover.
pub const DEFAULT_GRACE_SECONDS: u64 = 300;

#[derive(clap::Args)]
pub(in crate::cli) struct SplitArgs {
    /// The document: zookeeper://host:port[,host:port...]/path.
    #[arg(long)]
    source: Option<String>,
    /// The config file (the cutover is then MOVE SHARDS on the admin port
    /// of each proxy serving it; see docs/operations/move-and-split.md).
    #[arg(long, conflicts_with = "source")]
    config: Option<PathBuf>,
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

/// Where the config comes from.
enum Source {
    File(PathBuf),
    ZooKeeper(ZkLocation),
}

impl Source {
    async fn topology(&self) -> Result<Topology, CliError> {
        match self {
            Source::File(path) => load(path),
            Source::ZooKeeper(location) => {
                let document = crate::control::zookeeper::get(location)
                    .await
                    .map_err(CliError::Get)?;
                parse_config(&document.bytes, &location.to_string()).map_err(CliError::Config)
            }
        }
    }
}

/// Where the state record lives: a file, or a znode beside a ZooKeeper
/// document (`<document>/splits/<fleet>-<A>-<B>`).
enum Store {
    File(PathBuf),
    Znode(ZkLocation, String),
}

impl Store {
    fn describe(&self) -> String {
        match self {
            Store::File(path) => path.display().to_string(),
            Store::Znode(location, name) => format!(
                "znode {}",
                crate::control::zookeeper::split_record_path(location, name)
            ),
        }
    }

    async fn read(&self) -> Result<Option<SplitState>, SplitError> {
        match self {
            Store::File(path) => read_state(path),
            Store::Znode(location, name) => {
                let bytes = crate::control::zookeeper::read_split_record(location, name)
                    .await
                    .map_err(|e| SplitError::State(e.to_string()))?;
                bytes.map(|b| decode(&b, &self.describe())).transpose()
            }
        }
    }

    async fn write(&self, state: &SplitState) -> Result<(), SplitError> {
        match self {
            Store::File(path) => write_state(path, state),
            Store::Znode(location, name) => crate::control::zookeeper::write_split_record(
                location,
                name,
                encode(state)?.as_bytes(),
            )
            .await
            .map_err(|e| SplitError::State(e.to_string())),
        }
    }
}

fn failed(phase: &str) -> impl Fn(SplitError) -> CliError + '_ {
    move |e| CliError::Split(format!("{phase} failed: {e}; --resume continues from it"))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A phase's end, on stderr.
fn ended(phase: &str, started: Instant, detail: &str) {
    eprintln!(
        "split: {phase} done in {:.1}s: {detail}",
        started.elapsed().as_secs_f64()
    );
}

/// The one fleet with shard `last` (or the one named).
fn fleet_name(topology: &Topology, fleet: Option<&str>, last: u32) -> Result<String, CliError> {
    if let Some(fleet) = fleet {
        return Ok(fleet.to_owned());
    }
    let having: Vec<&str> = topology
        .fleets
        .iter()
        .filter(|f| f.shard_count > last)
        .map(|f| f.name.as_str())
        .collect();
    match having.as_slice() {
        [one] => Ok((*one).to_owned()),
        [] => Err(CliError::Split(format!("no fleet has shard {last}"))),
        _ => Err(CliError::Split(format!(
            "fleets {} all have shard {last}: say which with --fleet",
            having.join(", ")
        ))),
    }
}

/// Runs (or continues) the split, a line per phase on stderr.
pub(super) fn run(args: SplitArgs) -> Result<(), CliError> {
    let source = match (&args.source, &args.config) {
        (Some(text), _) => Source::ZooKeeper(zookeeper_source(text)?),
        (None, Some(file)) => Source::File(file.clone()),
        (None, None) => {
            return Err(CliError::Split(
                "give the config: --source zookeeper://host:port/path or --config FILE".to_owned(),
            ))
        }
    };
    let (first, last) = shard_range(&args.shards)?;
    runtime()?.block_on(async {
        let topology = source.topology().await?;
        let fleet = fleet_name(&topology, args.fleet.as_deref(), last)?;
        let store = match (&args.state, &source) {
            (Some(path), _) => Store::File(path.clone()),
            (None, Source::ZooKeeper(location)) => {
                Store::Znode(location.clone(), format!("{fleet}-{first}-{last}"))
            }
            (None, Source::File(config)) => {
                Store::File(default_state_path(config, &fleet, first, last))
            }
        };
        let recorded = store.read().await.map_err(failed("reading the state"))?;
        if let Some(state) = &recorded {
            if !state.same_split(Some(&fleet), first, last, &args.to) {
                return Err(CliError::Split(format!(
                    "{} records another split ({} {}-{} to {}): pass another --state",
                    store.describe(),
                    state.fleet,
                    state.first,
                    state.last,
                    state.target
                )));
            }
        }
        let login = Login::operations(&topology);
        if args.dry_run {
            return dry_run(&args, &topology, &login, &fleet, first, last, recorded).await;
        }
        let state = match (recorded, args.resume) {
            (Some(state), true) => state,
            (Some(state), false) => {
                return Err(CliError::Split(format!(
                    "{} records this split at phase {}: --resume continues it (or remove the file to start over)",
                    store.describe(),
                    state.phase.name()
                )))
            }
            (None, resume) => {
                let started = Instant::now();
                if resume {
                    // Killed before its prepare recorded anything: nothing
                    // was changed, so it starts over.
                    eprintln!(
                        "split: no split recorded in {}: starting from the prepare",
                        store.describe()
                    );
                }
                eprintln!("split: prepare ...");
                let plan = plan(&topology, Some(&fleet), first, last, &args.to)
                    .map_err(failed("prepare"))?;
                let report = prepare(&login, &plan, false).await.map_err(failed("prepare"))?;
                for check in &report.checks {
                    println!("{check}");
                }
                let failures = report.failures();
                if !failures.is_empty() {
                    return Err(CliError::Split(format!(
                        "prepare: {} check(s) failed (above); nothing was changed",
                        failures.len()
                    )));
                }
                let state = SplitState {
                    fleet: plan.fleet,
                    first,
                    last,
                    source: plan.source,
                    target: plan.target,
                    phase: Phase::Prepared,
                    moved: plan.moved,
                    copied: Vec::new(),
                    gtid: None,
                    cut_over_at: None,
                };
                store.write(&state).await.map_err(failed("prepare"))?;
                ended(
                    "prepare",
                    started,
                    &format!(
                        "{} databases, about {} MB and {} rows to copy from {} to {}; state in {}",
                        report.databases.len(),
                        report.bytes >> 20,
                        report.rows,
                        state.source,
                        state.target,
                        store.describe()
                    ),
                );
                state
            }
        };
        Phases {
            args: &args,
            source: &source,
            login,
            store: &store,
            topology,
        }
        .run(state)
        .await
    })
}

/// Everything the phases after prepare need.
struct Phases<'a> {
    args: &'a SplitArgs,
    source: &'a Source,
    login: Login,
    store: &'a Store,
    topology: Topology,
}

impl Phases<'_> {
    fn stop_after(&self, phase: Phase) -> bool {
        self.args.stop_after.as_deref() == Some(phase.name())
    }

    async fn save(&self, state: &SplitState, phase: &str) -> Result<(), CliError> {
        self.store.write(state).await.map_err(failed(phase))
    }

    async fn run(self, mut state: SplitState) -> Result<(), CliError> {
        if state.phase == Phase::Done {
            println!(
                "split of {} {}-{} to {} already done ({})",
                state.fleet,
                state.first,
                state.last,
                state.target,
                self.store.describe()
            );
            return Ok(());
        }
        if self.stop_after(Phase::Prepared) {
            return self.stopped(&state);
        }
        if state.phase < Phase::Copied {
            self.copy(&mut state).await?;
            if self.stop_after(Phase::Copied) {
                return self.stopped(&state);
            }
        }
        if state.phase < Phase::Verified {
            self.verify(&mut state).await?;
            if self.stop_after(Phase::Verified) {
                return self.stopped(&state);
            }
        }
        if state.phase < Phase::CutOver {
            self.cutover(&mut state).await?;
            if self.stop_after(Phase::CutOver) {
                return self.stopped(&state);
            }
        }
        self.cleanup(&mut state).await?;
        println!(
            "split of {} {}-{} from {} to {} done",
            state.fleet, state.first, state.last, state.source, state.target
        );
        Ok(())
    }

    fn stopped(&self, state: &SplitState) -> Result<(), CliError> {
        eprintln!(
            "split: stopped after {} (--stop-after); --resume continues ({})",
            state.phase.name(),
            self.store.describe()
        );
        Ok(())
    }

    async fn copy(&self, state: &mut SplitState) -> Result<(), CliError> {
        let started = Instant::now();
        let resuming = state.phase == Phase::Copying;
        eprintln!(
            "split: copy {} -> {}{} ...",
            state.source,
            state.target,
            if resuming {
                " (again: the last one was interrupted)"
            } else {
                ""
            }
        );
        let plan = crate::ops::split::SplitPlan {
            fleet: state.fleet.clone(),
            first: state.first,
            last: state.last,
            source: state.source.clone(),
            target: state.target.clone(),
            moved: state.moved.clone(),
        };
        // The checks again: the servers may have changed since.
        let report = prepare(&self.login, &plan, resuming)
            .await
            .map_err(failed("copy"))?;
        let failures = report.failures();
        if !failures.is_empty() {
            return Err(CliError::Split(format!(
                "copy: the checks fail now:\n{}",
                failures.join("\n")
            )));
        }
        let mut copied = report.databases;
        for earlier in &state.copied {
            if !copied.contains(earlier) {
                copied.push(earlier.clone());
            }
        }
        copied.sort();
        state.copied = copied;
        state.phase = Phase::Copying;
        self.save(state, "copy").await?;
        let options = CopyOptions {
            max_rows_per_second: self.args.max_rows_per_second,
            ..CopyOptions::default()
        };
        let last_line = std::sync::Mutex::new(Instant::now());
        let progress = |p: &CopyProgress| {
            let mut last = crate::sync::lock(&last_line);
            if last.elapsed() >= Duration::from_secs(1) || p.databases_done == p.databases {
                *last = Instant::now();
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
        };
        let copied = copy(
            &self.login,
            &state.source,
            &state.target,
            &state.copied,
            &options,
            &progress,
        )
        .await
        .map_err(failed("copy"))?;
        state.gtid = Some(copied.gtid.clone());
        state.phase = Phase::Copied;
        self.save(state, "copy").await?;
        let (rows, megabytes) = copied.rates();
        ended(
            "copy",
            started,
            &format!(
                "{} databases, {} tables, {} rows, {:.1} MB in {:.2}s ({rows:.0} rows/s, {megabytes:.2} MB/s) at GTID {}; \
                 {} replicates {} and caught up in {:.2}s",
                copied.databases,
                copied.tables,
                copied.rows,
                copied.bytes as f64 / 1e6,
                copied.copy_elapsed.as_secs_f64(),
                copied.gtid,
                state.target,
                state.source,
                copied.catch_up_elapsed.as_secs_f64()
            ),
        );
        Ok(())
    }

    async fn verify(&self, state: &mut SplitState) -> Result<(), CliError> {
        let started = Instant::now();
        eprintln!(
            "split: verify shards {}-{} against {} ...",
            state.first, state.last, state.target
        );
        ensure_replicating(&self.login, &state.target)
            .await
            .map_err(failed("verify"))?;
        let mut request = RowVerifyRequest::new(state.first, state.last, state.target.clone());
        request.fleet = Some(state.fleet.clone());
        request.max_rows_per_second = self.args.max_rows_per_second;
        let report = verify_rows(&self.topology, &request).await.map_err(|e| {
            CliError::Split(format!("verify failed: {e}; --resume continues from it"))
        })?;
        if !report.is_ok() {
            for difference in &report.differences {
                println!("{difference}");
            }
            return Err(CliError::Split(format!(
                "verify: {report}; nothing was cut over: find why the target differs, fix it (or copy again: \
                 remove the state file and the target's copy), then --resume"
            )));
        }
        state.phase = Phase::Verified;
        self.save(state, "verify").await?;
        ended("verify", started, &report.to_string());
        Ok(())
    }

    async fn cutover(&self, state: &mut SplitState) -> Result<(), CliError> {
        let started = Instant::now();
        eprintln!("split: cutover ...");
        if let Source::ZooKeeper(location) = self.source {
            let request = MoveRequest {
                first: state.first,
                last: state.last,
                fleet: Some(state.fleet.clone()),
                target: state.target.clone(),
                dry_run: false,
            };
            let released = release_killed_cutover(location, &request)
                .await
                .map_err(|e| CliError::Split(format!("cutover: {e}; --resume tries it again")))?;
            if let Some(released) = released {
                eprintln!("split: cutover: {released}");
            }
        }
        let current = self.source.topology().await?;
        let routed = current
            .fleet_by_name(&state.fleet)
            .and_then(|f| current.master_of(f, state.first))
            .map(|h| current.hosts[h].addr.clone());
        if routed.as_deref() == Some(state.target.as_str()) {
            eprintln!(
                "split: cutover: shards {}-{} already routed to {}",
                state.first, state.last, state.target
            );
        } else {
            match self.source {
                Source::File(file) => {
                    return Err(CliError::Split(format!(
                        "cutover: {} is a config file: run MOVE SHARDS {}-{} IN {} TO {} on the admin port of the proxy \
                         serving it (it pauses, waits for {} to catch up and rewrites the file), then the same \
                         fleet split with --resume for the cleanup",
                        file.display(),
                        state.first,
                        state.last,
                        state.fleet,
                        state.target,
                        state.target
                    )))
                }
                Source::ZooKeeper(location) => {
                    let request = MoveRequest {
                        first: state.first,
                        last: state.last,
                        fleet: Some(state.fleet.clone()),
                        target: state.target.clone(),
                        dry_run: false,
                    };
                    let progress = |event: StepEvent<'_>| match event {
                        StepEvent::Started(name) => eprintln!("split: cutover: {name} ..."),
                        StepEvent::Ended(step) => eprintln!("split: cutover: {step}"),
                    };
                    let mut stop = StopSignals::take();
                    let report = fleet_move_until(location.clone(), &request, &progress, stop.received())
                        .await
                        .map_err(|e| CliError::Split(format!("cutover failed: {e}; --resume tries it again")))?;
                    for step in &report.steps {
                        println!("cutover\t{}\t{}\t{}", step.name, step.ms, step.detail);
                    }
                }
            }
        }
        state.phase = Phase::CutOver;
        state.cut_over_at = Some(now());
        self.save(state, "cutover").await?;
        ended(
            "cutover",
            started,
            &format!(
                "shards {}-{} of {} are on {}",
                state.first, state.last, state.fleet, state.target
            ),
        );
        Ok(())
    }

    async fn cleanup(&self, state: &mut SplitState) -> Result<(), CliError> {
        let due = state.cut_over_at.unwrap_or(0) + self.args.grace;
        let left = due.saturating_sub(now());
        if left > 0 {
            eprintln!(
                "split: cleanup in {left}s (--grace {}) ...",
                self.args.grace
            );
            tokio::time::sleep(Duration::from_secs(left)).await;
        }
        let started = Instant::now();
        eprintln!("split: cleanup ...");
        let log = |line: String| tracing::info!(target: "shardgate::split", "cleanup: {line}");
        let removed = cleanup(&self.login, state, self.args.keep_moved, &log)
            .await
            .map_err(failed("cleanup"))?;
        for removal in &removed {
            println!("{removal}");
        }
        state.phase = Phase::Done;
        self.save(state, "cleanup").await?;
        ended(
            "cleanup",
            started,
            &format!("{} databases removed", removed.len()),
        );
        Ok(())
    }
}

/// `--dry-run`: the checks, then what every phase would do, each drop on
/// its line; nothing changes and no state is written.
async fn dry_run(
    args: &SplitArgs,
    topology: &Topology,
    login: &Login,
    fleet: &str,
    first: u32,
    last: u32,
    recorded: Option<SplitState>,
) -> Result<(), CliError> {
    let (state, failures) = match recorded {
        Some(state) => {
            println!("recorded\tphase {}", state.phase.name());
            (state, Vec::new())
        }
        None => {
            let plan =
                plan(topology, Some(fleet), first, last, &args.to).map_err(failed("prepare"))?;
            let report = prepare(login, &plan, false)
                .await
                .map_err(failed("prepare"))?;
            for check in &report.checks {
                println!("{check}");
            }
            println!(
                "would copy\t{} databases, about {} MB, {} rows, from {} to {} (one consistent snapshot), then replicate",
                report.databases.len(),
                report.bytes >> 20,
                report.rows,
                plan.source,
                plan.target
            );
            let failures = report.failures();
            (
                SplitState {
                    fleet: plan.fleet,
                    first,
                    last,
                    source: plan.source,
                    target: plan.target,
                    phase: Phase::Prepared,
                    moved: plan.moved,
                    copied: report.databases,
                    gtid: None,
                    cut_over_at: None,
                },
                failures,
            )
        }
    };
    println!(
        "would verify\tshards {}-{} of {} against {} (at most {} rows/s)",
        state.first, state.last, state.fleet, state.target, args.max_rows_per_second
    );
    println!(
        "would move\tshards {}-{} of {} from {} to {} (pause, catch-up, push, acks, resume)",
        state.first, state.last, state.fleet, state.source, state.target
    );
    println!(
        "would stop\treplication on {} (STOP SLAVE; RESET SLAVE ALL) after {}s",
        state.target, args.grace
    );
    for removal in cleanup_plan(&state, args.keep_moved) {
        println!("would {removal}");
    }
    println!("dry run: nothing was changed");
    if failures.is_empty() {
        Ok(())
    } else {
        Err(CliError::Split(format!(
            "prepare: {} check(s) failed (above)",
            failures.len()
        )))
    }
}
