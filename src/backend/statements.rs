//! The prepared statements a backend connection keeps on its server
//! (`limits.backend_prepared_statements` of them at most): the statement
//! id the server gave each planned text, reused by later executes of the
//! same text on the same connection.
//!
//! A text is kept only when it is likely to be used again
//! ([`StatementCache::admit`]): with a place free, at once; with every
//! place taken, when a small record of the texts seen lately ([`Seen`])
//! saw it at least twice and more than twice as often as the least
//! recently used statement kept was used (that one is then closed). Use
//! counts and sightings are halved every few uses of the connection, so
//! the record follows what is used now. Under uniform use of more texts
//! than places, the kept set stays put instead of churning: a text not
//! kept runs in one round trip (prepared, executed and closed in one
//! write, `engine::direct`), which costs less than replacing a statement.
//!
//! A statement belongs to the session settings it was prepared under
//! (`sql_mode` and the character set decide how its text was read): when
//! the connection's settings fingerprint changes, every statement is
//! closed. A COM_RESET_CONNECTION or COM_CHANGE_USER drops them on the
//! server; the cache then forgets them without closing (the server may
//! hand their ids out again). A COM_INIT_DB closes them all (the default
//! database decided their unqualified names). A new connection starts
//! empty.
//!
//! The cache also follows which statement the server would run for an
//! execute of "the statement prepared last" ([`LastPrepared`]): MariaDB
//! keeps that statement after a later prepare it refused at
//! `max_prepared_stmt_count`, so a prepare and an execute of it are only
//! sent in one write when that cannot run another statement.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// Longest text kept prepared: longer ones are prepared, executed and
/// closed at once.
pub const MAX_CACHED_TEXT: usize = 4096;

/// Uses of a connection between two halvings of the use counts and
/// sightings, per place of the cache.
const AGING_PER_PLACE: u64 = 16;

/// Slots of the record of texts seen, per place of the cache (a power of
/// two at least [`MIN_SEEN_SLOTS`], at most [`MAX_SEEN_SLOTS`]).
const SEEN_SLOTS_PER_PLACE: usize = 4;
const MIN_SEEN_SLOTS: usize = 64;
const MAX_SEEN_SLOTS: usize = 8192;

/// Whether a server with `count` prepared statements open (all clients
/// together, `Prepared_stmt_count`) out of `max` (`max_prepared_stmt_count`)
/// has room for the proxy to keep more: under three quarters of its
/// maximum, so that other clients and the proxy's own one-round-trip
/// statements still find a place.
pub fn server_has_room(count: u64, max: u64) -> bool {
    count.saturating_mul(4) < max.saturating_mul(3)
}

/// The statement an execute of "the statement prepared last" (id
/// `0xFFFFFFFF`) runs on the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LastPrepared {
    /// None: such an execute fails (nothing prepared yet, or the last
    /// statement prepared was closed, or its prepare failed).
    #[default]
    None,
    /// Statement `id`, with `params` parameters, is still open.
    Open {
        /// Its id.
        id: u32,
        /// Its parameter count.
        params: u16,
    },
    /// Not known (a prepare whose answer was not read, a reset).
    Unknown,
}

/// One statement kept.
#[derive(Debug, Clone, Copy)]
struct Kept {
    id: u32,
    /// Clock of the last use, for least-recently-used eviction.
    used: u64,
    /// Uses since it was kept, halved with every aging.
    uses: u32,
}

/// The statements one connection keeps prepared.
#[derive(Debug, Default)]
pub struct StatementCache {
    /// The settings fingerprint the statements were prepared under.
    fingerprint: u64,
    /// Planned text → the statement kept for it.
    entries: HashMap<Vec<u8>, Kept>,
    /// Uses so far.
    clock: u64,
    /// Clock of the last aging.
    aged_at: u64,
    /// Texts seen lately, with how often.
    seen: Seen,
    /// Ids evicted or invalidated, still open on the server: closed with
    /// the next command sent.
    to_close: Vec<u32>,
    /// What an execute of the last prepared statement runs.
    last: LastPrepared,
}

