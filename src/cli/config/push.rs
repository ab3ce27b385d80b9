//! `shardgate config push FILE --source zookeeper://...`.

use std::path::Path;

use crate::cli::runtime::runtime;
use crate::cli::{zookeeper_source, CliError};
use crate::control::zookeeper;

/// Validates `file` and writes it to the znode, version-checked; unless
/// `allow_rehome`, refuses a file that would re-home existing data compared
/// with the document in the znode (and writes only over that version).
pub(super) fn run(
    file: &Path,
    source: &str,
    expected_version: Option<i32>,
    allow_rehome: bool,
    allow_open_acl: bool,
) -> Result<(), CliError> {
    let location = zookeeper_source(source)?;
    let bytes = crate::topology::prescan::read_bounded(file).map_err(|source| CliError::Read {
        path: file.to_path_buf(),
        source,
    })?;
    let name = file.display().to_string();
    let pushed = runtime()?
        .block_on(async {
            zookeeper::refuse_open_document(&location, allow_open_acl).await?;
            if allow_rehome || expected_version.is_some() {
                if !allow_rehome {
                    zookeeper::refuse_rehoming(&location, &bytes, &name).await?;
                }
                return zookeeper::push(&location, &bytes, &name, expected_version).await;
            }
            // Written only over the version compared with; a writer in
            // between is a concurrent write, not a stale --expected-version.
            let compared = zookeeper::refuse_rehoming(&location, &bytes, &name).await?;
            zookeeper::push(&location, &bytes, &name, compared)
                .await
                .map_err(|error| match error {
                    zookeeper::ZkError::StaleVersion {
                        path,
                        expected,
                        actual,
                    } => zookeeper::ZkError::ConcurrentWrite {
                        path,
                        read: Some(expected),
                        now: actual,
                    },
                    other => other,
                })
        })
        .map_err(CliError::Push)?;
    let previous = pushed
        .previous
        .map_or_else(|| "created".to_owned(), |v| format!("was {v}"));
    println!(
        "{name}: pushed to {location}: znode version {} ({previous}), md5 {}",
        pushed.znode_version, pushed.version
    );
    Ok(())
}
