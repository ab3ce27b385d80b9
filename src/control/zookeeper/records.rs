//! Records kept beside the document, `<document>/splits/<name>`: the state
//! record of `shardgate fleet split` on a ZooKeeper source, so that any
//! machine can resume the split.

use zookeeper_client as zk;

use super::{connect, ephemeral, persistent, request, ZkError};
use crate::topology::source::ZkLocation;

/// `<document>/splits/<name>`.
pub fn split_record_path(location: &ZkLocation, name: &str) -> String {
    format!("{}/splits/{name}", location.path)
}

/// The record `name` of the document at `location`; `None` when there is
/// none.
pub async fn read_split_record(
    location: &ZkLocation,
    name: &str,
) -> Result<Option<Vec<u8>>, ZkError> {
    let client = connect(location).await?;
    let path = split_record_path(location, name);
    match client.get_data(&path).await {
        Ok((bytes, _)) => Ok(Some(bytes)),
        Err(zk::Error::NoNode) => Ok(None),
        Err(e) => Err(request("read", &path)(e)),
    }
}

/// A session to the document at `location`, its `splits` child created
/// when missing.
async fn connect_with_splits(location: &ZkLocation) -> Result<zk::Client, ZkError> {
    let client = connect(location).await?;
    let dir = format!("{}/splits", location.path);
    client
        .mkdir(&dir, &persistent())
        .await
        .map_err(request("create", &dir))?;
    Ok(client)
}

/// Writes the record `name` of the document at `location` (created with
/// its parent when missing).
pub async fn write_split_record(
    location: &ZkLocation,
    name: &str,
    bytes: &[u8],
) -> Result<(), ZkError> {
    let client = connect_with_splits(location).await?;
    let path = split_record_path(location, name);
    match client.create(&path, bytes, &persistent()).await {
        Ok(_) => Ok(()),
        Err(zk::Error::NodeExists) => client
            .set_data(&path, bytes, None)
            .await
            .map(|_| ())
            .map_err(request("write", &path)),
        Err(e) => Err(request("create", &path)(e)),
    }
}

/// `<document>/splits/<name>.lock`: the ephemeral znode of the driver
/// running the split `name` (docs/decisions/0040-one-driver-per-split.md).
pub fn split_claim_path(location: &ZkLocation, name: &str) -> String {
    format!("{}.lock", split_record_path(location, name))
}

/// A claim on a split held by a session of this process: its ephemeral
/// znode goes when the claim is dropped (the session closes) or the
/// process dies (the session expires).
#[derive(Debug)]
pub struct SplitClaim {
    client: zk::Client,
    path: String,
}

/// What claiming a split found.
#[derive(Debug)]
pub enum SplitClaimed {
    /// This process holds it now.
    Held(SplitClaim),
    /// Another driver holds it.
    Taken {
        /// The claim's znode.
        path: String,
        /// What its holder wrote (who, since when).
        holder: String,
        /// The holder's session.
        session: i64,
        /// The session timeout of this process's session (the holder's
        /// is alike): how long a dead holder's claim stays.
        timeout: std::time::Duration,
    },
}

/// Claims the split `name` of the document at `location` for `holder`
/// (written into the claim): an ephemeral znode on a session of its own.
pub async fn claim_split(
    location: &ZkLocation,
    name: &str,
    holder: &str,
) -> Result<SplitClaimed, ZkError> {
    let client = connect_with_splits(location).await?;
    let path = split_claim_path(location, name);
    // A claim released between the create and the read is claimed again.
    for _ in 0..3 {
        match client.create(&path, holder.as_bytes(), &ephemeral()).await {
            Ok(_) => return Ok(SplitClaimed::Held(SplitClaim { client, path })),
            Err(zk::Error::NodeExists) => match client.get_data(&path).await {
                Ok((bytes, stat)) => {
                    return Ok(SplitClaimed::Taken {
                        holder: String::from_utf8_lossy(&bytes).into_owned(),
                        session: stat.ephemeral_owner,
                        timeout: client.session_timeout(),
                        path,
                    })
                }
                Err(zk::Error::NoNode) => continue,
                Err(e) => return Err(request("read", &path)(e)),
            },
            Err(e) => return Err(request("create", &path)(e)),
        }
    }
    Err(request("create", &path)(zk::Error::NodeExists))
}

impl SplitClaim {
    /// The claim's znode.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Removes the claim and closes its session, so that the next driver
    /// need not wait for the session to expire (a process that ends right
    /// after dropping a client may not get to close its session).
    pub async fn release(self) {
        if self.held().await.is_ok() {
            if let Err(e) = self.client.delete(&self.path, None).await {
                tracing::warn!("removing the split claim {}: {e}", self.path);
            }
        }
    }

    /// Whether this session still holds the claim (an expired session
    /// lost it: another driver may have claimed the split since).
    pub async fn held(&self) -> Result<(), String> {
        let own = self.client.session_id().0;
        match self.client.check_stat(&self.path).await {
            Ok(Some(stat)) if stat.ephemeral_owner == own => Ok(()),
            Ok(Some(stat)) => Err(format!(
                "the claim {} is now held by ZooKeeper session {:#x}, not this one ({own:#x}): \
                 this driver's session expired",
                self.path, stat.ephemeral_owner
            )),
            Ok(None) => Err(format!(
                "the claim {} is gone: this driver's ZooKeeper session expired",
                self.path
            )),
            Err(e) => Err(format!("checking the claim {}: {e}", self.path)),
        }
    }
}
