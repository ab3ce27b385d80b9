//! The state record of a split: which phase it finished, what it copied
//! and where, written after each phase (a file written atomically, a
//! temporary renamed over the old one; or a znode beside a ZooKeeper
//! document, which the command line keeps), so `--resume` continues where
//! a crash or a Ctrl-C stopped it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::SplitError;

/// The phases in order; the state records the last one finished
/// (`Copying`: a copy started and did not finish).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// The checks passed; nothing changed yet.
    Prepared,
    /// A copy started: the target may hold part of it (a resume drops it
    /// and copies again).
    Copying,
    /// The copy is on the target, which replicates the source.
    Copied,
    /// Every row of the range compared alike.
    Verified,
    /// The range is routed to the target.
    CutOver,
    /// Replication removed and the unowned databases dropped.
    Done,
}

impl Phase {
    /// The name the command line uses (`--stop-after`, progress lines).
    pub fn name(self) -> &'static str {
        match self {
            Phase::Prepared => "prepare",
            Phase::Copying => "copying",
            Phase::Copied => "copy",
            Phase::Verified => "verify",
            Phase::CutOver => "cutover",
            Phase::Done => "cleanup",
        }
    }
}

/// What a split has done so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitState {
    /// The fleet.
    pub fleet: String,
    /// First shard.
    pub first: u32,
    /// Last shard.
    pub last: u32,
    /// The shards' master before the split, `host:port`.
    pub source: String,
    /// The new master, `host:port`.
    pub target: String,
    /// The last phase finished.
    pub phase: Phase,
    /// The shard databases of the range (they move).
    pub moved: Vec<String>,
    /// Every database copied to the target (the source's, system schemas
    /// aside); empty until the copy starts.
    pub copied: Vec<String>,
    /// The GTID position of the copy's snapshot.
    pub gtid: Option<String>,
    /// When the cutover finished (seconds since the epoch): the grace
    /// period counts from it.
    pub cut_over_at: Option<u64>,
}

impl SplitState {
    /// Whether `other` (from the command line) is the same split.
    pub fn same_split(&self, fleet: Option<&str>, first: u32, last: u32, target: &str) -> bool {
        fleet.is_none_or(|f| f == self.fleet)
            && self.first == first
            && self.last == last
            && self.target == target
    }
}

/// The default state file of a file-sourced split: next to the config
/// file, `<config>.split-<fleet>-<A>-<B>.state`.
pub fn default_state_path(config: &Path, fleet: &str, first: u32, last: u32) -> PathBuf {
    let file = config
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    config.with_file_name(format!("{file}.split-{fleet}-{first}-{last}.state"))
}

/// The record as stored (JSON).
pub fn encode(state: &SplitState) -> Result<String, SplitError> {
    serde_json::to_string_pretty(state)
        .map(|text| text + "\n")
        .map_err(|e| SplitError::State(format!("encoding the state: {e}")))
}

/// A stored record read back; `origin` names where it came from.
pub fn decode(bytes: &[u8], origin: &str) -> Result<SplitState, SplitError> {
    serde_json::from_slice(bytes)
        .map_err(|e| SplitError::State(format!("{origin} is not a split state record: {e}")))
}

/// Reads the state at `path`; `None` when there is none.
pub fn read_state(path: &Path) -> Result<Option<SplitState>, SplitError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(SplitError::State(format!(
                "reading {}: {e}",
                path.display()
            )))
        }
    };
    decode(text.as_bytes(), &path.display().to_string()).map(Some)
}

/// Writes `state` to `path` atomically.
pub fn write_state(path: &Path, state: &SplitState) -> Result<(), SplitError> {
    let io = |e: std::io::Error| SplitError::State(format!("writing {}: {e}", path.display()));
    let text = encode(state)?;
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    let temporary = PathBuf::from(temporary);
    std::fs::write(&temporary, text).map_err(io)?;
    std::fs::rename(&temporary, path).map_err(io)
}

