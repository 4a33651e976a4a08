//! File watching that survives the ways files really change: Kubernetes ConfigMap `..data`
//! symlink swaps, atomic renames, editors that write a temp file and rename it over the original,
//! and files or directories that are deleted and created again.
//!
//! The watcher does not try to understand events. Any event on or under a target only says
//! "something may have changed"; the owner then re-reads everything and compares. Before each such
//! round [`PathWatcher::refresh`] re-resolves the targets, because inotify watches inodes: once a
//! symlink points elsewhere, or a directory is re-created, the old watch sees nothing more (and a
//! change made before the new watch is in place would be missed, hence before the read, not after).
//!
//! A path that still names the same string can name a different directory: deleted and made
//! again, or renamed away and replaced. So a watch is remembered with the identity (device and
//! inode) of what it was placed on, and any removal or rename event naming a watched path marks
//! it stale; either way the next refresh places the watch again. Both are needed: ext4 reuses a
//! freed inode number at once, and the removal event can arrive after the refresh that runs
//! because of an earlier event of the same deletion.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use parking_lot::{Mutex, RwLock};
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
pub(crate) struct PathWatcher {
    watcher: Option<RecommendedWatcher>,
    targets: Vec<WatchTarget>,
    // (path, recursive) pairs registered with the OS, with the identity of what each was placed on.
    watched: HashMap<(PathBuf, bool), Option<Identity>>,
    shared: Arc<Shared>,
}

/// What the event handler (on the watcher's own thread) and the refresh share.
#[derive(Default)]
struct Shared {
    // Paths whose events matter: the targets, unresolved and resolved.
    relevant: RwLock<Vec<PathBuf>>,
    // Paths a removal or rename event named since the last refresh (the targets and their
    // ancestors only, so the set stays small).
    stale: Mutex<HashSet<PathBuf>>,
    // Files created or written and not closed since (at most `MAX_WRITERS`).
    writing: Mutex<HashSet<PathBuf>>,
}

/// Open writers tracked at once; past this a round simply waits for the quiet time and the bound.
const MAX_WRITERS: usize = 1024;

impl Shared {
    /// Records what `event` means for the next round; true when it concerns a target.
    fn note(&self, event: &notify::Event) -> bool {
        let closed = matches!(
            event.kind,
            EventKind::Access(AccessKind::Close(AccessMode::Write))
        );
        if matches!(event.kind, EventKind::Access(_)) && !closed {
            return false; // opens and reads, ours included
        }
        let gone = matches!(
            event.kind,
            EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(_))
        );
        let written = matches!(
            event.kind,
            EventKind::Create(CreateKind::File) | EventKind::Modify(ModifyKind::Data(_))
        );
        let relevant = self.relevant.read();
        let mut hit = false;
        for p in &event.paths {
            let under = relevant.iter().any(|t| p.starts_with(t));
            if gone && relevant.iter().any(|t| t.starts_with(p)) {
                // Marked before the caller's send, so the round it starts sees the mark.
                self.stale.lock().insert(p.clone());
            }
            if under {
                let mut writing = self.writing.lock();
                if written && writing.len() < MAX_WRITERS {
                    writing.insert(p.clone());
                } else if closed || gone {
                    writing.remove(p);
                }
            }
            hit |= under || relevant.iter().any(|t| t.starts_with(p));
        }
        hit
    }
}

/// What a path named when it was watched: (device, inode).
type Identity = (u64, u64);

