//! Cutover pause: `PAUSE SHARDS a-b` makes new statements for those shards
//! wait (bounded) while statements and transactions already running on them
//! finish; `RESUME SHARDS a-b` lets the waiting statements go, routed on the
//! topology in force at that moment.
//!
//! Every statement for a shard registers itself in that shard's in-flight
//! counter before it runs ([`PauseGate::enter`]) and unregisters when its
//! [`ShardGuard`] drops; a transaction bound to a shard keeps its guard until
//! COMMIT/ROLLBACK. `pause` publishes the range as paused, then waits for
//! those counters to reach zero. The two sides order their writes and reads
//! the Dekker way, all `SeqCst` (the paused-range list is an [`ArcSwap`],
//! whose loads and stores are `SeqCst` too): a statement increments its
//! counters, then reads `active` and, if non-zero, the paused ranges; a pause
//! stores the new range list, increments `active`, then reads the counters.
//! So a statement either sees the pause and waits, or the pause sees the
//! statement and waits for it. Ending a pause moves the epoch before it
//! stores the shorter list, so a statement that no longer sees a range it
//! was routed under sees the new epoch and routes again.
//!
//! Statements read only atomics and the current range list (no lock, no
//! reference count). Counters are kept per fleet *name* (fleet indexes may
//! change across reloads) and grow when a reload raises a fleet's shard count
//! or adds a fleet; a table is never freed (guards refer to it without
//! counting), the replaced one stays chained behind its successor, so a
//! gate's counters cost four bytes per shard per growth.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use arc_swap::ArcSwap;
use tokio::sync::Notify;

use crate::sync::lock;
use crate::topology::{FleetId, Topology};

/// How often `pause` looks at the in-flight counters while draining.
const DRAIN_POLL: Duration = Duration::from_millis(1);

/// Most running shards a drain-timeout error names one by one.
const SHARDS_NAMED: usize = 10;

/// The shards paused now, and the statements running on each shard.
#[derive(Debug)]
pub struct PauseGate {
    /// In-flight counters, one table per fleet (by name).
    counters: ArcSwap<Vec<&'static FleetCounters>>,
    /// Serialises growing `counters`.
    grow: Mutex<()>,
    /// The paused ranges, read by statements without a lock.
    paused: ArcSwap<Vec<Arc<PausedEntry>>>,
    /// Serialises changes to `paused`; holds the next entry id.
    changing: Mutex<u64>,
    /// Number of entries in `paused`; read on every statement, so a
    /// statement looks at `paused` only while something is paused.
    active: AtomicU32,
    /// Bumped each time a pause ends (resume, or a pause undone), before
    /// the range leaves `paused`: a statement that routed on a topology
    /// loaded before the end of a pause sees the change and routes again.
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
    older: Option<&'static FleetCounters>,
}

