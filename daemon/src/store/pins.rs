//! Tool integrity pins in Redis, so that every instance holds the same
//! tools back and one trust decision holds on all: a hash `pins`, a field
//! per server id → that server's pins as `pins.json` has them (config hash,
//! each tool's and offer's pinned definition and the change seen since).
//! Definitions are names, descriptions and schemas: nothing secret.

use std::collections::BTreeMap;

use super::Event;
use super::redis::{Shared, StoreError};
use crate::policy::integrity::ServerPins;

impl Shared {
    /// Every server's pins the store holds, or only `servers`'.
    pub async fn pins_get(
        &self,
        servers: Option<&[String]>,
    ) -> Result<BTreeMap<String, ServerPins>, StoreError> {
        let raw: BTreeMap<String, String> = match servers {
            None => {
                self.query(redis::cmd("HGETALL").arg(self.key("pins")))
                    .await?
            }
            Some([]) => BTreeMap::new(),
            Some(ids) => {
                let values: Vec<Option<String>> = self
                    .query(redis::cmd("HMGET").arg(self.key("pins")).arg(ids))
                    .await?;
                ids.iter()
                    .cloned()
                    .zip(values)
                    .filter_map(|(id, v)| v.map(|v| (id, v)))
                    .collect()
            }
        };
        let mut out = BTreeMap::new();
        for (id, text) in raw {
            match serde_json::from_str::<ServerPins>(&text) {
                Ok(pins) => {
                    out.insert(id, pins);
                }
                Err(e) => {
                    tracing::warn!(server = %id, error = %e, "unreadable pins in the store ignored")
                }
            }
        }
        Ok(out)
    }

    /// Writes `server`'s pins and tells the other instances.
    pub async fn pins_put(&self, server: &str, pins: &ServerPins) -> Result<(), StoreError> {
        let text = serde_json::to_string(pins).map_err(|e| StoreError(format!("pins: {e}")))?;
        let _: i64 = self
            .query(
                redis::cmd("HSET")
                    .arg(self.key("pins"))
                    .arg(server)
                    .arg(text),
            )
            .await?;
        self.publish(Event::Pins {
            server: server.to_string(),
        })
        .await;
        Ok(())
    }
}
