//! What the planner notes while it routes a statement the fast path
//! ([`super::fast`]) is learning from: the key literals it read, and
//! whatever a template could not repeat.

use std::cell::RefCell;
use std::ops::Range;

use crate::topology::FleetId;

thread_local! {
    /// The notes of the route being recorded, if any.
    pub(super) static RECORD: RefCell<Option<Record>> = const { RefCell::new(None) };
}

/// What the ordinary route of a statement being learned did, beyond its plan.
#[derive(Default)]
pub(super) struct Record {
    /// The text routed first (address, length): another one is a re-route.
    pub(super) text: Option<(usize, usize)>,
    /// Something the template cannot repeat: a re-routed text, a
    /// placement, an object table's columns.
    pub(super) untemplatable: bool,
    /// Key literals read: their range, whether an introducer came first,
    /// the table's rule and fleet.
    pub(super) keys: Vec<(Option<Range<usize>>, bool, KeyRule, FleetId)>,
}

/// How a key literal selects a shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum KeyRule {
    /// An object table of this type: an ID, rewritten to its local id.
    Object(u16),
    /// A mapping table: an ID's shard.
    Mapping,
    /// A mod-shard table: md5 of the key's text.
    ModShard,
}

fn record(change: impl FnOnce(&mut Record)) {
    RECORD.with(|r| {
        if let Some(record) = r.borrow_mut().as_mut() {
            change(record);
        }
    });
}

/// The planner starts reading `sql` (a second text means a re-route).
pub(super) fn note_text(sql: &[u8]) {
    let this = (sql.as_ptr() as usize, sql.len());
    record(|r| match r.text {
        None => r.text = Some(this),
        Some(first) if first != this => r.untemplatable = true,
        Some(_) => {}
    });
}

/// The planner read the key literal at `range` of the text.
pub(super) fn note_key(
    range: Option<Range<usize>>,
    introduced: bool,
    rule: KeyRule,
    fleet: FleetId,
) {
    record(|r| r.keys.push((range, introduced, rule, fleet)));
}

/// The plan depends on something a template cannot repeat.
pub(super) fn note_untemplatable() {
    record(|r| r.untemplatable = true);
}