impl StatementCache {
    /// The id of `text` prepared under settings `fingerprint`, if it is
    /// kept. Statements of other settings are queued for closing first.
    pub fn lookup(&mut self, fingerprint: u64, text: &[u8]) -> Option<u32> {
        self.settle(fingerprint);
        self.clock += 1;
        let clock = self.clock;
        self.entries.get_mut(text).map(|kept| {
            kept.used = clock;
            kept.uses = kept.uses.saturating_add(1);
            kept.id
        })
    }

    /// Whether `text`, just looked up and not kept, should be kept once
    /// prepared (within `capacity` statements; `room`: the server has room
    /// for more, [`server_has_room`]). Counts the sighting. When every
    /// place is taken and it is admitted, the least recently used
    /// statement is queued for closing now, so that its close goes out
    /// before the prepare.
    pub fn admit(&mut self, text: &[u8], capacity: usize, room: bool) -> bool {
        if capacity == 0 {
            return false;
        }
        self.age(capacity);
        let seen = self.seen.record(text, capacity);
        if !room {
            return false;
        }
        if self.entries.len() < capacity {
            return true;
        }
        let Some((victim, kept)) = self.least_recent() else {
            return true;
        };
        if seen < 2 || seen <= kept.uses.saturating_mul(2) {
            return false;
        }
        let victim = victim.clone();
        if let Some(evicted) = self.entries.remove(&victim) {
            self.to_close.push(evicted.id);
        }
        true
    }

    /// Queues the least recently used kept statement for closing: its
    /// server is past three quarters of `max_prepared_stmt_count`
    /// ([`server_has_room`]), and statements the proxy keeps there must
    /// give way until it has room again (else every proxy's kept
    /// statements could hold the server at its maximum, and clients'
    /// own prepares would be refused with 1461).
    pub fn shed(&mut self) {
        let Some(oldest) = self.least_recent().map(|(text, _)| text.clone()) else {
            return;
        };
        if let Some(evicted) = self.entries.remove(&oldest) {
            self.to_close.push(evicted.id);
        }
    }

    /// Keeps `text` as statement `id`, prepared under `fingerprint`, within
    /// `capacity` statements (the least recently used queued for closing).
    pub fn insert(&mut self, fingerprint: u64, text: &[u8], id: u32, capacity: usize) {
        self.settle(fingerprint);
        if capacity == 0 {
            self.to_close.push(id);
            return;
        }
        while self.entries.len() >= capacity {
            let Some(oldest) = self.least_recent().map(|(text, _)| text.clone()) else {
                break;
            };
            if let Some(evicted) = self.entries.remove(&oldest) {
                self.to_close.push(evicted.id);
            }
        }
        self.clock += 1;
        let kept = Kept {
            id,
            used: self.clock,
            uses: 0,
        };
        if let Some(replaced) = self.entries.insert(text.to_vec(), kept) {
            self.to_close.push(replaced.id);
        }
    }

    /// The ids to close on the server now (each once); the caller sends
    /// them before anything else.
    pub fn take_closes(&mut self) -> Vec<u32> {
        let closes = std::mem::take(&mut self.to_close);
        for id in &closes {
            self.closed(*id);
        }
        closes
    }

    /// Queues every statement for closing: they were prepared under
    /// another default database (COM_INIT_DB), which decides what their
    /// unqualified names are.
    pub fn close_all(&mut self) {
        self.to_close
            .extend(self.entries.drain().map(|(_, kept)| kept.id));
    }

    /// Forgets every statement without closing it: the server dropped
    /// them (COM_RESET_CONNECTION, COM_CHANGE_USER).
    pub fn forget_all(&mut self) {
        self.entries.clear();
        self.to_close.clear();
        self.last = LastPrepared::Unknown;
    }

    /// A COM_STMT_PREPARE was sent; its answer is not read yet.
    pub fn preparing(&mut self) {
        self.last = LastPrepared::Unknown;
    }

