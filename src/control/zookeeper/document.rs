//! `shardgate config push` and `config get`: the document written with a
//! version check after full validation, and read with its version.

use zookeeper_client as zk;

use super::acl::Openness;
use super::{auth, connect, persistent, request, version_now, ZkError};
use crate::control::process::ProxyEntry;
use crate::control::status::{parse_config, version_of};
use crate::topology::source::ZkLocation;
use crate::topology::ConfigErrors;

/// Largest document `config push` writes: ZooKeeper refuses a request
/// over its `jute.maxbuffer` (1 MiB less a byte by default) by dropping the
/// connection, which would read as "connection loss".
const MAX_DOCUMENT_BYTES: usize = 1_000_000;

/// A document read from its znode.
#[derive(Debug, Clone)]
pub struct Document {
    /// The YAML text's bytes.
    pub bytes: Vec<u8>,
    /// The znode version.
    pub znode_version: i32,
    /// MD5 (hex) of the bytes: the version `SHOW CONFIG` shows.
    pub version: String,
}

/// What a push wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// The znode version before (none: the push created it).
    pub previous: Option<i32>,
    /// The znode version now.
    pub znode_version: i32,
    /// MD5 (hex) of the document.
    pub version: String,
}

/// Refuses (unless `allow_open_acl`) to write the document at `location`
/// when anyone could change it: the znode exists with such an ACL, or it
/// does not and this process has no credentials to create it closed.
pub async fn refuse_open_document(
    location: &ZkLocation,
    allow_open_acl: bool,
) -> Result<(), ZkError> {
    if allow_open_acl {
        return Ok(());
    }
    let client = connect(location).await?;
    let path = &location.path;
    let writable = match client.get_acl(path).await {
        Ok((acls, _)) => Openness::of(&acls).writable,
        Err(zk::Error::NoNode) => {
            if auth::installed().is_none() {
                return Err(ZkError::OpenDocument {
                    path: path.clone(),
                    creating: true,
                });
            }
            false
        }
        Err(e) => return Err(request("read the ACL", path)(e)),
    };
    if writable {
        return Err(ZkError::OpenDocument {
            path: path.clone(),
            creating: false,
        });
    }
    Ok(())
}

/// Reads the document at `location`.
pub async fn get(location: &ZkLocation) -> Result<Document, ZkError> {
    let client = connect(location).await?;
    match client.get_data(&location.path).await {
        Ok((bytes, stat)) => Ok(Document {
            version: version_of(&bytes),
            bytes,
            znode_version: stat.version,
        }),
        Err(zk::Error::NoNode) => Err(ZkError::NoDocument {
            location: location.to_string(),
        }),
        Err(e) => Err(request("read", &location.path)(e)),
    }
}

