//! Where the control socket lives, and how to listen on and connect to it.
//!
//! Resolution, strongest first: `--socket PATH`, `EVO_SOCKET`,
//! `$XDG_RUNTIME_DIR/evo/evod.sock`, `/tmp/evo-$UID/evod.sock`; on Windows the
//! named pipe `\\.\pipe\evod-$USER`.

use std::io;
use std::path::{Path, PathBuf};

use interprocess::local_socket::Stream as BlockingStream;
use interprocess::local_socket::tokio::{Listener, Stream};
use interprocess::local_socket::traits::Stream as _;
use interprocess::local_socket::traits::tokio::Stream as _;
use interprocess::local_socket::{ListenerOptions, Name};

/// The cache directory for `explicit` (evod's `--cache-dir`), else
/// `EVO_CACHE_DIR`, else `$XDG_CACHE_HOME/evo`, else `~/.cache/evo`. evod
/// keeps its catalog and embeddings there; `evoctl model pull` its models.
pub fn cache_dir(explicit: Option<&Path>) -> PathBuf {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    explicit
        .map(Path::to_path_buf)
        .or_else(|| env("EVO_CACHE_DIR"))
        .unwrap_or_else(|| {
            env("XDG_CACHE_HOME")
                .unwrap_or_else(|| {
                    env("HOME")
                        .unwrap_or_else(|| PathBuf::from("."))
                        .join(".cache")
                })
                .join("evo")
        })
}

/// Where `evoctl model pull ID` puts model `ID` (`org/name`) under the
/// cache directory: `models/org--name`, the id's characters other than
/// letters, digits, `.`, `_` and `-` made `-`.
pub fn model_dir(cache_dir: &Path, id: &str) -> PathBuf {
    let folder: String = id
        .trim_matches('/')
        .split('/')
        .map(|part| {
            part.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || "._-".contains(c) {
                        c
                    } else {
                        '-'
                    }
                })
                .collect::<String>()
                .trim_start_matches('.')
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("--");
    cache_dir.join("models").join(folder)
}

/// The socket path for `explicit` (a `--socket` flag) or the environment.
pub fn socket_path(explicit: Option<&Path>) -> PathBuf {
    socket_path_with(explicit, &|k| std::env::var_os(k))
}

/// [`socket_path`] with the environment passed in, for tests.
pub fn socket_path_with(
    explicit: Option<&Path>,
    env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> PathBuf {
    if let Some(p) = explicit {
        return p.to_path_buf();
    }
    if let Some(p) = env("EVO_SOCKET").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    default_socket_path(env)
}

#[cfg(unix)]
fn default_socket_path(env: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> PathBuf {
    if let Some(dir) = env("XDG_RUNTIME_DIR").filter(|p| !p.is_empty()) {
        return PathBuf::from(dir).join("evo").join("evod.sock");
    }
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    PathBuf::from(format!("/tmp/evo-{uid}/evod.sock"))
}

#[cfg(windows)]
fn default_socket_path(env: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> PathBuf {
    let user = env("USERNAME")
        .or_else(|| env("USER"))
        .map(|u| u.to_string_lossy().into_owned())
        .unwrap_or_else(|| "default".into());
    PathBuf::from(format!(r"\\.\pipe\evod-{user}"))
}

#[cfg(unix)]
fn socket_name(path: &Path) -> io::Result<Name<'static>> {
    use interprocess::local_socket::{GenericFilePath, ToFsName};
    path.to_path_buf().to_fs_name::<GenericFilePath>()
}

#[cfg(windows)]
fn socket_name(path: &Path) -> io::Result<Name<'static>> {
    use interprocess::local_socket::{GenericNamespaced, ToNsName};
    let s = path.to_string_lossy();
    let name = s.strip_prefix(r"\\.\pipe\").unwrap_or(&s).to_string();
    name.to_ns_name::<GenericNamespaced>()
}

/// Connects to the daemon at `path`.
pub async fn connect(path: &Path) -> io::Result<Stream> {
    Stream::connect(socket_name(path)?).await
}

/// Connects to the daemon at `path` with blocking I/O (the shim's byte pump
/// runs on plain threads: no runtime between the client and the socket).
pub fn connect_blocking(path: &Path) -> io::Result<BlockingStream> {
    BlockingStream::connect(socket_name(path)?)
}

/// Binds the control socket at `path`: a missing directory is created 0700
/// (an existing one keeps its mode: `--socket /tmp/x.sock` must not lock
/// others out of `/tmp`; the socket's own 0600 and the peer-uid check guard
/// it), the socket is 0600. Refuses to replace a socket a live daemon
/// answers on, and anything that is not a socket; removes a stale socket.
pub async fn listen(path: &Path) -> io::Result<Listener> {
    #[cfg(unix)]
    {
        use interprocess::os::unix::local_socket::ListenerOptionsExt;
        use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if !meta.file_type().is_socket() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!(
                        "{} exists and is not a socket; evod will not replace it: choose another --socket or move that file",
                        path.display()
                    ),
                ));
            }
            if connect(path).await.is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!(
                        "another evod is already listening on {}; stop it with `evoctl stop` or choose another --socket",
                        path.display()
                    ),
                ));
            }
            std::fs::remove_file(path)?;
        }
        let listener = ListenerOptions::new()
            .name(socket_name(path)?)
            .mode(0o600)
            .create_tokio()?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        Ok(listener)
    }
    #[cfg(windows)]
    {
        ListenerOptions::new()
            .name(socket_name(path)?)
            .create_tokio()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::ffi::OsString;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let map: HashMap<String, OsString> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    #[cfg(unix)]
    fn resolution_order() {
        let explicit = Path::new("/x/y.sock");
        let all = env_of(&[
            ("EVO_SOCKET", "/e/s.sock"),
            ("XDG_RUNTIME_DIR", "/run/user/7"),
        ]);
        assert_eq!(socket_path_with(Some(explicit), &all), explicit);
        assert_eq!(socket_path_with(None, &all), Path::new("/e/s.sock"));
        let xdg = env_of(&[("XDG_RUNTIME_DIR", "/run/user/7")]);
        assert_eq!(
            socket_path_with(None, &xdg),
            Path::new("/run/user/7/evo/evod.sock")
        );
        let none = env_of(&[("EVO_SOCKET", "")]);
        let uid = unsafe { libc::getuid() };
        assert_eq!(
            socket_path_with(None, &none),
            PathBuf::from(format!("/tmp/evo-{uid}/evod.sock"))
        );
    }
}
