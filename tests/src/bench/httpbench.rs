//! `evo-bench --http`: evod's Streamable HTTP endpoint against the same
//! client calling a Streamable HTTP child directly (the fixture's `--http`
//! mode), side by side in alternating rounds; first the call path's goals
//! in one interleaved run (evod with a stdio child and with an HTTP child
//! against direct: added median, evod's own CPU per call with 16 clients,
//! calls/s as a share of direct); throughput with 16 clients; evod's memory
//! with 100 idle HTTP sessions; JWT validation in process.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::timing::{cpu_time, median, percentile, us};
use evo_tests::harness::{
    daemon::Daemon,
    http::{Conn, Reply, wait_http},
    locations::fixture,
    mcp::McpClient,
    ports::free_port,
    process::{TempDir, rss_kib},
    servers::fixture_server,
};

/// The fixture serving Streamable HTTP on a free port; killed on drop.
pub(crate) struct HttpFixture {
    child: Child,
    pub(crate) port: u16,
}

impl HttpFixture {
    pub(crate) fn start() -> HttpFixture {
        let mut child = Command::new(fixture())
            .args(["--http", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the HTTP fixture");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let port = loop {
            let line = lines
                .next()
                .expect("the fixture says where it listens")
                .unwrap();
            if let Some(rest) = line.split("listening on http://").nth(1) {
                break rest
                    .split('/')
                    .next()
                    .and_then(|a| a.rsplit(':').next())
                    .and_then(|p| p.parse().ok())
                    .expect("a port");
            }
        };
        std::thread::spawn(move || for _ in lines {});
        HttpFixture { child, port }
    }
}

impl Drop for HttpFixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One MCP client on a keep-alive connection: initialize-era (a session id)
/// or 2026-07-28 (no session), with an optional bearer credential.
struct Client {
    conn: Conn,
    port: u16,
    auth: Option<String>,
    session: Option<String>,
    modern: bool,
    next: u64,
    /// The tool to call: `echo` at the fixture, `web_echo` through evo.
    tool: String,
}

impl Client {
    fn new(port: u16, auth: Option<&str>, modern: bool, tool: &str) -> Client {
        let mut c = Client {
            conn: Conn::open(port),
            port,
            auth: auth.map(|t| format!("Bearer {t}")),
            session: None,
            modern,
            next: 1,
            tool: tool.to_string(),
        };
        if !modern {
            let r = c.post(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "evo-bench", "version": "1"}}}),
                "initialize",
            );
            assert_eq!(r.status, 200, "initialize: {}", r.text());
            c.session = r.header("mcp-session-id").map(str::to_owned);
            let n = c.post(
                &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                "notifications/initialized",
            );
            assert_eq!(n.status, 202, "{}", n.text());
        }
        c
    }

    fn post(&mut self, msg: &Value, method: &str) -> Reply {
        let body = msg.to_string();
        let mut headers: Vec<(&str, &str)> = vec![
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
        ];
        if let Some(a) = &self.auth {
            headers.push(("Authorization", a));
        }
        if let Some(s) = &self.session {
            headers.push(("Mcp-Session-Id", s));
        }
        let name = msg["params"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if self.modern {
            headers.push(("MCP-Protocol-Version", "2026-07-28"));
            headers.push(("Mcp-Method", method));
            if method == "tools/call" {
                headers.push(("Mcp-Name", &name));
            }
        }
        let r = self.conn.request("POST", "/mcp", &headers, body.as_bytes());
        if r.header("connection")
            .is_some_and(|c| c.eq_ignore_ascii_case("close"))
        {
            self.conn = Conn::open(self.port);
        }
        r
    }

    fn call(&mut self, text: &str) {
        let id = self.next;
        self.next += 1;
        let mut params = json!({"name": self.tool, "arguments": {"text": text}});
        if self.modern {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            });
        }
        let r = self.post(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}),
            "tools/call",
        );
        assert_eq!(r.status, 200, "{}", r.text());
        let answer = r.answer();
        assert_eq!(answer["result"]["content"][0]["text"], text, "{answer}");
    }

    fn time(&mut self, n: usize, out: &mut Vec<Duration>) {
        for i in 0..n {
            let t = Instant::now();
            self.call(&i.to_string());
            out.push(t.elapsed());
        }
    }
}

/// A JWKS document for `key`, served over HTTP by a thread (every
/// connection gets it, once).
fn serve_jwks(jwks: String) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{jwks}",
                jwks.len()
            );
        }
    });
    port
}

