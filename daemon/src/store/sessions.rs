//! HTTP session records in Redis (`http:session:<Mcp-Session-Id>`): the
//! client's `initialize` parameters (what rmcp's session store replays on
//! another instance) and the identity that opened the session (so another
//! identity's request for it is a 404 there too). Each expires after
//! `serve.http.session_timeout_s` without use; the front renews it while
//! the session is used (at most one renewal per quarter of that time).

use rmcp::transport::streamable_http_server::session::SessionState;
use serde::{Deserialize, Serialize};

use super::redis::{Shared, StoreError};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionRecord {
    /// The identity key (`token:NAME`, `oauth:SUB`); `None`: the local owner.
    pub owner: Option<String>,
    pub state: SessionState,
}

impl Shared {
    fn session_key(&self, id: &str) -> String {
        self.key(&format!("http:session:{id}"))
    }

    pub async fn session_get(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        let raw: Option<String> = self
            .query(redis::cmd("GET").arg(self.session_key(id)))
            .await?;
        Ok(raw.and_then(|r| serde_json::from_str(&r).ok()))
    }

    pub async fn session_put(
        &self,
        id: &str,
        record: &SessionRecord,
        ttl_s: u64,
    ) -> Result<(), StoreError> {
        let text = serde_json::to_string(record)
            .map_err(|e| StoreError(format!("session record: {e}")))?;
        self.query(
            redis::cmd("SET")
                .arg(self.session_key(id))
                .arg(text)
                .arg("EX")
                .arg(ttl_s.max(1)),
        )
        .await
    }

    /// Renews the record and the session's activations.
    pub async fn session_touch(&self, id: &str, ttl_s: u64) -> Result<(), StoreError> {
        let mut pipe = redis::pipe();
        pipe.cmd("EXPIRE")
            .arg(self.session_key(id))
            .arg(ttl_s.max(1))
            .ignore()
            .cmd("EXPIRE")
            .arg(self.key(&format!("act:{id}")))
            .arg(ttl_s.max(1))
            .ignore();
        self.pipeline::<()>(&pipe).await
    }

    pub async fn session_delete(&self, id: &str) -> Result<(), StoreError> {
        let _: i64 = self
            .query(redis::cmd("DEL").arg(self.session_key(id)))
            .await?;
        Ok(())
    }
}
