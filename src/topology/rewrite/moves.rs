//! The config edit written by `MOVE SHARDS a-b TO host`: the host entry
//! holding the range is split around it, and the moved part gets the new
//! master.

use super::super::config::Config;
use super::RewriteError;

/// A shard range given a new master.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MovedRange {
    /// Fleet of the range.
    pub fleet: String,
    /// First shard moved.
    pub first: u32,
    /// Last shard moved.
    pub last: u32,
    /// The master the shards were on, as written.
    pub from: String,
    /// The new master, as asked.
    pub to: String,
    /// The range of the host entry the shards came from.
    pub entry: [u32; 2],
    /// The entry's replica when it is the new master: dropped from the
    /// parts of the entry that stay on the old master.
    pub replica_dropped: Option<String>,
}

/// The edited config text and what it now says.
#[derive(Debug, Clone)]
pub struct Moved {
    /// The new text.
    pub text: String,
    /// The config the new text parses to (checked equal to the intended one).
    pub config: Config,
    /// What moved.
    pub moved: MovedRange,
}

/// Rewrites `text` so shards `first..=last` of `fleet` have `target` as
/// master: the one host entry holding them is replaced by up to three
/// entries (the part before, the moved part, the part after). `source`
/// names the text in errors.
pub fn move_shards(
    text: &str,
    source: &str,
    fleet: &str,
    first: u32,
    last: u32,
    target: &str,
) -> Result<Moved, RewriteError> {
    let _ = (text, source, fleet, first, last, target);
    Err(RewriteError::NotMovable {
        fleet: fleet.to_owned(),
        first,
        last,
        why: "not built yet".to_owned(),
    })
}

/// The same change on a config in memory.
pub fn move_in_config(
    config: &Config,
    fleet: &str,
    first: u32,
    last: u32,
    target: &str,
) -> Result<(Config, MovedRange), RewriteError> {
    let _ = (config, target);
    Err(RewriteError::NotMovable {
        fleet: fleet.to_owned(),
        first,
        last,
        why: "not built yet".to_owned(),
    })
}
