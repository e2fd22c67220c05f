//! A redis-server of a test's own: on a free loopback port with its own data
//! directory (and, asked, a password or TLS with a throwaway CA), killed on
//! drop.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::certs::ca_and_server_cert;
use super::ports::free_port;
use super::process::{TempDir, ended, on_path, started};
use super::skipped;
use super::wait::eventually;

/// A redis-server of a test's own.
pub struct Redis {
    pub port: u16,
    pub dir: TempDir,
    pub password: Option<String>,
    /// `rediss://`: the CA that signed its certificate.
    pub tls_ca: Option<PathBuf>,
    args: Vec<String>,
    child: Option<Child>,
}

impl Redis {
    /// A plain redis-server, or `None` (after saying "skipped") without one.
    pub fn start(test: &str) -> Option<Redis> {
        Self::start_with(test, None, false)
    }

    pub fn start_with(test: &str, password: Option<&str>, tls: bool) -> Option<Redis> {
        if !on_path("redis-server") || !on_path("redis-cli") {
            skipped(&format!(
                "{test}: redis-server / redis-cli not on PATH (apt-get install redis-server)"
            ));
            return None;
        }
        if tls && !on_path("openssl") {
            skipped(&format!(
                "{test}: openssl not on PATH (to make a throwaway CA)"
            ));
            return None;
        }
        let dir = TempDir::new("redis");
        let port = free_port();
        let mut args: Vec<String> = vec![
            "--bind".into(),
            "127.0.0.1".into(),
            "--dir".into(),
            dir.path().display().to_string(),
            "--save".into(),
            String::new(),
            // Durable across a restart of Redis itself (the fault tests).
            "--appendonly".into(),
            "yes".into(),
            "--appendfsync".into(),
            "always".into(),
            "--daemonize".into(),
            "no".into(),
        ];
        if let Some(p) = password {
            args.extend(["--requirepass".into(), p.into()]);
        }
        let mut tls_ca = None;
        if tls {
            let ca = ca_and_server_cert(dir.path());
            args.extend([
                "--port".into(),
                "0".into(),
                "--tls-port".into(),
                port.to_string(),
                "--tls-cert-file".into(),
                dir.path().join("server.crt").display().to_string(),
                "--tls-key-file".into(),
                dir.path().join("server.key").display().to_string(),
                "--tls-ca-cert-file".into(),
                ca.display().to_string(),
                "--tls-auth-clients".into(),
                "no".into(),
            ]);
            tls_ca = Some(ca);
        } else {
            args.extend(["--port".into(), port.to_string()]);
        }
        let mut r = Redis {
            port,
            dir,
            password: password.map(str::to_owned),
            tls_ca,
            args,
            child: None,
        };
        r.spawn();
        Some(r)
    }

    fn spawn(&mut self) {
        let log = File::create(self.dir.path().join("redis.log")).unwrap();
        let child = Command::new("redis-server")
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        started(child.id());
        self.child = Some(child);
        eventually(
            "redis-server to answer PING",
            Duration::from_secs(10),
            || self.cli(&["PING"]).trim() == "PONG",
        );
    }

    /// `redis://127.0.0.1:PORT` (with the password, `rediss` with TLS).
    pub fn url(&self) -> String {
        let scheme = if self.tls_ca.is_some() {
            "rediss"
        } else {
            "redis"
        };
        match &self.password {
            Some(p) => format!("{scheme}://:{p}@127.0.0.1:{}", self.port),
            None => format!("{scheme}://127.0.0.1:{}", self.port),
        }
    }

    /// `redis-cli` against it: its output.
    pub fn cli(&self, args: &[&str]) -> String {
        let mut cmd = Command::new("redis-cli");
        cmd.args(["-h", "127.0.0.1", "-p", &self.port.to_string()]);
        if let Some(p) = &self.password {
            cmd.args(["-a", p, "--no-auth-warning"]);
        }
        if let Some(ca) = &self.tls_ca {
            cmd.arg("--tls").arg("--cacert").arg(ca);
        }
        cmd.args(args);
        cmd.output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    /// Every key and its value (strings, hashes, lists, sets), as text.
    pub fn dump(&self) -> String {
        let mut all = String::new();
        for key in self.cli(&["--scan"]).lines() {
            let kind = self.cli(&["TYPE", key]);
            let value = match kind.trim() {
                "string" => self.cli(&["GET", key]),
                "hash" => self.cli(&["HGETALL", key]),
                "set" => self.cli(&["SMEMBERS", key]),
                "list" => self.cli(&["LRANGE", key, "0", "-1"]),
                "zset" => self.cli(&["ZRANGE", key, "0", "-1"]),
                "stream" => self.cli(&["XRANGE", key, "-", "+"]),
                other => format!("({other})"),
            };
            all.push_str(&format!("{key} = {value}\n"));
        }
        all
    }

    /// SIGKILL (no goodbye to clients).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            ended(c.id());
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Started again on the same port and data.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}
