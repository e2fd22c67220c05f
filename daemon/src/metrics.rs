//! evod's Prometheus metrics (`/metrics` on the HTTP endpoint). What happens
//! on a request path (a tool call, a search, an HTTP answer) is counted where
//! it happens, into the one process-wide [`Metrics`]; what is a state (live
//! sessions, children by state, restarts) is gathered when scraped, from the
//! Supervisor ([`Gathered`]), so nothing has to keep a gauge in step.
//!
//! The hot path pays one read lock and one hash lookup of the server id (its
//! counters are cached per server, labels built once), then atomic adds.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, RwLock};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// How a proxied tool call ended, as `/metrics` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallOutcome {
    /// The child answered with a result.
    Ok,
    /// The child answered with an error result (`isError`) or a JSON-RPC error.
    ToolError,
    /// evo did not forward it: unknown or denied tool, invalid arguments,
    /// the retry-loop breaker, an approval not given.
    Refused,
    /// No answer within the server's `timeout_s`.
    Timeout,
    /// The server could not be reached (down, starting failed, connection lost).
    Unavailable,
    /// The client cancelled it.
    Cancelled,
}

impl CallOutcome {
    const ALL: [CallOutcome; 6] = [
        CallOutcome::Ok,
        CallOutcome::ToolError,
        CallOutcome::Refused,
        CallOutcome::Timeout,
        CallOutcome::Unavailable,
        CallOutcome::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Ok => "ok",
            CallOutcome::ToolError => "tool_error",
            CallOutcome::Refused => "refused",
            CallOutcome::Timeout => "timeout",
            CallOutcome::Unavailable => "unavailable",
            CallOutcome::Cancelled => "cancelled",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    server: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabel {
    server: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SessionLabels {
    transport: &'static str,
    era: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

/// Call latency buckets: 100 µs to about 105 s, doubling.
fn call_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 21))
}

/// Search latency buckets: 10 µs to about 1.3 s, doubling.
fn search_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_01, 2.0, 18))
}

/// One server's call counters and latency, cached so a call builds no labels.
struct ServerMetrics {
    outcomes: [Counter; 6],
    latency: Histogram,
}

/// The process-wide metrics. See the module docs.
pub struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    call_seconds: Family<ServerLabel, Histogram, fn() -> Histogram>,
    search_seconds: Histogram,
    http_requests: Family<StatusLabel, Counter>,
    store_errors: Counter,
    servers: RwLock<HashMap<String, Arc<ServerMetrics>>>,
}

/// What the Supervisor reports at a scrape: states, not events.
#[derive(Debug, Clone, Default)]
pub struct Gathered {
    /// Live sessions by (transport, era).
    pub sessions: Vec<(&'static str, &'static str)>,
    /// Configured children by state.
    pub children: Vec<&'static str>,
    /// Restarts per server since evod started.
    pub restarts: Vec<(String, u32)>,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The process-wide metrics.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

impl Metrics {
    fn new() -> Metrics {
        let mut registry = Registry::with_prefix("evo");
        let calls = Family::<CallLabels, Counter>::default();
        let call_seconds: Family<ServerLabel, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(call_histogram);
        let search_seconds = search_histogram();
        let http_requests = Family::<StatusLabel, Counter>::default();
        let store_errors = Counter::default();
        registry.register(
            "store_errors",
            "Operations on the shared store (Redis, store.redis_url) that failed",
            store_errors.clone(),
        );
        registry.register(
            "tool_calls",
            "Proxied tool calls by server and outcome (ok, tool_error, refused, timeout, unavailable, cancelled)",
            calls.clone(),
        );
        registry.register(
            "tool_call_duration_seconds",
            "Time from forwarding a tool call to its answer, by server",
            call_seconds.clone(),
        );
        registry.register(
            "search_duration_seconds",
            "Time to rank the catalog for one discover_tools or evoctl search",
            search_seconds.clone(),
        );
        registry.register(
            "http_requests",
            "HTTP requests answered by the HTTP endpoint, by status code",
            http_requests.clone(),
        );
        Metrics {
            registry,
            calls,
            call_seconds,
            search_seconds,
            http_requests,
            store_errors,
            servers: RwLock::new(HashMap::new()),
        }
    }

