//! The semantic search stage through real processes: evod with
//! `search.model` set to the real all-MiniLM-L6-v2 (unpacked by tests/run,
//! `EVO_TEST_MODEL`), `evoctl status` and `evoctl search --explain`; a model
//! folder that cannot be used; `evoctl model pull` against a local server
//! with the hub's URL layout.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use evo_tests::harness::{
    daemon::Daemon,
    locations::{bin, repo_root},
    process::{TempDir, outcome},
    servers::replayed,
    skipped,
};
use serde_json::{Value, json};

/// The unpacked test model, or None (and a "skipped" line) without it.
fn test_model() -> Option<PathBuf> {
    match std::env::var_os("EVO_TEST_MODEL") {
        Some(p) => {
            let p = repo_root().join(p);
            assert!(
                p.join("model.safetensors").is_file(),
                "EVO_TEST_MODEL names {}, which holds no model.safetensors",
                p.display()
            );
            Some(p)
        }
        None => {
            skipped("EVO_TEST_MODEL is unset (tests/run unpacks all-MiniLM-L6-v2 and sets it)");
            None
        }
    }
}

/// Two servers listing the same git tools, and the time server.
fn servers() -> Value {
    json!({
        "git": replayed("git"),
        "mirror": replayed("git"),
        "time": replayed("time"),
    })
}

fn search_state(status: &Value) -> &str {
    status["search"]["state"].as_str().unwrap_or("")
}

