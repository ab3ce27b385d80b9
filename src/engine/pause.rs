//! The cutover pause gate, on the statement path: every statement for a
//! shard registers itself in that shard's in-flight counter before it runs
//! ([`PauseGate::enter`]) and unregisters when its [`ShardGuard`] drops; a
//! transaction bound to a shard keeps its guard until COMMIT/ROLLBACK. A
//! statement for a paused shard waits ([`PauseGate::wait`]) and is routed
//! again on the topology in force when the pause ends. The PAUSE and RESUME
//! operations (draining, its timeout, the operator's errors) are the
//! control plane's (`control::pause`); they change the gate through
//! [`PauseGate::begin`], [`PauseGate::confirm`], [`PauseGate::undo`] and
//! [`PauseGate::end_within`].
//!
//! A pause publishes the range as paused, then waits for the counters to
//! reach zero. The two sides order their writes and reads
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
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

use crate::sync::lock;
use crate::topology::{FleetId, Topology};

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
    /// Wakes sessions idle in a transaction when a pause begins.
    began: Notify,
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

    fn range(&self) -> PausedRange {
        PausedRange {
            fleet: self.fleet.clone(),
            first: self.first,
            last: self.last,
            since: self.since,
            waiting: self.waiting.load(Ordering::SeqCst),
        }
    }
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

/// A pause ended by [`PauseGate::end_within`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndedPause {
    /// Fleet name.
    pub fleet: String,
    /// Statements that were waiting for it and now go on.
    pub released: usize,
    /// How long the range was paused.
    pub paused_for: Duration,
}

