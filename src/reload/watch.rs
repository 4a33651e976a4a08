//! File watching that survives the ways files really change: Kubernetes ConfigMap `..data`
//! symlink swaps, atomic renames, editors that write a temp file and rename it over the original,
//! and files or directories that are deleted and created again.
//!
//! The watcher does not try to understand events. Any event on or under a target only says
//! "something may have changed"; the owner then re-reads everything and compares. Before each such
//! round [`PathWatcher::refresh`] re-resolves the targets, because inotify watches inodes: once a
//! symlink points elsewhere, or a directory is re-created, the old watch sees nothing more (and a
//! change made before the new watch is in place would be missed, hence before the read, not after).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use parking_lot::RwLock;
use tokio::sync::mpsc;

/// A path to watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchTarget {
    path: PathBuf,
    tree: bool,
}

impl WatchTarget {
    /// The path and, when it is a directory, everything under it.
    pub fn tree(path: PathBuf) -> WatchTarget {
        WatchTarget { path, tree: true }
    }

    /// The path itself only: its creation, replacement, removal, or (for a file) its contents.
    pub fn entry(path: PathBuf) -> WatchTarget {
        WatchTarget { path, tree: false }
    }
}

/// Watches targets and sends `()` (coalesced) on `tx` when something on or under them changes.
pub struct PathWatcher {
    watcher: Option<RecommendedWatcher>,
    targets: Vec<WatchTarget>,
    // (path, recursive) pairs currently registered with the OS.
    watched: HashSet<(PathBuf, bool)>,
    // Paths whose events matter: the targets, unresolved and resolved.
    relevant: Arc<RwLock<Vec<PathBuf>>>,
}

impl std::fmt::Debug for PathWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PathWatcher")
            .field("targets", &self.targets)
            .field("watched", &self.watched)
            .finish_non_exhaustive()
    }
}

impl PathWatcher {
    /// Starts watching. If the OS watcher cannot be created the result watches nothing (the
    /// periodic re-read still notices changes) and the reason is logged.
    pub fn new(targets: Vec<WatchTarget>, tx: mpsc::Sender<()>) -> PathWatcher {
        let relevant = Arc::new(RwLock::new(Vec::new()));
        let filter = relevant.clone();
        let handler = move |res: notify::Result<notify::Event>| {
            let Ok(event) = res else { return };
            if matches!(event.kind, EventKind::Access(_)) {
                return;
            }
            let paths = filter.read();
            let hit = event.paths.iter().any(|p| {
                paths
                    .iter()
                    .any(|t: &PathBuf| p.starts_with(t) || t.starts_with(p))
            });
            if hit {
                // Full channel = a reload is already pending; that one will see this change too.
                let _ = tx.try_send(());
            }
        };
        let watcher = match notify::recommended_watcher(handler) {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch files; relying on periodic re-reads");
                None
            }
        };
        let mut w = PathWatcher {
            watcher,
            targets,
            watched: HashSet::new(),
            relevant,
        };
        w.refresh();
        w
    }

    /// Re-resolves every target and moves the OS watches to what the paths mean now.
    pub fn refresh(&mut self) {
        let mut want = HashSet::new();
        let mut relevant = Vec::new();
        for t in &self.targets {
            plan(t, &mut want, &mut relevant);
        }
        *self.relevant.write() = relevant;
        let Some(watcher) = self.watcher.as_mut() else {
            return;
        };
        for (path, rec) in self.watched.difference(&want) {
            let _ = watcher.unwatch(path);
            tracing::debug!(path = %path.display(), recursive = rec, "unwatched");
        }
        let mut now_watched = HashSet::new();
        for (path, rec) in &want {
            if self.watched.contains(&(path.clone(), *rec)) {
                now_watched.insert((path.clone(), *rec));
                continue;
            }
            let mode = if *rec {
                RecursiveMode::Recursive
            } else {
                RecursiveMode::NonRecursive
            };
            match watcher.watch(path, mode) {
                Ok(()) => {
                    now_watched.insert((path.clone(), *rec));
                }
                // Usually a race with a deletion; the next refresh retries.
                Err(e) => tracing::debug!(path = %path.display(), error = %e, "cannot watch"),
            }
        }
        self.watched = now_watched;
    }
}

/// What to watch for one target: the target (resolved, recursively when asked and a directory),
/// the directory holding it (to see it replaced), and for a symlinked file the directory of the
/// file it points to. A missing target is watched through its nearest existing ancestor.
fn plan(t: &WatchTarget, want: &mut HashSet<(PathBuf, bool)>, relevant: &mut Vec<PathBuf>) {
    relevant.push(t.path.clone());
    let Some(existing) = t.path.ancestors().find(|a| a.exists()) else {
        return;
    };
    if existing != t.path {
        want.insert((existing.to_path_buf(), false));
        return;
    }
    if let Some(parent) = parent_of(&t.path) {
        want.insert((parent, false));
    }
    let Ok(resolved) = t.path.canonicalize() else {
        return;
    };
    if resolved != t.path {
        relevant.push(resolved.clone());
    }
    if resolved.is_dir() {
        want.insert((resolved, t.tree));
    } else if let Some(parent) = parent_of(&resolved) {
        want.insert((parent, false));
    }
}

fn parent_of(p: &Path) -> Option<PathBuf> {
    p.parent()
        .filter(|q| !q.as_os_str().is_empty())
        .map(Path::to_path_buf)
}
