//! The operator's commands, through the real `evoctl` with HOME and
//! XDG_CONFIG_HOME in a temp dir: service units, client setup, import,
//! shell completions, and `refresh` staying quiet without a terminal.

use std::path::{Path, PathBuf};
use std::process::Command;

use evo_tests::harness::{
    daemon::{Daemon, server},
    locations::bin,
    process::{TempDir, outcome},
    servers::fixture_server,
};
use serde_json::{Value, json};

/// A private home: `home/` is HOME, `config/` is XDG_CONFIG_HOME.
struct Home {
    dir: TempDir,
}

impl Home {
    fn new() -> Home {
        let dir = TempDir::new("op");
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        Home { dir }
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("config")
    }

    /// `evoctl ARGS` in this home: (exit code, stdout, stderr).
    fn evoctl(&self, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(bin("evoctl"))
            .args(args)
            .env("HOME", self.home())
            .env("XDG_CONFIG_HOME", self.config())
            .env_remove("EVO_CONFIG")
            // No daemon there (unless a test starts one): never the
            // machine's own evod.
            .env("EVO_SOCKET", self.dir.path().join("run/evod.sock"))
            .output()
            .expect("run evoctl");
        outcome(out)
    }

    /// `evoctl ARGS --json`, parsed; panics unless it exits 0.
    fn evoctl_json(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.push("--json");
        let (code, out, err) = self.evoctl(&a);
        assert_eq!(code, 0, "evoctl {args:?}: {err}\n{out}");
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("evoctl {args:?}: {e}: {out}"))
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()))
}

/// Everything in `dir`, recursively, for "nothing was written" checks.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = entry.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn repo_file(rel: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)).unwrap()
}

const ENABLE: &str = "systemctl --user daemon-reload && systemctl --user enable --now evod.socket";

#[cfg(target_os = "linux")]
#[test]
fn service_install_print_shows_units_with_absolute_evod_and_writes_nothing() {
    let h = Home::new();
    let (code, out, err) = h.evoctl(&["service", "install", "--print"]);
    assert_eq!(code, 0, "{err}");
    let exec = out
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap_or_else(|| panic!("no ExecStart in:\n{out}"));
    let evod = Path::new(exec);
    assert!(evod.is_absolute() && evod.ends_with("evod"), "{exec}");
    assert_eq!(evod, bin("evod").canonicalize().unwrap());
    assert!(out.contains("ListenStream=%t/evo/evod.sock"), "{out}");
    assert!(out.contains(ENABLE), "{out}");
    assert!(files_under(h.dir.path()).is_empty(), "--print wrote files");

    let j = h.evoctl_json(&["service", "install", "--print"]);
    assert_eq!(j["written"], false);
    assert_eq!(j["command"], ENABLE);
}

#[cfg(target_os = "linux")]
#[test]
fn service_install_writes_both_units_and_uninstall_removes_them() {
    let h = Home::new();
    let units = h.config().join("systemd/user");
    let (code, out, err) = h.evoctl(&["service", "install"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(ENABLE), "{out}");
    // The socket unit is the repository's, verbatim; the service differs
    // only in ExecStart.
    assert_eq!(
        std::fs::read_to_string(units.join("evod.socket")).unwrap(),
        repo_file("systemd/evod.socket")
    );
    let service = std::fs::read_to_string(units.join("evod.service")).unwrap();
    let evod = bin("evod").canonicalize().unwrap();
    assert!(
        service.contains(&format!("\nExecStart={}\n", evod.display())),
        "{service}"
    );
    for line in ["Restart=on-failure", "Requires=evod.socket"] {
        assert!(service.contains(line), "{line} missing:\n{service}");
    }

    // What `systemctl --user enable` leaves behind goes too.
    let wants = units.join("sockets.target.wants");
    std::fs::create_dir_all(&wants).unwrap();
    std::os::unix::fs::symlink(units.join("evod.socket"), wants.join("evod.socket")).unwrap();

    let j = h.evoctl_json(&["service", "uninstall"]);
    assert_eq!(j["removed"], true);
    assert_eq!(j["files"].as_array().unwrap().len(), 3, "{j}");
    assert!(j["command"].as_str().unwrap().contains("systemctl --user"));
    for p in [
        units.join("evod.socket"),
        units.join("evod.service"),
        wants.join("evod.socket"),
    ] {
        assert!(p.symlink_metadata().is_err(), "{} still there", p.display());
    }
    // Nothing left: says so, still succeeds.
    let (code, out, _) = h.evoctl(&["service", "uninstall"]);
    assert_eq!(code, 0);
    assert!(out.contains("nothing to remove"), "{out}");
}

/// A client config with other servers and unrelated settings, in a layout
/// of its own (4-space indent, one-line entries).
const CLIENT_FILE: &str = r#"{
    "theme": "dark",
    "mcpServers": {
        "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"]},
        "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}}
    },
    "servers": {
        "gh": {"type": "http", "url": "https://example.invalid/mcp"}
    },
    "numbers": [1, 2.5, -3],
    "nested": {"keep": {"me": true}}
}
"#;

