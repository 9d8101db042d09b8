//! The config watcher (R2.4): what to watch for a path that may be reached
//! through symlinks, and the loop that turns file events and SIGHUP into reloads.
//!
//! A path is resolved component by component; every symlink met on the way (the file
//! itself, `/etc/switchyard.yaml -> /srv/switchyard.yaml`, or a directory link such as a
//! Kubernetes ConfigMap's `..data -> ..2024_01_01_00_00_00.1`) and the file finally reached
//! are *watched entries*. Their parent directories are watched (not the files: a rename-save
//! replaces the inode), an event is relevant when it names a watched entry, and after every
//! reload the path is resolved again, so a swapped `..data` or a re-pointed link is followed.
//! Events settle for [`DEBOUNCE`] of quiet (at most [`MAX_SETTLE`]) before one reload.

use std::collections::{BTreeSet, HashSet, VecDeque};
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use notify::event::{AccessKind, AccessMode, EventKind};
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::{mpsc, watch};

use super::reload::{Hangup, Reloader, Trigger};

/// Quiet time after the last event before a reload.
pub const DEBOUNCE: Duration = Duration::from_millis(200);
/// A stream of events never delays a reload longer than this.
pub const MAX_SETTLE: Duration = Duration::from_secs(2);
/// Symlinks followed before giving up (a loop).
const MAX_LINKS: usize = 40;

enum Part {
    Root,
    Up,
    Name(OsString),
}

fn parts(p: &Path) -> Vec<Part> {
    p.components()
        .filter_map(|c| match c {
            Component::RootDir | Component::Prefix(_) => Some(Part::Root),
            Component::CurDir => None,
            Component::ParentDir => Some(Part::Up),
            Component::Normal(n) => Some(Part::Name(n.to_os_string())),
        })
        .collect()
}

/// Every symlink met while resolving `path`, then the path finally reached (which may not
/// exist yet). All absolute, without `.` or `..`.
pub fn chain(path: &Path) -> Vec<PathBuf> {
    let start = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut todo: VecDeque<Part> = parts(&start).into();
    let mut cur = PathBuf::from("/");
    let mut out = Vec::new();
    while let Some(part) = todo.pop_front() {
        match part {
            Part::Root => cur = PathBuf::from("/"),
            Part::Up => {
                cur.pop();
            }
            Part::Name(name) => {
                let next = cur.join(&name);
                let link = std::fs::symlink_metadata(&next)
                    .ok()
                    .filter(|m| m.file_type().is_symlink() && out.len() < MAX_LINKS)
                    .and_then(|_| std::fs::read_link(&next).ok());
                match link {
                    Some(target) => {
                        out.push(next);
                        for p in parts(&target).into_iter().rev() {
                            todo.push_front(p);
                        }
                    }
                    None => cur = next,
                }
            }
        }
    }
    out.push(cur);
    out
}

/// The watched entries of several paths, and the directories holding them.
fn entries(paths: &[PathBuf]) -> (HashSet<PathBuf>, BTreeSet<PathBuf>) {
    let files: HashSet<PathBuf> = paths.iter().flat_map(|p| chain(p)).collect();
    let dirs = files
        .iter()
        .filter_map(|f| f.parent().map(Path::to_path_buf))
        .collect();
    (files, dirs)
}

/// Whether a debounced event should count: anything but reads (the watcher reports our own
/// `open` of the file; reacting to it would reload forever — ECOSYSTEM-NOTES).
fn relevant(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

/// The OS watcher and what it currently watches.
struct Watch {
    watcher: Option<RecommendedWatcher>,
    files: Arc<RwLock<HashSet<PathBuf>>>,
    dirs: BTreeSet<PathBuf>,
}

impl Watch {
    fn new(tx: mpsc::Sender<Trigger>) -> Watch {
        let files: Arc<RwLock<HashSet<PathBuf>>> = Arc::default();
        let seen = files.clone();
        // The callback only looks names up: the directory may also hold the SQLite files,
        // whose every commit raises an event.
        let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            let Ok(e) = res else { return };
            if !relevant(&e.kind) {
                return;
            }
            let files = crate::lock::read(&seen);
            if e.paths.iter().any(|p| files.contains(p)) {
                let _ = tx.try_send(Trigger::File);
            }
        });
        let watcher = match watcher {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::warn!(error = %e, "file watcher unavailable; reload with SIGHUP");
                None
            }
        };
        Watch {
            watcher,
            files,
            dirs: BTreeSet::new(),
        }
    }

    /// Resolve `paths` again and watch what they lead to now.
    fn follow(&mut self, paths: &[PathBuf]) {
        let (files, dirs) = entries(paths);
        *crate::lock::write(&self.files) = files;
        let Some(w) = self.watcher.as_mut() else {
            return;
        };
        for gone in self.dirs.difference(&dirs) {
            let _ = w.unwatch(gone);
        }
        for dir in dirs.difference(&self.dirs) {
            if let Err(e) = w.watch(dir, RecursiveMode::NonRecursive) {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot watch this directory; changes there need SIGHUP");
            }
        }
        self.dirs = dirs;
    }
}