/// Refuses `bytes` when, compared with the document at `location`, they
/// would send existing data to other shards
/// ([`crate::topology::rehome::rehoming_changes`]). Returns the znode
/// version compared with (none: no document yet), for the push to expect
/// so that nothing written in between goes unchecked. A document that does
/// not parse (either one) is not compared: the push's validation reports
/// the new one, and an invalid one in force routes nothing.
pub async fn refuse_rehoming(
    location: &ZkLocation,
    bytes: &[u8],
    source_name: &str,
) -> Result<Option<i32>, ZkError> {
    let current = match get(location).await {
        Ok(current) => current,
        Err(ZkError::NoDocument { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let in_force = parse_config(&current.bytes, &location.to_string());
    let pushed = parse_config(bytes, source_name);
    if let (Ok(old), Ok(new)) = (in_force, pushed) {
        let changes = crate::topology::rehome::rehoming_changes(&old, &new);
        if !changes.is_empty() {
            return Err(ZkError::Rehome {
                path: location.path.clone(),
                znode_version: current.znode_version,
                changes,
            });
        }
    }
    Ok(Some(current.znode_version))
}

/// Checks `bytes` as a push does before writing them: size, full
/// validation (`source_name` names them in the errors), and an `admin`
/// section while registered proxies listen on an admin port.
pub(super) async fn validate(
    client: &zk::Client,
    location: &ZkLocation,
    bytes: &[u8],
    source_name: &str,
) -> Result<(), ZkError> {
    let invalid = |errors| ZkError::Invalid {
        source_name: source_name.to_owned(),
        errors,
    };
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(invalid(ConfigErrors::single(
            source_name,
            0,
            format!(
                "the document is {} bytes; ZooKeeper takes at most {MAX_DOCUMENT_BYTES} in one znode \
                 (its jute.maxbuffer): shorten it",
                bytes.len()
            ),
        )));
    }
    let topology = parse_config(bytes, source_name).map_err(invalid)?;
    if topology.config.admin.is_none() {
        let with_admin = proxies_with_admin_port(client, location).await?;
        if !with_admin.is_empty() {
            return Err(invalid(ConfigErrors::single(
                source_name,
                0,
                format!(
                    "the document has no `admin` section, but registered proxies listen on an admin port \
                     ({}); they would refuse it. Keep the `admin` section (its users log in there)",
                    with_admin.join(", ")
                ),
            )));
        }
    }
    Ok(())
}

/// Validates `bytes` fully (as `check-config` does; `source_name` names
/// them in the errors) and writes them to the znode at `location` only if
/// it is still the version read first (and `expected_version`, when
/// given), creating it and its parents if it does not exist. A writer
/// in between makes it fail with both versions named.
pub async fn push(
    location: &ZkLocation,
    bytes: &[u8],
    source_name: &str,
    expected_version: Option<i32>,
) -> Result<Pushed, ZkError> {
    push_with(location, bytes, source_name, expected_version, async {}).await
}

/// [`push`], awaiting `between` after the version is read and the document
/// validated, right before the write: the window another writer can take,
/// made deterministic for tests.
pub async fn push_with(
    location: &ZkLocation,
    bytes: &[u8],
    source_name: &str,
    expected_version: Option<i32>,
    between: impl std::future::Future<Output = ()>,
) -> Result<Pushed, ZkError> {
    let client = connect(location).await?;
    let path = &location.path;
    let read = match client.check_stat(path).await {
        Ok(stat) => stat.map(|stat| stat.version),
        Err(e) => return Err(request("read", path)(e)),
    };
    if let Some(expected) = expected_version {
        if read != Some(expected) {
            return Err(ZkError::StaleVersion {
                path: path.clone(),
                expected,
                actual: read,
            });
        }
    }
    validate(&client, location, bytes, source_name).await?;
    let version = version_of(bytes);
    let lost = |now: Option<i32>| ZkError::ConcurrentWrite {
        path: path.clone(),
        read,
        now,
    };
    between.await;
    let written = match read {
        Some(read_version) => client.set_data(path, bytes, Some(read_version)).await,
        None => create(&client, location, bytes).await,
    };
    match written {
        Ok(stat) => Ok(Pushed {
            previous: read,
            znode_version: stat.version,
            version,
        }),
        Err(zk::Error::BadVersion | zk::Error::NodeExists | zk::Error::NoNode) => {
            let now = version_now(&client, path).await;
            Err(lost(now))
        }
        Err(e) => Err(request("write", path)(e)),
    }
}

/// Creates the document's znode, and its parents if missing.
async fn create(
    client: &zk::Client,
    location: &ZkLocation,
    bytes: &[u8],
) -> Result<zk::Stat, zk::Error> {
    if let Some(parent) = location.parent() {
        client.mkdir(parent, &persistent()).await?;
    }
    client
        .create(&location.path, bytes, &persistent())
        .await
        .map(|(stat, _)| stat)
}

/// The ids of the proxies registered under `location` that listen on an
/// admin port.
async fn proxies_with_admin_port(
    client: &zk::Client,
    location: &ZkLocation,
) -> Result<Vec<String>, ZkError> {
    let dir = location.registry_path();
    let ids = match client.list_children(&dir).await {
        Ok(ids) => ids,
        Err(zk::Error::NoNode) => return Ok(Vec::new()),
        Err(e) => return Err(request("list", &dir)(e)),
    };
    let mut with_admin = Vec::new();
    for id in ids {
        let path = location.registry_entry(&id);
        let entry = match client.get_data(&path).await {
            Ok((bytes, _)) => ProxyEntry::from_json(&bytes),
            Err(zk::Error::NoNode) => None,
            Err(e) => return Err(request("read", &path)(e)),
        };
        if entry.is_some_and(|entry| entry.addresses.admin.is_some()) {
            with_admin.push(id);
        }
    }
    with_admin.sort();
    Ok(with_admin)
}
