//! Handing the client's stdio to the daemon (Unix only).
//!
//! A shim whose stdin and stdout are pipes or sockets offers them in its
//! [`Hello`](crate::Hello) (`stdio: true`). When the daemon accepts
//! ([`Welcome::stdio`](crate::Welcome)), the shim sends both descriptors
//! over the control socket (`SCM_RIGHTS`, one marker byte) and the daemon
//! reads and writes the client's MCP lines itself: two process hops fewer on
//! every message. The shim stays as the session's lifeline: the session ends
//! when either side closes the control socket.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// The byte that carries the descriptors (`SCM_RIGHTS` needs a payload).
pub const MARKER: u8 = b'F';
/// Descriptors one handoff carries: stdin, then stdout.
pub const STDIO_FDS: usize = 2;

/// Whether `fd` is a pipe or a socket: descriptors the daemon can poll.
/// Terminals and files stay with the shim, which copies them.
pub fn pollable(fd: BorrowedFd<'_>) -> bool {
    // SAFETY: `stat` is plain data; fstat fills it or fails.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is a valid descriptor for the borrow's lifetime.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return false;
    }
    matches!(st.st_mode & libc::S_IFMT, libc::S_IFIFO | libc::S_IFSOCK)
}

fn one_byte(byte: &mut [u8; 1]) -> libc::iovec {
    libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    }
}

/// A message of the byte in `iov` with `control` for ancillary data. The
/// pointers it holds borrow both: use it while they live.
fn message(iov: &mut libc::iovec, control: &mut [u8]) -> libc::msghdr {
    // SAFETY: msghdr is plain data; all-zero is a valid empty message.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = control.len() as _;
    msg
}

/// Sends `fds` over the Unix socket `sock` with one [`MARKER`] byte.
pub fn send_fds(sock: BorrowedFd<'_>, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
    let bytes = std::mem::size_of_val(raw.as_slice());
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(bytes as u32) } as usize;
    let mut control = vec![0u8; space];
    let mut marker = [MARKER];
    let mut iov = one_byte(&mut marker);
    let msg = message(&mut iov, &mut control);
    // SAFETY: the control buffer has room for one header holding `bytes`
    // (CMSG_SPACE above), so CMSG_FIRSTHDR is non-null and CMSG_DATA points
    // inside it.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(bytes as u32) as _;
        std::ptr::copy_nonoverlapping(raw.as_ptr().cast::<u8>(), libc::CMSG_DATA(cmsg), bytes);
    }
    loop {
        // SAFETY: `msg` is fully initialised and its buffers are live.
        let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if n == 1 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if n < 0 && e.kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return Err(if n < 0 {
            e
        } else {
            io::ErrorKind::WriteZero.into()
        });
    }
}

/// Receives the descriptors sent by [`send_fds`] (at most `max`) without
/// blocking: `WouldBlock` when nothing has arrived yet. Anything else than one
/// [`MARKER`] byte carrying descriptors is an error; descriptors received
/// with it are closed.
pub fn recv_fds(sock: BorrowedFd<'_>, max: usize) -> io::Result<Vec<OwnedFd>> {
    let bytes = max * std::mem::size_of::<RawFd>();
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(bytes as u32) } as usize;
    let mut control = vec![0u8; space];
    let mut byte = [0u8; 1];
    let mut iov = one_byte(&mut byte);
    let mut msg = message(&mut iov, &mut control);
    let n = loop {
        // SAFETY: `msg` is fully initialised and its buffers are live.
        let n = unsafe {
            libc::recvmsg(
                sock.as_raw_fd(),
                &mut msg,
                libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
            )
        };
        if n >= 0 {
            break n;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    let mut fds = Vec::new();
    // SAFETY: the kernel filled `msg` and its control buffer; the CMSG macros
    // walk only within `msg_controllen`, and every descriptor in an
    // SCM_RIGHTS message is ours to own.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg);
                let len = (*cmsg).cmsg_len as usize - (data as usize - cmsg as usize);
                for i in 0..len / std::mem::size_of::<RawFd>() {
                    let fd = std::ptr::read_unaligned(data.cast::<RawFd>().add(i));
                    fds.push(OwnedFd::from_raw_fd(fd));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    if n == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    if byte[0] != MARKER || msg.msg_flags & libc::MSG_CTRUNC != 0 || fds.len() != max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "expected {max} descriptors with the handoff byte, got {} (byte {:#04x})",
                fds.len(),
                byte[0]
            ),
        ));
    }
    Ok(fds)
}

/// `fd`'s open file description flags.
fn status_flags(fd: BorrowedFd<'_>) -> io::Result<libc::c_int> {
    // SAFETY: fcntl on a valid descriptor with integer arguments.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(flags)
}

/// Is `O_NONBLOCK` set on `fd`'s open file description?
pub fn is_nonblocking(fd: BorrowedFd<'_>) -> io::Result<bool> {
    Ok(status_flags(fd)? & libc::O_NONBLOCK != 0)
}

/// Sets or clears `O_NONBLOCK` on `fd`'s open file description.
pub fn set_nonblocking(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    let flags = status_flags(fd)?;
    let new = if on {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    // SAFETY: fcntl on a valid descriptor with integer arguments.
    if new != flags && unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, new) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn descriptors_cross_a_socket_and_stay_usable() {
        let (a, b) = UnixStream::pair().unwrap();
        let (mut pr, mut pw) = std::io::pipe().unwrap();
        assert!(pollable(pr.as_fd()) && pollable(a.as_fd()));
        assert!(matches!(
            recv_fds(b.as_fd(), 2),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock
        ));
        send_fds(a.as_fd(), &[pr.as_fd(), pw.as_fd()]).unwrap();
        let fds = recv_fds(b.as_fd(), 2).unwrap();
        let mut r = std::fs::File::from(fds.into_iter().next().unwrap());
        pw.write_all(b"hi").unwrap();
        drop(pw);
        let mut got = [0u8; 2];
        r.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hi");
        let _ = pr.read(&mut got);
    }

    #[test]
    fn plain_bytes_or_a_closed_peer_are_errors() {
        let (mut a, b) = UnixStream::pair().unwrap();
        a.write_all(b"x").unwrap();
        let e = recv_fds(b.as_fd(), 2).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        drop(a);
        let e = recv_fds(b.as_fd(), 2).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        let f = std::fs::File::open("/dev/null").unwrap();
        assert!(!pollable(f.as_fd()));
    }
}
