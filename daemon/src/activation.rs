//! systemd socket activation: when started by `evod.socket`, evod serves the
//! listener it inherits (`LISTEN_FDS`/`LISTEN_PID`, first fd 3) instead of
//! binding its own, and leaves the socket file to systemd.

/// The first descriptor systemd passes.
#[cfg(unix)]
const SD_LISTEN_FDS_START: i32 = 3;

/// Takes the inherited listener, if systemd passed one to this process, and
/// clears the variables so children never see them. Call before any thread
/// starts (it edits the environment).
#[cfg(unix)]
pub fn take_inherited() -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let pid = std::env::var("LISTEN_PID").ok()?;
    let fds = std::env::var("LISTEN_FDS").ok()?;
    // SAFETY: called from main before any other thread exists, as required
    // for environment edits.
    unsafe {
        std::env::remove_var("LISTEN_PID");
        std::env::remove_var("LISTEN_FDS");
        std::env::remove_var("LISTEN_FDNAMES");
    }
    if pid.parse::<u32>().ok()? != std::process::id() {
        return None;
    }
    let n: i32 = fds.parse().ok()?;
    if n < 1 {
        return None;
    }
    if n > 1 {
        tracing::warn!(fds = n, "systemd passed several sockets; serving the first");
    }
    // SAFETY: fcntl F_GETFD only queries the descriptor.
    if unsafe { libc::fcntl(SD_LISTEN_FDS_START, libc::F_GETFD) } < 0 {
        tracing::warn!("LISTEN_FDS is set but fd 3 is not open; binding our own socket");
        return None;
    }
    // SAFETY: systemd hands this process fd 3 as an open listening socket;
    // we take sole ownership of it here, once.
    let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(SD_LISTEN_FDS_START) };
    // Not inherited by children.
    // SAFETY: fcntl on an fd we own.
    unsafe {
        libc::fcntl(SD_LISTEN_FDS_START, libc::F_SETFD, libc::FD_CLOEXEC);
    }
    Some(fd)
}

#[cfg(not(unix))]
pub fn take_inherited() -> Option<std::convert::Infallible> {
    None
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
