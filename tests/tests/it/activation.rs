//! Socket activation: evod serves a listener inherited the way systemd
//! passes one (fd 3, LISTEN_FDS, LISTEN_PID), without systemd itself.

use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use evo_tests::harness::{
    daemon::{ctl_at, server},
    http::{HttpMcp, result_text},
    locations::bin,
    mcp::McpClient,
    process::TempDir,
    servers::fixture_server,
    wait::{eventually, with_log},
};
use serde_json::json;

#[test]
fn evod_serves_an_inherited_socket() {
    let dir = TempDir::new("act");
    let socket = dir.path().join("evod.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let fd = listener.as_raw_fd();
    let cfg = dir.path().join("mcp.config.json");
    std::fs::write(
        &cfg,
        serde_json::to_vec(&json!({"mcpServers": {"fx": fixture_server(&[])}})).unwrap(),
    )
    .unwrap();
    let log = std::fs::File::create(dir.path().join("evod.log")).unwrap();
    let mut cmd = Command::new("sh");
    // `$$` is the shell's pid, which `exec` hands to evod: LISTEN_PID matches.
    cmd.arg("-c")
        .arg("LISTEN_PID=$$ LISTEN_FDS=1 exec \"$0\" \"$@\"")
        .arg(bin("evod"))
        .arg("--config")
        .arg(&cfg)
        .arg("--cache-dir")
        .arg(dir.path().join("cache"))
        .arg("--socket")
        .arg(dir.path().join("unused.sock"))
        .env_remove("EVO_SOCKET")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    // SAFETY: dup2 between fork and exec, on fds we own.
    unsafe {
        cmd.pre_exec(move || {
            if fd == 3 {
                // Already in place: just let it survive exec.
                libc::fcntl(3, libc::F_SETFD, 0);
            } else if libc::dup2(fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    /// Kills evod if the test fails before stopping it.
    struct Running(std::process::Child);
    impl Drop for Running {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = Running(cmd.spawn().unwrap());
    drop(listener);
    let log_path = dir.path().join("evod.log");
    let log_text = || std::fs::read_to_string(&log_path).unwrap_or_default();
    eventually(
        with_log("evod to serve fx on the inherited socket", &log_path),
        Duration::from_secs(10),
        || {
            let (code, out, _) = ctl_at(&socket, &["status", "--json"]);
            code == 0
                && serde_json::from_str::<serde_json::Value>(&out)
                    .is_ok_and(|s| server(&s, "fx").is_some_and(|v| v["state"] == "ready"))
        },
    );
    assert!(log_text().contains("socket activation"));
    assert!(
        !dir.path().join("unused.sock").exists(),
        "it did not bind its own socket"
    );
    let mut c = McpClient::spawn(&socket, &["--mode", "legacy", "--no-autostart"]);
    c.initialize();
    let (v, _) = c.call_text("fx_env", json!({"name": "LISTEN_FDS"}));
    assert_eq!(
        v, "<unset>",
        "children do not inherit the activation variables"
    );
    let (code, _, _) = ctl_at(&socket, &["stop"]);
    assert_eq!(code, 0);
    assert!(child.0.wait().unwrap().success());
    assert!(
        socket.exists(),
        "the socket file belongs to systemd and stays"
    );
}

/// A second socket systemd passes (`ListenStream=127.0.0.1:PORT`) is the
/// HTTP endpoint's: evod serves MCP over HTTP on it, with the config's
/// `serve.http` settings, beside the control socket.
#[test]
fn evod_serves_http_on_an_inherited_tcp_socket() {
    let dir = TempDir::new("acth");
    let socket = dir.path().join("evod.sock");
    let control = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let http = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = http.local_addr().unwrap().port();
    let cfg = dir.path().join("mcp.config.json");
    std::fs::write(
        &cfg,
        serde_json::to_vec(&json!({"mcpServers": {"fx": fixture_server(&[])},
                                   "serve": {"http": {"listen": "127.0.0.1:1"}}}))
        .unwrap(),
    )
    .unwrap();
    let log_path = dir.path().join("evod.log");
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("LISTEN_PID=$$ LISTEN_FDS=2 exec \"$0\" \"$@\"")
        .arg(bin("evod"))
        .arg("--config")
        .arg(&cfg)
        .arg("--cache-dir")
        .arg(dir.path().join("cache"))
        .arg("--socket")
        .arg(dir.path().join("unused.sock"))
        .arg("--mode")
        .arg("legacy")
        .env_remove("EVO_SOCKET")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap());
    let (unix_fd, tcp_fd) = (control.as_raw_fd(), http.as_raw_fd());
    // SAFETY: fcntl/dup2 between fork and exec, on fds we own: both are
    // first moved above 3 and 4 so neither is overwritten before it moves.
    unsafe {
        cmd.pre_exec(move || {
            let a = libc::fcntl(unix_fd, libc::F_DUPFD, 100);
            let b = libc::fcntl(tcp_fd, libc::F_DUPFD, 100);
            if a < 0 || b < 0 || libc::dup2(a, 3) < 0 || libc::dup2(b, 4) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    struct Running(std::process::Child);
    impl Drop for Running {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = Running(cmd.spawn().unwrap());
    drop((control, http));
    eventually(
        with_log("evod to serve fx on the inherited sockets", &log_path),
        Duration::from_secs(10),
        || {
            let (code, out, _) = ctl_at(&socket, &["status", "--json"]);
            code == 0
                && serde_json::from_str::<serde_json::Value>(&out)
                    .is_ok_and(|s| server(&s, "fx").is_some_and(|v| v["state"] == "ready"))
        },
    );
    let (_, out, _) = ctl_at(&socket, &["status", "--json"]);
    let status: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        status["http"]["listen"],
        format!("127.0.0.1:{port}"),
        "the inherited TCP socket, not serve.http.listen: {status:#}"
    );
    let mut mcp = HttpMcp::initialize(port, None);
    let r = mcp.call("fx_echo", json!({"text": "activated"}));
    assert_eq!(result_text(&r), "activated");
    let (code, _, _) = ctl_at(&socket, &["stop"]);
    assert_eq!(code, 0);
    assert!(child.0.wait().unwrap().success());
}
