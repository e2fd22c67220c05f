//! A real evod in a private temp directory, and `evoctl` run against it.

use std::fs::File;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::locations::bin;
use super::mcp::McpClient;
use super::process::{TempDir, ended, exit_within, outcome, started};
use super::wait::{eventually, holds_within, with_log};

/// A running evod with its own socket, config, cache and log.
pub struct Daemon {
    pub dir: TempDir,
    pub socket: PathBuf,
    pub config: PathBuf,
    pub cache: PathBuf,
    pub log: PathBuf,
    pub child: Option<Child>,
}

impl Daemon {
    /// Writes `config` and starts evod on it, waiting for its socket.
    pub fn start(config: &Value) -> Daemon {
        Self::start_with(config, &[], &[])
    }

    pub fn start_with(config: &Value, args: &[&str], env: &[(&str, &str)]) -> Daemon {
        let dir = TempDir::new("d");
        let config_path = dir.path().join("mcp.config.json");
        std::fs::write(&config_path, serde_json::to_vec_pretty(config).unwrap()).unwrap();
        Self::start_raw(dir, config_path, args, env)
    }

    pub fn start_raw(dir: TempDir, config: PathBuf, args: &[&str], env: &[(&str, &str)]) -> Daemon {
        let socket = dir.path().join("run").join("evod.sock");
        let cache = dir.path().join("cache");
        let log = dir.path().join("evod.log");
        let mut d = Daemon {
            socket,
            config,
            cache,
            log,
            child: None,
            dir,
        };
        d.spawn(args, env);
        d
    }

    pub fn spawn(&mut self, args: &[&str], env: &[(&str, &str)]) {
        let mut cmd = Command::new(bin("evod"));
        cmd.arg("--config")
            .arg(&self.config)
            .arg("--socket")
            .arg(&self.socket)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args)
            .env_remove("EVO_DISCOVERY_MODE")
            .env_remove("EVO_SOCKET")
            .env("EVO_LOG", "info,evo_daemon=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&self.log).unwrap());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("spawn evod");
        started(child.id());
        self.child = Some(child);
        self.wait_for_socket();
    }

    pub fn wait_for_socket(&self) {
        eventually(
            with_log(
                &format!("evod to listen on {}", self.socket.display()),
                &self.log,
            ),
            Duration::from_secs(20),
            || UnixStream::connect(&self.socket).is_ok(),
        );
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).expect("daemon running")
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Runs `evoctl --socket S ARGS...`: (exit code, stdout, stderr).
    pub fn ctl(&self, args: &[&str]) -> (i32, String, String) {
        ctl_at(&self.socket, args)
    }

    /// `evoctl ARGS --json`, parsed; panics unless it exits 0.
    pub fn ctl_json(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.push("--json");
        let (code, out, err) = self.ctl(&a);
        assert_eq!(
            code,
            0,
            "evoctl {args:?} failed: {err}\n{out}\nlog:\n{}",
            self.log_text()
        );
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("evoctl {args:?}: bad JSON ({e}): {out}"))
    }

    /// Polls `evoctl status --json` until `pred` holds.
    pub fn wait_status(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let mut s = Value::Null;
        if !holds_within(Duration::from_secs(30), || {
            s = self.ctl_json(&["status"]);
            pred(&s)
        }) {
            panic!(
                "timed out waiting for {what}; status: {s:#}\nlog:\n{}",
                self.log_text()
            );
        }
        s
    }

    /// Waits until every listed server is `ready`.
    pub fn wait_ready(&self, ids: &[&str]) -> Value {
        self.wait_status(&format!("servers {ids:?} ready"), |s| {
            ids.iter()
                .all(|id| server(s, id).is_some_and(|v| v["state"] == "ready"))
        })
    }

    /// Opens an MCP session through `evoctl shim` with extra shim args.
    pub fn session(&self, shim_args: &[&str]) -> McpClient {
        McpClient::spawn(&self.socket, shim_args)
    }

    /// An initialized legacy-mode session.
    pub fn legacy_session(&self) -> McpClient {
        let mut c = self.session(&["--mode", "legacy"]);
        c.initialize();
        c
    }

    pub fn stop(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        ended(child.id());
        // SAFETY: plain signal to our own child.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        exit_within(&mut child, Duration::from_secs(10)).or_else(|| {
            let _ = child.kill();
            child.wait().ok()
        })
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

pub fn ctl_at(socket: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin("evoctl"))
        .arg("--socket")
        .arg(socket)
        .args(args)
        .env_remove("EVO_SOCKET")
        .output()
        .expect("run evoctl");
    outcome(out)
}

/// Asserts that `session`, one entry of `sessions --json` (`report`, shown
/// on failure), has every stable key: present, `null` where it has no
/// value (`instance` without a shared store).
pub fn assert_stable_session_keys(session: &Value, report: &Value) {
    for key in [
        "id",
        "name",
        "mode",
        "activated",
        "last_active",
        "io",
        "era",
        "identity",
        "profile",
        "instance",
    ] {
        assert!(
            session.get(key).is_some(),
            "sessions --json lacks {key}: {report:#}"
        );
    }
}

/// The status entry of server `id`.
pub fn server<'a>(status: &'a Value, id: &str) -> Option<&'a Value> {
    status["servers"].as_array()?.iter().find(|s| s["id"] == id)
}