#[test]
fn setup_adds_evo_to_each_client_and_keeps_the_rest() {
    let h = Home::new();
    let evoctl = bin("evoctl").canonicalize().unwrap();
    let evoctl = evoctl.to_str().unwrap();
    let clients = [
        (
            "claude-desktop",
            h.config().join("Claude/claude_desktop_config.json"),
            "mcpServers",
            json!({"command": evoctl, "args": ["shim"]}),
        ),
        (
            "claude-code",
            h.home().join(".claude.json"),
            "mcpServers",
            json!({"command": evoctl, "args": ["shim"]}),
        ),
        (
            "cursor",
            h.home().join(".cursor/mcp.json"),
            "mcpServers",
            json!({"command": evoctl, "args": ["shim"]}),
        ),
        (
            "vscode",
            h.config().join("Code/User/mcp.json"),
            "servers",
            json!({"type": "stdio", "command": evoctl, "args": ["shim"]}),
        ),
    ];
    for (client, path, key, entry) in clients {
        write(&path, CLIENT_FILE);
        let (code, out, err) = h.evoctl(&["setup", client]);
        assert_eq!(code, 0, "{client}: {err}");
        assert!(out.contains(path.to_str().unwrap()), "{client}: {out}");

        let mut after = read_json(&path);
        assert_eq!(after[key]["evo"], entry, "{client}");
        // Everything else is as it was, in the same order.
        after[key].as_object_mut().unwrap().shift_remove("evo");
        let before: Value = serde_json::from_str(CLIENT_FILE).unwrap();
        assert_eq!(
            serde_json::to_string(&after).unwrap(),
            serde_json::to_string(&before).unwrap(),
            "{client}"
        );
        // The lines evoctl did not need to touch are still there verbatim.
        let text = std::fs::read_to_string(&path).unwrap();
        for line in CLIENT_FILE.lines().filter(|l| l.contains("\"fs\"")) {
            assert!(text.contains(line), "{client}: lost {line:?}:\n{text}");
        }
        let backup = path.with_file_name(format!(
            "{}.bak",
            path.file_name().unwrap().to_str().unwrap()
        ));
        assert_eq!(
            std::fs::read_to_string(&backup).unwrap(),
            CLIENT_FILE,
            "{client}"
        );

        // Again: identical entry, nothing changes.
        let (code, out, _) = h.evoctl(&["setup", client]);
        assert_eq!(code, 0);
        assert!(out.contains("already"), "{client}: {out}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "{client}");
    }
}

#[test]
fn setup_creates_a_missing_file_and_replaces_a_stale_entry() {
    let h = Home::new();
    let path = h.home().join(".cursor/mcp.json");
    let j = h.evoctl_json(&["setup", "cursor"]);
    assert_eq!(j["action"], "added");
    assert_eq!(j["backup"], Value::Null);
    assert_eq!(
        read_json(&path)["mcpServers"]["evo"]["args"],
        json!(["shim"])
    );

    // An old evo entry (another path) is replaced where it stands.
    write(
        &path,
        r#"{"mcpServers": {"evo": {"command": "/old/evoctl", "args": ["shim"]}, "z": {"command": "z"}}}"#,
    );
    let j = h.evoctl_json(&["setup", "cursor"]);
    assert_eq!(j["action"], "updated");
    let after = read_json(&path);
    let ids: Vec<&String> = after["mcpServers"].as_object().unwrap().keys().collect();
    assert_eq!(ids, ["evo", "z"]);
    assert_ne!(after["mcpServers"]["evo"]["command"], "/old/evoctl");
}

#[test]
fn setup_refuses_a_file_it_cannot_parse_and_leaves_it_alone() {
    let h = Home::new();
    let path = h.home().join("client.json");
    let cases = [
        // A trailing comma, on line 3.
        "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"},\n  }\n}\n",
        // Comments (VS Code allows them; JSON does not).
        "{\n  // mine\n  \"servers\": {}\n}\n",
        "[1, 2]",
        "{\"mcpServers\": [\"not\", \"an\", \"object\"]}",
    ];
    for text in cases {
        write(&path, text);
        let file = path.to_str().unwrap();
        let (code, out, err) = h.evoctl(&["setup", "claude-code", "--file", file]);
        assert_eq!(code, 1, "{text}: {out}");
        assert!(err.contains(file), "{err}");
        assert!(err.contains("by hand"), "says what to do: {err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        assert!(!h.home().join("client.json.bak").exists());
    }
    write(&path, cases[0]);
    let (_, _, err) = h.evoctl(&["setup", "claude-code", "--file", path.to_str().unwrap()]);
    assert!(err.contains("line 4 column 3"), "{err}");
}

