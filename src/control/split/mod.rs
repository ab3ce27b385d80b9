//! The phase driver of a shard split: prepare → copy → verify → cutover →
//! cleanup, the state record written after each phase so a resume
//! continues where a crash stopped it. `shardgate fleet split` and the
//! admin port's `SPLIT SHARDS` both run it; what differs between them is
//! a [`Place`]: where the config in force is read, where the state record
//! lives and how the cutover runs (`fleet move` on the command line's own
//! ZooKeeper session, this proxy's own `MOVE SHARDS`, or `MOVE SHARDS` on
//! the admin port of the proxy serving a config file: [`place`]).
//!
//! The phases' work on the hosts is `ops::split` (layer 1); the cutover is
//! `control::cutover`, which is why the driver lives here.
//! docs/decisions/0037-split-shards-on-the-admin-port-is-a-background-job.md
//! says why the admin command starts a job rather than answering at the end.

pub mod jobs;
pub mod place;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::clock::format_time;
use crate::control::cutover::{MoveRequest, StepEvent};
use crate::control::zookeeper::{claim_split, SplitClaim, SplitClaimed};
use crate::ops::split::state::{
    claim_file, decode, encode, lock_path, read_state, write_state, FileClaim, Phase, SplitState,
};
use crate::ops::split::{
    cleanup, cleanup_plan, copy, ensure_replicating, plan, prepare, CopyOptions, CopyProgress,
    Login, SplitError, SplitPlan,
};
use crate::ops::{verify_rows, RowVerifyRequest, DEFAULT_MAX_ROWS_PER_SECOND};
use crate::topology::source::ZkLocation;
use crate::topology::Topology;

pub use jobs::{JobState, SplitJob, Splits};

/// How long the source keeps the moved databases (and the target its
/// replication) after the cutover, by default, in seconds.
pub const DEFAULT_GRACE_SECONDS: u64 = 300;

/// Where a split's state record lives: a file, or a znode beside a
/// ZooKeeper document (`<document>/splits/<fleet>-<A>-<B>`).
#[derive(Debug, Clone)]
pub enum Store {
    /// A file, written atomically.
    File(PathBuf),
    /// The record `name` beside the document at the location.
    Znode(ZkLocation, String),
}

impl Store {
    /// The record's name for the split of `first..=last` of `fleet`
    /// beside a document.
    pub fn znode(location: &ZkLocation, fleet: &str, first: u32, last: u32) -> Self {
        Store::Znode(location.clone(), format!("{fleet}-{first}-{last}"))
    }

    /// Where it is, for messages.
    pub fn describe(&self) -> String {
        match self {
            Store::File(path) => path.display().to_string(),
            Store::Znode(location, name) => format!(
                "znode {}",
                crate::control::zookeeper::split_record_path(location, name)
            ),
        }
    }

