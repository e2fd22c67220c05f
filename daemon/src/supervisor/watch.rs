//! Watching the config and permissions files for hot reload. Editors save in
//! place or write a temp file and rename it over the original, which replaces
//! the inode, so the watch is on the parent directories, filtered by name,
//! debounced, and reported to the Supervisor as one `FileChanged`.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use actix::{Message, Recipient};
use notify::RecursiveMode;
use notify_debouncer_full::{DebounceEventResult, Debouncer, RecommendedCache, new_debouncer};

/// A watched file changed (config, env or permissions): the owner reloads.
#[derive(Message)]
#[rtype(result = "()")]
pub struct FileChanged;

/// Changes within this window are applied once.
const DEBOUNCE: Duration = Duration::from_millis(200);

/// Keeps the watch alive; dropping it stops watching.
pub type Watcher = Debouncer<notify::RecommendedWatcher, RecommendedCache>;

/// Watches `files` (their directories need not hold them yet).
pub fn watch(files: Vec<PathBuf>, to: Recipient<FileChanged>) -> notify::Result<Watcher> {
    let names: BTreeSet<std::ffi::OsString> = files
        .iter()
        .filter_map(|f| f.file_name().map(|n| n.to_owned()))
        .collect();
    let dirs: BTreeSet<PathBuf> = files
        .iter()
        .map(|f| match f.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        })
        .collect();
    let mut debouncer = new_debouncer(DEBOUNCE, None, move |result: DebounceEventResult| {
        let Ok(events) = result else { return };
        let relevant = events.iter().any(|e| {
            !matches!(e.kind, notify::EventKind::Access(_))
                && e.paths
                    .iter()
                    .any(|p| p.file_name().is_some_and(|n| names.contains(n)))
        });
        if relevant {
            to.do_send(FileChanged);
        }
    })?;
    for dir in dirs {
        if let Err(e) = debouncer.watch(&dir, RecursiveMode::NonRecursive) {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot watch directory for config changes");
        }
    }
    Ok(debouncer)
}
