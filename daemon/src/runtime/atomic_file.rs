//! Files only their owner may read: the API tokens file, the console's
//! sign-ins, OAuth token files. One way to write them, so none is ever
//! readable by others, even for a moment, and none is left half written.

use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` atomically (a temporary file beside it, synced,
/// then renamed over it), mode 0600 from the temporary file's creation. A
/// missing parent directory is made 0700; an existing one is left as is.
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && !dir.exists()
    {
        make_dir(dir)?;
    }
    let tmp = path.with_extension("json.tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut out = options.open(&tmp)?;
    out.write_all(bytes)?;
    out.sync_all()?;
    drop(out);
    std::fs::rename(&tmp, path)
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
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn files_are_the_owners_alone_and_replaced_whole() {
        let dir = std::env::temp_dir().join(format!("evo-private-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("sub").join("secret.json");
        super::write(&path, b"one").expect("written");
        super::write(&path, b"two").expect("written again");
        assert_eq!(std::fs::read(&path).unwrap_or_default(), b"two");
        let mode = |p: &std::path::Path| {
            std::fs::metadata(p).map_or(0, |m| m.permissions().mode() & 0o777)
        };
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir.join("sub")), 0o700);
        assert!(!path.with_extension("json.tmp").exists());
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755));
        super::private_dir(&dir).expect("made private");
        assert_eq!(mode(&dir), 0o700);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
