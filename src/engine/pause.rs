//! Cutover pause: `PAUSE SHARDS a-b` makes new statements for those shards
//! wait (bounded) while statements and transactions already running on them
//! finish; `RESUME SHARDS a-b` lets the waiting statements go, routed on the
//! topology in force at that moment.
//!
//! Every statement for a shard registers itself in that shard's in-flight
//! counter before it runs ([`PauseGate::enter`]) and unregisters when its
//! [`ShardGuard`] drops; a transaction bound to a shard keeps its guard until
//! COMMIT/ROLLBACK. `pause` marks the range paused, then waits for those
//! counters to reach zero. The two sides order their writes and reads the
//! Dekker way (increment, then check the pause marks; mark, then read the
//! counters, all `SeqCst`), so a statement either sees the pause and waits,
//! or the pause sees the statement and waits for it.
//!
//! Counters are kept per fleet *name* (fleet indexes may change across
//! reloads) and grow when a reload raises a fleet's shard count; the old
//! counters stay chained behind the new ones until their last guard goes.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use arc_swap::ArcSwap;
use tokio::sync::Notify;

use crate::topology::{FleetId, Topology};

/// How often `pause` looks at the in-flight counters while draining.
const DRAIN_POLL: Duration = Duration::from_millis(1);

/// Most running shards a drain-timeout error names one by one.
const SHARDS_NAMED: usize = 10;

/// The shards paused now, and the statements running on each shard.
#[derive(Debug)]
pub struct PauseGate {
    wait_timeout: Duration,
    /// In-flight counters, one table per fleet (by name).
    counters: ArcSwap<Vec<Arc<FleetCounters>>>,
    /// Serialises growing `counters`.
    grow: Mutex<()>,
    /// The paused ranges.
    paused: Mutex<Vec<PausedEntry>>,
    /// Number of entries in `paused`; read on every statement, so a
    /// statement looks at `paused` only while something is paused.
    active: AtomicU32,
    /// Bumped each time a pause ends (resume, or a pause undone), before
    /// `active` drops: a statement that routed on a topology loaded before
    /// the end of a pause sees the change and routes again.
    epoch: AtomicU64,
    /// Wakes waiting statements when a pause ends.
    resumed: Notify,
}

/// In-flight statement counts of one fleet's shards.
#[derive(Debug)]
struct FleetCounters {
    name: String,
    running: Box<[AtomicU32]>,
    /// The smaller table this one replaced (guards taken on it still count).
    older: Option<Arc<FleetCounters>>,
}

impl FleetCounters {
    fn new(name: &str, shards: usize, older: Option<Arc<FleetCounters>>) -> Self {
        Self {
            name: name.to_owned(),
            running: (0..shards).map(|_| AtomicU32::new(0)).collect(),
            older,
        }
    }

    fn running(&self, shard: u32) -> u32 {
        let here = self
            .running
            .get(shard as usize)
            .map_or(0, |count| count.load(Ordering::SeqCst));
        here + self.older.as_ref().map_or(0, |older| older.running(shard))
    }

    fn covers(&self, name: &str, shards: u32) -> bool {
        self.name == name && self.running.len() >= shards as usize
    }
}

/// One paused range of one fleet.
#[derive(Debug)]
struct PausedEntry {
    fleet: String,
    first: u32,
    last: u32,
    since: SystemTime,
    started: Instant,
    /// Statements waiting for this range now.
    waiting: Arc<AtomicUsize>,
}

impl PausedEntry {
    fn covers(&self, fleet: &str, shard: u32) -> bool {
        self.fleet == fleet && (self.first..=self.last).contains(&shard)
    }

    fn overlaps(&self, fleet: &str, first: u32, last: u32) -> bool {
        self.fleet == fleet && self.first <= last && first <= self.last
    }
}

/// The answer to `PAUSE SHARDS`: the range is paused and nothing runs on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PauseReport {
    /// The fleets paused.
    pub fleets: Vec<String>,
    /// First shard paused.
    pub first: u32,
    /// Last shard paused.
    pub last: u32,
    /// Statements and transactions that were running on the range when it
    /// was paused (all finished since).
    pub drained: usize,
    /// How long draining them took.
    pub waited: Duration,
}

/// The answer to `RESUME SHARDS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumeReport {
    /// The fleets resumed.
    pub fleets: Vec<String>,
    /// First shard of the range given.
    pub first: u32,
    /// Last shard of the range given.
    pub last: u32,
    /// Statements that were waiting and now go on.
    pub released: usize,
    /// How long the range was paused (the longest, when several ranges
    /// were resumed together).
    pub paused_for: Duration,
}