/// The lock file beside a state file, `<state>.lock`: the driver running
/// the split holds an exclusive `flock` on it and writes who it is there.
pub fn lock_path(state: &Path) -> PathBuf {
    let mut path = state.as_os_str().to_owned();
    path.push(".lock");
    PathBuf::from(path)
}

/// The exclusive lock of one driver on a file-recorded split: held by an
/// open file, so the kernel releases it when the process ends, even by
/// SIGKILL. The lock file stays (removing it would let two drivers lock
/// two different files).
#[derive(Debug)]
pub struct FileClaim {
    _file: std::fs::File,
    path: PathBuf,
}

impl FileClaim {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Locks the lock file of the state file `state` for `holder` (written
/// into it); `Err(holder)` with what the driver holding it wrote when
/// another holds it.
pub fn claim_file(state: &Path, holder: &str) -> Result<Result<FileClaim, String>, SplitError> {
    use std::io::{Read, Seek, Write};
    let path = lock_path(state);
    let io = |e: std::io::Error| SplitError::State(format!("locking {}: {e}", path.display()));
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut written = String::new();
            let _ = file.read_to_string(&mut written);
            return Ok(Err(written.trim().to_owned()));
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
    }
    file.set_len(0).map_err(io)?;
    file.rewind().map_err(io)?;
    file.write_all(format!("{holder}\n").as_bytes())
        .and_then(|()| file.flush())
        .map_err(io)?;
    Ok(Ok(FileClaim { _file: file, path }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> SplitState {
        SplitState {
            fleet: "main".into(),
            first: 8,
            last: 15,
            source: "127.0.0.1:3312".into(),
            target: "127.0.0.1:3311".into(),
            phase: Phase::Copied,
            moved: vec!["sp08".into()],
            copied: vec!["sp00".into(), "sp08".into()],
            gtid: Some("0-6-42".into()),
            cut_over_at: None,
        }
    }

    #[test]
    fn state_round_trips_through_its_file() {
        let dir = std::env::temp_dir().join(format!("split-state-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.state");
        assert_eq!(read_state(&path).unwrap(), None);
        write_state(&path, &state()).unwrap();
        assert_eq!(read_state(&path).unwrap(), Some(state()));
        std::fs::write(&path, "not json").unwrap();
        let error = read_state(&path).unwrap_err().to_string();
        assert!(error.contains("is not a split state record"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn phases_are_ordered_and_named() {
        assert!(Phase::Prepared < Phase::Copying && Phase::Copying < Phase::Copied);
        assert!(Phase::Verified < Phase::CutOver && Phase::CutOver < Phase::Done);
        assert_eq!(Phase::Done.name(), "cleanup");
    }

    #[test]
    fn the_same_split_is_recognised() {
        let s = state();
        assert!(s.same_split(None, 8, 15, "127.0.0.1:3311"));
        assert!(s.same_split(Some("main"), 8, 15, "127.0.0.1:3311"));
        assert!(!s.same_split(Some("mod"), 8, 15, "127.0.0.1:3311"));
        assert!(!s.same_split(None, 8, 14, "127.0.0.1:3311"));
        assert!(!s.same_split(None, 8, 15, "127.0.0.1:3313"));
    }

    #[test]
    fn the_default_state_file_sits_next_to_the_config() {
        assert_eq!(
            default_state_path(Path::new("/etc/sg/shardgate.yaml"), "main", 1, 2),
            PathBuf::from("/etc/sg/shardgate.yaml.split-main-1-2.state")
        );
    }

    #[test]
    fn a_state_file_is_claimed_by_one_holder_at_a_time() {
        let dir = std::env::temp_dir().join(format!("split-claim-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.state");
        let first = claim_file(&path, "cli@a:1").unwrap().unwrap();
        assert_eq!(first.path(), lock_path(&path));
        assert_eq!(
            claim_file(&path, "cli@b:2").unwrap().unwrap_err(),
            "cli@a:1"
        );
        drop(first);
        let second = claim_file(&path, "cli@b:2").unwrap().unwrap();
        assert_eq!(std::fs::read_to_string(second.path()).unwrap(), "cli@b:2\n");
        drop(second);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