#[test]
fn setup_print_writes_nothing() {
    let h = Home::new();
    for client in ["claude-desktop", "claude-code", "cursor", "vscode"] {
        let (code, out, err) = h.evoctl(&["setup", client, "--print"]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("\"shim\"") && out.contains("\"evo\""), "{out}");
        let j = h.evoctl_json(&["setup", client, "--print"]);
        assert_eq!(j["written"], false);
        assert!(
            out.contains(j["path"].as_str().unwrap()),
            "names the file: {out}"
        );
    }
    assert!(files_under(h.dir.path()).is_empty());
}

#[test]
fn import_adds_new_servers_and_skips_existing_ids_and_evo_itself() {
    let h = Home::new();
    let source = h.home().join(".cursor/mcp.json");
    write(
        &source,
        &json!({
            "mcpServers": {
                "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem"]},
                "time": {"command": "uvx", "args": ["mcp-server-time"]},
                "evo": {"command": "/opt/bin/evoctl", "args": ["shim"]}
            },
            "servers": {
                "gh": {"type": "http", "url": "https://example.invalid/mcp"}
            }
        })
        .to_string(),
    );
    // evo's default config (XDG_CONFIG_HOME/evo), with a server and settings.
    let config = h.config().join("evo/mcp.config.json");
    let original = "{\n  \"mcpServers\": {\n    \"time\": {\"command\": \"mine\"}\n  },\n  \"discovery\": {\"mode\": \"legacy\"}\n}\n";
    write(&config, original);

    let j = h.evoctl_json(&["import", source.to_str().unwrap()]);
    assert_eq!(j["added"], json!(["fs", "gh"]));
    let skipped = j["skipped"].as_array().unwrap();
    let reason = |id: &str| {
        skipped
            .iter()
            .find(|s| s["id"] == id)
            .and_then(|s| s["reason"].as_str())
            .unwrap_or_else(|| panic!("{id} not skipped: {j}"))
            .to_string()
    };
    assert!(reason("time").contains("already"), "{j}");
    assert!(reason("evo").contains("evoctl shim"), "{j}");
    assert_eq!(skipped.len(), 2, "{j}");

    let after = read_json(&config);
    assert_eq!(after["mcpServers"]["time"], json!({"command": "mine"}));
    assert_eq!(
        after["mcpServers"]["fs"]["args"][1],
        "@modelcontextprotocol/server-filesystem"
    );
    assert_eq!(
        after["mcpServers"]["gh"]["url"],
        "https://example.invalid/mcp"
    );
    assert_eq!(after["discovery"], json!({"mode": "legacy"}));
    assert_eq!(
        std::fs::read_to_string(config.with_file_name("mcp.config.json.bak")).unwrap(),
        original
    );

    // Again: everything is there now; nothing is written.
    let before = std::fs::read_to_string(&config).unwrap();
    let (code, out, err) = h.evoctl(&["import", source.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("nothing added"), "{out}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), before);
}

/// Entries evo cannot serve are written disabled, saying why; with no evod
/// running, the output says the file is read at the next start.
#[test]
fn import_writes_what_evo_cannot_serve_disabled_and_says_why() {
    let h = Home::new();
    let source = h.home().join(".config/Code/User/mcp.json");
    write(
        &source,
        &json!({
            "inputs": [{"id": "gh_token", "type": "promptString", "password": true}],
            "servers": {
                "fs": {"type": "stdio", "command": "npx", "args": ["-y", "fs"]},
                "old": {"type": "sse", "url": "https://example.invalid/sse"},
                "events": {"url": "https://example.invalid/v1/sse"},
                "gh": {"type": "http", "url": "https://example.invalid/mcp",
                       "headers": {"Authorization": "Bearer ${input:gh_token}"}}
            }
        })
        .to_string(),
    );
    let j = h.evoctl_json(&["import", source.to_str().unwrap()]);
    assert_eq!(j["added"], json!(["fs", "old", "events", "gh"]), "{j}");
    let disabled: Vec<&str> = j["disabled"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert_eq!(disabled, ["events", "gh"], "{j}");
    assert_eq!(j["evod"]["running"], false, "{j}");

    let config = h.config().join("evo/mcp.config.json");
    let after = read_json(&config);
    let servers = &after["mcpServers"];
    assert_eq!(
        servers["fs"],
        json!({"type": "stdio", "command": "npx", "args": ["-y", "fs"]})
    );
    // Legacy SSE servers are served: imported as they are.
    assert_eq!(
        servers["old"],
        json!({"type": "sse", "url": "https://example.invalid/sse"})
    );
    for id in ["events", "gh"] {
        assert_eq!(servers[id]["disabled"], true, "{id}: {after}");
        let description = servers[id]["description"].as_str().unwrap();
        assert!(
            description.starts_with("imported disabled: "),
            "{id}: {description}"
        );
    }
    assert!(
        servers["events"]["description"]
            .as_str()
            .unwrap()
            .contains("\"type\": \"sse\""),
        "{after}"
    );
    let gh = servers["gh"]["description"].as_str().unwrap();
    let env_file = h.config().join("evo/env");
    for needle in [
        "${input:gh_token}",
        "VS Code prompt",
        env_file.to_str().unwrap(),
        "remove \"disabled\"",
    ] {
        assert!(gh.contains(needle), "{needle:?} in {gh}");
    }
    // The values are kept as written, for the person to finish.
    assert_eq!(
        servers["gh"]["headers"]["Authorization"],
        "Bearer ${input:gh_token}"
    );

    // The human output names each one and why, and what happens next.
    let config_text = std::fs::read_to_string(&config).unwrap();
    std::fs::remove_file(&config).unwrap();
    let (code, out, err) = h.evoctl(&["import", source.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("imported disabled: old"), "{out}");
    assert!(
        out.contains("imported disabled: gh: ${input:gh_token}"),
        "{out}"
    );
    assert!(
        out.contains("no evod is running") && out.contains("when it starts"),
        "{out}"
    );
    assert!(!out.contains("picks this up"), "{out}");
    // Imported servers run unconfined; one line says how to confine them.
    assert!(
        out.contains("sandboxes are off for these servers")
            && out.contains("add \"sandbox\": {\"read\""),
        "{out}"
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), config_text);
}

/// With evod running, import reloads it and reports, per server, what the
/// reload did: applied, failed with the loader's error, or disabled (and a
/// disabled entry's `description` draws no warning).
#[test]
fn import_into_a_running_evod_reports_each_server_as_it_applied() {
    let d = Daemon::start(&json!({"mcpServers": {"fx": fixture_server(&[])}}));
    d.wait_ready(&["fx"]);
    let source = d.dir.path().join("cursor.json");
    write(
        &source,
        &json!({"mcpServers": {
            "more": fixture_server(&["--name", "more"]),
            "broken": {"command": "x", "env": {"TOKEN": "${EVO_TEST_SURELY_UNSET}"}},
            "old": {"type": "sse", "url": "https://example.invalid/sse"}
        }})
        .to_string(),
    );
    let args = [
        "import",
        source.to_str().unwrap(),
        "--config",
        d.config.to_str().unwrap(),
    ];
    let (code, out, err) = d.ctl(&args);
    assert_eq!(code, 0, "{err}\n{}", d.log_text());
    assert!(out.contains("evod reloaded"), "{out}");
    assert!(out.contains("  more: applied ("), "{out}");
    assert!(
        out.contains("  broken: failed: ") && out.contains("EVO_TEST_SURELY_UNSET"),
        "{out}"
    );
    assert!(out.contains("  old: applied ("), "{out}");
    d.wait_ready(&["fx", "more"]);
    let status = d.ctl_json(&["status"]);
    assert_eq!(server(&status, "old").unwrap()["transport"], "sse");
    assert!(
        !d.log_text().contains("unknown key 'description'"),
        "{}",
        d.log_text()
    );

    // --json: the same facts, as keys. The reload came from import itself,
    // so the answer is there at once, not "within a second".
    std::fs::write(
        &d.config,
        serde_json::to_vec_pretty(&json!({"mcpServers": {"fx": fixture_server(&[])}})).unwrap(),
    )
    .unwrap();
    let j = d.ctl_json(&args);
    let evod = &j["evod"];
    assert_eq!(evod["running"], true, "{j}");
    assert_eq!(evod["reloaded"], true, "{j}");
    let outcome = |id: &str| {
        evod["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id)
            .unwrap_or_else(|| panic!("{id} not reported: {j}"))
            .clone()
    };
    assert_eq!(outcome("more")["outcome"], "applied", "{j}");
    assert_eq!(outcome("broken")["outcome"], "failed", "{j}");
    assert!(
        outcome("broken")["error"]
            .as_str()
            .unwrap()
            .contains("EVO_TEST_SURELY_UNSET"),
        "{j}"
    );
    assert_eq!(outcome("old")["outcome"], "applied", "{j}");

    // An evod that reads another file is not reloaded, and says so.
    let other = d.dir.path().join("other.json");
    let (code, out, _) = d.ctl(&[
        "import",
        source.to_str().unwrap(),
        "--config",
        other.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    assert!(
        out.contains("has not taken these servers") && out.contains(d.config.to_str().unwrap()),
        "{out}"
    );
}

/// The summary of an import into a running evod counts what was imported,
/// whatever the reload's own diff (the file watcher may have applied part
/// of it first): two added, one of them disabled, is two, not "1 changed".
#[test]
fn import_summary_counts_every_server_added_disabled_ones_too() {
    let d = Daemon::start(&json!({"mcpServers": {"fx": fixture_server(&[])}}));
    d.wait_ready(&["fx"]);
    let source = d.dir.path().join("vscode.json");
    write(
        &source,
        &json!({"servers": {
            "more": fixture_server(&["--name", "more"]),
            "gh": {"type": "http", "url": "https://example.invalid/mcp",
                   "headers": {"Authorization": "Bearer ${input:gh_token}"}}
        }})
        .to_string(),
    );
    let (code, out, err) = d.ctl(&[
        "import",
        source.to_str().unwrap(),
        "--config",
        d.config.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let summary = out
        .lines()
        .find(|l| l.starts_with("evod reloaded"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        summary.ends_with(": 2 server(s) imported: 1 applied, 1 disabled"),
        "{out}"
    );
    assert!(out.contains("  gh: disabled, not started"), "{out}");
}

/// `setup --move`: the client's servers go to evo's config and the client
/// keeps evo, plus what could not move (another server under the id in
/// evo's config, a server evo cannot serve yet); backups of both files; a
/// running evod reloads; a second run changes nothing.
#[test]
fn setup_move_moves_the_clients_servers_and_keeps_what_cannot_move() {
    let h = Home::new();
    let d = Daemon::start(&json!({"mcpServers": {
        "fx": fixture_server(&[]),
        "git": {"command": "git-mcp-of-my-own"},
        // An earlier move that stopped before the client was written.
        "time": fixture_server(&["--name", "time"])
    }}));
    let evo_before = std::fs::read_to_string(&d.config).unwrap();
    let client = h.home().join(".cursor/mcp.json");
    let client_before = json!({"mcpServers": {
        "more": fixture_server(&["--name", "more"]),
        "git": {"command": "uvx", "args": ["mcp-server-git"]},
        "time": fixture_server(&["--name", "time"]),
        "old": {"type": "ws", "url": "wss://example.invalid/ws"},
        "also-evo": {"command": "/opt/evoctl", "args": ["shim"]}
    }, "theme": "dark"});
    let client_text = serde_json::to_string_pretty(&client_before).unwrap();
    write(&client, &client_text);
    let socket = d.socket.to_str().unwrap();
    let config = d.config.to_str().unwrap();
    let args = [
        "--socket", socket, "setup", "cursor", "--move", "--config", config,
    ];

    let j = h.evoctl_json(&args);
    let m = &j["move"];
    assert_eq!(j["action"], "added", "{j}");
    assert_eq!(m["moved"], json!(["more", "time"]), "{j}");
    assert_eq!(m["added"], json!(["more", "old"]), "{j}");
    let kept: Vec<&str> = m["kept"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["id"].as_str().unwrap())
        .collect();
    assert_eq!(kept, ["git", "old"], "{j}");
    let why = |id: &str| {
        m["kept"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["id"] == id)
            .unwrap()["reason"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(why("git").contains("different server \"git\""), "{j}");
    assert!(why("old").contains("\"type\": \"ws\""), "{j}");
    assert_eq!(j["also_evo"], json!(["also-evo"]), "{j}");

    // The client keeps evo and what did not move, and the rest of its file.
    let after = read_json(&client);
    let ids: Vec<&String> = after["mcpServers"].as_object().unwrap().keys().collect();
    assert_eq!(ids, ["git", "old", "also-evo", "evo"], "{after}");
    assert_eq!(
        after["mcpServers"]["git"],
        client_before["mcpServers"]["git"]
    );
    assert_eq!(
        after["mcpServers"]["old"],
        client_before["mcpServers"]["old"]
    );
    assert_eq!(after["theme"], "dark");
    assert_eq!(
        std::fs::read_to_string(client.with_file_name("mcp.json.bak")).unwrap(),
        client_text
    );
    // evo's config has the moved server, the one it cannot serve disabled,
    // and its own "git" untouched; its previous version is kept.
    let evo = read_json(&d.config);
    assert_eq!(
        evo["mcpServers"]["more"],
        client_before["mcpServers"]["more"]
    );
    assert_eq!(
        evo["mcpServers"]["git"],
        json!({"command": "git-mcp-of-my-own"})
    );
    assert_eq!(evo["mcpServers"]["old"]["disabled"], true);
    assert_eq!(
        std::fs::read_to_string(d.config.with_file_name("mcp.config.json.bak")).unwrap(),
        evo_before
    );
    // The running evod took them.
    let outcome: Vec<(&str, &str)> = m["evod"]["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["id"].as_str().unwrap(), s["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(outcome, [("more", "applied"), ("old", "disabled")], "{j}");
    d.wait_ready(&["more"]);

    // Again: nothing to do, nothing written.
    let client_after = std::fs::read_to_string(&client).unwrap();
    let evo_after = std::fs::read_to_string(&d.config).unwrap();
    let (code, out, err) = h.evoctl(&args);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("nothing to move"), "{out}");
    assert!(out.contains("nothing changed"), "{out}");
    assert!(out.contains("kept in ") && out.contains("git: "), "{out}");
    assert!(!out.contains("evod reloaded"), "{out}");
    assert_eq!(std::fs::read_to_string(&client).unwrap(), client_after);
    assert_eq!(std::fs::read_to_string(&d.config).unwrap(), evo_after);
    assert_eq!(
        std::fs::read_to_string(client.with_file_name("mcp.json.bak")).unwrap(),
        client_text,
        "the backup is the file before the move"
    );

    // --print writes nothing, so it does not go with --move.
    let (code, _, err) = h.evoctl(&["setup", "cursor", "--print", "--move"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn import_refuses_invalid_json_in_either_file() {
    let h = Home::new();
    let good = h.home().join("good.json");
    write(&good, r#"{"mcpServers": {"a": {"command": "a"}}}"#);
    let bad = h.home().join("bad.json");
    let bad_text = "{\"mcpServers\": {\"a\": {\"command\": \"a\"}}\n";
    write(&bad, bad_text);
    let config = h.dir.path().join("evo.json");
    let config_text = "{\"mcpServers\": {}, \"discovery\": {\"mode\": \"dynamic\"}}";
    write(&config, config_text);

    // A broken source: nothing written anywhere.
    let (code, _, err) = h.evoctl(&[
        "import",
        bad.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains(bad.to_str().unwrap()) && err.contains("line 2"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), config_text);

    // A broken evo config: left byte for byte.
    write(&config, bad_text);
    let (code, _, err) = h.evoctl(&[
        "import",
        good.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains(config.to_str().unwrap()), "{err}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), bad_text);
    assert!(!h.dir.path().join("evo.json.bak").exists());

    // Not a client config at all.
    let (code, _, err) = h.evoctl(&[
        "import",
        config
            .to_str()
            .unwrap()
            .replace("evo.json", "missing.json")
            .as_str(),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("missing.json"), "{err}");
}

#[test]
fn completions_print_a_script_for_each_shell() {
    let h = Home::new();
    for shell in ["bash", "zsh", "fish"] {
        let (code, out, err) = h.evoctl(&["completions", shell]);
        assert_eq!(code, 0, "{shell}: {err}");
        assert!(out.len() > 200 && out.contains("evoctl"), "{shell}: {out}");
        assert!(out.contains("setup"), "{shell}: subcommands listed");
    }
    let (code, _, _) = h.evoctl(&["completions", "tcsh"]);
    assert_eq!(code, 2, "unknown shell is a usage error");
}

#[test]
fn refresh_without_a_terminal_reports_the_outcome() {
    let d = Daemon::start(&json!({"mcpServers": {
        "fx": fixture_server(&[]),
        "dies": fixture_server(&["--exit-at-start"]),
    }}));
    d.wait_status("fx ready, dies failed", |s| {
        server(s, "fx").is_some_and(|v| v["state"] == "ready")
            && server(s, "dies").is_some_and(|v| v["state"] == "failed")
    });
    // Off a terminal, refresh waits for the outcome and prints it (no
    // progress line): what happened, not only what was asked.
    // A server that ends failed is a failed refresh: exit 1.
    let (code, out, err) = d.ctl(&["refresh"]);
    assert_eq!(code, 1, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[..2],
        ["re-discovering fx, dies", "restarted: fx, dies"],
        "{out}"
    );
    assert_eq!(lines[2], "fx: ready, 14 tools", "{out}");
    assert!(
        lines[3].starts_with("dies: failed: ") && lines[3].contains("exited with status 1"),
        "{out}"
    );
    assert_eq!(lines.len(), 4, "{out}");
    assert!(
        !out.contains('\r'),
        "no progress line off a terminal: {out:?}"
    );
    // With --json, the reply alone.
    let r = d.ctl_json(&["refresh", "fx"]);
    assert_eq!(r["restarted"], json!(["fx"]));
    d.wait_ready(&["fx"]);
}

/// On a terminal, `evoctl status` follows a daemon still discovering its
/// servers until each is ready (run under `script` for a pseudo-terminal).
#[test]
fn status_on_a_terminal_shows_discovery_progress() {
    let d = Daemon::start(&json!({"mcpServers": {
        "slow": fixture_server(&["--delay-start-ms", "1500"])
    }}));
    let cmd = format!(
        "{} --socket {} status",
        bin("evoctl").display(),
        d.socket.display()
    );
    let out = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .output()
        .expect("run script (util-linux) for a pseudo-terminal");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("re-discovering: 0/1 ready"), "{text}");
    assert!(text.contains("re-discovered: 1/1 ready"), "{text}");
}

/// `--socket` reaches what evoctl writes for other programs: the client's
/// entry and the service units, as an absolute path.
#[test]
fn setup_and_service_carry_an_explicit_socket() {
    let h = Home::new();
    let path = h.home().join(".cursor/mcp.json");
    let out = Command::new(bin("evoctl"))
        .args(["--socket", "run/evod.sock", "setup", "cursor"])
        .current_dir(h.home())
        .env("HOME", h.home())
        .env("XDG_CONFIG_HOME", h.config())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let socket = h.home().join("run/evod.sock");
    assert_eq!(
        read_json(&path)["mcpServers"]["evo"]["args"],
        json!(["shim", "--socket", socket])
    );
    let socket = socket.to_str().unwrap();
    let j = h.evoctl_json(&["--socket", socket, "service", "install", "--print"]);
    let text = j["files"].to_string();
    if cfg!(target_os = "linux") {
        assert!(
            text.contains(&format!("ListenStream={socket}\\n")),
            "{text}"
        );
        assert!(text.contains(&format!(" --socket {socket}\\n")), "{text}");
    }
}
