//! The one way the daemon replaces a file: whole or not at all, and, for
//! files only their owner may read (the API tokens file, the console's
//! sign-ins, OAuth token files), never readable by others, even for a
//! moment.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Who may read a file written by [`write()`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Mode 0600 from the temporary file's creation; a missing parent
    /// directory is made 0700 (an existing one is left as is).
    OwnerOnly,
    /// The process's default (0666 less the umask); a missing parent
    /// directory is made with the default mode too.
    Default,
}

/// Writes `bytes` to `path` so a reader sees the old file or the new one,
/// never a torn one: a temporary file of its own beside it (concurrent
/// writers of one path do not share it), synced, renamed over `path`, and
/// the directory synced so the rename survives a crash.
pub fn write(path: &Path, bytes: &[u8], mode: Mode) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.exists() {
        match mode {
            Mode::OwnerOnly => make_dir(dir)?,
            Mode::Default => std::fs::create_dir_all(dir)?,
        }
    }
    let tmp = temporary_beside(dir, path);
    let written = write_synced(&tmp, bytes, mode).and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// A name in `dir` no other write uses: `.NAME.PID.SEQ.tmp`.
fn temporary_beside(dir: &Path, path: &Path) -> PathBuf {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(".{name}.{}.{seq}.tmp", std::process::id()))
}

fn write_synced(tmp: &Path, bytes: &[u8], mode: Mode) -> std::io::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if mode == Mode::OwnerOnly {
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut out = options.open(tmp)?;
    out.write_all(bytes)?;
    out.sync_all()
}

/// Makes `dir` (with its parents) mode 0700, and sets an existing `dir` to
/// 0700: for a directory that holds secrets only.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    make_dir(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

fn make_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};

    use super::{Mode, private_dir, temporary_beside, write};

    fn scratch(what: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("evo-{what}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).map_or(0, |m| m.permissions().mode() & 0o777)
    }

    /// Names in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    #[test]
    fn files_are_the_owners_alone_and_replaced_whole() {
        let dir = scratch("private");
        let path = dir.join("sub").join("secret.json");
        write(&path, b"one", Mode::OwnerOnly).expect("written");
        write(&path, b"two", Mode::OwnerOnly).expect("written again");
        assert_eq!(std::fs::read(&path).unwrap_or_default(), b"two");
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir.join("sub")), 0o700);
        assert_eq!(names(&dir.join("sub")), vec!["secret.json".to_string()]);
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755));
        private_dir(&dir).expect("made private");
        assert_eq!(mode(&dir), 0o700);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn default_files_follow_the_umask_and_each_write_has_its_own_temporary() {
        let dir = scratch("atomic");
        let path = dir.join("catalog.json");
        write(&path, b"one", Mode::Default).expect("written");
        write(&path, b"two", Mode::Default).expect("written again");
        assert_eq!(std::fs::read(&path).unwrap_or_default(), b"two");
        // The umask is the test runner's: compare with a file made the
        // ordinary way.
        let plain = dir.join("plain");
        std::fs::write(&plain, b"").expect("plain file");
        assert_eq!(mode(&path), mode(&plain));
        assert_eq!(
            names(&dir),
            vec!["catalog.json".to_string(), "plain".to_string()]
        );
        let first = temporary_beside(&dir, &path);
        let second = temporary_beside(&dir, &path);
        assert_ne!(first, second);
        assert_eq!(first.parent(), Some(dir.as_path()));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