#[test]
fn semantic_stage_fuses_with_lexical_and_pulls_near_duplicates_together() {
    let Some(model) = test_model() else { return };
    let config = json!({
        "mcpServers": servers(),
        "search": {"model": model.to_string_lossy()},
    });
    let mut d = Daemon::start(&config);
    d.wait_ready(&["git", "mirror", "time"]);
    let status = d.wait_status("every tool embedded", |s| search_state(s) == "ready");
    let tools = status["daemon"]["tools"].as_u64().unwrap_or(0);
    assert_eq!(
        status["search"]["tools"].as_u64(),
        Some(tools),
        "{status:#}"
    );
    assert_eq!(status["search"]["embedded"].as_u64(), Some(tools));
    assert_eq!(
        status["search"]["stages"],
        json!(["lexical", "semantic", "near_duplicates"])
    );
    let (code, out, _) = d.ctl(&["status"]);
    assert_eq!(code, 0);
    assert!(
        out.contains(&format!(
            "search: lexical + semantic + near-duplicates ({tools}/{tools} embedded; model "
        )),
        "{out}"
    );

    // Every result carries each stage's score; a tool no word of the query
    // matches (lexical 0) can only have come from the semantic stage.
    let r = d.ctl_json(&[
        "search",
        "--explain",
        "go back to an earlier snapshot of the code",
    ]);
    let results = r["results"].as_array().expect("results");
    assert!(
        results
            .iter()
            .all(|t| t["explain"]["semantic"].is_f64() && t["explain"]["fused"].is_f64()),
        "{r:#}"
    );
    assert!(
        results.iter().any(|t| t["name"] == "git_reset"
            && t["explain"]["lexical"] == 0.0
            && t["explain"]["semantic"].as_f64().unwrap_or(0.0) >= 0.25),
        "{r:#}"
    );
    // Gibberish still finds nothing: the model's nearest neighbours of it
    // are not matches.
    let r = d.ctl_json(&["search", "--explain", "zzzz qqqq"]);
    assert_eq!(r["results"], json!([]), "{r:#}");

    // The mirror's copy of the top git tool comes right after it, marked.
    let r = d.ctl_json(&["search", "--explain", "show me the diff of staged changes"]);
    let results = r["results"].as_array().expect("results");
    let top = results[0]["name"].as_str().unwrap_or("");
    assert!(top.ends_with("git_diff_staged"), "{r:#}");
    let twin = &results[1];
    assert_eq!(twin["explain"]["near_duplicate_of"], top, "{r:#}");
    let other = if top.starts_with("git_") {
        "mirror_"
    } else {
        "git_"
    };
    assert!(
        twin["name"].as_str().unwrap_or("").starts_with(other),
        "{r:#}"
    );
    // The human table shows each stage.
    let (code, out, _) = d.ctl(&["search", "--explain", "show me the diff of staged changes"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("LEXICAL") && out.contains("SEMANTIC") && out.contains("next to"),
        "{out}"
    );

    // discover_tools answers in the same shape, from the fused ranking.
    let mut c = d.legacy_session();
    let (text, error) = c.call_text(
        "discover_tools",
        json!({"query": "show me the diff of staged changes", "activate": false}),
    );
    assert!(!error, "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with(&format!("{top} — ")), "{text}");
    assert!(
        lines[1].starts_with(twin["name"].as_str().unwrap_or("?")),
        "{text}"
    );
    assert!(lines[0].contains(") score "), "{text}");
    drop(c);

    // The vectors are in the cache: a restart embeds nothing.
    let files: Vec<_> = std::fs::read_dir(d.cache.join("embeddings"))
        .expect("embeddings folder")
        .flatten()
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    d.stop();
    let first_log = d.log_text();
    assert!(first_log.contains("tools embedded"), "{first_log}");
    d.spawn(&[], &[]);
    d.wait_status("ready from the cache", |s| search_state(s) == "ready");
    let log = d.log_text();
    assert!(!log.contains("tools embedded"), "embedded again:\n{log}");
}

#[test]
fn a_model_folder_missing_its_tokenizer_is_reported_and_search_stays_lexical() {
    let dir = TempDir::new("model");
    let model = dir.path().join("broken-model");
    std::fs::create_dir_all(&model).unwrap();
    std::fs::write(model.join("config.json"), r#"{"model_type": "bert"}"#).unwrap();
    std::fs::write(model.join("model.safetensors"), "").unwrap();
    let config = json!({
        "mcpServers": {"time": replayed("time")},
        "search": {"model": model.to_string_lossy()},
    });
    let d = Daemon::start(&config);
    d.wait_ready(&["time"]);
    let status = d.wait_status("the model refused", |s| search_state(s) == "failed");
    let error = status["search"]["error"].as_str().unwrap_or("");
    assert!(
        error.contains("broken-model has no tokenizer.json"),
        "{status:#}"
    );
    assert_eq!(status["search"]["stages"], json!(["lexical"]));
    let (code, out, _) = d.ctl(&["status"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("search: lexical only; search.model:") && out.contains("tokenizer.json"),
        "{out}"
    );
    // Search still answers, lexically.
    let r = d.ctl_json(&["search", "--explain", "current time"]);
    assert_eq!(r["results"][0]["name"], "time_get_current_time", "{r:#}");
    assert!(r["results"][0]["explain"]["semantic"].is_null(), "{r:#}");
    // Without search.model the status says lexical, and nothing else changes.
    std::fs::write(
        &d.config,
        serde_json::to_vec(&json!({"mcpServers": {"time": replayed("time")}})).unwrap(),
    )
    .unwrap();
    let (code, _, err) = d.ctl(&["reload"]);
    assert_eq!(code, 0, "{err}");
    d.wait_status("search off", |s| search_state(s) == "off");
}

/// A local server with the hub's layout, `/{id}/resolve/main/{file}`: large
/// files redirect to `/cdn/{file}` with `X-Linked-Etag` (their SHA-256) as
/// the hub does; range requests are served. The first `cut` downloads of
/// `model.safetensors` stop halfway (a dropped connection).
struct Hub {
    addr: String,
    requests: Arc<Mutex<Vec<String>>>,
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Hub {
    fn serve(files: PathBuf, id: &'static str, cut: usize, lie_about: Option<&'static str>) -> Hub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = requests.clone();
        let cuts = Arc::new(AtomicUsize::new(cut));
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let files = files.clone();
                let log = log.clone();
                let cuts = cuts.clone();
                std::thread::spawn(move || {
                    let _ = answer(conn, &files, id, &log, &cuts, lie_about);
                });
            }
        });
        Hub { addr, requests }
    }
}

fn answer(
    mut conn: TcpStream,
    files: &Path,
    id: &str,
    log: &Mutex<Vec<String>>,
    cuts: &AtomicUsize,
    lie_about: Option<&str>,
) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let mut range: Option<u64> = None;
    loop {
        let mut h = String::new();
        reader.read_line(&mut h)?;
        if h.trim().is_empty() {
            break;
        }
        if let Some(v) = h.to_ascii_lowercase().strip_prefix("range: bytes=") {
            range = v.trim().trim_end_matches('-').parse().ok();
        }
    }
    log.lock().unwrap().push(format!(
        "{path} {}",
        range.map_or("-".into(), |r| r.to_string())
    ));
    let resolve = format!("/{id}/resolve/main/");
    let (file, via_cdn) = if let Some(f) = path.strip_prefix(&resolve) {
        (f.to_string(), false)
    } else if let Some(f) = path.strip_prefix("/cdn/") {
        (f.to_string(), true)
    } else {
        (String::new(), false)
    };
    let Ok(body) = std::fs::read(files.join(&file))
        .map_err(|_| ())
        .and_then(|b| if file.is_empty() { Err(()) } else { Ok(b) })
    else {
        return conn.write_all(
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        );
    };
    let large = file == "model.safetensors";
    if large && !via_cdn {
        let sha = if lie_about == Some("model.safetensors") {
            "0".repeat(64)
        } else {
            sha256_hex(&body)
        };
        let head = format!(
            "HTTP/1.1 302 Found\r\nlocation: /cdn/{file}\r\nx-linked-etag: \"{sha}\"\r\nx-linked-size: {}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            body.len()
        );
        return conn.write_all(head.as_bytes());
    }
    let start = range.unwrap_or(0).min(body.len() as u64) as usize;
    let status = if range.is_some() {
        "206 Partial Content"
    } else {
        "200 OK"
    };
    let rest = &body[start..];
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-length: {}\r\netag: \"blob\"\r\nconnection: close\r\n\r\n",
        rest.len()
    );
    conn.write_all(head.as_bytes())?;
    let cut = large
        && cuts
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
    if cut {
        conn.write_all(&rest[..rest.len() / 2])?;
        let _ = conn.shutdown(std::net::Shutdown::Both);
        return Ok(());
    }
    conn.write_all(rest)
}