/// Why [`PauseGate::end_within`] ended nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotEnded {
    /// This paused range is only partly inside the range given.
    Partial(PausedRange),
    /// This paused range inside the range given is still draining: its
    /// pause has not answered yet.
    Draining(PausedRange),
    /// Nothing paused inside the range given; the paused ranges now.
    NothingPaused(Vec<PausedRange>),
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
            began: Notify::new(),
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

    /// Resolves when a pause begins (from the first poll on).
    pub fn began(&self) -> Notified<'_> {
        self.began.notified()
    }

    /// Resolves once `shard` of fleet `fleet` has been paused (without a
    /// break) for `grace`.
    pub async fn paused_for(&self, fleet: &str, shard: u32, grace: Duration) {
        loop {
            let began = self.began();
            tokio::pin!(began);
            began.as_mut().enable();
            if !self.is_paused(fleet, shard) {
                began.await;
                continue;
            }
            tokio::time::sleep(grace).await;
            if self.is_paused(fleet, shard) {
                return;
            }
        }
    }

    /// Whether `shard` of fleet `fleet` is paused now.
    pub fn is_paused(&self, fleet: &str, shard: u32) -> bool {
        self.active.load(Ordering::SeqCst) != 0
            && self.paused.load().iter().any(|e| e.covers(fleet, shard))
    }

    /// Publishes `first..=last` of `fleets` as paused (draining) from
    /// `started`: new statements for them wait from now on. Returns the ids
    /// of the new entries, or the paused range in the way (nothing is
    /// published then).
    pub fn begin(
        &self,
        fleets: &[String],
        first: u32,
        last: u32,
        started: Instant,
    ) -> Result<Vec<u64>, PausedRange> {
        let mut next_id = lock(&self.changing);
        let current = self.paused.load_full();
        for name in fleets {
            if let Some(entry) = current.iter().find(|e| e.overlaps(name, first, last)) {
                return Err(entry.range());
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
        self.began.notify_waiters();
        Ok(ids)
    }

    /// Marks the entries `ids` (of [`PauseGate::begin`]) drained, if every
    /// one of them is still paused; false (nothing marked) if some ended
    /// meanwhile.
    pub fn confirm(&self, ids: &[u64]) -> bool {
        let _changing = lock(&self.changing);
        let paused = self.paused.load();
        let mine: Vec<_> = paused.iter().filter(|e| ids.contains(&e.id)).collect();
        let complete = mine.len() == ids.len();
        if complete {
            for entry in mine {
                entry.draining.store(false, Ordering::SeqCst);
            }
        }
        complete
    }

    /// Ends the entries `ids` (of [`PauseGate::begin`]) still paused: a
    /// pause that did not complete.
    pub fn undo(&self, ids: &[u64]) {
        let changing = lock(&self.changing);
        self.end(&changing, |e| ids.contains(&e.id));
    }

    /// Ends the pauses of `first..=last` (of `fleet`, or of every fleet
    /// when `None`): waiting statements go on, routed on the topology in
    /// force now. Every paused range inside `first..=last` is ended; none
    /// is if one is only partly inside, or one of them is still draining.
    pub fn end_within(
        &self,
        fleet: Option<&str>,
        first: u32,
        last: u32,
    ) -> Result<Vec<EndedPause>, NotEnded> {
        let fleet_matches = |e: &PausedEntry| fleet.is_none_or(|name| e.fleet == name);
        let inside = |e: &PausedEntry| fleet_matches(e) && first <= e.first && e.last <= last;
        let changing = lock(&self.changing);
        let paused = self.paused.load_full();
        if let Some(partial) = paused
            .iter()
            .find(|e| fleet_matches(e) && e.first <= last && first <= e.last && !inside(e))
        {
            return Err(NotEnded::Partial(partial.range()));
        }
        if let Some(draining) = paused
            .iter()
            .find(|e| inside(e) && e.draining.load(Ordering::SeqCst))
        {
            return Err(NotEnded::Draining(draining.range()));
        }
        let removed = self.end(&changing, |e| inside(e));
        if removed.is_empty() {
            return Err(NotEnded::NothingPaused(
                paused.iter().map(|e| e.range()).collect(),
            ));
        }
        drop(changing);
        Ok(removed
            .iter()
            .map(|e| EndedPause {
                fleet: e.fleet.clone(),
                released: e.waiting.load(Ordering::SeqCst),
                paused_for: e.started.elapsed(),
            })
            .collect())
    }

    /// The paused ranges now.
    pub fn paused(&self) -> Vec<PausedRange> {
        self.paused.load().iter().map(|e| e.range()).collect()
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
    /// Shards of `first..=last` of `fleets` with statements registered:
    /// (fleet, shard, count).
    pub fn running(&self, fleets: &[String], first: u32, last: u32) -> Vec<(String, u32, u32)> {
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

#[cfg(test)]
impl PauseGate {
    /// Ends every pause, draining or not (what no operation does: tests
    /// use it to end a pause behind its PAUSE's back).
    pub(crate) fn end_all(&self) -> usize {
        let changing = lock(&self.changing);
        self.end(&changing, |_| true).len()
    }

    /// The ids of the paused entries, in order.
    pub(crate) fn entry_ids(&self) -> Vec<u64> {
        self.paused.load().iter().map(|e| e.id).collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::topology::tests::{load, SPEC_YAML};

    /// The main fleet of the example config.
    pub(crate) const MAIN: FleetId = 0;
    /// The mod-shard fleet of the example config.
    pub(crate) const MOD: FleetId = 1;

    /// A fresh gate and the example config's topology.
    pub(crate) fn gate() -> (PauseGate, Topology) {
        (PauseGate::new(), load(SPEC_YAML))
    }

    /// Registers a statement on `shard` of the main fleet.
    pub(crate) fn enter(
        gate: &PauseGate,
        topology: &Topology,
        shard: u32,
    ) -> Result<ShardGuard, Blocked> {
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

    #[tokio::test]
    async fn paused_for_resolves_once_a_shard_stayed_paused_for_the_grace() {
        let (gate, _) = gate();
        let gate = Arc::new(gate);
        let grace = Duration::from_millis(200);
        let waiter = {
            let gate = Arc::clone(&gate);
            tokio::spawn(async move { gate.paused_for("main", 5, grace).await })
        };
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(!waiter.is_finished(), "nothing is paused");
        let started = tokio::time::Instant::now();
        let ids = gate
            .begin(&["main".to_owned()], 0, 10, Instant::now())
            .unwrap();
        waiter.await.unwrap();
        assert!(started.elapsed() >= grace, "{:?}", started.elapsed());
        gate.undo(&ids);
        // A pause that ends within the grace does not count.
        let waiter = {
            let gate = Arc::clone(&gate);
            tokio::spawn(async move { gate.paused_for("main", 5, grace).await })
        };
        tokio::task::yield_now().await;
        let ids = gate
            .begin(&["main".to_owned()], 0, 10, Instant::now())
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        gate.undo(&ids);
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(!waiter.is_finished(), "the pause ended within the grace");
        waiter.abort();
    }
}
