//! Process plumbing the actors stand on, none of it about MCP:
//! [`shutdown`] (the one stop signal), [`socket_activation`] (listeners
//! systemd passes), [`guard`] (the process that ends children's process
//! groups if evod is killed), [`ndjson`] (newline-delimited JSON framing),
//! [`log_tag`] (which server a log line of an rmcp task is about),
//! [`busy_poll`] (Linux), [`atomic_file`] (the one way files are written),
//! [`idle_trim`] (memory given back after a burst), and
//! [`http_serving`] (the HTTP serving layer under the endpoint and the console).

pub mod atomic_file;
#[cfg(target_os = "linux")]
pub mod busy_poll;
pub mod guard;
pub mod http_serving;
pub mod idle_trim;
pub mod log_tag;
pub mod ndjson;
pub mod shutdown;
pub mod socket_activation;
