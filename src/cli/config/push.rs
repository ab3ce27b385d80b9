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
            let mut expected = expected_version;
            if !allow_rehome {
                let compared = zookeeper::refuse_rehoming(&location, &bytes, &name).await?;
                expected = expected.or(compared);
            }
            zookeeper::push(&location, &bytes, &name, expected).await
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