    /// The server prepared statement `id` with `params` parameters: it is
    /// the last one prepared.
    pub fn prepared(&mut self, id: u32, params: u16) {
        self.last = LastPrepared::Open { id, params };
    }

    /// Statement `id` was closed (COM_STMT_CLOSE sent).
    pub fn closed(&mut self, id: u32) {
        if matches!(self.last, LastPrepared::Open { id: last, .. } if last == id) {
            self.last = LastPrepared::None;
        }
    }

    /// A prepare and an execute and close of the last prepared statement
    /// were sent in one write, and the prepare was refused: the close may
    /// have closed the statement prepared before (a prepare refused at
    /// `max_prepared_stmt_count` leaves it the last one). It is no longer
    /// kept, and closed again (a close of a closed id does nothing: ids
    /// are not reused). Nothing is the last prepared statement now.
    pub fn refused_after(&mut self) {
        if let LastPrepared::Open { id, .. } = self.last {
            self.entries.retain(|_, kept| kept.id != id);
            self.to_close.push(id);
        }
        self.last = LastPrepared::None;
    }

    /// What an execute of the last prepared statement would run once the
    /// closes queued are sent (they go out before anything else).
    pub fn last(&self) -> LastPrepared {
        match self.last {
            LastPrepared::Open { id, .. } if self.to_close.contains(&id) => LastPrepared::None,
            last => last,
        }
    }

    /// Statements kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether a statement is kept for `text` (not counted as a use).
    pub fn keeps(&self, text: &[u8]) -> bool {
        self.entries.contains_key(text)
    }

    /// The statement kept that was used least recently.
    fn least_recent(&self) -> Option<(&Vec<u8>, &Kept)> {
        self.entries.iter().min_by_key(|(_, kept)| kept.used)
    }

    /// Halves use counts and sightings once per [`AGING_PER_PLACE`] uses
    /// per place since the last aging.
    fn age(&mut self, capacity: usize) {
        let period = AGING_PER_PLACE.saturating_mul(capacity as u64).max(1);
        let periods = self.clock.saturating_sub(self.aged_at) / period;
        if periods == 0 {
            return;
        }
        self.aged_at += periods * period;
        let shift = periods.min(31) as u32;
        for kept in self.entries.values_mut() {
            kept.uses >>= shift;
        }
        self.seen.halve(shift);
    }

    /// Queues every statement for closing when the settings changed.
    fn settle(&mut self, fingerprint: u64) {
        if fingerprint != self.fingerprint {
            self.to_close
                .extend(self.entries.drain().map(|(_, kept)| kept.id));
            self.fingerprint = fingerprint;
        }
    }
}

/// Texts seen lately and how often: a table of slots by the text's hash,
/// a newcomer taking the slot of another text (so it records recent
/// texts, not all of them). Made at the first sighting.
#[derive(Debug, Default)]
struct Seen {
    /// (hash, sightings); empty until used.
    slots: Vec<(u64, u32)>,
}

impl Seen {
    /// Counts a sighting of `text`; its sightings so far.
    fn record(&mut self, text: &[u8], capacity: usize) -> u32 {
        if self.slots.is_empty() {
            let size = capacity
                .saturating_mul(SEEN_SLOTS_PER_PLACE)
                .clamp(MIN_SEEN_SLOTS, MAX_SEEN_SLOTS)
                .next_power_of_two();
            self.slots = vec![(0, 0); size];
        }
        let mut hasher = DefaultHasher::new();
        text.hash(&mut hasher);
        let hash = hasher.finish();
        let index = (hash as usize) & (self.slots.len() - 1);
        let slot = &mut self.slots[index];
        if slot.0 == hash && slot.1 > 0 {
            slot.1 = slot.1.saturating_add(1);
        } else {
            *slot = (hash, 1);
        }
        slot.1
    }