/// base64url without padding (JWK members).
fn b64url(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().fold(0u32, |n, b| n << 8 | u32::from(*b)) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// An ES256 and an RS256 signing key made by `openssl`, as jsonwebtoken
/// keys, and the JWKS of their public halves.
fn signing_keys(
    dir: &std::path::Path,
) -> Option<(jsonwebtoken::EncodingKey, jsonwebtoken::EncodingKey, String)> {
    use jsonwebtoken::EncodingKey;
    let run = |args: &[&str]| {
        Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| o.stdout)
    };
    run(&[
        "genpkey",
        "-algorithm",
        "EC",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-out",
        "ec.pem",
    ])?;
    run(&[
        "pkcs8", "-topk8", "-nocrypt", "-in", "ec.pem", "-outform", "DER", "-out", "ec.der",
    ])?;
    run(&[
        "ec",
        "-in",
        "ec.pem",
        "-pubout",
        "-outform",
        "DER",
        "-out",
        "ec.pub.der",
    ])?;
    run(&["genrsa", "-out", "rsa.pem", "2048"])?;
    run(&[
        "rsa",
        "-in",
        "rsa.pem",
        "-outform",
        "DER",
        "-traditional",
        "-out",
        "rsa.der",
    ])?;
    let modulus = String::from_utf8(run(&["rsa", "-in", "rsa.pem", "-noout", "-modulus"])?).ok()?;
    let hex = modulus.trim().strip_prefix("Modulus=")?;
    let n: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
        .collect::<Option<_>>()?;
    // A P-256 public key's DER ends with the 64 bytes of X and Y.
    let point = std::fs::read(dir.join("ec.pub.der")).ok()?;
    let (x, y) = point[point.len() - 64..].split_at(32);
    let jwks = json!({"keys": [
        {"kty": "EC", "crv": "P-256", "kid": "ec1", "alg": "ES256", "use": "sig", "x": b64url(x), "y": b64url(y)},
        {"kty": "RSA", "kid": "rsa1", "alg": "RS256", "use": "sig", "n": b64url(&n), "e": "AQAB"},
    ]})
    .to_string();
    let ec = EncodingKey::from_ec_der(&std::fs::read(dir.join("ec.der")).ok()?);
    let rsa = EncodingKey::from_rsa_der(&std::fs::read(dir.join("rsa.der")).ok()?);
    Some((ec, rsa, jwks))
}

fn jwt(
    key: &jsonwebtoken::EncodingKey,
    alg: jsonwebtoken::Algorithm,
    kid: &str,
    iss: &str,
    aud: &str,
) -> String {
    jwt_for(key, alg, kid, iss, aud, "bench")
}

fn jwt_for(
    key: &jsonwebtoken::EncodingKey,
    alg: jsonwebtoken::Algorithm,
    kid: &str,
    iss: &str,
    aud: &str,
    sub: &str,
) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut header = jsonwebtoken::Header::new(alg);
    header.kid = Some(kid.into());
    jsonwebtoken::encode(
        &header,
        &json!({"iss": iss, "aud": aud, "sub": sub, "exp": now + 3600, "iat": now}),
        key,
    )
    .expect("sign a JWT")
}

/// JWT validation in process, the key set cached: µs per token.
fn jwt_validation(ec: &jsonwebtoken::EncodingKey, rsa: &jsonwebtoken::EncodingKey, jwks_port: u16) {
    use evo_daemon::auth::jwt::JwtValidator;
    use evo_daemon::config::serve::OAuthSettings;
    let iss = format!("http://127.0.0.1:{jwks_port}");
    let aud = "http://127.0.0.1/mcp";
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let v = JwtValidator::new(OAuthSettings {
        issuer: iss.clone(),
        audience: aud.into(),
        jwks_url: format!("{iss}/jwks.json"),
        ..Default::default()
    })
    .unwrap();
    runtime.block_on(v.refresh(true));
    println!("\n## JWT validation in process (key set cached)\n");
    println!("| algorithm | token | checks | median µs | p99 µs |");
    println!("|---|---|---|---|---|");
    for (name, key, alg, kid) in [
        ("ES256", ec, jsonwebtoken::Algorithm::ES256, "ec1"),
        ("RS256", rsa, jsonwebtoken::Algorithm::RS256, "rsa1"),
    ] {
        // Each token seen for the first time: its signature is verified.
        let fresh: Vec<String> = (0..2000)
            .map(|i| jwt_for(key, alg, kid, &iss, aud, &format!("user{i}")))
            .collect();
        let mut first = Vec::with_capacity(fresh.len());
        // The same token again (what a client sends on every request).
        let mut again = Vec::with_capacity(5000);
        runtime.block_on(async {
            for t in fresh.iter().take(100) {
                v.check(t).await.expect("a valid token");
            }
            for t in &fresh[100..] {
                let at = Instant::now();
                let ok = v.check(t).await;
                first.push(at.elapsed());
                assert!(ok.is_ok());
            }
            let token = &fresh[0];
            for _ in 0..5000 {
                let at = Instant::now();
                let ok = v.check(token).await;
                again.push(at.elapsed());
                assert!(ok.is_ok());
            }
        });
        for (what, times) in [
            ("first use (signature checked)", &mut first),
            ("used again (verified before)", &mut again),
        ] {
            times.sort();
            println!(
                "| {name} | {what} | {} | **{}** (budget 50) | {} |",
                times.len(),
                us(percentile(times, 0.5)),
                us(percentile(times, 0.99))
            );
        }
    }
}

