//! The promotion's config work, on the blocking pool: the promoted routing
//! table (in memory, or rewritten into the config file) and the atomic
//! write of the file.

use std::path::{Path, PathBuf};

use super::FailoverError;
use crate::control::status::{build_config, version_of, write_atomically};
use crate::topology::bootstrap::ListenOverrides;
use crate::topology::rewrite;
use crate::topology::{ConfigErrors, Topology};

/// Runs `work` on the blocking pool; a task that failed is reported
/// against the config file `path`.
pub(super) async fn off_runtime<T: Send + 'static>(
    path: PathBuf,
    work: impl FnOnce() -> Result<T, FailoverError> + Send + 'static,
) -> Result<T, FailoverError> {
    tokio::task::spawn_blocking(work).await.unwrap_or_else(|e| {
        Err(FailoverError::ConfigFile {
            path,
            reason: format!("the task editing it failed: {e}"),
        })
    })
}

/// The routing table of `config` with `master`'s ranges promoted.
pub(super) fn promote_in_memory(
    config: crate::topology::Config,
    master: &str,
) -> Result<Topology, FailoverError> {
    let (config, _) =
        rewrite::promote_in_config(&config, master).map_err(FailoverError::NotPromotable)?;
    Topology::from_config(config, "<promotion>").map_err(|errors| FailoverError::ConfigFile {
        path: PathBuf::from("<none>"),
        reason: format!("the promoted config is invalid: {errors}"),
    })
}

/// Rewrites the config file at `path` (which must still be version
/// `in_force`) with `master`'s ranges promoted, after checking the new
/// text builds; returns its routing table, its version and the file
/// written. Blocking.
pub(super) fn rewrite_file(
    path: &Path,
    master: &str,
    in_force: &str,
    overrides: &ListenOverrides,
) -> Result<(Topology, String, PathBuf), FailoverError> {
    let file_error = |reason: String| FailoverError::ConfigFile {
        path: path.to_owned(),
        reason,
    };
    let bytes = std::fs::read(path).map_err(|e| file_error(format!("cannot read it: {e}")))?;
    let on_disk = version_of(&bytes);
    if on_disk != in_force {
        return Err(FailoverError::FileChanged {
            path: path.to_owned(),
            on_disk,
            in_force: in_force.to_owned(),
        });
    }
    let source = path.display().to_string();
    let text = String::from_utf8(bytes).map_err(|e| file_error(format!("not UTF-8 text: {e}")))?;
    let promoted =
        rewrite::promote_replica(&text, &source, master).map_err(|e| file_error(e.to_string()))?;
    // This process's listen addresses stay laid over the file's, as on
    // every reload.
    let topology = build_config(promoted.text.as_bytes(), &source, overrides).map_err(
        |errors: ConfigErrors| {
            file_error(format!(
                "the promoted config would be invalid, so it was not written:\n{errors}"
            ))
        },
    )?;
    let written = write_atomically(path, &promoted.text)
        .map_err(|e| file_error(format!("cannot write it: {e}")))?;
    Ok((topology, version_of(promoted.text.as_bytes()), written))
}