impl FleetCounters {
    /// A new table, never freed (see the module docs).
    fn leak(name: &str, shards: usize, older: Option<&'static FleetCounters>) -> &'static Self {
        Box::leak(Box::new(Self {
            name: name.to_owned(),
            running: (0..shards).map(|_| AtomicU32::new(0)).collect(),
            older,
        }))
    }

    fn running(&self, shard: u32) -> u32 {
        let here = self
            .running
            .get(shard as usize)
            .map_or(0, |count| count.load(Ordering::SeqCst));
        here + self.older.map_or(0, |older| older.running(shard))
    }

    fn covers(&self, name: &str, shards: u32) -> bool {
        self.name == name && self.running.len() >= shards as usize
    }
}

/// One paused range of one fleet.
#[derive(Debug)]
struct PausedEntry {
    /// Tells this pause from a later one of the same range.
    id: u64,
    fleet: String,
    first: u32,
    last: u32,
    since: SystemTime,
    started: Instant,
    /// Statements waiting for this range now.
    waiting: AtomicUsize,
    /// The `PAUSE` that made it still waits for running statements.
    draining: AtomicBool,
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
    /// `RESUME` of a range whose `PAUSE` has not answered yet.
    #[error("shards {paused_first}-{paused_last} of fleet {fleet} are still draining: their PAUSE SHARDS is waiting for the statements running on them and has not answered yet; wait for it to answer (at most pause.drain_timeout_ms; a drain that times out undoes the pause by itself), then RESUME SHARDS {paused_first}-{paused_last}")]
    StillDraining {
        /// Fleet name.
        fleet: String,
        /// First shard of the draining range.
        paused_first: u32,
        /// Last shard of the draining range.
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
    /// The pause's ranges were gone when its drain finished.
    #[error("shards {first}-{last} of {fleets}: the pause ended while it was draining; nothing is paused. PAUSE SHARDS {first}-{last} again")]
    Ended {
        /// `fleet main` or `fleets main, mod`.
        fleets: String,
        /// First shard of the range.
        first: u32,
        /// Last shard of the range.
        last: u32,
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
    One((&'static FleetCounters, u32)),
    Many(Vec<(&'static FleetCounters, u32)>),
}

impl ShardGuard {
    fn shards(&self) -> &[(&'static FleetCounters, u32)] {
        match &self.held {
            Held::Nothing => &[],
            Held::One(one) => std::slice::from_ref(one),
            Held::Many(list) => list,
        }
    }
}

impl Drop for ShardGuard {
    fn drop(&mut self) {
        for (counters, shard) in self.shards() {
            if let Some(count) = counters.running.get(*shard as usize) {
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
    entry: Arc<PausedEntry>,
}

impl Drop for PausedShard {
    fn drop(&mut self) {
        self.entry.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Undoes, when dropped armed, the entries of a pause that did not
/// complete: its drain timed out, or its future was dropped mid-drain (the
/// admin port runs every command to completion, so there only the timeout
/// does this; the guard keeps entries that nobody finishes from staying
/// paused, and unresumable, since RESUME refuses a draining range).
struct PendingPause<'a> {
    gate: &'a PauseGate,
    ids: Vec<u64>,
    armed: bool,
}

impl Drop for PendingPause<'_> {
    fn drop(&mut self) {
        if self.armed {
            let changing = lock(&self.gate.changing);
            self.gate.end(&changing, |e| self.ids.contains(&e.id));
        }
    }
}

impl PauseGate {
    /// A gate with nothing paused.
    pub fn new() -> Self {
        Self {
            counters: ArcSwap::from_pointee(Vec::new()),
            grow: Mutex::new(()),
            paused: ArcSwap::from_pointee(Vec::new()),
            changing: Mutex::new(0),
            active: AtomicU32::new(0),
            epoch: AtomicU64::new(0),
            resumed: Notify::new(),
        }
    }

    /// Changes once per ended pause. Read it *before* loading the topology
    /// a statement is routed on, and give it to [`PauseGate::enter`].
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Registers a statement on `shards` (fleet ids of `topology`). A
    /// statement for a paused shard is refused with [`Blocked::Paused`],
    /// unless the range pausing it also covers `exempt` (the shard of the
    /// session's bound transaction: that pause is waiting for the session
    /// itself). One whose topology may predate the end of a pause (`epoch`,
    /// from [`PauseGate::epoch`] before `topology` was loaded, moved) is
    /// refused with [`Blocked::Stale`].
    pub fn enter<I>(
        &self,
        topology: &Topology,
        shards: I,
        epoch: u64,
        exempt: Option<(&str, u32)>,
    ) -> Result<ShardGuard, Blocked>
    where
        I: IntoIterator<Item = (FleetId, u32)>,
    {
        let guard = self.register(topology, shards);
        if self.active.load(Ordering::SeqCst) != 0 {
            if let Some(paused) = self.first_paused(&guard, exempt) {
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
            && self.paused.load().iter().any(|e| e.covers(fleet, shard))
    }

    /// Pauses shards `first..=last` of `fleet` (every fleet that has them
    /// when `None`): new statements for them wait from now on. Returns once
    /// the statements and transactions already running on them have
    /// finished; if some still run after `drain_timeout`, the pause is
    /// undone and the error says where they run. Dropping the future before
    /// it answers undoes the pause too.
    pub async fn pause(
        &self,
        topology: &Topology,
        fleet: Option<&str>,
        first: u32,
        last: u32,
        drain_timeout: Duration,
    ) -> Result<PauseReport, PauseError> {
        let fleets = pausable_fleets(topology, fleet, first, last)?;
        let started = Instant::now();
        let mut pending = PendingPause {
            gate: self,
            ids: self.begin(&fleets, first, last, started)?,
            armed: true,
        };
        let deadline = started + drain_timeout;
        let mut drained = None;
        let drained = loop {
            let running = self.running(&fleets, first, last);
            let total: u32 = running.iter().map(|(_, _, n)| n).sum();
            let drained = *drained.get_or_insert(total as usize);
            if total == 0 {
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
        let complete = {
            let _changing = lock(&self.changing);
            let paused = self.paused.load();
            let mine: Vec<_> = paused
                .iter()
                .filter(|e| pending.ids.contains(&e.id))
                .collect();
            let complete = mine.len() == pending.ids.len();
            if complete {
                for entry in mine {
                    entry.draining.store(false, Ordering::SeqCst);
                }
                pending.armed = false;
            }
            complete
        };
        if !complete {
            return Err(PauseError::Ended {
                fleets: fleet_list(&fleets),
                first,
                last,
            });
        }
        Ok(PauseReport {
            fleets,
            first,
            last,
            drained,
            waited: started.elapsed(),
        })
    }

    /// Publishes `first..=last` of `fleets` as paused (draining); the ids
    /// of the new entries.
    fn begin(
        &self,
        fleets: &[String],
        first: u32,
        last: u32,
        started: Instant,
    ) -> Result<Vec<u64>, PauseError> {
        let mut next_id = lock(&self.changing);
        let current = self.paused.load_full();
        for name in fleets {
            if let Some(entry) = current.iter().find(|e| e.overlaps(name, first, last)) {
                return Err(PauseError::AlreadyPaused {
                    fleet: name.clone(),
                    first,
                    last,
                    paused_first: entry.first,
                    paused_last: entry.last,
                });
            }
        }
        let since = SystemTime::now();
        let mut next = current.as_ref().clone();
        let mut ids = Vec::with_capacity(fleets.len());
        for name in fleets {
            *next_id += 1;
            ids.push(*next_id);
            next.push(Arc::new(PausedEntry {
                id: *next_id,
                fleet: name.clone(),
                first,
                last,
                since,
                started,
                waiting: AtomicUsize::new(0),
                draining: AtomicBool::new(true),
            }));
        }
        self.paused.store(Arc::new(next));
        self.active.fetch_add(fleets.len() as u32, Ordering::SeqCst);
        Ok(ids)
    }

    /// Ends the pauses of `first..=last` (of `fleet`, or of every fleet
    /// when `None`): waiting statements go on, routed on the topology in
    /// force now. Every paused range inside `first..=last` is resumed; one
    /// that is only partly inside is refused, and so is the whole resume
    /// while one of those ranges is still draining (its PAUSE has not
    /// answered).
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
        let inside = |e: &PausedEntry| fleet_matches(e) && first <= e.first && e.last <= last;
        let changing = lock(&self.changing);
        let paused = self.paused.load_full();
        if let Some(partial) = paused
            .iter()
            .find(|e| fleet_matches(e) && e.first <= last && first <= e.last && !inside(e))
        {
            return Err(PauseError::PartialResume {
                fleet: partial.fleet.clone(),
                first,
                last,
                paused_first: partial.first,
                paused_last: partial.last,
            });
        }
        if let Some(draining) = paused
            .iter()
            .find(|e| inside(e) && e.draining.load(Ordering::SeqCst))
        {
            return Err(PauseError::StillDraining {
                fleet: draining.fleet.clone(),
                paused_first: draining.first,
                paused_last: draining.last,
            });
        }
        let removed = self.end(&changing, |e| inside(e));
        if removed.is_empty() {
            return Err(PauseError::NotPaused {
                first,
                last,
                fleet: fleet.map_or_else(String::new, |name| format!(" in fleet {name}")),
                paused: describe_paused(&paused),
            });
        }
        drop(changing);
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
        self.paused
            .load()
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

    /// Removes the entries `which` selects (`changing` held), ending their
    /// pause, and wakes the waiting statements: the epoch moves before the
    /// shorter list is published and `active` drops (see
    /// [`PauseGate::enter`]).
    fn end(
        &self,
        _changing: &MutexGuard<'_, u64>,
        which: impl Fn(&PausedEntry) -> bool,
    ) -> Vec<Arc<PausedEntry>> {
        let current = self.paused.load_full();
        let (removed, kept): (Vec<_>, Vec<_>) = current.iter().cloned().partition(|e| which(e));
        if !removed.is_empty() {
            self.epoch.fetch_add(1, Ordering::SeqCst);
            self.paused.store(Arc::new(kept));
            self.active
                .fetch_sub(removed.len() as u32, Ordering::SeqCst);
            self.resumed.notify_waiters();
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
                Held::Nothing => Held::One((counters, shard)),
                Held::One(one) => Held::Many(vec![one, (counters, shard)]),
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
    ) -> Option<&'static FleetCounters> {
        let fleet = topology.fleet(fleet)?;
        let needed = fleet.shard_count.max(shard + 1);
        let found = |table: &[&'static FleetCounters]| {
            table
                .iter()
                .find(|c| c.covers(&fleet.name, needed))
                .copied()
        };
        if let Some(counters) = found(&self.counters.load()) {
            return Some(counters);
        }
        let _growing = lock(&self.grow);
        let table = self.counters.load_full();
        if let Some(counters) = found(&table) {
            return Some(counters);
        }
        let mut next: Vec<&'static FleetCounters> = table.as_ref().clone();
        let older = next
            .iter()
            .position(|c| c.name == fleet.name)
            .map(|at| next.remove(at));
        let counters = FleetCounters::leak(&fleet.name, needed as usize, older);
        next.push(counters);
        self.counters.store(Arc::new(next));
        Some(counters)
    }

    /// The first shard of `guard` that a range not covering `exempt`
    /// pauses, counted as waiting.
    fn first_paused(&self, guard: &ShardGuard, exempt: Option<(&str, u32)>) -> Option<PausedShard> {
        let paused = self.paused.load();
        guard.shards().iter().find_map(|&(counters, shard)| {
            let entry = paused.iter().find(|e| {
                e.covers(&counters.name, shard)
                    && !exempt.is_some_and(|(fleet, bound)| e.covers(fleet, bound))
            })?;
            entry.waiting.fetch_add(1, Ordering::SeqCst);
            Some(PausedShard {
                fleet: counters.name.clone(),
                shard,
                entry: entry.clone(),
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

impl Default for PauseGate {
    fn default() -> Self {
        Self::new()
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

fn describe_paused(paused: &[Arc<PausedEntry>]) -> String {
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
        (PauseGate::new(), load(SPEC_YAML))
    }

    fn enter(gate: &PauseGate, topology: &Topology, shard: u32) -> Result<ShardGuard, Blocked> {
        gate.enter(topology, [(MAIN, shard)], gate.epoch(), None)
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
            .enter(&topology, [(MOD, 1500)], gate.epoch(), None)
            .is_ok());
        // A refused statement is not left registered.
        assert_eq!(gate.running_on("main", 1500), 0);
    }

    /// Polls until `gate` lists `count` paused ranges.
    async fn until_paused(gate: &PauseGate, count: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while gate.paused().len() != count {
            assert!(Instant::now() < deadline, "{:?}", gate.paused());
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
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
        until_paused(&gate, 2).await;
        let marked = Instant::now();
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(!pausing.is_finished(), "the pause waits for the statement");
        // Meanwhile new statements for the range wait.
        assert!(matches!(
            enter(&gate, &topology, 2000),
            Err(Blocked::Paused(_))
        ));
        let held = marked.elapsed();
        drop(running);
        let report = pausing.await.unwrap().unwrap();
        assert_eq!(report.drained, 1);
        assert!(report.waited >= held, "{:?} < {held:?}", report.waited);
        assert_eq!(report.fleets, vec!["main".to_owned(), "mod".to_owned()]);
    }

    /// The Dekker ordering: racing statements and a pause never both pass
    /// (a statement admitted while the pause believes the range drained).
    #[test]
    fn racing_statements_either_wait_or_are_drained() {
        let topology = Arc::new(load(SPEC_YAML));
        let gate = Arc::new(PauseGate::new());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        for _ in 0..200 {
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
            gate.resume(Some("main"), 0, 15).unwrap();
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
        assert!(waited < Duration::from_secs(3), "woken after {waited:?}");
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
            gate.enter(&topology, [(MAIN, 5)], epoch, None),
            Err(Blocked::Stale)
        ));
        assert_eq!(gate.running_on("main", 5), 0);
        // The range that pauses a session's bound shard does not hold that
        // session's statements; another paused range does.
        gate.pause(&topology, Some("main"), 0, 9, Duration::from_secs(1))
            .await
            .unwrap();
        gate.pause(&topology, Some("main"), 20, 29, Duration::from_secs(1))
            .await
            .unwrap();
        let exempt = Some(("main", 3));
        let epoch = gate.epoch();
        let same_range = gate.enter(&topology, [(MAIN, 5)], epoch, exempt).unwrap();
        assert_eq!(gate.running_on("main", 5), 1);
        drop(same_range);
        assert!(matches!(
            gate.enter(&topology, [(MAIN, 25)], epoch, exempt),
            Err(Blocked::Paused(PausedShard { shard: 25, .. }))
        ));
        assert!(matches!(
            gate.enter(&topology, [(MAIN, 5), (MAIN, 25)], epoch, exempt),
            Err(Blocked::Paused(PausedShard { shard: 25, .. }))
        ));
        assert!(matches!(
            gate.enter(&topology, [(MAIN, 5)], epoch, Some(("mod", 3))),
            Err(Blocked::Paused(_))
        ));
        // The epoch is still checked.
        gate.resume(Some("main"), 20, 29).unwrap();
        assert!(matches!(
            gate.enter(&topology, [(MAIN, 5)], epoch, exempt),
            Err(Blocked::Stale)
        ));
        assert_eq!(gate.running_on("main", 5), 0);
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
    async fn a_dropped_pause_future_is_undone() {
        let (gate, topology) = gate();
        let _running = enter(&gate, &topology, 3).unwrap();
        let pausing = gate.pause(&topology, Some("main"), 0, 9, Duration::from_secs(5));
        assert!(tokio::time::timeout(Duration::from_millis(20), pausing)
            .await
            .is_err());
        assert!(gate.paused().is_empty());
        assert!(enter(&gate, &topology, 4).is_ok());
    }

    /// Spawns a pause of main 0-9 with `drain` as its drain timeout.
    fn spawn_pause(
        gate: &Arc<PauseGate>,
        topology: &Topology,
        drain: Duration,
    ) -> tokio::task::JoinHandle<Result<PauseReport, PauseError>> {
        let (gate, topology) = (gate.clone(), topology.clone());
        tokio::spawn(async move { gate.pause(&topology, Some("main"), 0, 9, drain).await })
    }

    #[tokio::test]
    async fn resume_is_refused_while_the_pause_drains() {
        let (gate, topology) = gate();
        let gate = Arc::new(gate);
        let running = enter(&gate, &topology, 3).unwrap();
        let pausing = spawn_pause(&gate, &topology, Duration::from_secs(10));
        until_paused(&gate, 1).await;
        let refused = gate.resume(Some("main"), 0, 9).unwrap_err();
        assert!(
            matches!(
                refused,
                PauseError::StillDraining {
                    paused_first: 0,
                    paused_last: 9,
                    ..
                }
            ),
            "{refused}"
        );
        assert!(refused.to_string().contains("still draining"), "{refused}");
        // A wider RESUME is refused as a whole too.
        assert!(matches!(
            gate.resume(None, 0, 4095),
            Err(PauseError::StillDraining { .. })
        ));
        assert_eq!(gate.paused().len(), 1);
        drop(running);
        pausing.await.unwrap().unwrap();
        assert!(matches!(
            enter(&gate, &topology, 3),
            Err(Blocked::Paused(_))
        ));
        gate.resume(Some("main"), 0, 9).unwrap();
        assert!(gate.paused().is_empty());
    }

    /// A pause's entries are its own: one whose drain times out removes
    /// only them, not a later pause of the same range; one whose entries
    /// were ended meanwhile reports that instead of success.
    #[tokio::test]
    async fn a_pause_undoes_and_confirms_only_its_own_entries() {
        let (gate, topology) = gate();
        let gate = Arc::new(gate);
        let running = enter(&gate, &topology, 3).unwrap();
        let early = spawn_pause(&gate, &topology, Duration::from_millis(300));
        until_paused(&gate, 1).await;
        // Something ends the early pause's range (the old RESUME did), and a
        // later PAUSE of the same range begins.
        {
            let changing = lock(&gate.changing);
            assert_eq!(gate.end(&changing, |_| true).len(), 1);
        }
        let later = spawn_pause(&gate, &topology, Duration::from_secs(10));
        until_paused(&gate, 1).await;
        let later_id = gate.paused.load()[0].id;
        let timed_out = early.await.unwrap().unwrap_err();
        assert!(
            matches!(timed_out, PauseError::DrainTimeout { .. }),
            "{timed_out}"
        );
        let paused = gate.paused.load();
        assert_eq!(paused.len(), 1, "the later pause stays");
        assert_eq!(paused[0].id, later_id);
        drop(paused);
        // The later pause's entry ends before its drain finishes.
        {
            let changing = lock(&gate.changing);
            gate.end(&changing, |_| true);
        }
        drop(running);
        let ended = later.await.unwrap().unwrap_err();
        assert!(matches!(ended, PauseError::Ended { .. }), "{ended}");
        assert!(ended.to_string().contains("nothing is paused"), "{ended}");
        assert!(gate.paused().is_empty());
        assert!(enter(&gate, &topology, 3).is_ok());
    }

    #[tokio::test]
    async fn multi_shard_statements_register_every_shard_and_counters_grow() {
        let (gate, topology) = gate();
        let guard = gate
            .enter(&topology, [(MAIN, 1), (MAIN, 4000), (MOD, 1)], 0, None)
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
            .enter(&bigger, [(MAIN, 6000), (MAIN, 4000)], 0, None)
            .unwrap();
        assert_eq!(gate.running_on("main", 4000), 2);
        assert_eq!(gate.running_on("main", 6000), 1);
        drop(guard);
        drop(more);
        assert_eq!(gate.running_on("main", 4000), 0);
        assert_eq!(gate.running_on("main", 6000), 0);
    }
}
