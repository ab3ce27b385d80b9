//! The state file of a migration: a header naming the fleet and the
//! statement, then the shard databases done, one a line.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::ops::OpsError;

pub(super) fn default_state_path(fleet: &str, table: &str, sql: &str) -> PathBuf {
    // FNV-1a: a stable name for the same statement across runs.
    let hash = sql.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let safe: String = table
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    PathBuf::from(format!(
        "shardgate-migrate-{fleet}-{safe}-{hash:016x}.state"
    ))
}

fn state_header(fleet: &str, sql: &str) -> String {
    format!(
        "# shardgate fleet migrate: the shard databases done, one a line\n# fleet: {fleet}\n# sql: {}\n",
        sql.replace('\\', "\\\\").replace('\n', "\\n")
    )
}

/// The shard databases a previous run of the same statement finished.
pub(super) fn read_state(path: &Path, fleet: &str, sql: &str) -> Result<HashSet<String>, OpsError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashSet::new()),
        Err(source) => {
            return Err(OpsError::ReadSchema {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let header = state_header(fleet, sql);
    let Some(rest) = text.strip_prefix(&header) else {
        return Err(OpsError::Migrate(format!(
            "the state file {} is of another migration (another fleet or statement); remove it or pass another --state",
            path.display()
        )));
    };
    Ok(rest
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect())
}

/// The state file, appended to as shard databases finish.
pub(super) struct StateFile(Mutex<std::fs::File>);

impl StateFile {
    pub(super) fn open(path: &Path, fleet: &str, sql: &str) -> Result<Self, OpsError> {
        let io = |source| OpsError::Migrate(format!("state file {}: {source}", path.display()));
        let exists = path.exists();
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io)?;
        if !exists {
            file.write_all(state_header(fleet, sql).as_bytes())
                .map_err(io)?;
        }
        Ok(StateFile(Mutex::new(file)))
    }

    /// Records a shard database as done. The line is written at once (an
    /// interrupted process loses none); a lost line only makes a rerun
    /// meet an "already applied" error, which it checks.
    pub(super) fn done(&self, database: &str) -> Result<(), String> {
        let mut file = crate::sync::lock(&self.0);
        writeln!(file, "{database}").map_err(|e| format!("writing the state file: {e}"))
    }
}