    fn server(&self, server: &str) -> Arc<ServerMetrics> {
        if let Some(m) = self
            .servers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(server)
        {
            return m.clone();
        }
        let outcomes = CallOutcome::ALL.map(|outcome| {
            self.calls.get_or_create_owned(&CallLabels {
                server: server.to_owned(),
                outcome: outcome.as_str(),
            })
        });
        let latency = self.call_seconds.get_or_create_owned(&ServerLabel {
            server: server.to_owned(),
        });
        let made = Arc::new(ServerMetrics { outcomes, latency });
        self.servers
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .entry(server.to_owned())
            .or_insert(made)
            .clone()
    }

    /// A proxied call to `server` (`""` when no server was resolved: an
    /// unknown or denied tool) ended with `outcome`; `took` is how long the
    /// child had it, for calls that were forwarded.
    pub fn call(&self, server: &str, outcome: CallOutcome, took: Option<Duration>) {
        let m = self.server(server);
        let i = CallOutcome::ALL
            .iter()
            .position(|o| *o == outcome)
            .unwrap_or(0);
        m.outcomes[i].inc();
        if let Some(took) = took {
            m.latency.observe(took.as_secs_f64());
        }
    }

    /// One search of the catalog took `took`.
    pub fn search(&self, took: Duration) {
        self.search_seconds.observe(took.as_secs_f64());
    }

    /// An operation on the shared store failed.
    pub fn store_error(&self) {
        self.store_errors.inc();
    }

    /// The HTTP endpoint answered with `status`.
    pub fn http_response(&self, status: u16) {
        self.http_requests
            .get_or_create(&StatusLabel { status })
            .inc();
    }

    /// The Prometheus text exposition (version 0.0.4) of everything, with
    /// the states gathered for this scrape.
    pub fn render(&self, gathered: &Gathered) -> String {
        let mut states = Registry::with_prefix("evo");
        let sessions = Family::<SessionLabels, Gauge>::default();
        for &(transport, era) in &gathered.sessions {
            sessions
                .get_or_create(&SessionLabels { transport, era })
                .inc();
        }
        states.register(
            "sessions",
            "Live MCP sessions by transport (stdio, socket, http) and era (initialize, 2026-07-28, unknown)",
            sessions,
        );
        let children = Family::<StateLabel, Gauge>::default();
        for &state in &gathered.children {
            children.get_or_create(&StateLabel { state }).inc();
        }
        states.register("children", "Configured servers by state", children);
        let restarts = Family::<ServerLabel, Gauge>::default();
        for (server, n) in &gathered.restarts {
            restarts
                .get_or_create(&ServerLabel {
                    server: server.clone(),
                })
                .set(i64::from(*n));
        }
        states.register(
            "child_restarts",
            "Restarts of each server's child since evod started",
            restarts,
        );
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut text, &self.registry);
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut text, &states);
        text
    }
}

/// The `Content-Type` of [`Metrics::render`].
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_and_states_render_in_the_prometheus_text_format() {
        let m = Metrics::new();
        m.call("fx", CallOutcome::Ok, Some(Duration::from_millis(2)));
        m.call("fx", CallOutcome::Ok, Some(Duration::from_millis(3)));
        m.call("fx", CallOutcome::Timeout, Some(Duration::from_secs(1)));
        m.call("", CallOutcome::Refused, None);
        m.search(Duration::from_micros(40));
        m.http_response(401);
        let text = m.render(&Gathered {
            sessions: vec![
                ("http", "initialize"),
                ("http", "initialize"),
                ("stdio", "2026-07-28"),
            ],
            children: vec!["ready", "ready", "failed"],
            restarts: vec![("fx".into(), 2)],
        });
        for line in [
            "# TYPE evo_tool_calls_total counter",
            r#"evo_tool_calls_total{server="fx",outcome="ok"} 2"#,
            r#"evo_tool_calls_total{server="fx",outcome="timeout"} 1"#,
            r#"evo_tool_calls_total{server="",outcome="refused"} 1"#,
            r#"evo_tool_call_duration_seconds_count{server="fx"} 3"#,
            "evo_search_duration_seconds_count 1",
            r#"evo_http_requests_total{status="401"} 1"#,
            r#"evo_sessions{transport="http",era="initialize"} 2"#,
            r#"evo_sessions{transport="stdio",era="2026-07-28"} 1"#,
            r#"evo_children{state="ready"} 2"#,
            r#"evo_child_restarts{server="fx"} 2"#,
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in:\n{text}"
            );
        }
    }
}
