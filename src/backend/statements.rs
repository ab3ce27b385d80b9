//! The prepared statements a backend connection keeps on its server
//! (`limits.backend_prepared_statements` of them at most): the statement
//! id the server gave each planned text, reused by later executes of the
//! same text on the same connection, least recently used closed first.
//!
//! A statement belongs to the session settings it was prepared under
//! (`sql_mode` and the character set decide how its text was read): when
//! the connection's settings fingerprint changes, every statement is
//! closed. A COM_RESET_CONNECTION or COM_CHANGE_USER drops them on the
//! server; the cache then forgets them without closing (the server may
//! hand their ids out again). A COM_INIT_DB closes them all (the default
//! database decided their unqualified names). A new connection starts
//! empty.

use std::collections::HashMap;

/// Longest text kept prepared: longer ones are prepared, executed and
/// closed at once.
pub const MAX_CACHED_TEXT: usize = 4096;

/// The statements one connection keeps prepared.
#[derive(Debug, Default)]
pub struct StatementCache {
    /// The settings fingerprint the statements were prepared under.
    fingerprint: u64,
    /// Planned text → (statement id, last use).
    entries: HashMap<Vec<u8>, (u32, u64)>,
    /// Uses so far, for least-recently-used eviction.
    clock: u64,
    /// Ids evicted or invalidated, still open on the server: closed with
    /// the next command sent.
    to_close: Vec<u32>,
}

impl StatementCache {
    /// The id of `text` prepared under settings `fingerprint`, if it is
    /// kept. Statements of other settings are queued for closing first.
    pub fn lookup(&mut self, fingerprint: u64, text: &[u8]) -> Option<u32> {
        self.settle(fingerprint);
        self.clock += 1;
        let clock = self.clock;
        self.entries.get_mut(text).map(|(id, used)| {
            *used = clock;
            *id
        })
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
            let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(text, _)| text.clone())
            else {
                break;
            };
            if let Some((evicted, _)) = self.entries.remove(&oldest) {
                self.to_close.push(evicted);
            }
        }
        self.clock += 1;
        if let Some((replaced, _)) = self.entries.insert(text.to_vec(), (id, self.clock)) {
            self.to_close.push(replaced);
        }
    }

    /// The ids to close on the server now (each once).
    pub fn take_closes(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.to_close)
    }

    /// Queues every statement for closing: they were prepared under
    /// another default database (COM_INIT_DB), which decides what their
    /// unqualified names are.
    pub fn close_all(&mut self) {
        self.to_close
            .extend(self.entries.drain().map(|(_, (id, _))| id));
    }

    /// Forgets every statement without closing it: the server dropped
    /// them (COM_RESET_CONNECTION, COM_CHANGE_USER).
    pub fn forget_all(&mut self) {
        self.entries.clear();
        self.to_close.clear();
    }

    /// Statements kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Queues every statement for closing when the settings changed.
    fn settle(&mut self, fingerprint: u64) {
        if fingerprint != self.fingerprint {
            self.to_close
                .extend(self.entries.drain().map(|(_, (id, _))| id));
            self.fingerprint = fingerprint;
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
}
