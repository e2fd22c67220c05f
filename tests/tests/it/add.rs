//! `evoctl add` against a registry served by the test from recorded `server.json` records
//! (`tests/fixtures/registry`): the listing, the entry each kind of record becomes, the
//! published npm and PyPI servers starting under a real evod, and the refusals (a missing
//! required variable, an id taken, docker without `--allow-docker`, an invalid record, a record
//! evo cannot run, an unreachable registry).

use std::path::{Path, PathBuf};
use std::process::Command;

use evo_tests::harness::daemon::{Daemon, ctl_at, server};
use evo_tests::harness::locations::{bin, repo_root};
use evo_tests::harness::ports::free_port;
use evo_tests::harness::process::{TempDir, on_path};
use evo_tests::harness::registry::FakeRegistry;
use evo_tests::harness::skipped;
use serde_json::{Value, json};

const AIRTABLE: &str = "io.github.domdomegg/airtable-mcp-server";
const TIME: &str = "io.github.modelcontextprotocol/mcp-server-time";

/// A config naming `registry` as `registry.url`, in a fresh directory with no evod.
struct Setup {
    dir: TempDir,
    config: PathBuf,
    socket: PathBuf,
}

impl Setup {
    fn new(registry_url: &str) -> Setup {
        let dir = TempDir::new("add");
        let config = dir.path().join("mcp.config.json");
        let doc = json!({"registry": {"url": registry_url}, "mcpServers": {}});
        std::fs::write(&config, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
        let socket = dir.path().join("run/evod.sock");
        Setup {
            dir,
            config,
            socket,
        }
    }

    fn add(&self, args: &[&str]) -> (i32, String, String) {
        let mut all = vec!["add", "--config", self.config.to_str().unwrap()];
        all.extend_from_slice(args);
        ctl_at(&self.socket, &all)
    }

    fn add_json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.push("--json");
        let (code, out, err) = self.add(&all);
        assert_eq!(code, 0, "evoctl add {args:?}: {err}\n{out}");
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
    }

