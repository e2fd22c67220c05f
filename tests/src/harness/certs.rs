//! Certificates for TLS in tests, made one way: the `openssl` CLI (no
//! certificate crate is in the dependency tree, and the tests need only a
//! throwaway CA and one server certificate).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A throwaway CA and a server certificate for 127.0.0.1 (and localhost)
/// signed by it, written into `dir` as `ca.crt`, `server.crt` and
/// `server.key`; returns the CA's path. Panics when `openssl` fails.
pub fn ca_and_server_cert(dir: &Path) -> PathBuf {
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("run openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=evo test CA",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
    ]);
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
    ]);
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        "ext.cnf",
        "-out",
        "server.crt",
    ]);
    dir.join("ca.crt")
}