fn identity(path: &Path) -> Option<Identity> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
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
    pub(crate) fn new(targets: Vec<WatchTarget>, tx: mpsc::Sender<()>) -> PathWatcher {
        let shared = Arc::new(Shared::default());
        let seen = shared.clone();
        let handler = move |res: notify::Result<notify::Event>| {
            if let Ok(event) = res
                && seen.note(&event)
            {
                // Full channel = a reload is already pending; it will see this change too.
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
            watched: HashMap::new(),
            shared,
        };
        w.refresh();
        w
    }

    /// Whether a file under the targets was created or written and not yet closed: a round now
    /// could read it half-written.
    pub(crate) fn writers_open(&self) -> bool {
        !self.shared.writing.lock().is_empty()
    }

    /// Re-resolves every target and moves the OS watches to what the paths mean now.
    pub(crate) fn refresh(&mut self) {
        let mut want = HashSet::new();
        let mut relevant = Vec::new();
        for t in &self.targets {
            plan(t, &mut want, &mut relevant);
        }
        *self.shared.relevant.write() = relevant;
        let stale = std::mem::take(&mut *self.shared.stale.lock());
        // A writer still open after the round's wait (or one that never closes, such as a hard
        // link's creation) must not hold every later round back.
        self.shared.writing.lock().clear();
        let Some(watcher) = self.watcher.as_mut() else {
            return;
        };
        let mut now_watched = HashMap::new();
        for ((path, rec), placed) in self.watched.drain() {
            let keep = want.contains(&(path.clone(), rec))
                && !stale.contains(&path)
                && placed.is_some()
                && placed == identity(&path);
            if keep {
                now_watched.insert((path, rec), placed);
            } else {
                // Fails harmlessly when the OS already dropped a watch on a deleted directory.
                let _ = watcher.unwatch(&path);
                tracing::debug!(path = %path.display(), recursive = rec, "unwatched");
            }
        }
        for (path, rec) in want {
            if now_watched.contains_key(&(path.clone(), rec)) {
                continue;
            }
            let mode = if rec {
                RecursiveMode::Recursive
            } else {
                RecursiveMode::NonRecursive
            };
            // Read before placing: if the path changes in between, the identities differ and the
            // next refresh places the watch again.
            let placed = identity(&path);
            match watcher.watch(&path, mode) {
                Ok(()) => {
                    now_watched.insert((path, rec), placed);
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

#[cfg(test)]
mod tests {
    use super::*;
    use notify::Event;
    use notify::event::RemoveKind;

    fn shared(target: &str) -> Shared {
        let s = Shared::default();
        s.relevant.write().push(PathBuf::from(target));
        s
    }

    fn ev(kind: EventKind, path: &str) -> Event {
        Event::new(kind).add_path(PathBuf::from(path))
    }

    #[test]
    fn a_file_written_under_a_target_is_open_until_its_writer_closes_it() {
        let s = shared("/conf");
        assert!(s.note(&ev(EventKind::Create(CreateKind::File), "/conf/a.yaml")));
        assert!(!s.writing.lock().is_empty(), "created, not yet filled");
        let close = EventKind::Access(AccessKind::Close(AccessMode::Write));
        assert!(
            s.note(&ev(close, "/conf/a.yaml")),
            "the close wakes the wait"
        );
        assert!(s.writing.lock().is_empty());
        // Reads (ours among them) neither start a round nor count as writers.
        let open = EventKind::Access(AccessKind::Open(AccessMode::Any));
        assert!(!s.note(&ev(open, "/conf/a.yaml")));
        // Elsewhere is not our business.
        let data = EventKind::Modify(ModifyKind::Data(notify::event::DataChange::Any));
        assert!(!s.note(&ev(data, "/other/a.yaml")));
        assert!(s.writing.lock().is_empty());
    }

    #[test]
    fn removing_or_renaming_a_target_or_its_directory_marks_it_stale() {
        let s = shared("/srv/conf");
        assert!(s.note(&ev(EventKind::Remove(RemoveKind::File), "/srv/conf/a.yaml")));
        assert!(
            s.stale.lock().is_empty(),
            "a file inside is not a watched path"
        );
        assert!(s.note(&ev(EventKind::Remove(RemoveKind::Folder), "/srv/conf")));
        let rename = EventKind::Modify(ModifyKind::Name(notify::event::RenameMode::From));
        assert!(s.note(&ev(rename, "/srv")));
        let stale = s.stale.lock();
        assert!(stale.contains(Path::new("/srv/conf")) && stale.contains(Path::new("/srv")));
    }
}
