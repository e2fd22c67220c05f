//! The server a log line is about, for lines of tasks evo does not spawn.
//! rmcp runs a Streamable HTTP child's transport worker (and its stream
//! readers) on tasks of its own, spawned without a span, so its lines
//! ("worker quit with fatal: …", "fail to get common stream: …") would not
//! say which server they are about. Every request of such a child goes
//! through evo's HTTP client wrapper (`child::remote::Authed`), which runs
//! on those tasks: it tags the current tokio task with the server id
//! ([`TaskTag`]), and the log formatter ([`TaskTagged`]) and the
//! console's log ring add `server=ID` to an rmcp line of a tagged task that
//! does not name one.
//!
//! Task ids are never reused within a runtime, so a stale entry can only
//! go unused; the table keeps the most recent `CAPACITY` tasks (a live
//! worker is tagged again by its next request, at the latest the 10 s ping).
//!
//! Lines of the tasks evo does spawn get `server=ID` from their span: rmcp's service loop runs in a
//! `child{server=ID}` span (the connect future is instrumented), as do the OAuth discovery, login,
//! logout and refresh-timer futures. Tagging takes a lock only when the task differs from the last
//! one it tagged.

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Tasks remembered at most.
const CAPACITY: usize = 4096;

#[derive(Default)]
struct Tags {
    by_task: HashMap<tokio::task::Id, Arc<str>>,
    order: VecDeque<tokio::task::Id>,
}

static TAGS: LazyLock<Mutex<Tags>> = LazyLock::new(Default::default);

/// A server's tag, held by its HTTP client wrapper: it remembers the last
/// task it tagged, so the requests of one task after the first cost a task
/// id's hash and an atomic load, no lock.
pub struct TaskTag {
    server: Arc<str>,
    last: AtomicU64,
}

impl TaskTag {
    pub fn new(server: Arc<str>) -> TaskTag {
        TaskTag {
            server,
            last: AtomicU64::new(0),
        }
    }

    /// Records that the current tokio task works for this server.
    pub fn tag_current_task(&self) {
        let Some(id) = tokio::task::try_id() else {
            return;
        };
        let mut hasher = std::hash::DefaultHasher::new();
        id.hash(&mut hasher);
        let key = hasher.finish() | 1;
        if self.last.swap(key, Ordering::Relaxed) != key {
            tag(id, &self.server);
        }
    }
}

/// Records that the current tokio task works for `server`.
pub fn tag_current_task(server: &Arc<str>) {
    if let Some(id) = tokio::task::try_id() {
        tag(id, server);
    }
}

fn tag(id: tokio::task::Id, server: &Arc<str>) {
    let mut tags = TAGS.lock().unwrap_or_else(|e| e.into_inner());
    if tags
        .by_task
        .get(&id)
        .is_some_and(|s| Arc::ptr_eq(s, server))
    {
        return;
    }
    if tags.by_task.insert(id, server.clone()).is_none() {
        tags.order.push_back(id);
    }
    while tags.order.len() > CAPACITY {
        if let Some(old) = tags.order.pop_front() {
            tags.by_task.remove(&old);
        }
    }
}

/// The server the current task works for, if it was tagged.
pub fn server_of_current_task() -> Option<Arc<str>> {
    let id = tokio::task::try_id()?;
    TAGS.lock()
        .unwrap_or_else(|e| e.into_inner())
        .by_task
        .get(&id)
        .cloned()
}

/// The server to add to `event`'s line: an rmcp event on a tagged task.
pub fn untagged_rmcp_event(event: &Event<'_>) -> Option<Arc<str>> {
    if !event.metadata().target().starts_with("rmcp") {
        return None;
    }
    server_of_current_task()
}

/// An event format that adds `server=ID` to rmcp's lines on tagged tasks
/// (JSON lines get a `"server"` member). Other lines are `F`'s own.
pub struct TaskTagged<F>(pub F);

impl<S, N, F> FormatEvent<S, N> for TaskTagged<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let Some(server) = untagged_rmcp_event(event) else {
            return self.0.format_event(ctx, writer, event);
        };
        let mut line = String::new();
        self.0.format_event(ctx, Writer::new(&mut line), event)?;
        writer.write_str(&with_server(line, &server))
    }
}

/// `line` (one formatted event, text or JSON) naming `server`, unless it
/// already names one.
fn with_server(mut line: String, server: &str) -> String {
    let trimmed = line.trim_end().len();
    if line.starts_with('{') {
        if line.contains("\"server\":") {
            return line;
        }
        let body = &line[..trimmed];
        if let Some(close) = body.rfind('}') {
            let member = format!(",\"server\":{}", serde_json::Value::from(server));
            line.insert_str(close, &member);
        }
        return line;
    }
    if line.contains("server=") {
        return line;
    }
    line.insert_str(trimmed, &format!(" server={server}"));
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_get_the_server_once() {
        assert_eq!(
            with_server("ERROR rmcp::transport::worker: worker quit\n".into(), "web"),
            "ERROR rmcp::transport::worker: worker quit server=web\n"
        );
        let named = "WARN x: y server=fx\n".to_string();
        assert_eq!(with_server(named.clone(), "web"), named);
        let json = with_server("{\"level\":\"ERROR\",\"fields\":{}}\n".into(), "web");
        let parsed: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
        assert_eq!(parsed["server"], "web");
    }

    #[tokio::test]
    async fn a_tagged_task_is_found_and_others_are_not() {
        let server: Arc<str> = "web".into();
        let tagged = tokio::spawn({
            let server = server.clone();
            async move {
                tag_current_task(&server);
                server_of_current_task()
            }
        });
        assert_eq!(tagged.await.unwrap().as_deref(), Some("web"));
        let other = tokio::spawn(async { server_of_current_task() });
        assert_eq!(other.await.unwrap(), None);
    }
}
