//! `evo-bench --remote`: a proxied call to a remote child against the same
//! call made to that child directly, over Streamable HTTP (the fixture's
//! `--http` mode) and over the legacy HTTP+SSE transport (server-everything
//! in its `sse` mode, from tests/interop/node_modules), in alternating
//! rounds. The HTTP child is also reached with a valid OAuth token (a token
//! file seeded in the state directory): the token costs one header.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use rmcp::service::{Peer, RoleClient, RunningService, ServiceExt};
use serde_json::{Value, json};

use crate::httpbench::HttpFixture;
use crate::timing::{median, percentile, us};
use evo_tests::harness::{daemon::Daemon, mcp::McpClient, ports::free_port, process::TempDir};

/// server-everything in SSE mode on a free port; killed on drop.
struct SseEverything {
    child: Child,
    port: u16,
}

impl SseEverything {
    fn start() -> Option<SseEverything> {
        let js = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("interop/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
        if !js.exists() {
            println!(
                "skipped SSE: {} is missing (run tests/run once)",
                js.display()
            );
            return None;
        }
        let port = free_port();
        let mut child = Command::new("node")
            .arg(&js)
            .arg("sse")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .ok()?;
        let mut lines = BufReader::new(child.stderr.take()?).lines();
        loop {
            let line = lines.next()?.ok()?;
            if line.contains("Server is running on port") {
                break;
            }
        }
        std::thread::spawn(move || for _ in lines {});
        Some(SseEverything { child, port })
    }
}

impl Drop for SseEverything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A direct rmcp client of a remote server, driven from the bench's
/// runtime.
struct Direct {
    rt: tokio::runtime::Runtime,
    _client: RunningService<RoleClient, ()>,
    peer: Peer<RoleClient>,
    tool: &'static str,
    key: &'static str,
}

impl Direct {
    fn calls(&self, n: usize, out: &mut Vec<Duration>) {
        let peer = self.peer.clone();
        let (tool, key) = (self.tool, self.key);
        self.rt.block_on(async move {
            for i in 0..n {
                let args = json!({ key: i.to_string() });
                let t = Instant::now();
                let r = peer
                    .call_tool(
                        CallToolRequestParams::new(tool)
                            .with_arguments(args.as_object().cloned().unwrap_or_default()),
                    )
                    .await
                    .expect("direct call");
                out.push(t.elapsed());
                assert_ne!(r.is_error, Some(true));
            }
        });
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime")
}

fn direct_http(port: u16) -> Direct {
    let rt = runtime();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let client = rt.block_on(async {
        let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url);
        ().serve(transport).await.expect("direct HTTP client")
    });
    let peer = client.peer().clone();
    Direct {
        rt,
        _client: client,
        peer,
        tool: "echo",
        key: "text",
    }
}

fn direct_sse(port: u16) -> Direct {
    let rt = runtime();
    let client = rt.block_on(async {
        let link = Arc::new(evo_daemon::child::link::ServerLink::new(
            "bench".into(),
            Duration::from_secs(60),
            None,
        ));
        let target = evo_daemon::child::sse::SseTarget {
            server: "bench".into(),
            url: format!("http://127.0.0.1:{port}/sse"),
            headers: Default::default(),
            bearer: None,
            link,
            max_message: 16 << 20,
        };
        let transport =
            evo_daemon::child::sse::SseTransport::connect(target, reqwest_client(), |_| {})
                .await
                .unwrap_or_else(|e| panic!("direct SSE: {e}"));
        ().serve(transport).await.expect("direct SSE client")
    });
    let peer = client.peer().clone();
    Direct {
        rt,
        _client: client,
        peer,
        tool: "echo",
        key: "message",
    }
}

fn reqwest_client() -> reqwest::Client {
    reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .expect("client")
}

/// A token file evod takes as a valid login for server `id` at `url`.
fn seed_token(state: &std::path::Path, id: &str, url: &str) {
    let dir = state.join("oauth");
    std::fs::create_dir_all(&dir).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let file = json!({
        "binding": evo_daemon::config::binding(url, None),
        "client_id": "bench",
        "credentials": {
            "client_id": "bench",
            "token_response": {"access_token": "bench-token", "token_type": "bearer", "expires_in": 3600},
            "granted_scopes": [],
            "token_received_at": now
        }
    });
    let name = format!(
        "{id}-{}.json",
        evo_daemon::config::short_hash(id.as_bytes())
    );
    std::fs::write(dir.join(name), serde_json::to_vec(&file).unwrap()).unwrap();
}

fn proxied(c: &mut McpClient, tool: &str, key: &str, n: usize, out: &mut Vec<Duration>) {
    for i in 0..n {
        let t = Instant::now();
        let r: Value = c.call(tool, json!({ key: i.to_string() }));
        out.push(t.elapsed());
        assert_ne!(r["isError"], true, "{r}");
    }
}

pub fn remote_benchmarks(quick: bool) {
    let (rounds, per_round) = if quick { (5, 100) } else { (20, 250) };
    let http = HttpFixture::start();
    let sse = SseEverything::start();
    let http_url = format!("http://127.0.0.1:{}/mcp", http.port);
    let state = TempDir::new("state");
    seed_token(state.path(), "authed", &http_url);
    let mut servers = json!({
        "web": {"type": "http", "url": http_url},
        "authed": {"type": "http", "url": http_url, "auth": "oauth"},
    });
    if let Some(s) = &sse {
        servers["ev"] = json!({"type": "sse", "url": format!("http://127.0.0.1:{}/sse", s.port)});
    }
    let state_dir = state.path().to_string_lossy().into_owned();
    let d = Daemon::start_with(
        &json!({"mcpServers": servers}),
        &[],
        &[("EVO_STATE_DIR", &state_dir)],
    );
    let mut ids = vec!["web", "authed"];
    if sse.is_some() {
        ids.push("ev");
    }
    d.wait_ready(&ids);
    let mut socket = McpClient::connect_socket(&d.socket, "legacy");
    socket.initialize();

    let direct_h = direct_http(http.port);
    let direct_s = sse.as_ref().map(|s| direct_sse(s.port));

    // name, how to run n calls
    type Run<'a> = Box<dyn FnMut(usize, &mut Vec<Duration>) + 'a>;
    let socket = std::cell::RefCell::new(socket);
    let mut paths: Vec<(&str, Run)> = vec![
        (
            "Streamable HTTP: client → fixture (direct, rmcp client)",
            Box::new(|n, out| direct_h.calls(n, out)),
        ),
        (
            "Streamable HTTP: client → evod socket → fixture",
            Box::new(|n, out| proxied(&mut socket.borrow_mut(), "web_echo", "text", n, out)),
        ),
        (
            "Streamable HTTP, OAuth token: client → evod socket → fixture",
            Box::new(|n, out| proxied(&mut socket.borrow_mut(), "authed_echo", "text", n, out)),
        ),
    ];
    if let Some(ds) = &direct_s {
        paths.push((
            "HTTP+SSE: client → server-everything (direct, evo's SSE transport)",
            Box::new(move |n, out| ds.calls(n, out)),
        ));
        paths.push((
            "HTTP+SSE: client → evod socket → server-everything",
            Box::new(|n, out| proxied(&mut socket.borrow_mut(), "ev_echo", "message", n, out)),
        ));
    }
    let mut sink = Vec::new();
    for (_, run) in paths.iter_mut() {
        run(100, &mut sink); // warm-up
    }
    let mut all: Vec<Vec<Duration>> = vec![Vec::new(); paths.len()];
    let mut rounds_of: Vec<Vec<Duration>> = vec![Vec::new(); paths.len()];
    for _ in 0..rounds {
        for (i, (_, run)) in paths.iter_mut().enumerate() {
            let mut r = Vec::new();
            run(per_round, &mut r);
            rounds_of[i].push(median(&mut r.clone()));
            all[i].extend(r);
        }
    }
    for v in all.iter_mut() {
        v.sort();
    }
    println!(
        "\n## Remote children: proxied vs direct ({} calls per path in {rounds} alternating rounds)\n",
        all[0].len()
    );
    println!("| path | median µs | p99 µs |");
    println!("|---|---|---|");
    for ((name, _), v) in paths.iter().zip(&all) {
        println!(
            "| {name} | {} | {} |",
            us(percentile(v, 0.5)),
            us(percentile(v, 0.99))
        );
    }
    let paired = |proxied: usize, direct: usize| {
        let mut diffs: Vec<Duration> = rounds_of[proxied]
            .iter()
            .zip(&rounds_of[direct])
            .map(|(p, d)| p.saturating_sub(*d))
            .collect();
        us(median(&mut diffs))
    };
    println!(
        "| **added by evo, Streamable HTTP** (paired by round) | **{}** | |",
        paired(1, 0)
    );
    println!(
        "| **added by evo, Streamable HTTP with an OAuth token** (paired by round) | **{}** | |",
        paired(2, 0)
    );
    if direct_s.is_some() {
        println!(
            "| **added by evo, HTTP+SSE** (paired by round) | **{}** | |",
            paired(4, 3)
        );
    }
}