fn pull(hub: &Hub, id: &str, cache: &Path) -> (i32, String, String) {
    let out = std::process::Command::new(bin("evoctl"))
        .args(["model", "pull", id, "--cache-dir"])
        .arg(cache)
        .env("EVO_HF_ENDPOINT", &hub.addr)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run evoctl");
    outcome(out)
}

/// A small folder with a model's files (not a working model: the pull
/// does not read them).
fn fake_model(dir: &Path) -> PathBuf {
    let files = dir.join("hub");
    std::fs::create_dir_all(files.join("1_Pooling")).unwrap();
    std::fs::write(files.join("config.json"), r#"{"model_type": "bert"}"#).unwrap();
    std::fs::write(files.join("tokenizer.json"), "{}").unwrap();
    std::fs::write(files.join("1_Pooling/config.json"), "{}").unwrap();
    let weights: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(files.join("model.safetensors"), weights).unwrap();
    files
}

#[test]
fn model_pull_resumes_an_interrupted_download_and_checks_it() {
    let dir = TempDir::new("pull");
    let files = fake_model(dir.path());
    let hub = Hub::serve(files.clone(), "org/tiny-model", 1, None);
    let cache = dir.path().join("cache");
    // The first attempt is cut halfway through the weights.
    let (code, _, err) = pull(&hub, "org/tiny-model", &cache);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("run the command again to resume"), "{err}");
    let target = cache.join("models/org--tiny-model");
    let part = target.join("model.safetensors.part");
    let had = std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
    assert!(had > 0 && had < 300_000, "part file of {had} bytes");
    // The second resumes where the first stopped.
    let (code, out, err) = pull(&hub, "org/tiny-model", &cache);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("org/tiny-model"), "{out}");
    assert_eq!(
        std::fs::read(target.join("model.safetensors")).unwrap(),
        std::fs::read(files.join("model.safetensors")).unwrap()
    );
    assert!(!part.exists());
    assert!(target.join("1_Pooling/config.json").is_file());
    let requests = hub.requests.lock().unwrap().clone();
    assert!(
        requests.contains(&format!("/cdn/model.safetensors {had}")),
        "no range request from byte {had}: {requests:?}"
    );

    // A checksum that does not match: refused, nothing kept under the name.
    let liar = Hub::serve(files, "org/tiny-model", 0, Some("model.safetensors"));
    let other = dir.path().join("cache2");
    let (code, _, err) = pull(&liar, "org/tiny-model", &other);
    assert_eq!(code, 1);
    assert!(
        err.contains("model.safetensors: checksum mismatch"),
        "{err}"
    );
    assert!(
        !other
            .join("models/org--tiny-model/model.safetensors")
            .exists()
    );

    // An id the hub does not have.
    let (code, _, err) = pull(&liar, "org/nothing-here", &other);
    assert_eq!(code, 1);
    assert!(
        err.contains("/org/nothing-here/resolve/main/config.json was not found"),
        "{err}"
    );
}

/// The whole path a person takes: pull the real model by id, name the id in
/// `search.model`, and evod finds it in its cache directory.
#[test]
fn a_pulled_model_is_found_by_its_id() {
    let Some(model) = test_model() else { return };
    let hub = Hub::serve(model, "sentence-transformers/all-MiniLM-L6-v2", 0, None);
    let dir = TempDir::new("byid");
    let cache = dir.path().join("cache");
    let (code, _, err) = pull(&hub, "sentence-transformers/all-MiniLM-L6-v2", &cache);
    assert_eq!(code, 0, "{err}");
    let config_path = dir.path().join("mcp.config.json");
    std::fs::write(
        &config_path,
        serde_json::to_vec(&json!({
            "mcpServers": {"time": replayed("time")},
            "search": {"model": "sentence-transformers/all-MiniLM-L6-v2"},
        }))
        .unwrap(),
    )
    .unwrap();
    let d = Daemon::start_raw(dir, config_path, &[], &[]);
    d.wait_ready(&["time"]);
    let status = d.wait_status("the pulled model ready", |s| search_state(s) == "ready");
    assert_eq!(
        status["search"]["model"],
        "sentence-transformers/all-MiniLM-L6-v2"
    );
    let mut bytes = Vec::new();
    std::fs::File::open(
        d.cache
            .join("models/sentence-transformers--all-MiniLM-L6-v2/config.json"),
    )
    .unwrap()
    .read_to_end(&mut bytes)
    .unwrap();
    assert!(!bytes.is_empty());
}