    /// Halves every count `shift` times.
    fn halve(&mut self, shift: u32) {
        for slot in &mut self.slots {
            slot.1 >>= shift;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_are_reused_evicted_least_recent_first_and_dropped_with_their_settings() {
        let mut cache = StatementCache::default();
        assert_eq!(cache.lookup(7, b"a"), None);
        cache.insert(7, b"a", 1, 2);
        cache.insert(7, b"b", 2, 2);
        assert_eq!(cache.lookup(7, b"a"), Some(1));
        cache.insert(7, b"c", 3, 2);
        assert_eq!(cache.take_closes(), vec![2], "b was used least recently");
        assert_eq!(
            (cache.lookup(7, b"a"), cache.lookup(7, b"c")),
            (Some(1), Some(3))
        );
        assert_eq!(cache.lookup(8, b"a"), None, "other settings");
        let mut closed = cache.take_closes();
        closed.sort_unstable();
        assert_eq!(closed, vec![1, 3]);
        assert!(cache.is_empty());
        cache.insert(8, b"a", 6, 2);
        cache.close_all();
        assert_eq!(
            (cache.lookup(8, b"a"), cache.take_closes()),
            (None, vec![6])
        );
        cache.insert(8, b"a", 4, 2);
        cache.forget_all();
        assert_eq!((cache.lookup(8, b"a"), cache.take_closes()), (None, vec![]));
        cache.insert(8, b"a", 5, 0);
        assert_eq!((cache.len(), cache.take_closes()), (0, vec![5]));
    }

    /// Runs `executes` lookups of texts drawn uniformly from `texts`
    /// (a fixed pseudo-random sequence) through the cache as the engine
    /// does; (hits, statements prepared to be kept) after the first
    /// `warm_up` lookups.
    fn run_uniform(
        cache: &mut StatementCache,
        texts: usize,
        capacity: usize,
        executes: usize,
        warm_up: usize,
    ) -> (usize, usize) {
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let (mut hits, mut kept) = (0, 0);
        let mut next_id = 1;
        for i in 0..executes {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let text = format!(
                "SELECT data FROM db{:05}.pins WHERE local_id = ?",
                state % texts as u64
            );
            let counted = i >= warm_up;
            if cache.lookup(1, text.as_bytes()).is_some() {
                hits += usize::from(counted);
            } else if cache.admit(text.as_bytes(), capacity, true) {
                cache.insert(1, text.as_bytes(), next_id, capacity);
                next_id += 1;
                kept += usize::from(counted);
            }
            cache.take_closes();
        }
        (hits, kept)
    }

    #[test]
    fn texts_are_kept_at_once_while_there_is_room() {
        let mut cache = StatementCache::default();
        let (hits, kept) = run_uniform(&mut cache, 64, 128, 2000, 500);
        assert_eq!(kept, 0, "every text kept during warm-up");
        assert_eq!(hits, 1500);
        assert_eq!(cache.len(), 64);
    }

    #[test]
    fn uniform_use_of_more_texts_than_places_keeps_a_stable_set() {
        // 64 texts, 16 places: LRU replaces a statement on 3 of 4 executes.
        let mut cache = StatementCache::default();
        let executes = 20_000;
        let (hits, kept) = run_uniform(&mut cache, 64, 16, executes + 2000, 2000);
        let misses = executes - hits;
        assert!(
            kept * 20 < misses,
            "{kept} statements prepared to be kept for {misses} misses"
        );
        assert!(
            hits * 5 > executes,
            "{hits} hits of {executes}: about 16 in 64 stay hits"
        );
        assert_eq!(cache.len(), 16);
    }

    #[test]
    fn a_text_used_often_replaces_one_used_rarely() {
        let mut cache = StatementCache::default();
        for (id, text) in [b"a", b"b"].iter().enumerate() {
            assert!(cache.admit(*text, 2, true), "room: kept at once");
            cache.insert(1, *text, id as u32, 2);
        }
        assert!(!cache.admit(b"c", 2, true), "seen once: not kept");
        assert!(cache.admit(b"c", 2, true), "seen twice, the others unused");
        assert_eq!(
            cache.take_closes(),
            vec![0],
            "a, used least recently, closed first"
        );
        cache.insert(1, b"c", 3, 2);
        assert!(cache.take_closes().is_empty(), "room was made before");
        // b and c used a lot: d needs to be seen more than twice as often.
        for _ in 0..3 {
            cache.lookup(1, b"b");
            cache.lookup(1, b"c");
        }
        let admitted: Vec<bool> = (0..7).map(|_| cache.admit(b"d", 2, true)).collect();
        assert_eq!(admitted, [false, false, false, false, false, false, true]);
        assert_eq!(cache.take_closes(), vec![1], "b was used least recently");
        cache.insert(1, b"d", 4, 2);
        for _ in 0..3 {
            assert!(!cache.admit(b"e", 2, false), "the server has no room");
        }
        assert!(!cache.admit(b"e", 0, true), "none kept");
        assert_eq!((cache.len(), cache.take_closes()), (2, vec![]));
    }

    #[test]
    fn use_counts_age_so_a_new_favourite_gets_in() {
        let mut cache = StatementCache::default();
        cache.admit(b"old", 1, true);
        cache.insert(1, b"old", 1, 1);
        for _ in 0..100 {
            cache.lookup(1, b"old");
        }
        // The old favourite is no longer used; the new one is, every time.
        let mut lookups = 0;
        loop {
            lookups += 1;
            assert!(lookups < 100, "the new text never got in");
            if cache.lookup(1, b"new").is_some() {
                break;
            }
            if cache.admit(b"new", 1, true) {
                cache.insert(1, b"new", 2, 1);
            }
        }
        assert_eq!(cache.take_closes(), vec![1]);
    }

    #[test]
    fn the_last_prepared_statement_is_followed_through_closes_and_resets() {
        let mut cache = StatementCache::default();
        assert_eq!(cache.last(), LastPrepared::None);
        cache.preparing();
        assert_eq!(cache.last(), LastPrepared::Unknown);
        cache.prepared(4, 1);
        cache.insert(1, b"a", 4, 2);
        assert_eq!(cache.last(), LastPrepared::Open { id: 4, params: 1 });
        cache.close_all();
        assert_eq!(cache.last(), LastPrepared::None, "its close goes out first");
        assert_eq!(cache.take_closes(), vec![4]);
        cache.prepared(5, 1);
        cache.insert(1, b"a", 5, 2);
        cache.closed(3);
        assert_eq!(cache.last(), LastPrepared::Open { id: 5, params: 1 });
        // A refused prepare sent with an execute and close of the last
        // one: statement 5 may be closed, and is closed again.
        cache.refused_after();
        assert_eq!(cache.last(), LastPrepared::None);
        assert!(!cache.keeps(b"a"));
        assert_eq!(cache.take_closes(), vec![5]);
        cache.prepared(6, 0);
        cache.closed(6);
        assert_eq!(cache.last(), LastPrepared::None);
        cache.prepared(7, 0);
        cache.forget_all();
        assert_eq!(cache.last(), LastPrepared::Unknown);
    }

    #[test]
    fn a_server_without_room_gets_kept_statements_closed_one_per_use() {
        let mut cache = StatementCache::default();
        for (id, text) in [b"a", b"b", b"c"].iter().enumerate() {
            cache.insert(1, *text, id as u32 + 1, 8);
        }
        assert_eq!(cache.lookup(1, b"a"), Some(1));
        cache.shed();
        assert_eq!(cache.len(), 2);
        assert_eq!(
            cache.take_closes(),
            vec![2],
            "the least recently used goes first"
        );
        cache.shed();
        cache.shed();
        cache.shed();
        assert!(cache.is_empty());
        assert_eq!(cache.take_closes(), vec![3, 1]);
    }

    #[test]
    fn a_server_has_room_under_three_quarters_of_its_maximum() {
        assert!(server_has_room(0, 16_382));
        assert!(server_has_room(12_285, 16_382));
        assert!(!server_has_room(12_287, 16_382));
        assert!(!server_has_room(5, 0));
        assert!(!server_has_room(u64::MAX, u64::MAX));
    }
}