    /// The record; `None` when there is none.
    pub async fn read(&self) -> Result<Option<SplitState>, SplitError> {
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

    /// Writes the record.
    pub async fn write(&self, state: &SplitState) -> Result<(), SplitError> {
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

/// The exclusive claim of one driver on a split, held while it runs it:
/// an `flock` on `<record>.lock` beside a file record, or the ephemeral
/// znode `<record>.lock` beside a znode record. A second driver is refused
/// ([`DriverError::Busy`]); a dead driver's claim goes with its process
/// (a file) or its ZooKeeper session (a znode).
/// docs/decisions/0040-one-driver-per-split.md says why.
#[derive(Debug)]
pub enum Claim {
    /// The lock on the file beside a file record.
    File(FileClaim),
    /// The ephemeral znode beside a znode record.
    Znode(SplitClaim),
}

impl Claim {
    /// Whether it is still held (a ZooKeeper session that expired lost it).
    async fn held(&self) -> Result<(), String> {
        match self {
            Claim::File(_) => Ok(()),
            Claim::Znode(claim) => claim.held().await,
        }
    }

    /// Gives the claim up (the next driver may start at once).
    pub async fn release(self) {
        match self {
            Claim::File(claim) => drop(claim),
            Claim::Znode(claim) => claim.release().await,
        }
    }
}

impl Store {
    /// Claims the split for `holder` (who runs it: `proxy <id>`,
    /// `cli@<host>:<pid>`); refused at once ([`DriverError::Busy`], naming
    /// the holder) while another driver holds it.
    pub async fn claim(&self, holder: &str) -> Result<Claim, DriverError> {
        let holder = format!("{holder}, since {}", format_time(SystemTime::now()));
        let failed = |e: String| DriverError::Failed(format!("claiming the split failed: {e}"));
        match self {
            Store::File(path) => {
                match claim_file(path, &holder).map_err(|e| failed(e.to_string()))? {
                    Ok(claim) => Ok(Claim::File(claim)),
                    Err(holding) => {
                        let lock = lock_path(path);
                        Err(DriverError::Busy(format!(
                        "the split recorded in {} is being run by another driver: {} holds the lock on {} \
                         (one driver per split). Wait for it to end, or find that process (`fuser {}`); a \
                         driver that died released the lock with its process: then run this again",
                        path.display(),
                        holder_text(&holding),
                        lock.display(),
                        lock.display()
                    )))
                    }
                }
            }
            Store::Znode(location, name) => {
                match claim_split(location, name, &holder)
                    .await
                    .map_err(|e| failed(e.to_string()))?
                {
                    SplitClaimed::Held(claim) => Ok(Claim::Znode(claim)),
                    SplitClaimed::Taken {
                        path,
                        holder,
                        session,
                        timeout,
                    } => Err(DriverError::Busy(format!(
                        "the split recorded in {} is being run by another driver: {} holds the ephemeral \
                         znode {path} (ZooKeeper session {session:#x}; one driver per split). Wait for it to \
                         end (SHOW SPLITS on that proxy, or that fleet split process), or find that process; \
                         a driver that died keeps its claim until its ZooKeeper session expires (the session \
                         timeout, about {:.0} s): then run this again",
                        self.describe(),
                        holder_text(&holder),
                        timeout.as_secs_f64()
                    ))),
                }
            }
        }
    }
}

/// What a claim says of its holder, for messages.
fn holder_text(written: &str) -> &str {
    match written.trim() {
        "" => "a driver that has not written its name yet",
        text => text,
    }
}

/// Where a split runs: the config it reads, its state record, its cutover.
pub trait Place {
    /// Who drives the split from here, for its claim: `proxy <id>` or
    /// `cli@<host>:<pid>`.
    fn holder(&self) -> String;

    /// The config in force (read again before the cutover: the shards may
    /// already be on the target).
    fn topology(&self) -> impl Future<Output = Result<Arc<Topology>, String>> + Send;

    /// The state record of the split of `first..=last` of `fleet`.
    fn store(&self, fleet: &str, first: u32, last: u32) -> Result<Store, String>;

    /// Takes over the pause a killed run of the same cutover left (see
    /// [`crate::control::cutover::release_killed_cutover`]); what it did,
    /// `None` when there was none (or this place cannot tell).
    fn release_killed(
        &self,
        _request: &MoveRequest,
    ) -> impl Future<Output = Result<Option<String>, String>> + Send {
        async { Ok(None) }
    }

    /// Moves the shards with the cutover sequence; its steps
    /// (`name\tms\tdetail`), or why it failed (saying what it left).
    /// `progress` hears of each step.
    fn cut_over(
        &self,
        request: &MoveRequest,
        progress: &(dyn Fn(StepEvent<'_>) + Send + Sync),
    ) -> impl Future<Output = Result<Vec<String>, String>> + Send;
}

/// What to split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitRequest {
    /// The fleet (needed when several fleets have those shards).
    pub fleet: Option<String>,
    /// First shard.
    pub first: u32,
    /// Last shard.
    pub last: u32,
    /// The new master, `host:port`: an empty MariaDB server.
    pub target: String,
}

/// How a split runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitOptions {
    /// Continue the split recorded (refused when there is none; without
    /// it a recorded split is refused).
    pub resume: bool,
    /// Source rows read per second at most, by the copy and the verify
    /// (0: no limit).
    pub max_rows_per_second: u64,
    /// Keep the range's databases on the source as `_moved_<name>`.
    pub keep_moved: bool,
    /// Seconds between the cutover and the cleanup.
    pub grace_seconds: u64,
    /// Stop after this phase; a resume continues.
    pub stop_after: Option<Phase>,
    /// How the operator resumes, for messages (`--resume`, `RESUME`).
    pub resume_hint: &'static str,
}

impl Default for SplitOptions {
    fn default() -> Self {
        Self {
            resume: false,
            max_rows_per_second: DEFAULT_MAX_ROWS_PER_SECOND,
            keep_moved: false,
            grace_seconds: DEFAULT_GRACE_SECONDS,
            stop_after: None,
            resume_hint: "--resume",
        }
    }
}

/// What a running split tells its caller.
#[derive(Debug, Clone, Copy)]
pub enum SplitEvent<'a> {
    /// A phase starts (`prepare`, `copy`, `verify`, `cutover`, `cleanup`),
    /// with what it does.
    Started(&'static str, &'a str),
    /// The copy's progress.
    Copy(&'a CopyProgress),
    /// A note while a phase runs.
    Note(&'a str),
    /// A line of a phase's result: a check, a difference, a cutover step,
    /// a removal.
    Line(&'a str),
    /// A phase ended: its name, its time, what it did.
    Ended(&'static str, Duration, &'a str),
}

/// Told of everything a split does.
pub type Events<'a> = &'a (dyn Fn(SplitEvent<'_>) + Send + Sync);

/// Why a split was refused or stopped.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The request does not fit the config or the state record; nothing
    /// was changed.
    #[error("{0}")]
    Refused(String),
    /// Another split runs on this proxy; nothing was started.
    #[error("{0}")]
    Busy(String),
    /// A phase failed or found a problem; the message says what to do.
    #[error("{0}")]
    Failed(String),
}

/// How a split ended without an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every phase done (now or before).
    Done(SplitState),
    /// Stopped after a phase as asked.
    Stopped(SplitState),
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The one fleet with shard `last` (or the one named).
pub fn fleet_name(topology: &Topology, fleet: Option<&str>, last: u32) -> Result<String, String> {
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
        [] => Err(format!("no fleet has shard {last}")),
        _ => Err(format!(
            "fleets {} all have shard {last}: say which (--fleet, or IN <fleet>)",
            having.join(", ")
        )),
    }
}

/// A split found and checked against its state record: what [`run`] and
/// [`dry_run`] start from.
pub struct Opened {
    /// The config in force when it was opened.
    pub topology: Arc<Topology>,
    /// The fleet's name.
    pub fleet: String,
    /// Where the state record lives.
    pub store: Store,
    /// The record, if the split was started before.
    pub recorded: Option<SplitState>,
}

/// Reads the config and the state record of `request` at `place`; refused
/// when the record is of another split.
pub async fn open<P: Place>(place: &P, request: &SplitRequest) -> Result<Opened, DriverError> {
    let (topology, fleet, store) = locate(place, request).await?;
    read_opened(topology, fleet, store, request).await
}

/// [`open`] for a driver: the split claimed for this place's
/// [`Place::holder`] before its record is read, so that no other driver
/// moves it on from what was read. The claim is held until dropped.
pub async fn open_claimed<P: Place>(
    place: &P,
    request: &SplitRequest,
) -> Result<(Opened, Claim), DriverError> {
    let (topology, fleet, store) = locate(place, request).await?;
    let claim = store.claim(&place.holder()).await?;
    Ok((read_opened(topology, fleet, store, request).await?, claim))
}

async fn locate<P: Place>(
    place: &P,
    request: &SplitRequest,
) -> Result<(Arc<Topology>, String, Store), DriverError> {
    let topology = place.topology().await.map_err(DriverError::Refused)?;
    let fleet = fleet_name(&topology, request.fleet.as_deref(), request.last)
        .map_err(DriverError::Refused)?;
    let store = place
        .store(&fleet, request.first, request.last)
        .map_err(DriverError::Refused)?;
    Ok((topology, fleet, store))
}

async fn read_opened(
    topology: Arc<Topology>,
    fleet: String,
    store: Store,
    request: &SplitRequest,
) -> Result<Opened, DriverError> {
    let recorded = store
        .read()
        .await
        .map_err(|e| DriverError::Failed(format!("reading the state failed: {e}")))?;
    if let Some(state) = &recorded {
        if !state.same_split(Some(&fleet), request.first, request.last, &request.target) {
            return Err(DriverError::Refused(format!(
                "{} records another split ({} {}-{} to {}): finish that one first (or pass another --state)",
                store.describe(),
                state.fleet,
                state.first,
                state.last,
                state.target
            )));
        }
    }
    Ok(Opened {
        topology,
        fleet,
        store,
        recorded,
    })
}

/// Whether `options` fit the record of `opened`: a recorded split needs
/// a resume, and a resume needs a record.
pub fn check_resume(opened: &Opened, options: &SplitOptions) -> Result<(), DriverError> {
    match (&opened.recorded, options.resume) {
        (Some(state), false) => Err(refuse_recorded(&opened.store, state, options)),
        (None, true) => Err(refuse_unrecorded(&opened.store, options)),
        _ => Ok(()),
    }
}

fn refuse_recorded(store: &Store, state: &SplitState, options: &SplitOptions) -> DriverError {
    DriverError::Refused(format!(
        "{} records this split at phase {}: {} continues it (or remove the record to start over)",
        store.describe(),
        state.phase.name(),
        options.resume_hint
    ))
}

fn refuse_unrecorded(store: &Store, options: &SplitOptions) -> DriverError {
    DriverError::Refused(format!(
        "no split recorded in {}: run it without {}",
        store.describe(),
        options.resume_hint
    ))
}

/// Runs (or continues) the split `opened` at `place` under `claim` (from
/// [`open_claimed`]): every phase not done yet, each recorded as it ends.
pub async fn run<P: Place>(
    place: &P,
    opened: Opened,
    claim: &Claim,
    request: &SplitRequest,
    options: &SplitOptions,
    events: Events<'_>,
) -> Result<Outcome, DriverError> {
    let Opened {
        topology,
        fleet,
        store,
        recorded,
    } = opened;
    let login = Login::operations(&topology);
    let phases = Phases {
        place,
        options,
        events,
        login,
        store: &store,
        claim,
        topology,
    };
    let state = match recorded {
        Some(state) if options.resume => state,
        Some(state) => return Err(refuse_recorded(&store, &state, options)),
        None if options.resume => return Err(refuse_unrecorded(&store, options)),
        None => phases.prepare(&fleet, request).await?,
    };
    phases.run(state).await
}

/// Everything the phases need.
struct Phases<'a, P> {
    place: &'a P,
    options: &'a SplitOptions,
    events: Events<'a>,
    login: Login,
    store: &'a Store,
    claim: &'a Claim,
    topology: Arc<Topology>,
}

impl<P: Place> Phases<'_, P> {
    fn failed(&self, phase: &'static str) -> impl Fn(SplitError) -> DriverError {
        let hint = self.options.resume_hint;
        move |e| DriverError::Failed(format!("{phase} failed: {e}; {hint} continues from it"))
    }

    fn started(&self, phase: &'static str, what: &str) -> Instant {
        (self.events)(SplitEvent::Started(phase, what));
        Instant::now()
    }

    fn ended(&self, phase: &'static str, started: Instant, detail: &str) {
        (self.events)(SplitEvent::Ended(phase, started.elapsed(), detail));
    }

    fn line(&self, text: &str) {
        (self.events)(SplitEvent::Line(text));
    }

    /// Refuses to go on once the claim is lost: another driver may run
    /// the split now.
    async fn still_claimed(&self, phase: &'static str) -> Result<(), DriverError> {
        self.claim.held().await.map_err(|e| {
            DriverError::Failed(format!(
                "{phase}: this driver lost its claim on the split ({e}); it stopped. If no other \
                 driver runs it (SHOW SPLITS, fleet split processes), {} continues it",
                self.options.resume_hint
            ))
        })
    }

    async fn save(&self, state: &SplitState, phase: &'static str) -> Result<(), DriverError> {
        self.still_claimed(phase).await?;
        self.store.write(state).await.map_err(self.failed(phase))
    }

    fn stop_after(&self, phase: Phase) -> bool {
        self.options.stop_after == Some(phase)
    }

    async fn prepare(
        &self,
        fleet: &str,
        request: &SplitRequest,
    ) -> Result<SplitState, DriverError> {
        let started = self.started("prepare", "prepare ...");
        let plan = plan(
            &self.topology,
            Some(fleet),
            request.first,
            request.last,
            &request.target,
        )
        .map_err(|e| DriverError::Refused(format!("prepare: {e}")))?;
        let report = prepare(&self.login, &plan, false)
            .await
            .map_err(self.failed("prepare"))?;
        for check in &report.checks {
            self.line(&check.to_string());
        }
        let failures = report.failures();
        if !failures.is_empty() {
            return Err(DriverError::Refused(format!(
                "prepare: {} check(s) failed; nothing was changed:\n{}",
                failures.len(),
                failures.join("\n")
            )));
        }
        let state = SplitState {
            fleet: plan.fleet,
            first: request.first,
            last: request.last,
            source: plan.source,
            target: plan.target,
            phase: Phase::Prepared,
            moved: plan.moved,
            copied: Vec::new(),
            gtid: None,
            cut_over_at: None,
        };
        self.save(&state, "prepare").await?;
        self.ended(
            "prepare",
            started,
            &format!(
                "{} databases, about {} MB and {} rows to copy from {} to {}; state in {}",
                report.databases.len(),
                report.bytes >> 20,
                report.rows,
                state.source,
                state.target,
                self.store.describe()
            ),
        );
        Ok(state)
    }

    async fn run(self, mut state: SplitState) -> Result<Outcome, DriverError> {
        if state.phase == Phase::Done {
            self.line(&format!(
                "split of {} {}-{} to {} already done ({})",
                state.fleet,
                state.first,
                state.last,
                state.target,
                self.store.describe()
            ));
            return Ok(Outcome::Done(state));
        }
        if self.stop_after(Phase::Prepared) {
            return Ok(Outcome::Stopped(state));
        }
        if state.phase < Phase::Copied {
            self.copy(&mut state).await?;
            if self.stop_after(Phase::Copied) {
                return Ok(Outcome::Stopped(state));
            }
        }
        if state.phase < Phase::Verified {
            self.verify(&mut state).await?;
            if self.stop_after(Phase::Verified) {
                return Ok(Outcome::Stopped(state));
            }
        }
        if state.phase < Phase::CutOver {
            self.cutover(&mut state).await?;
            if self.stop_after(Phase::CutOver) {
                return Ok(Outcome::Stopped(state));
            }
        }
        self.cleanup(&mut state).await?;
        self.line(&format!(
            "split of {} {}-{} from {} to {} done",
            state.fleet, state.first, state.last, state.source, state.target
        ));
        Ok(Outcome::Done(state))
    }

    async fn copy(&self, state: &mut SplitState) -> Result<(), DriverError> {
        let resuming = state.phase == Phase::Copying;
        let started = self.started(
            "copy",
            &format!(
                "copy {} -> {}{} ...",
                state.source,
                state.target,
                if resuming {
                    " (again: the last one was interrupted)"
                } else {
                    ""
                }
            ),
        );
        let plan = SplitPlan {
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
            .map_err(self.failed("copy"))?;
        let failures = report.failures();
        if !failures.is_empty() {
            return Err(DriverError::Failed(format!(
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
            max_rows_per_second: self.options.max_rows_per_second,
            ..CopyOptions::default()
        };
        let progress = |p: &CopyProgress| (self.events)(SplitEvent::Copy(p));
        let copied = copy(
            &self.login,
            &state.source,
            &state.target,
            &state.copied,
            &options,
            &progress,
        )
        .await
        .map_err(self.failed("copy"))?;
        state.gtid = Some(copied.gtid.clone());
        state.phase = Phase::Copied;
        self.save(state, "copy").await?;
        let (rows, megabytes) = copied.rates();
        self.ended(
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

    async fn verify(&self, state: &mut SplitState) -> Result<(), DriverError> {
        let started = self.started(
            "verify",
            &format!(
                "verify shards {}-{} against {} ...",
                state.first, state.last, state.target
            ),
        );
        ensure_replicating(&self.login, &state.target)
            .await
            .map_err(self.failed("verify"))?;
        let mut request = RowVerifyRequest::new(state.first, state.last, state.target.clone());
        request.fleet = Some(state.fleet.clone());
        request.max_rows_per_second = self.options.max_rows_per_second;
        let hint = self.options.resume_hint;
        let report = verify_rows(&self.topology, &request).await.map_err(|e| {
            DriverError::Failed(format!("verify failed: {e}; {hint} continues from it"))
        })?;
        if !report.is_ok() {
            for difference in &report.differences {
                self.line(&difference.to_string());
            }
            return Err(DriverError::Failed(format!(
                "verify: {report}; nothing was cut over: find why the target differs, fix it (or copy again: \
                 remove the state record and the target's copy), then {hint}"
            )));
        }
        state.phase = Phase::Verified;
        self.save(state, "verify").await?;
        self.ended("verify", started, &report.to_string());
        Ok(())
    }

    async fn cutover(&self, state: &mut SplitState) -> Result<(), DriverError> {
        self.still_claimed("cutover").await?;
        let started = self.started("cutover", "cutover ...");
        let request = MoveRequest {
            first: state.first,
            last: state.last,
            fleet: Some(state.fleet.clone()),
            target: state.target.clone(),
            dry_run: false,
        };
        let released = self.place.release_killed(&request).await.map_err(|e| {
            DriverError::Failed(format!(
                "cutover: {e}; {} tries it again",
                self.options.resume_hint
            ))
        })?;
        if let Some(released) = released {
            (self.events)(SplitEvent::Note(&format!("cutover: {released}")));
        }
        let current = self.place.topology().await.map_err(|e| {
            DriverError::Failed(format!(
                "cutover: reading the config failed: {e}; {} tries it again",
                self.options.resume_hint
            ))
        })?;
        let routed = current
            .fleet_by_name(&state.fleet)
            .and_then(|f| current.master_of(f, state.first))
            .map(|h| current.hosts[h].addr.clone());
        if routed.as_deref() == Some(state.target.as_str()) {
            (self.events)(SplitEvent::Note(&format!(
                "cutover: shards {}-{} already routed to {}",
                state.first, state.last, state.target
            )));
        } else {
            let progress = |event: StepEvent<'_>| match event {
                StepEvent::Started(name) => {
                    (self.events)(SplitEvent::Note(&format!("cutover: {name} ...")));
                }
                StepEvent::Ended(step) => {
                    (self.events)(SplitEvent::Note(&format!("cutover: {step}")));
                }
            };
            let steps = self
                .place
                .cut_over(&request, &progress)
                .await
                .map_err(|e| {
                    DriverError::Failed(format!(
                        "cutover failed: {e}; {} tries it again",
                        self.options.resume_hint
                    ))
                })?;
            for step in &steps {
                self.line(&format!("cutover\t{step}"));
            }
        }
        state.phase = Phase::CutOver;
        state.cut_over_at = Some(now());
        self.save(state, "cutover").await?;
        self.ended(
            "cutover",
            started,
            &format!(
                "shards {}-{} of {} are on {}",
                state.first, state.last, state.fleet, state.target
            ),
        );
        Ok(())
    }

    async fn cleanup(&self, state: &mut SplitState) -> Result<(), DriverError> {
        let grace = self.options.grace_seconds;
        let due = state.cut_over_at.unwrap_or(0) + grace;
        let left = due.saturating_sub(now());
        if left > 0 {
            (self.events)(SplitEvent::Note(&format!(
                "cleanup in {left}s (grace {grace}s) ..."
            )));
            tokio::time::sleep(Duration::from_secs(left)).await;
        }
        self.still_claimed("cleanup").await?;
        let started = self.started("cleanup", "cleanup ...");
        let log = |line: String| tracing::info!(target: "shardgate::split", "cleanup: {line}");
        let removed = cleanup(&self.login, state, self.options.keep_moved, &log)
            .await
            .map_err(self.failed("cleanup"))?;
        for removal in &removed {
            self.line(&removal.to_string());
        }
        state.phase = Phase::Done;
        self.save(state, "cleanup").await?;
        self.ended(
            "cleanup",
            started,
            &format!("{} databases removed", removed.len()),
        );
        Ok(())
    }
}

/// What a dry run found: a line per check and per thing each phase would
/// do (`would drop\t<host>\t<database>`, ...), and the checks that failed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DryRun {
    /// The lines, in order.
    pub lines: Vec<String>,
    /// The failing checks (empty: the split can run).
    pub failures: Vec<String>,
}

/// The checks, then what every phase would do, each drop on its line;
/// nothing changes and no state is written.
pub async fn dry_run(
    opened: Opened,
    request: &SplitRequest,
    options: &SplitOptions,
) -> Result<DryRun, DriverError> {
    let Opened {
        topology,
        fleet,
        recorded,
        ..
    } = opened;
    let mut lines = Vec::new();
    let (state, failures) = match recorded {
        Some(state) => {
            lines.push(format!("recorded\tphase {}", state.phase.name()));
            (state, Vec::new())
        }
        None => {
            let login = Login::operations(&topology);
            let plan = plan(
                &topology,
                Some(&fleet),
                request.first,
                request.last,
                &request.target,
            )
            .map_err(|e| DriverError::Refused(format!("prepare: {e}")))?;
            let report = prepare(&login, &plan, false)
                .await
                .map_err(|e| DriverError::Failed(format!("prepare failed: {e}")))?;
            lines.extend(report.checks.iter().map(ToString::to_string));
            lines.push(format!(
                "would copy\t{} databases, about {} MB, {} rows, from {} to {} (one consistent snapshot), then replicate",
                report.databases.len(),
                report.bytes >> 20,
                report.rows,
                plan.source,
                plan.target
            ));
            let failures = report.failures();
            (
                SplitState {
                    fleet: plan.fleet,
                    first: plan.first,
                    last: plan.last,
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
    lines.push(format!(
        "would verify\tshards {}-{} of {} against {} (at most {} rows/s)",
        state.first, state.last, state.fleet, state.target, options.max_rows_per_second
    ));
    lines.push(format!(
        "would move\tshards {}-{} of {} from {} to {} (pause, catch-up, push, acks, resume)",
        state.first, state.last, state.fleet, state.source, state.target
    ));
    lines.push(format!(
        "would stop\treplication on {} (STOP SLAVE; RESET SLAVE ALL) after {}s",
        state.target, options.grace_seconds
    ));
    for removal in cleanup_plan(&state, options.keep_moved) {
        lines.push(format!("would {removal}"));
    }
    Ok(DryRun { lines, failures })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_file_record_is_claimed_by_one_driver_and_the_second_is_told_who_holds_it() {
        let dir = std::env::temp_dir().join(format!("split-store-claim-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::File(dir.join("x.state"));
        let held = store.claim("cli@h:1").await.unwrap();
        let refused = store
            .claim("proxy p (SPLIT SHARDS by admin)")
            .await
            .unwrap_err();
        assert!(matches!(refused, DriverError::Busy(_)), "{refused:?}");
        let text = refused.to_string();
        assert!(
            text.contains("is being run by another driver: cli@h:1, since ")
                && text.contains("x.state.lock")
                && text.contains("fuser"),
            "{text}"
        );
        held.release().await;
        store
            .claim("proxy p (SPLIT SHARDS by admin)")
            .await
            .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