/// A paused range, as `SHOW CONFIG` / `SHOW SHARDS` list it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PausedRange {
    /// Fleet name.
    pub fleet: String,
    /// First shard paused.
    pub first: u32,
    /// Last shard paused.
    pub last: u32,
    /// When the pause began.
    pub since: SystemTime,
    /// Statements waiting for it now.
    pub waiting: usize,
}

/// Why `PAUSE` or `RESUME` refused or failed. The text is what the
/// operator reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PauseError {
    /// `first > last`.
    #[error("bad shard range {first}-{last}: the first shard must not be after the last")]
    BadRange {
        /// First shard given.
        first: u32,
        /// Last shard given.
        last: u32,
    },
    /// No fleet of that name.
    #[error("no fleet named '{name}' (fleets: {known})")]
    UnknownFleet {
        /// The name given.
        name: String,
        /// The fleets configured, comma-separated.
        known: String,
    },
    /// The range goes past the fleet's (or every fleet's) last shard.
    #[error("shards {first}-{last} are outside {what}")]
    OutOfRange {
        /// First shard given.
        first: u32,
        /// Last shard given.
        last: u32,
        /// `fleet main (shards 0-4095)` or the like.
        what: String,
    },
    /// Part of the range is paused already.
    #[error("shards {first}-{last} of fleet {fleet} overlap shards {paused_first}-{paused_last}, paused already; RESUME SHARDS {paused_first}-{paused_last} first, or pause a range that does not overlap")]
    AlreadyPaused {
        /// Fleet name.
        fleet: String,
        /// First shard given.
        first: u32,
        /// Last shard given.
        last: u32,
        /// First shard of the paused range in the way.
        paused_first: u32,
        /// Last shard of the paused range in the way.
        paused_last: u32,
    },
    /// `RESUME` of a range that is not paused.
    #[error("shards {first}-{last} are not paused{fleet}; paused now: {paused}")]
    NotPaused {
        /// First shard given.
        first: u32,
        /// Last shard given.
        last: u32,
        /// ` in fleet x` when one was named, else empty.
        fleet: String,
        /// The paused ranges, or `nothing`.
        paused: String,
    },
    /// `RESUME` of part of a paused range.
    #[error("shards {first}-{last} cover only part of the paused range {paused_first}-{paused_last} of fleet {fleet}; resume the whole range (RESUME SHARDS {paused_first}-{paused_last})")]
    PartialResume {
        /// Fleet name.
        fleet: String,
        /// First shard given.
        first: u32,
        /// Last shard given.
        last: u32,
        /// First shard of the paused range.
        paused_first: u32,
        /// Last shard of the paused range.
        paused_last: u32,
    },
    /// Statements or transactions still ran when the drain timeout passed;
    /// the pause was undone.
    #[error("shards {first}-{last} of {fleets}: {running} statement(s) or transaction(s) were still running after {waited_ms} ms ({shards}); the pause was undone and statements flow again. Retry once the long transactions have finished, or raise pause.drain_timeout_ms")]
    DrainTimeout {
        /// `fleet main` or `fleets main, mod`.
        fleets: String,
        /// First shard of the range.
        first: u32,
        /// Last shard of the range.
        last: u32,
        /// Statements and transactions still registered.
        running: u32,
        /// Where they ran: `shard 1500: 1, shard 1777: 2`.
        shards: String,
        /// How long the pause waited.
        waited_ms: u128,
    },
}

/// Registration of a statement (or a bound transaction) on its shards;
/// unregisters on drop. The default guard holds nothing.
#[derive(Debug, Default)]
pub struct ShardGuard {
    held: Held,
}

#[derive(Debug, Default)]
enum Held {
    #[default]
    Nothing,
    One(Arc<FleetCounters>, u32),
    Many(Vec<(Arc<FleetCounters>, u32)>),
}

impl ShardGuard {
    fn shards(&self) -> impl Iterator<Item = (&FleetCounters, u32)> {
        let (one, many) = match &self.held {
            Held::Nothing => (None, &[][..]),
            Held::One(counters, shard) => (Some((counters.as_ref(), *shard)), &[][..]),
            Held::Many(list) => (None, list.as_slice()),
        };
        one.into_iter().chain(
            many.iter()
                .map(|(counters, shard)| (counters.as_ref(), *shard)),
        )
    }
}

