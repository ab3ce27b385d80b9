//! The push of a cutover: the new document is written in one multi with a
//! check on each pause record the cutover holds, so a record deleted
//! meanwhile (a `RESUME SHARDS ... FORCE`) aborts the write. When the
//! answer is lost (connection loss, timeout) the znode is read back to
//! tell "written" from "not written"; if that read fails too, the outcome
//! is unknown and said so.

use std::future::Future;
use std::time::Duration;

use zookeeper_client as zk;

use super::document::validate;
use super::{request, version_now, Pushed, ZkError, ZooKeeper};
use crate::control::status::version_of;

/// How many times the znode is read back after a lost answer.
const REREAD_ATTEMPTS: u32 = 10;

/// The wait between two of those reads.
const REREAD_PAUSE: Duration = Duration::from_millis(200);

/// What a read-back after a lost answer says about the push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The znode holds the new document at the version the push made: it
    /// was written.
    Written(i32),
    /// The znode is still at the base version, or another document took
    /// the next version: nothing was written.
    NotWritten,
    /// The znode could not be read, or moved on past the version the push
    /// would have made (ours may have been written, then overwritten).
    Unknown,
}

/// Decides a push over znode version `base` of the document whose MD5 is
/// `md5` from the znode read back afterwards (`None`: it could not be
/// read): its version and the MD5 of its data.
pub fn outcome(base: i32, md5: &str, read_back: Option<(i32, &str)>) -> Outcome {
    match read_back {
        Some((version, _)) if version == base => Outcome::NotWritten,
        Some((version, found)) if version == base + 1 => {
            if found == md5 {
                Outcome::Written(version)
            } else {
                Outcome::NotWritten
            }
        }
        _ => Outcome::Unknown,
    }
}

/// Why a cutover's push did not (surely) write the document.
#[derive(Debug, thiserror::Error)]
pub enum GuardedPushError {
    /// Nothing was written: a concurrent writer, an invalid document,
    /// ZooKeeper refused.
    #[error("{0}")]
    NotWritten(#[from] ZkError),
    /// A pause record the cutover holds is gone; nothing was written.
    #[error(
        "the pause record {id} was deleted while the cutover held it (a RESUME SHARDS ... FORCE, or its \
         record removed by hand); the new map was not written, as proxies may have resumed on the old one"
    )]
    PauseGone {
        /// The record's id.
        id: String,
    },
    /// The answer was lost and the znode could not be read back.
    #[error(
        "the answer to the push was lost ({reason}) and reading {path} back did not tell whether it was \
         written ({read_back}): the new map (md5 {md5}, it would be znode version {would_be}) may or may \
         not be in force"
    )]
    Unknown {
        /// The znode.
        path: String,
        /// The error that lost the answer.
        reason: String,
        /// What the read-back found, or why it failed.
        read_back: String,
        /// MD5 of the new document.
        md5: String,
        /// The version the push would have made.
        would_be: i32,
    },
}

impl ZooKeeper {
    /// Validates `bytes` as `config push` does and writes them over znode
    /// version `base` only while every pause record in `held` exists, all
    /// in one multi. A lost answer is settled by reading the znode back.
    pub async fn push_guarded(
        &self,
        bytes: &[u8],
        source_name: &str,
        base: i32,
        held: &[String],
    ) -> Result<Pushed, GuardedPushError> {
        self.push_guarded_with(bytes, source_name, base, held, async {})
            .await
    }

    /// [`ZooKeeper::push_guarded`], awaiting `between` after the checks,
    /// right before the multi: the window a `RESUME SHARDS ... FORCE` or
    /// another writer can take, made deterministic for tests.
    pub async fn push_guarded_with(
        &self,
        bytes: &[u8],
        source_name: &str,
        base: i32,
        held: &[String],
        between: impl Future<Output = ()>,
    ) -> Result<Pushed, GuardedPushError> {
        let client = self.client()?;
        let location = &self.location;
        let path = &location.path;
        let read = client
            .check_stat(path)
            .await
            .map_err(request("read", path))?
            .map(|stat| stat.version);
        if read != Some(base) {
            return Err(ZkError::StaleVersion {
                path: path.clone(),
                expected: base,
                actual: read,
            }
            .into());
        }
        validate(&client, location, bytes, source_name).await?;
        let md5 = version_of(bytes);
        between.await;
        let mut multi = client.new_multi_writer();
        for id in held {
            let record = self.record_path(id);
            multi
                .add_check_version(&record, -1)
                .map_err(request("check", &record))?;
        }
        multi
            .add_set_data(path, bytes, Some(base))
            .map_err(request("write", path))?;
        let pushed = |znode_version| Pushed {
            previous: Some(base),
            znode_version,
            version: md5.clone(),
        };
        let reason = match multi.commit().await {
            Ok(results) => {
                let written = results.iter().find_map(|result| match result {
                    zk::MultiWriteResult::SetData { stat } => Some(stat.version),
                    _ => None,
                });
                return Ok(pushed(written.unwrap_or(base + 1)));
            }
            Err(zk::MultiWriteError::OperationFailed { index, source }) => {
                return Err(match held.get(index) {
                    Some(id) => GuardedPushError::PauseGone { id: id.clone() },
                    None if matches!(source, zk::Error::BadVersion | zk::Error::NoNode) => {
                        let now = version_now(&client, path).await;
                        ZkError::ConcurrentWrite {
                            path: path.clone(),
                            read,
                            now,
                        }
                        .into()
                    }
                    None => request("write", path)(source).into(),
                });
            }
            Err(zk::MultiWriteError::RequestFailed { source }) => source,
        };
        let mut read_back = String::new();
        for attempt in 0..REREAD_ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(REREAD_PAUSE).await;
            }
            let client = match self.client() {
                Ok(client) => client,
                Err(e) => {
                    read_back = e.to_string();
                    break;
                }
            };
            match client.get_data(path).await {
                Ok((data, stat)) => {
                    let found = version_of(&data);
                    match outcome(base, &md5, Some((stat.version, &found))) {
                        Outcome::Written(version) => return Ok(pushed(version)),
                        Outcome::NotWritten => {
                            return Err(request("write", path)(reason).into());
                        }
                        Outcome::Unknown => {
                            read_back = format!("znode version {} (md5 {found})", stat.version);
                            break;
                        }
                    }
                }
                Err(e) => read_back = format!("{e}"),
            }
        }
        Err(GuardedPushError::Unknown {
            path: path.clone(),
            reason: reason.to_string(),
            read_back,
            md5,
            would_be: base + 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_back_tells_written_from_not_written_and_else_unknown() {
        let ours = "0123abcd";
        assert_eq!(outcome(4, ours, Some((5, ours))), Outcome::Written(5));
        assert_eq!(outcome(4, ours, Some((4, "old"))), Outcome::NotWritten);
        assert_eq!(outcome(4, ours, Some((5, "other"))), Outcome::NotWritten);
        assert_eq!(outcome(4, ours, Some((6, "other"))), Outcome::Unknown);
        assert_eq!(outcome(4, ours, Some((6, ours))), Outcome::Unknown);
        assert_eq!(outcome(4, ours, None), Outcome::Unknown);
    }
}
