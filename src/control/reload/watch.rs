//! The config watchers: SIGHUP, and a watch on the config file's
//! directory (and its symlink target's), or on the config znode, each
//! reloading the document.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::mpsc;
use tracing::{error, info, warn};

use super::ReloadTrigger;
use crate::control::Control;

/// How long the file must stay quiet after a change before it is read
/// (editors and config managers write in several steps).
const DEBOUNCE: Duration = Duration::from_millis(200);

/// Starts the config watchers of `control`: SIGHUP, and a watch on the
/// directory of its config file (if it has one) or on its config znode
/// (with the registry task). They log what happened and never stop on an
/// error. The SIGHUP handler is installed before this returns; once the
/// directory or znode watch is in place, the document is reloaded once,
/// for a change made between the first load and the watch.
pub fn spawn_watchers(control: Arc<Control>) {
    spawn_signal_handler(Arc::downgrade(&control));
    if let Some(path) = control.config_path.clone() {
        spawn_file_watcher(Arc::downgrade(&control), path);
    }
    crate::control::zookeeper::spawn_watch(&control);
}

fn spawn_signal_handler(control: Weak<Control>) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hangups = match signal(SignalKind::hangup()) {
        Ok(hangups) => hangups,
        Err(e) => {
            error!(
                "cannot listen for SIGHUP ({e}); reload with RELOAD CONFIG or by editing the file"
            );
            return;
        }
    };
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            let Some(control) = control.upgrade() else {
                break;
            };
            info!("SIGHUP: reloading the config");
            let _ = control.reload(ReloadTrigger::Signal).await;
        }
    });
}

/// The directories watched for one config path: the one that names it, and
/// the one holding the file it resolves to, when that is elsewhere (a
/// symlink). The target is resolved again after every reload, since a
/// ConfigMap update points the link at a new directory.
struct WatchedDirs {
    path: PathBuf,
    dir: PathBuf,
    target_dir: Option<PathBuf>,
}

impl WatchedDirs {
    fn new(path: PathBuf) -> Self {
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
            _ => PathBuf::from("."),
        };
        Self {
            path,
            dir,
            target_dir: None,
        }
    }

    /// Watches the target's directory if the path now resolves elsewhere
    /// (and stops watching the previous one).
    fn follow_target(&mut self, watcher: &mut impl notify::Watcher) {
        let resolved = resolved_dir(&self.path);
        let own = std::fs::canonicalize(&self.dir).ok();
        let wanted = resolved.filter(|target| Some(target) != own.as_ref());
        if wanted == self.target_dir {
            return;
        }
        if let Some(old) = self.target_dir.take() {
            let _ = watcher.unwatch(&old);
        }
        if let Some(target) = wanted {
            match watcher.watch(&target, notify::RecursiveMode::NonRecursive) {
                Ok(()) => {
                    info!(dir = %target.display(), "watching the config file's target directory too");
                    self.target_dir = Some(target);
                }
                Err(e) => {
                    warn!(dir = %target.display(), "cannot watch the config file's target directory ({e}); edits made there need SIGHUP or RELOAD CONFIG")
                }
            }
        }
    }
}

/// The directory of the file `path` resolves to, following symlinks.
fn resolved_dir(path: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(path)
        .ok()
        .and_then(|target| target.parent().map(Path::to_path_buf))
}

fn spawn_file_watcher(control: Weak<Control>, path: PathBuf) {
    use notify::{RecursiveMode, Watcher};
    let mut dirs = WatchedDirs::new(path);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let watcher = notify::recommended_watcher(move |event| {
        let _ = tx.send(event);
    })
    .and_then(|mut watcher| {
        watcher.watch(&dirs.dir, RecursiveMode::NonRecursive)?;
        Ok(watcher)
    });
    let mut watcher = match watcher {
        Ok(watcher) => watcher,
        Err(e) => {
            error!(dir = %dirs.dir.display(), "cannot watch the config directory ({e}); reload with SIGHUP or RELOAD CONFIG");
            return;
        }
    };
    info!(dir = %dirs.dir.display(), "watching the config directory for changes");
    dirs.follow_target(&mut watcher);
    tokio::spawn(async move {
        if !reload_on_file_change(&control).await {
            return;
        }
        let is_change = |event: notify::Result<notify::Event>| match event {
            Ok(event) => changes_something(&event),
            Err(e) => {
                warn!("config directory watch: {e}");
                false
            }
        };
        while let Some(event) = rx.recv().await {
            if !is_change(event) {
                continue;
            }
            let mut deadline = tokio::time::Instant::now() + DEBOUNCE;
            loop {
                match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some(event)) => {
                        if is_change(event) {
                            deadline = tokio::time::Instant::now() + DEBOUNCE;
                        }
                    }
                    Ok(None) => return,
                    Err(_) => break,
                }
            }
            if !reload_on_file_change(&control).await {
                return;
            }
            dirs.follow_target(&mut watcher);
        }
    });
}

/// Reloads for a file change (the outcome is logged and recorded by
/// [`Control::reload`]); false once the control plane is gone.
async fn reload_on_file_change(control: &Weak<Control>) -> bool {
    let Some(control) = control.upgrade() else {
        return false;
    };
    let _ = control.reload(ReloadTrigger::FileChange).await;
    true
}

/// Whether `event` may have changed something in a watched directory.
/// Every change counts, whatever file it names (a ConfigMap update renames
/// a `..data` symlink, not the file); opening and reading files, ours
/// included, does not.
pub(super) fn changes_something(event: &notify::Event) -> bool {
    use notify::event::{AccessKind, AccessMode};
    use notify::EventKind;
    match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}