impl Drop for ShardGuard {
    fn drop(&mut self) {
        for (counters, shard) in self.shards() {
            if let Some(count) = counters.running.get(shard as usize) {
                count.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
}

/// Why [`PauseGate::enter`] did not admit a statement.
#[derive(Debug)]
pub enum Blocked {
    /// One of its shards is paused: wait ([`PauseGate::wait`]), then route
    /// again.
    Paused(PausedShard),
    /// A pause ended after the statement's topology was loaded: route again
    /// on the topology in force now.
    Stale,
}

/// A statement waiting for a paused shard; counted in the range's waiting
/// statements while it exists.
#[derive(Debug)]
pub struct PausedShard {
    /// Fleet name.
    pub fleet: String,
    /// The paused shard.
    pub shard: u32,
    waiting: Arc<AtomicUsize>,
}

impl Drop for PausedShard {
    fn drop(&mut self) {
        self.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Undoes a pause that did not complete (drain timeout, or the admin
/// session went away mid-drain) when dropped armed.
struct PendingPause<'a> {
    gate: &'a PauseGate,
    fleets: &'a [String],
    first: u32,
    last: u32,
    armed: bool,
}

impl Drop for PendingPause<'_> {
    fn drop(&mut self) {
        if self.armed {
            let mut paused = self.gate.lock_paused();
            let removed = self.gate.remove(&mut paused, |e| {
                e.first == self.first && e.last == self.last && self.fleets.contains(&e.fleet)
            });
            drop(paused);
            if !removed.is_empty() {
                self.gate.resumed.notify_waiters();
            }
        }
    }
}

impl PauseGate {
    /// A gate with nothing paused; waiting statements give up after
    /// `wait_timeout`.
    pub fn new(wait_timeout: Duration) -> Self {
        Self {
            wait_timeout,
            counters: ArcSwap::from_pointee(Vec::new()),
            grow: Mutex::new(()),
            paused: Mutex::new(Vec::new()),
            active: AtomicU32::new(0),
            epoch: AtomicU64::new(0),
            resumed: Notify::new(),
        }
    }

    /// How long a statement for a paused shard waits (the value the gate
    /// was built with; the engine uses `pause.timeout_ms` of the config in
    /// force, so a reload changes it).
    pub fn wait_timeout(&self) -> Duration {
        self.wait_timeout
    }

    /// Changes once per ended pause. Read it *before* loading the topology
    /// a statement is routed on, and give it to [`PauseGate::enter`].
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Registers a statement on `shards` (fleet ids of `topology`). With
    /// `epoch` (from [`PauseGate::epoch`] before `topology` was loaded), a
    /// statement for a paused shard is refused with [`Blocked::Paused`],
    /// and one whose topology may predate the end of a pause with
    /// [`Blocked::Stale`]; without it, the statement is registered
    /// unconditionally (a session whose own transaction the pause is
    /// waiting for).
    pub fn enter<I>(
        &self,
        topology: &Topology,
        shards: I,
        epoch: Option<u64>,
    ) -> Result<ShardGuard, Blocked>
    where
        I: IntoIterator<Item = (FleetId, u32)>,
    {
        let guard = self.register(topology, shards);
        let Some(epoch) = epoch else {
            return Ok(guard);
        };
        if self.active.load(Ordering::SeqCst) != 0 {
            if let Some(paused) = self.first_paused(&guard) {
                return Err(Blocked::Paused(paused));
            }
        }
        if self.epoch.load(Ordering::SeqCst) != epoch {
            return Err(Blocked::Stale);
        }
        Ok(guard)
    }

    /// Waits until `paused`'s shard is no longer paused (true) or
    /// `deadline` passes (false).
    pub async fn wait(&self, paused: &PausedShard, deadline: Instant) -> bool {
        loop {
            // Created before the check: a resume in between still wakes it.
            let resumed = self.resumed.notified();
            if !self.is_paused(&paused.fleet, paused.shard) {
                return true;
            }
            if tokio::time::timeout_at(deadline.into(), resumed)
                .await
                .is_err()
            {
                return !self.is_paused(&paused.fleet, paused.shard);
            }
        }
    }

    /// Whether `shard` of fleet `fleet` is paused now.
    pub fn is_paused(&self, fleet: &str, shard: u32) -> bool {
        self.active.load(Ordering::SeqCst) != 0
            && self.lock_paused().iter().any(|e| e.covers(fleet, shard))
    }

    /// Pauses shards `first..=last` of `fleet` (every fleet that has them
    /// when `None`): new statements for them wait from now on. Returns once
    /// the statements and transactions already running on them have
    /// finished; if some still run after `drain_timeout`, the pause is
    /// undone and the error says where they run.
    pub async fn pause(
        &self,
        topology: &Topology,
        fleet: Option<&str>,
        first: u32,
        last: u32,
        drain_timeout: Duration,
    ) -> Result<PauseReport, PauseError> {
        let fleets = pausable_fleets(topology, fleet, first, last)?;
        {
            let mut paused = self.lock_paused();
            for name in &fleets {
                if let Some(entry) = paused.iter().find(|e| e.overlaps(name, first, last)) {
                    return Err(PauseError::AlreadyPaused {
                        fleet: name.clone(),
                        first,
                        last,
                        paused_first: entry.first,
                        paused_last: entry.last,
                    });
                }
            }
            let (since, started) = (SystemTime::now(), Instant::now());
            for name in &fleets {
                paused.push(PausedEntry {
                    fleet: name.clone(),
                    first,
                    last,
                    since,
                    started,
                    waiting: Arc::new(AtomicUsize::new(0)),
                });
            }
            self.active.fetch_add(fleets.len() as u32, Ordering::SeqCst);
        }
        let mut pending = PendingPause {
            gate: self,
            fleets: &fleets,
            first,
            last,
            armed: true,
        };
        let started = Instant::now();
        let deadline = started + drain_timeout;
        let mut drained = None;
        let drained = loop {
            let running = self.running(&fleets, first, last);
            let total: u32 = running.iter().map(|(_, _, n)| n).sum();
            let drained = *drained.get_or_insert(total as usize);
            if total == 0 {
                pending.armed = false;
                break drained;
            }
            if Instant::now() >= deadline {
                drop(pending);
                return Err(PauseError::DrainTimeout {
                    fleets: fleet_list(&fleets),
                    first,
                    last,
                    running: total,
                    shards: describe_running(&fleets, &running),
                    waited_ms: started.elapsed().as_millis(),
                });
            }
            tokio::time::sleep(DRAIN_POLL).await;
        };
        drop(pending);
        Ok(PauseReport {
            fleets,
            first,
            last,
            drained,
            waited: started.elapsed(),
        })
    }

    /// Ends the pauses of `first..=last` (of `fleet`, or of every fleet
    /// when `None`): waiting statements go on, routed on the topology in
    /// force now. Every paused range inside `first..=last` is resumed; one
    /// that is only partly inside is refused.
    pub fn resume(
        &self,
        fleet: Option<&str>,
        first: u32,
        last: u32,
    ) -> Result<ResumeReport, PauseError> {
        if first > last {
            return Err(PauseError::BadRange { first, last });
        }
        let fleet_matches = |e: &PausedEntry| fleet.is_none_or(|name| e.fleet == name);
        let mut paused = self.lock_paused();
        if let Some(partial) = paused.iter().find(|e| {
            fleet_matches(e)
                && e.first <= last
                && first <= e.last
                && !(first <= e.first && e.last <= last)
        }) {
            return Err(PauseError::PartialResume {
                fleet: partial.fleet.clone(),
                first,
                last,
                paused_first: partial.first,
                paused_last: partial.last,
            });
        }
        let removed = self.remove(&mut paused, |e| {
            fleet_matches(e) && first <= e.first && e.last <= last
        });
        if removed.is_empty() {
            return Err(PauseError::NotPaused {
                first,
                last,
                fleet: fleet.map_or_else(String::new, |name| format!(" in fleet {name}")),
                paused: describe_paused(&paused),
            });
        }
        drop(paused);
        self.resumed.notify_waiters();
        let mut fleets: Vec<String> = Vec::new();
        for entry in &removed {
            if !fleets.contains(&entry.fleet) {
                fleets.push(entry.fleet.clone());
            }
        }
        Ok(ResumeReport {
            fleets,
            first,
            last,
            released: removed
                .iter()
                .map(|e| e.waiting.load(Ordering::SeqCst))
                .sum(),
            paused_for: removed
                .iter()
                .map(|e| e.started.elapsed())
                .max()
                .unwrap_or_default(),
        })
    }

    /// The paused ranges now.
    pub fn paused(&self) -> Vec<PausedRange> {
        self.lock_paused()
            .iter()
            .map(|e| PausedRange {
                fleet: e.fleet.clone(),
                first: e.first,
                last: e.last,
                since: e.since,
                waiting: e.waiting.load(Ordering::SeqCst),
            })
            .collect()
    }

    /// Statements and transactions registered on `shard` of `fleet` now.
    pub fn running_on(&self, fleet: &str, shard: u32) -> u32 {
        self.counters
            .load()
            .iter()
            .find(|c| c.name == fleet)
            .map_or(0, |c| c.running(shard))
    }

    fn lock_paused(&self) -> MutexGuard<'_, Vec<PausedEntry>> {
        match self.paused.lock() {
            Ok(paused) => paused,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Removes the entries `which` selects (lock held), ending their pause:
    /// the epoch moves before `active` drops (see [`PauseGate::enter`]).
    fn remove(
        &self,
        paused: &mut Vec<PausedEntry>,
        which: impl Fn(&PausedEntry) -> bool,
    ) -> Vec<PausedEntry> {
        let (removed, kept) = std::mem::take(paused).into_iter().partition(which);
        *paused = kept;
        let removed: Vec<PausedEntry> = removed;
        if !removed.is_empty() {
            self.epoch.fetch_add(1, Ordering::SeqCst);
            self.active
                .fetch_sub(removed.len() as u32, Ordering::SeqCst);
        }
        removed
    }

    fn register<I>(&self, topology: &Topology, shards: I) -> ShardGuard
    where
        I: IntoIterator<Item = (FleetId, u32)>,
    {
        let mut held = Held::Nothing;
        for (fleet, shard) in shards {
            let Some(counters) = self.counters_of(topology, fleet, shard) else {
                continue;
            };
            if let Some(count) = counters.running.get(shard as usize) {
                count.fetch_add(1, Ordering::SeqCst);
            }
            held = match held {
                Held::Nothing => Held::One(counters, shard),
                Held::One(a, s) => Held::Many(vec![(a, s), (counters, shard)]),
                Held::Many(mut list) => {
                    list.push((counters, shard));
                    Held::Many(list)
                }
            };
        }
        ShardGuard { held }
    }

    /// The counters of fleet `fleet` of `topology`, big enough for `shard`.
    fn counters_of(
        &self,
        topology: &Topology,
        fleet: FleetId,
        shard: u32,
    ) -> Option<Arc<FleetCounters>> {
        let fleet = topology.fleet(fleet)?;
        let needed = fleet.shard_count.max(shard + 1);
        {
            let table = self.counters.load();
            if let Some(counters) = table.iter().find(|c| c.covers(&fleet.name, needed)) {
                return Some(counters.clone());
            }
        }
        let _growing = match self.grow.lock() {
            Ok(lock) => lock,
            Err(poisoned) => poisoned.into_inner(),
        };
        let table = self.counters.load_full();
        if let Some(counters) = table.iter().find(|c| c.covers(&fleet.name, needed)) {
            return Some(counters.clone());
        }
        let mut next: Vec<Arc<FleetCounters>> = table.as_ref().clone();
        let older = next
            .iter()
            .position(|c| c.name == fleet.name)
            .map(|at| next.remove(at));
        let counters = Arc::new(FleetCounters::new(&fleet.name, needed as usize, older));
        next.push(counters.clone());
        self.counters.store(Arc::new(next));
        Some(counters)
    }

    /// The first shard of `guard` that is paused, counted as waiting.
    fn first_paused(&self, guard: &ShardGuard) -> Option<PausedShard> {
        let paused = self.lock_paused();
        guard.shards().find_map(|(counters, shard)| {
            let entry = paused.iter().find(|e| e.covers(&counters.name, shard))?;
            entry.waiting.fetch_add(1, Ordering::SeqCst);
            Some(PausedShard {
                fleet: counters.name.clone(),
                shard,
                waiting: entry.waiting.clone(),
            })
        })
    }

    /// Shards of `first..=last` of `fleets` with statements registered:
    /// (fleet, shard, count).
    fn running(&self, fleets: &[String], first: u32, last: u32) -> Vec<(String, u32, u32)> {
        let table = self.counters.load();
        let mut running = Vec::new();
        for name in fleets {
            let Some(counters) = table.iter().find(|c| &c.name == name) else {
                continue;
            };
            for shard in first..=last {
                let count = counters.running(shard);
                if count > 0 {
                    running.push((name.clone(), shard, count));
                }
            }
        }
        running
    }
}

/// The fleets a pause of `first..=last` applies to, checked.
fn pausable_fleets(
    topology: &Topology,
    fleet: Option<&str>,
    first: u32,
    last: u32,
) -> Result<Vec<String>, PauseError> {
    if first > last {
        return Err(PauseError::BadRange { first, last });
    }
    let describe = |f: &crate::topology::Fleet| {
        format!(
            "fleet {} (shards 0-{})",
            f.name,
            f.shard_count.saturating_sub(1)
        )
    };
    match fleet {
        Some(name) => {
            let Some(found) = topology.fleets.iter().find(|f| f.name == name) else {
                return Err(PauseError::UnknownFleet {
                    name: name.to_owned(),
                    known: topology
                        .fleets
                        .iter()
                        .map(|f| f.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            };
            if last >= found.shard_count {
                return Err(PauseError::OutOfRange {
                    first,
                    last,
                    what: describe(found),
                });
            }
            Ok(vec![found.name.clone()])
        }
        None => {
            let fleets: Vec<String> = topology
                .fleets
                .iter()
                .filter(|f| last < f.shard_count)
                .map(|f| f.name.clone())
                .collect();
            if fleets.is_empty() {
                return Err(PauseError::OutOfRange {
                    first,
                    last,
                    what: format!(
                        "every fleet: {}",
                        topology
                            .fleets
                            .iter()
                            .map(describe)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
            Ok(fleets)
        }
    }
}

fn fleet_list(fleets: &[String]) -> String {
    match fleets {
        [one] => format!("fleet {one}"),
        many => format!("fleets {}", many.join(", ")),
    }
}

fn describe_running(fleets: &[String], running: &[(String, u32, u32)]) -> String {
    let mut parts: Vec<String> = running
        .iter()
        .take(SHARDS_NAMED)
        .map(|(fleet, shard, count)| {
            if fleets.len() > 1 {
                format!("{fleet} shard {shard}: {count}")
            } else {
                format!("shard {shard}: {count}")
            }
        })
        .collect();
    if running.len() > SHARDS_NAMED {
        parts.push(format!("and {} more shards", running.len() - SHARDS_NAMED));
    }
    parts.join(", ")
}

fn describe_paused(paused: &[PausedEntry]) -> String {
    if paused.is_empty() {
        return "nothing".to_owned();
    }
    paused
        .iter()
        .map(|e| format!("{} {}-{}", e.fleet, e.first, e.last))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::tests::{load, SPEC_YAML};

    const MAIN: FleetId = 0;
    const MOD: FleetId = 1;

    fn gate() -> (PauseGate, Topology) {
        (PauseGate::new(Duration::from_secs(5)), load(SPEC_YAML))
    }

    fn enter(gate: &PauseGate, topology: &Topology, shard: u32) -> Result<ShardGuard, Blocked> {
        gate.enter(topology, [(MAIN, shard)], Some(gate.epoch()))
    }

    #[tokio::test]
    async fn unpaused_statements_pass_and_are_counted() {
        let (gate, topology) = gate();
        let a = enter(&gate, &topology, 1500).unwrap();
        let b = enter(&gate, &topology, 1500).unwrap();
        assert_eq!(gate.running_on("main", 1500), 2);
        drop(a);
        assert_eq!(gate.running_on("main", 1500), 1);
        drop(b);
        assert_eq!(gate.running_on("main", 1500), 0);
        assert_eq!(gate.running_on("mod", 1500), 0);
    }

    #[tokio::test]
    async fn pause_with_nothing_running_returns_at_once_and_blocks_new_statements() {
        let (gate, topology) = gate();
        let report = gate
            .pause(&topology, Some("main"), 1024, 2047, Duration::from_secs(1))
            .await
            .unwrap();
        assert_eq!(report.fleets, vec!["main".to_owned()]);
        assert_eq!(report.drained, 0);
        assert!(matches!(
            enter(&gate, &topology, 1500),
            Err(Blocked::Paused(PausedShard { shard: 1500, .. }))
        ));
        // Outside the range, and the same shard of another fleet, pass.
        assert!(enter(&gate, &topology, 1023).is_ok());
        assert!(enter(&gate, &topology, 2048).is_ok());
        assert!(gate
            .enter(&topology, [(MOD, 1500)], Some(gate.epoch()))
            .is_ok());
        // A refused statement is not left registered.
        assert_eq!(gate.running_on("main", 1500), 0);
    }

    #[tokio::test]
    async fn a_statement_registered_before_the_pause_is_drained() {
        let (gate, topology) = gate();
        let gate = Arc::new(gate);
        let running = enter(&gate, &topology, 1500).unwrap();
        let pausing = {
            let gate = gate.clone();
            let topology = topology.clone();
            tokio::spawn(async move {
                gate.pause(&topology, None, 1024, 2047, Duration::from_secs(5))
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!pausing.is_finished(), "the pause waits for the statement");
        // Meanwhile new statements for the range wait.
        assert!(matches!(
            enter(&gate, &topology, 2000),
            Err(Blocked::Paused(_))
        ));
        drop(running);
        let report = pausing.await.unwrap().unwrap();
        assert_eq!(report.drained, 1);
        assert!(report.waited >= Duration::from_millis(50));
        assert_eq!(report.fleets, vec!["main".to_owned(), "mod".to_owned()]);
    }

    /// The Dekker ordering: racing statements and a pause never both pass
    /// (a statement admitted while the pause believes the range drained).
    #[test]
    fn racing_statements_either_wait_or_are_drained() {
        let topology = Arc::new(load(SPEC_YAML));
        for _ in 0..200 {
            let gate = Arc::new(PauseGate::new(Duration::from_secs(5)));
            let drained = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let violations = Arc::new(AtomicUsize::new(0));
            let workers: Vec<_> = (0..2)
                .map(|_| {
                    let (gate, topology) = (gate.clone(), topology.clone());
                    let (drained, violations) = (drained.clone(), violations.clone());
                    std::thread::spawn(move || {
                        for _ in 0..200 {
                            if let Ok(guard) = enter(&gate, &topology, 7) {
                                if drained.load(Ordering::SeqCst) {
                                    violations.fetch_add(1, Ordering::SeqCst);
                                }
                                drop(guard);
                            }
                        }
                    })
                })
                .collect();
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                gate.pause(&topology, Some("main"), 0, 15, Duration::from_secs(5))
                    .await
                    .unwrap();
            });
            drained.store(true, Ordering::SeqCst);
            for worker in workers {
                worker.join().unwrap();
            }
            assert_eq!(violations.load(Ordering::SeqCst), 0);
        }
    }

    #[tokio::test]
    async fn drain_timeout_undoes_the_pause_and_says_where_statements_run() {
        let (gate, topology) = gate();
        let _transaction = enter(&gate, &topology, 1777).unwrap();
        let error = gate
            .pause(
                &topology,
                Some("main"),
                1024,
                2047,
                Duration::from_millis(30),
            )
            .await
            .unwrap_err();
        let text = error.to_string();
        assert!(matches!(error, PauseError::DrainTimeout { running: 1, .. }));
        assert!(text.contains("shard 1777: 1"), "{text}");
        assert!(text.contains("undone"), "{text}");
        assert!(gate.paused().is_empty());
        assert!(enter(&gate, &topology, 1500).is_ok());
    }

    #[tokio::test]
    async fn resume_wakes_waiters_and_reports_them() {
        let (gate, topology) = gate();
        let gate = Arc::new(gate);
        gate.pause(&topology, Some("main"), 1024, 2047, Duration::from_secs(1))
            .await
            .unwrap();
        let Err(Blocked::Paused(paused)) = enter(&gate, &topology, 1500) else {
            panic!("shard 1500 is paused");
        };
        assert_eq!(gate.paused()[0].waiting, 1);
        let waiter = {
            let gate = gate.clone();
            tokio::spawn(async move {
                let started = Instant::now();
                let resumed = gate
                    .wait(&paused, Instant::now() + Duration::from_secs(5))
                    .await;
                (resumed, started.elapsed())
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        let before = gate.epoch();
        let report = gate.resume(None, 1024, 2047).unwrap();
        assert_eq!(report.released, 1);
        assert!(report.paused_for >= Duration::from_millis(50));
        let (resumed, waited) = waiter.await.unwrap();
        assert!(resumed);
        assert!(waited < Duration::from_secs(1));
        assert_ne!(gate.epoch(), before);
        assert!(gate.paused().is_empty());
        assert!(enter(&gate, &topology, 1500).is_ok());
    }

    #[tokio::test]
    async fn a_wait_gives_up_at_its_deadline() {
        let (gate, topology) = gate();
        gate.pause(&topology, Some("main"), 0, 0, Duration::from_secs(1))
            .await
            .unwrap();
        let Err(Blocked::Paused(paused)) = enter(&gate, &topology, 0) else {
            panic!("shard 0 is paused");
        };
        let started = Instant::now();
        assert!(
            !gate
                .wait(&paused, Instant::now() + Duration::from_millis(40))
                .await
        );
        assert!(started.elapsed() >= Duration::from_millis(40));
        drop(paused);
        assert_eq!(gate.paused()[0].waiting, 0);
    }

    #[tokio::test]
    async fn a_statement_routed_before_a_pause_ended_routes_again() {
        let (gate, topology) = gate();
        gate.pause(&topology, Some("main"), 0, 9, Duration::from_secs(1))
            .await
            .unwrap();
        let epoch = gate.epoch();
        gate.resume(Some("main"), 0, 9).unwrap();
        assert!(matches!(
            gate.enter(&topology, [(MAIN, 5)], Some(epoch)),
            Err(Blocked::Stale)
        ));
        assert_eq!(gate.running_on("main", 5), 0);
        // Unconditional registration ignores pauses and epochs.
        gate.pause(&topology, Some("main"), 0, 9, Duration::from_secs(1))
            .await
            .unwrap();
        let forced = gate.enter(&topology, [(MAIN, 5)], None).unwrap();
        assert_eq!(gate.running_on("main", 5), 1);
        drop(forced);
    }

    #[tokio::test]
    async fn overlapping_and_bad_ranges_are_refused() {
        let (gate, topology) = gate();
        gate.pause(&topology, Some("main"), 1024, 2047, Duration::from_secs(1))
            .await
            .unwrap();
        let overlap = gate
            .pause(&topology, Some("main"), 2000, 2100, Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(
            overlap.to_string().contains("overlap shards 1024-2047"),
            "{overlap}"
        );
        // The other fleet's same range is free.
        gate.pause(&topology, Some("mod"), 2000, 2100, Duration::from_secs(1))
            .await
            .unwrap();
        let none = gate
            .pause(&topology, None, 1500, 1600, Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(matches!(none, PauseError::AlreadyPaused { .. }));
        let reversed = gate
            .pause(&topology, None, 9, 3, Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(matches!(reversed, PauseError::BadRange { .. }));
        let beyond = gate
            .pause(&topology, Some("main"), 4000, 4096, Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(
            beyond.to_string().contains("fleet main (shards 0-4095)"),
            "{beyond}"
        );
        let unknown = gate
            .pause(&topology, Some("nope"), 0, 1, Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(
            unknown.to_string().contains("fleets: main, mod"),
            "{unknown}"
        );
        // Resume: part of a range is refused, an unpaused range is refused,
        // the whole range works.
        let partial = gate.resume(Some("main"), 1024, 1500).unwrap_err();
        assert!(
            matches!(partial, PauseError::PartialResume { .. }),
            "{partial}"
        );
        let not_paused = gate.resume(Some("main"), 0, 10).unwrap_err();
        assert!(
            not_paused
                .to_string()
                .contains("main 1024-2047, mod 2000-2100"),
            "{not_paused}"
        );
        let report = gate.resume(None, 0, 4095).unwrap();
        assert_eq!(report.fleets, vec!["main".to_owned(), "mod".to_owned()]);
        assert!(gate.paused().is_empty());
    }

    #[tokio::test]
    async fn an_abandoned_pause_is_undone() {
        let (gate, topology) = gate();
        let _running = enter(&gate, &topology, 3).unwrap();
        let pausing = gate.pause(&topology, Some("main"), 0, 9, Duration::from_secs(5));
        assert!(tokio::time::timeout(Duration::from_millis(20), pausing)
            .await
            .is_err());
        assert!(gate.paused().is_empty());
        assert!(enter(&gate, &topology, 4).is_ok());
    }

    #[tokio::test]
    async fn multi_shard_statements_register_every_shard_and_counters_grow() {
        let (gate, topology) = gate();
        let guard = gate
            .enter(&topology, [(MAIN, 1), (MAIN, 4000), (MOD, 1)], Some(0))
            .unwrap();
        assert_eq!(gate.running_on("main", 4000), 1);
        assert_eq!(gate.running_on("mod", 1), 1);
        // A reload that doubles the main fleet's shard count.
        let bigger = load(
            &SPEC_YAML
                .replace(
                    "shards: 4096\n    database: \"db",
                    "shards: 8192\n    database: \"db",
                )
                .replace("[2048, 4095]", "[2048, 8191]")
                .replace("open: [0, 4095]", "open: [0, 8191]"),
        );
        assert_eq!(bigger.fleets[0].shard_count, 8192);
        let more = gate
            .enter(&bigger, [(MAIN, 6000), (MAIN, 4000)], Some(0))
            .unwrap();
        assert_eq!(gate.running_on("main", 4000), 2);
        assert_eq!(gate.running_on("main", 6000), 1);
        drop(guard);
        drop(more);
        assert_eq!(gate.running_on("main", 4000), 0);
        assert_eq!(gate.running_on("main", 6000), 0);
    }
}
