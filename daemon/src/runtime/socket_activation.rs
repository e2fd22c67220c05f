//! systemd socket activation: when started by `evod.socket`, evod serves the
//! listeners it inherits (`LISTEN_FDS`/`LISTEN_PID`, from fd 3) instead of
//! binding its own, and leaves the socket file to systemd. A Unix socket is
//! the control socket; a TCP one (a second `ListenStream=127.0.0.1:8787`)
//! is the HTTP endpoint's.
//!
//! Each inherited descriptor is classified by its address family; a TCP one takes its settings from
//! `serve.http`, or the defaults. The unit's second `ListenStream` ships commented out: a TCP port
//! has no owner check.

/// The first descriptor systemd passes.
#[cfg(unix)]
const SD_LISTEN_FDS_START: i32 = 3;

/// The listeners systemd passed, by kind.
#[derive(Debug, Default)]
pub struct Inherited {
    /// The control socket (a Unix stream socket).
    #[cfg(unix)]
    pub control: Option<std::os::fd::OwnedFd>,
    /// HTTP listeners (TCP stream sockets).
    pub http: Vec<std::net::TcpListener>,
}

/// The socket's address family, if it is a socket at all.
#[cfg(unix)]
fn family(fd: i32) -> Option<i32> {
    // SAFETY: a zeroed sockaddr_storage is a valid out-buffer, and `len`
    // says its size; getsockname only writes within it.
    unsafe {
        let mut addr: libc::sockaddr_storage = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        if libc::getsockname(fd, (&raw mut addr).cast(), &mut len) < 0 {
            return None;
        }
        Some(i32::from(addr.ss_family))
    }
}

/// Takes the inherited listeners, if systemd passed any to this process,
/// and clears the variables so children never see them. Call before any
/// thread starts (it edits the environment).
#[cfg(unix)]
pub fn take_inherited() -> Inherited {
    use std::os::fd::FromRawFd;
    let mut inherited = Inherited::default();
    let (Ok(pid), Ok(fds)) = (std::env::var("LISTEN_PID"), std::env::var("LISTEN_FDS")) else {
        return inherited;
    };
    // SAFETY: called from main before any other thread exists, as required
    // for environment edits.
    unsafe {
        std::env::remove_var("LISTEN_PID");
        std::env::remove_var("LISTEN_FDS");
        std::env::remove_var("LISTEN_FDNAMES");
    }
    if pid.parse::<u32>().ok() != Some(std::process::id()) {
        return inherited;
    }
    let n: i32 = fds.parse().unwrap_or(0);
    for fd in SD_LISTEN_FDS_START..SD_LISTEN_FDS_START.saturating_add(n.clamp(0, 16)) {
        // SAFETY: fcntl F_GETFD only queries the descriptor.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            tracing::warn!(fd, "LISTEN_FDS names fd {fd}, which is not open; skipped");
            continue;
        }
        // Not inherited by children.
        // SAFETY: fcntl on a descriptor systemd handed this process.
        unsafe {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
        let kind = family(fd);
        // SAFETY: systemd hands this process fds 3.. as open listening
        // sockets; each is taken into sole ownership here, once.
        let owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        match kind {
            Some(libc::AF_UNIX) if inherited.control.is_none() => inherited.control = Some(owned),
            Some(libc::AF_INET | libc::AF_INET6) => {
                inherited.http.push(std::net::TcpListener::from(owned));
            }
            _ => tracing::warn!(fd, "systemd passed a socket evod has no use for; closed"),
        }
    }
    inherited
}

#[cfg(not(unix))]
pub fn take_inherited() -> Inherited {
    Inherited::default()
}

/// The inherited socket as the control listener.
#[cfg(unix)]
pub fn listener(
    fd: std::os::fd::OwnedFd,
) -> std::io::Result<interprocess::local_socket::tokio::Listener> {
    let uds = interprocess::os::unix::uds_local_socket::tokio::Listener::try_from(fd)?;
    Ok(interprocess::local_socket::tokio::Listener::UdSocket(uds))
}

/// Was evod started by systemd (logs go to the journal, which stamps time)?
pub fn under_systemd() -> bool {
    std::env::var_os("JOURNAL_STREAM").is_some() || std::env::var_os("INVOCATION_ID").is_some()
}