/// Calls per second of `clients` clients on their own connections, each
/// making `calls` sequential calls.
fn throughput(make: &dyn Fn() -> Client, clients: usize, calls: usize) -> f64 {
    let mut cs: Vec<Client> = (0..clients).map(|_| make()).collect();
    let start = Instant::now();
    std::thread::scope(|s| {
        for c in cs.iter_mut() {
            s.spawn(move || {
                for i in 0..calls {
                    c.call(&i.to_string());
                }
            });
        }
    });
    (clients * calls) as f64 / start.elapsed().as_secs_f64()
}

/// Makes one more client of a path.
type ClientMaker<'a> = Box<dyn Fn() -> Client + 'a>;

/// The call path's goals in one run, every path in alternating rounds:
/// evod (API token, initialize sessions) to a stdio child and to an HTTP
/// child, against the client calling the HTTP child directly. evod's own
/// CPU per call is its utime + stime over a 16-client run divided by the
/// calls made.
fn call_path_goals(d: &Daemon, fx_port: u16, port: u16, token: &str, sizes: (usize, usize, usize)) {
    let (rounds, per_round, tp_calls) = sizes;
    let makers: [(&str, ClientMaker<'_>); 3] = [
        (
            "client → HTTP fixture (direct)",
            Box::new(|| Client::new(fx_port, None, false, "echo")),
        ),
        (
            "client → evod → stdio fixture",
            Box::new(|| Client::new(port, Some(token), false, "fx_echo")),
        ),
        (
            "client → evod → HTTP fixture",
            Box::new(|| Client::new(port, Some(token), false, "web_echo")),
        ),
    ];
    let mut clients: Vec<Client> = makers.iter().map(|(_, make)| make()).collect();
    let mut sink = Vec::new();
    for c in clients.iter_mut() {
        c.time(100, &mut sink);
    }
    let mut all: Vec<Vec<Duration>> = vec![Vec::new(); clients.len()];
    for _ in 0..rounds {
        for (i, c) in clients.iter_mut().enumerate() {
            c.time(per_round, &mut all[i]);
        }
    }
    drop(clients);
    let mut rates = vec![0.0f64; makers.len()];
    let mut cpu = vec![Duration::MAX; makers.len()];
    for _ in 0..2 {
        for (i, (_, make)) in makers.iter().enumerate() {
            let before = cpu_time(d.pid());
            rates[i] = rates[i].max(throughput(make.as_ref(), 16, tp_calls));
            let used = cpu_time(d.pid()).saturating_sub(before);
            cpu[i] = cpu[i].min(used / (16 * tp_calls) as u32);
        }
    }
    for v in all.iter_mut() {
        v.sort();
    }
    let direct = percentile(&all[0], 0.5);
    println!(
        "\n## The call path ({} calls per path in {rounds} alternating rounds; 16 clients × {tp_calls} calls, best of 2 alternating; initialize sessions, API token)\n",
        all[0].len()
    );
    println!(
        "| path | median µs | p99 µs | added median µs (goal ≤ 100) | evod CPU µs/call, 16 clients (goal ≤ 100) | calls/s | % of direct (goal ≥ 90) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (i, (name, _)) in makers.iter().enumerate() {
        let median = percentile(&all[i], 0.5);
        let (added, own_cpu) = if i == 0 {
            ("".to_string(), "".to_string())
        } else {
            (
                format!("**{}**", us(median.saturating_sub(direct))),
                format!("**{}**", us(cpu[i])),
            )
        };
        println!(
            "| {name} | {} | {} | {added} | {own_cpu} | {:.0} | {:.0}% |",
            us(median),
            us(percentile(&all[i], 0.99)),
            rates[i],
            100.0 * rates[i] / rates[0]
        );
    }
}

/// Where the added time goes: the HTTP front alone (to a stdio child), the
/// HTTP child client alone (from the socket), neither (socket to stdio).
fn breakdown(d: &Daemon, port: u16, token: &str, rounds: usize, per_round: usize) {
    fn socket(d: &Daemon) -> McpClient {
        let mut c = McpClient::connect_socket(&d.socket, "legacy");
        c.initialize();
        c
    }
    enum Path {
        Http(Client),
        Socket(McpClient, &'static str),
    }
    impl Path {
        fn time(&mut self, n: usize, out: &mut Vec<Duration>) {
            match self {
                Path::Http(c) => c.time(n, out),
                Path::Socket(c, tool) => {
                    for i in 0..n {
                        let t = Instant::now();
                        let r = c.call(tool, json!({"text": i.to_string()}));
                        out.push(t.elapsed());
                        assert_eq!(r["content"][0]["text"], i.to_string(), "{r}");
                    }
                }
            }
        }
    }
    let mut paths = [
        (
            "client → evod HTTP (API token) → stdio fixture",
            Path::Http(Client::new(port, Some(token), false, "fx_echo")),
        ),
        (
            "client → evod socket → HTTP fixture",
            Path::Socket(socket(d), "web_echo"),
        ),
        (
            "client → evod socket → stdio fixture",
            Path::Socket(socket(d), "fx_echo"),
        ),
    ];
    let mut all: Vec<Vec<Duration>> = vec![Vec::new(); paths.len()];
    let mut sink = Vec::new();
    for (_, p) in paths.iter_mut() {
        p.time(100, &mut sink);
    }
    for _ in 0..rounds {
        for (i, (_, p)) in paths.iter_mut().enumerate() {
            p.time(per_round, &mut all[i]);
        }
    }
    println!("\n## Where it goes (same run, alternating rounds)\n");
    println!("| path | median µs | p99 µs |");
    println!("|---|---|---|");
    for ((name, _), v) in paths.iter().zip(all.iter_mut()) {
        v.sort();
        println!(
            "| {name} | {} | {} |",
            us(percentile(v, 0.5)),
            us(percentile(v, 0.99))
        );
    }
}

/// `--http-load PORT N [TOOL [TOKEN]]`: N sequential calls of TOOL
/// (`fx_echo`) in an initialize-era session on a running evod's HTTP
/// endpoint, for profiling it from outside.
pub fn http_load(port: u16, n: usize, tool: &str, token: Option<&str>) {
    let mut c = Client::new(port, token, false, tool);
    let mut times = Vec::with_capacity(n);
    c.time(n, &mut times);
    times.sort();
    println!("median {} µs", us(percentile(&times, 0.5)));
}

pub fn http_benchmarks(quick: bool) {
    let (rounds, per_round, tp_calls) = if quick { (10, 40, 100) } else { (40, 100, 400) };
    let fx = HttpFixture::start();
    let dir = TempDir::new("hb");
    let keys = signing_keys(dir.path());
    let jwks_port = keys.as_ref().map(|(_, _, jwks)| serve_jwks(jwks.clone()));
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut auth = json!({});
    if let Some(jp) = jwks_port {
        auth["oauth"] = json!({"issuer": format!("http://127.0.0.1:{jp}"), "audience": url,
                               "jwks_url": format!("http://127.0.0.1:{jp}/jwks.json")});
    }
    let config = json!({
        "mcpServers": {"web": {"type": "http", "url": format!("http://127.0.0.1:{}/mcp", fx.port)},
                       "fx": fixture_server(&[])},
        "serve": {"http": {"listen": format!("127.0.0.1:{port}"), "auth": auth}},
    });
    let d = Daemon::start_with(&config, &["--mode", "legacy"], &[]);
    wait_http(&d, port);
    d.wait_ready(&["web", "fx"]);
    let (code, out, err) = d.ctl(&["token", "create", "bench"]);
    assert_eq!(code, 0, "{err}");
    let token = out.trim().to_string();
    let bearer_jwt = keys.as_ref().zip(jwks_port).map(|((ec, _, _), jp)| {
        jwt(
            ec,
            jsonwebtoken::Algorithm::ES256,
            "ec1",
            &format!("http://127.0.0.1:{jp}"),
            &url,
        )
    });

    call_path_goals(&d, fx.port, port, &token, (rounds, per_round, tp_calls));

    // Latency, alternating rounds: [direct, evo+token, evo+JWT] per era.
    let mut paths: Vec<(String, Client)> = Vec::new();
    for (era, modern) in [("initialize session", false), ("2026-07-28", true)] {
        paths.push((
            format!("{era}: client → HTTP fixture (direct)"),
            Client::new(fx.port, None, modern, "echo"),
        ));
        paths.push((
            format!("{era}: client → evod (API token) → HTTP fixture"),
            Client::new(port, Some(&token), modern, "web_echo"),
        ));
        if let Some(j) = &bearer_jwt {
            paths.push((
                format!("{era}: client → evod (OAuth JWT, ES256) → HTTP fixture"),
                Client::new(port, Some(j), modern, "web_echo"),
            ));
        }
    }
    let per_era = paths.len() / 2;
    let mut sink = Vec::new();
    for (_, c) in paths.iter_mut() {
        c.time(100, &mut sink);
    }
    let mut all: Vec<Vec<Duration>> = vec![Vec::new(); paths.len()];
    let mut paired: Vec<Vec<Duration>> = vec![Vec::new(); 2];
    for _ in 0..rounds {
        let mut medians = Vec::new();
        for (i, (_, c)) in paths.iter_mut().enumerate() {
            let mut r = Vec::new();
            c.time(per_round, &mut r);
            medians.push(median(&mut r));
            all[i].extend(r);
        }
        for (era, pairs) in paired.iter_mut().enumerate() {
            let base = era * per_era;
            pairs.push(medians[base + 1].saturating_sub(medians[base]));
        }
    }
    for v in all.iter_mut() {
        v.sort();
    }
    println!(
        "\n## Proxied tools/call over HTTP ({} calls per path in {rounds} alternating rounds, keep-alive connections)\n",
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
    for (era, name) in ["initialize session", "2026-07-28"].iter().enumerate() {
        let base = era * per_era;
        let added = percentile(&all[base + 1], 0.5).saturating_sub(percentile(&all[base], 0.5));
        println!(
            "| **added by evo, {name}** (API token − direct) | **{}** (goal ≤ 100) | |",
            us(added)
        );
        println!(
            "| added, {name}, paired by round | **{}** | |",
            us(median(&mut paired[era]))
        );
        if per_era == 3 {
            let jwt_cost =
                percentile(&all[base + 2], 0.5).saturating_sub(percentile(&all[base + 1], 0.5));
            println!("| JWT over API token, {name} | {} | |", us(jwt_cost));
        }
    }
    drop(paths);
    breakdown(&d, port, &token, rounds, per_round);

    // Throughput, 16 clients, alternating twice.
    let direct = || Client::new(fx.port, None, false, "echo");
    let via = || Client::new(port, Some(&token), false, "web_echo");
    let mut d_rates = Vec::new();
    let mut e_rates = Vec::new();
    for _ in 0..2 {
        d_rates.push(throughput(&direct, 16, tp_calls));
        e_rates.push(throughput(&via, 16, tp_calls));
    }
    let best = |v: &[f64]| v.iter().cloned().fold(0.0, f64::max);
    println!(
        "\n## Throughput: 16 clients × {tp_calls} sequential calls (initialize sessions), best of 2 alternating\n"
    );
    println!("| path | calls/s |");
    println!("|---|---|");
    println!("| direct to the HTTP fixture | {:.0} |", best(&d_rates));
    println!("| through evod (API token) | {:.0} |", best(&e_rates));
    println!(
        "| **evod ÷ direct** | **{:.0}%** (goal ≥ 90%) |",
        100.0 * best(&e_rates) / best(&d_rates)
    );

    // Memory: 100 idle HTTP sessions.
    std::thread::sleep(Duration::from_millis(500));
    let before = rss_kib(d.pid());
    let idle: Vec<Client> = (0..100)
        .map(|_| Client::new(port, Some(&token), false, "web_echo"))
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let after = rss_kib(d.pid());
    let listed = d.ctl_json(&["sessions"])["sessions"]
        .as_array()
        .map_or(0, Vec::len);
    println!("\n## evod memory with idle HTTP sessions\n");
    println!("| state | RSS MiB |");
    println!("|---|---|");
    println!("| before | {:.1} |", before as f64 / 1024.0);
    println!(
        "| 100 idle initialize-era HTTP sessions ({listed} listed) | {:.1} |",
        after as f64 / 1024.0
    );
    println!(
        "| **added** | **{:.1}** (goal ≤ 8) |",
        (after.saturating_sub(before)) as f64 / 1024.0
    );
    drop(idle);

    match &keys {
        Some((ec, rsa, _)) => jwt_validation(ec, rsa, jwks_port.unwrap_or_default()),
        None => println!("\n(JWT rows skipped: `openssl` could not make the signing keys)"),
    }
}
