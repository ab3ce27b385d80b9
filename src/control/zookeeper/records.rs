//! Records kept beside the document, `<document>/splits/<name>`: the state
//! record of `shardgate fleet split` on a ZooKeeper source, so that any
//! machine can resume the split.

use zookeeper_client as zk;

use super::{connect, persistent, request, ZkError};
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

/// Writes the record `name` of the document at `location` (created with
/// its parent when missing).
pub async fn write_split_record(
    location: &ZkLocation,
    name: &str,
    bytes: &[u8],
) -> Result<(), ZkError> {
    let client = connect(location).await?;
    let dir = format!("{}/splits", location.path);
    client
        .mkdir(&dir, &persistent())
        .await
        .map_err(request("create", &dir))?;
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