/// Wait until events have been quiet for `DEBOUNCE` (at most `MAX_SETTLE`); a SIGHUP among
/// them makes the whole batch a signalled reload. `None` when the senders are gone.
async fn settle(first: Trigger, rx: &mut mpsc::Receiver<Trigger>) -> Option<Trigger> {
    let mut trigger = first;
    let until = tokio::time::Instant::now() + MAX_SETTLE;
    loop {
        let quiet = (tokio::time::Instant::now() + DEBOUNCE).min(until);
        match tokio::time::timeout_at(quiet, rx.recv()).await {
            Ok(Some(Trigger::Signal)) => trigger = Trigger::Signal,
            Ok(Some(Trigger::File)) => {}
            Ok(None) => return None,
            Err(_) => return Some(trigger),
        }
    }
}

/// The watcher, installed: file events are being collected from the moment this exists.
pub struct Installed {
    reloader: Arc<Reloader>,
    watch: Watch,
    rx: mpsc::Receiver<Trigger>,
}

/// Start watching now (before `start` reports ready, so no save after that is missed) and
/// route SIGHUP to the same queue.
pub fn install(reloader: Arc<Reloader>, hup: Hangup) -> Installed {
    let (tx, rx) = mpsc::channel::<Trigger>(64);
    let mut watch = Watch::new(tx.clone());
    watch.follow(&reloader.watched_paths());
    let mut files: Vec<String> = crate::lock::read(&watch.files)
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    files.sort();
    tracing::info!(files = %files.join(", "), "watching the config (and every link on the way to it) for changes");
    super::reload::spawn_sighup(tx, hup);
    Installed {
        reloader,
        watch,
        rx,
    }
}

impl Installed {
    /// Reload on file events and SIGHUP until shutdown.
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        loop {
            let first = tokio::select! {
                _ = shutdown.changed() => return,
                m = self.rx.recv() => match m { Some(t) => t, None => return },
            };
            let Some(trigger) = settle(first, &mut self.rx).await else {
                return;
            };
            let reloader = self.reloader.clone();
            let _ = tokio::task::spawn_blocking(move || reloader.reload(trigger)).await;
            self.watch.follow(&self.reloader.watched_paths());
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_configmap_mount_resolves_through_both_links() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir(root.join("..2024_01")).unwrap();
        std::fs::write(root.join("..2024_01/config.yaml"), "a: 1").unwrap();
        symlink("..2024_01", root.join("..data")).unwrap();
        symlink("..data/config.yaml", root.join("config.yaml")).unwrap();
        let c = chain(&root.join("config.yaml"));
        assert_eq!(
            c,
            [
                root.join("config.yaml"),
                root.join("..data"),
                root.join("..2024_01/config.yaml")
            ]
        );
        let (_, dirs) = entries(&[root.join("config.yaml")]);
        assert_eq!(
            dirs.into_iter().collect::<Vec<_>>(),
            [root.clone(), root.join("..2024_01")]
        );
    }

    #[test]
    fn relative_and_absolute_links_and_missing_files() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir_all(root.join("srv/sub")).unwrap();
        symlink(root.join("srv/sub/../real.yaml"), root.join("etc.yaml")).unwrap();
        assert_eq!(
            chain(&root.join("etc.yaml")),
            [root.join("etc.yaml"), root.join("srv/real.yaml")]
        );
        assert_eq!(chain(&root.join("none.yaml")), [root.join("none.yaml")]);
        symlink("loop", root.join("loop")).unwrap();
        assert!(chain(&root.join("loop")).len() <= MAX_LINKS + 1);
    }
}