    fn config(&self) -> Value {
        read_json(&self.config)
    }
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn add_in(d: &Daemon, args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["add", "--config", d.config.to_str().unwrap()];
    all.extend_from_slice(args);
    d.ctl(&all)
}

#[test]
fn a_search_lists_names_versions_and_transports() {
    let registry = FakeRegistry::recorded();
    let s = Setup::new(&registry.url);
    let j = s.add_json(&["time"]);
    assert_eq!(j["registry"], registry.url.as_str());
    let results = j["results"].as_array().unwrap();
    let by_name = |name: &str| {
        results
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed: {j:#}"))
    };
    assert_eq!(
        by_name("io.github.domdomegg/time-mcp-pypi"),
        &json!({"name": "io.github.domdomegg/time-mcp-pypi",
                "description": "Get the current UTC time in RFC 3339 format.",
                "version": "1.0.6", "transport": ["pypi"]})
    );
    assert_eq!(
        by_name("io.github.domdomegg/time-mcp-nuget")["transport"],
        json!(["nuget"])
    );
    assert!(
        results
            .iter()
            .all(|r| r["name"].as_str().unwrap().contains("time"))
    );
    assert!(
        registry
            .requests()
            .iter()
            .any(|p| p.starts_with("/v0.1/servers?search=time"))
    );

    let (code, out, err) = s.add(&["github"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("NAME"), "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("io.github.github/github-mcp-server"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        line.contains("1.7.0") && line.contains("oci, remote streamable-http"),
        "{line}"
    );
    assert!(line.contains("Connect AI assistants to GitHub"), "{line}");
    // Nothing written by a search.
    assert_eq!(s.config()["mcpServers"], json!({}));
}

/// The published npm server starts under evod; its secret goes to the env file, never to the
/// config or the output.
#[test]
fn an_npm_server_is_written_and_comes_up_under_evod() {
    if !on_path("npx") {
        return skipped("needs npx (Node 20) to run the published npm server");
    }
    let registry = FakeRegistry::recorded();
    let d = Daemon::start(&json!({"registry": {"url": registry.url}}));
    let (code, out, err) = add_in(
        &d,
        &[
            AIRTABLE,
            "--env",
            "AIRTABLE_API_KEY=pat-evo-test.secret",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{err}\n{out}\nlog:\n{}", d.log_text());
    assert!(!out.contains("pat-evo-test.secret"), "{out}");
    let j: Value = serde_json::from_str(&out).unwrap();
    let entry = json!({"command": "npx", "args": ["-y", "airtable-mcp-server@1.7.3"],
                       "env": {"AIRTABLE_API_KEY": "${AIRTABLE_API_KEY}"}});
    assert_eq!(j["id"], "airtable");
    assert_eq!(j["entry"], entry);
    assert_eq!(j["ready"], true, "{j:#}\nlog:\n{}", d.log_text());
    assert_eq!(j["evod"]["reloaded"], true, "{j:#}");
    assert_eq!(j["evod"]["servers"][0]["state"], "ready", "{j:#}");
    let config_text = std::fs::read_to_string(&d.config).unwrap();
    assert!(!config_text.contains("pat-evo-test"), "{config_text}");
    assert_eq!(read_json(&d.config)["mcpServers"]["airtable"], entry);
    let env_file = d.config.with_file_name("env");
    assert_eq!(
        std::fs::read_to_string(&env_file).unwrap(),
        "AIRTABLE_API_KEY='pat-evo-test.secret'\n"
    );
    assert!(d.config.with_file_name("mcp.config.json.bak").exists());
    let status = d.ctl_json(&["status"]);
    let airtable = server(&status, "airtable").unwrap();
    assert!(airtable["tools"].as_u64().unwrap() > 0, "{airtable:#}");

    // The same id again: refused, nothing changed.
    let before = std::fs::read(&d.config).unwrap();
    let (code, _, err) = add_in(&d, &[AIRTABLE, "--env", "AIRTABLE_API_KEY=other"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("already has a server 'airtable'") && err.contains("--id"),
        "{err}"
    );
    assert_eq!(std::fs::read(&d.config).unwrap(), before);
}

/// The published PyPI server runs through `uvx` (from the interop venv, where tests/run
/// installs uv), with its argument's default.
#[test]
fn a_pypi_server_is_written_and_comes_up_under_evod() {
    let venv_bin = repo_root().join("tests/interop/.venv/bin");
    let path = std::env::var("PATH").unwrap_or_default();
    let path = if venv_bin.join("uvx").exists() {
        format!("{}:{path}", venv_bin.display())
    } else if on_path("uvx") {
        path
    } else {
        return skipped("needs uvx: tests/run installs uv into tests/interop/.venv");
    };
    let registry = FakeRegistry::recorded();
    let d = Daemon::start_with(
        &json!({"registry": {"url": registry.url}}),
        &[],
        &[("PATH", &path)],
    );
    let (code, out, err) = add_in(&d, &[TIME]);
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(
        out.contains(&format!("added {TIME} 2026.10.19 to ")),
        "{out}"
    );
    assert!(out.contains("as 'time'"), "{out}");
    assert!(
        out.contains("1 server(s) added: 1 applied"),
        "{out}\nlog:\n{}",
        d.log_text()
    );
    assert!(
        out.contains("  time: applied (ready)"),
        "{out}\nlog:\n{}",
        d.log_text()
    );
    assert_eq!(
        read_json(&d.config)["mcpServers"]["time"],
        json!({"command": "uvx", "args": ["mcp-server-time==2026.10.19", "--local-timezone", "UTC"]})
    );
    let status = d.wait_ready(&["time"]);
    assert!(server(&status, "time").unwrap()["tools"].as_u64().unwrap() > 0);
}

#[test]
fn a_missing_required_variable_is_named_and_nothing_is_written() {
    let registry = FakeRegistry::recorded();
    let s = Setup::new(&registry.url);
    let before = std::fs::read(&s.config).unwrap();
    let (code, out, err) = s.add(&[AIRTABLE]);
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains("needs values")
            && err.contains("--env AIRTABLE_API_KEY=VALUE (Airtable personal access token"),
        "{err}"
    );
    assert_eq!(std::fs::read(&s.config).unwrap(), before);
    assert!(!s.dir.path().join("mcp.config.json.bak").exists());
    assert!(!s.dir.path().join("env").exists());
    // A variable the record does not take is refused too, not ignored.
    let (code, _, err) = s.add(&[
        AIRTABLE,
        "--env",
        "AIRTABLE_API_KEY=k",
        "--env",
        "AIRTABLE_TOKEN=k",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("takes no --env AIRTABLE_TOKEN"), "{err}");
}

#[test]
fn docker_is_written_only_when_allowed() {
    let registry = FakeRegistry::recorded();
    let s = Setup::new(&registry.url);
    let (code, _, err) = s.add(&["io.skaphos/sting"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("only as the docker image ghcr.io/skaphos/sting")
            && err.contains("--allow-docker"),
        "{err}"
    );
    assert_eq!(s.config()["mcpServers"], json!({}));

    let j = s.add_json(&[
        "io.skaphos/sting",
        "--allow-docker",
        "--env",
        "STING_TOKEN=ghp_x",
    ]);
    assert_eq!(
        j["entry"],
        json!({"command": "docker",
               "args": ["run", "-i", "--rm", "-e", "STING_TOKEN", "ghcr.io/skaphos/sting:0.8.0"],
               "env": {"STING_TOKEN": "${STING_TOKEN}"}})
    );
    assert_eq!(j["evod"]["running"], false);
    assert_eq!(s.config()["mcpServers"]["sting"], j["entry"]);
}

/// GitHub's record has an image and a remote: without --allow-docker the remote, its secret
/// header by reference; a remote without a credential gets the login hint.
#[test]
fn a_remote_gets_its_url_and_headers_or_the_login_hint() {
    let registry = FakeRegistry::recorded();
    let s = Setup::new(&registry.url);
    let (code, out, err) = s.add(&[
        "io.github.github/github-mcp-server",
        "--env",
        "Authorization=Bearer ghp_secret",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("ghp_secret"), "{out}");
    assert!(
        !out.contains("evoctl login"),
        "a credential was given: {out}"
    );
    assert_eq!(
        s.config()["mcpServers"]["github"],
        json!({"type": "http", "url": "https://api.githubcopilot.com/mcp/",
               "headers": {"Authorization": "${GITHUB_AUTHORIZATION}"}})
    );
    assert_eq!(
        std::fs::read_to_string(s.dir.path().join("env")).unwrap(),
        "GITHUB_AUTHORIZATION='Bearer ghp_secret'\n"
    );

    let (code, out, err) = s.add(&["io.github.getcyphrex/cyphrex-mcp"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("run `evoctl login cyphrex`"), "{out}");
    assert_eq!(
        s.config()["mcpServers"]["cyphrex"],
        json!({"type": "http", "url": "https://mcp.cyphrex.io/mcp"})
    );
    let j = s.add_json(&["io.github.domdomegg/time-mcp-pypi", "--id", "utc"]);
    assert_eq!(
        j["entry"],
        json!({"command": "uvx", "args": ["time-mcp-pypi==1.0.6"]})
    );
    assert_eq!(s.config()["mcpServers"]["utc"], j["entry"]);
}

#[test]
fn records_evo_cannot_use_are_refused_with_the_reason() {
    let registry = FakeRegistry::recorded();
    let s = Setup::new(&registry.url);
    let (code, _, err) = s.add(&["io.github.user/bad-version"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("not a valid server.json (schema 2025-12-11)")
            && err.contains("/packages/0/version"),
        "{err}"
    );
    let (code, _, err) = s.add(&["io.github.domdomegg/time-mcp-nuget"]);
    assert_eq!(code, 1);
    assert!(
        err.contains(
            "evo cannot run io.github.domdomegg/time-mcp-nuget: it offers a nuget package"
        ),
        "{err}"
    );
    let (code, _, err) = s.add(&["io.github.nobody/nothing"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("has no server io.github.nobody/nothing"),
        "{err}"
    );
    let (code, _, err) = s.add(&[AIRTABLE, "--version", "9.9.9"]);
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!("has no server {AIRTABLE} version 9.9.9")),
        "{err}"
    );
    // Flags of an add with a search: a usage error.
    let (code, _, err) = s.add(&["airtable", "--env", "AIRTABLE_API_KEY=k"]);
    assert_eq!(code, 2);
    assert!(err.contains("'airtable' is a search"), "{err}");
    assert_eq!(s.config()["mcpServers"], json!({}));
}

#[test]
fn an_unreachable_registry_is_named() {
    let url = format!("http://127.0.0.1:{}", free_port());
    let s = Setup::new(&url);
    for args in [
        &["time"][..],
        &[AIRTABLE, "--env", "AIRTABLE_API_KEY=k"][..],
    ] {
        let (code, _, err) = s.add(args);
        assert_eq!(code, 1, "{err}");
        assert!(
            err.contains(&format!(
                "cannot reach the MCP registry at {url}/v0.1/servers"
            )),
            "{err}"
        );
    }
    let (code, out, _) = s.add(&["time", "--json"]);
    assert_eq!(code, 1);
    let j: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["ok"], false);
}

/// On a terminal the required variable is asked for, and the secret typed is not echoed.
#[test]
fn on_a_terminal_a_secret_is_asked_for_without_echo() {
    let registry = FakeRegistry::recorded();
    let s = Setup::new(&registry.url);
    let script = repo_root().join("tests/fixtures/on_a_terminal.py");
    let evoctl = bin("evoctl");
    let out = Command::new("python3")
        .arg(&script)
        .args([
            "AIRTABLE_API_KEY (Airtable personal access token",
            "pat-typed.secret",
            "--",
        ])
        .arg(&evoctl)
        .args(["--socket", s.socket.to_str().unwrap(), "add", AIRTABLE])
        .args(["--config", s.config.to_str().unwrap()])
        .output()
        .expect("run python3");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{shown}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !shown.contains("pat-typed"),
        "the secret was echoed: {shown}"
    );
    assert!(
        shown.contains("added io.github.domdomegg/airtable-mcp-server 1.7.3"),
        "{shown}"
    );
    assert_eq!(
        std::fs::read_to_string(s.dir.path().join("env")).unwrap(),
        "AIRTABLE_API_KEY='pat-typed.secret'\n"
    );
    assert_eq!(
        s.config()["mcpServers"]["airtable"]["env"],
        json!({"AIRTABLE_API_KEY": "${AIRTABLE_API_KEY}"})
    );
}
