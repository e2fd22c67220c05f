//! The Catalog's pins shared through the store (Redis): a server's pins go
//! there whenever they change here, and what another instance changed (a
//! change it saw, a person's trust) is taken as it left it, so one
//! decision holds on every instance. Without the store nothing here runs.

use std::collections::BTreeMap;
use std::sync::Arc;

use actix::prelude::*;

use super::Catalog;
use crate::policy::integrity::ServerPins;
use crate::store::{Shared, Store};

impl Catalog {
    /// Shares the pins through `store` when it is Redis.
    pub fn with_shared_pins(mut self, store: &Store) -> Catalog {
        self.shared = store.shared().cloned();
        self
    }

    /// Writes `server`'s pins to the shared store (best effort: a failed
    /// write is made up by the next change of that server's pins).
    pub(super) fn share_pins(&self, server: &str) {
        let (Some(shared), Some(pins)) = (&self.shared, self.pins.server(server)) else {
            return;
        };
        write_pins(shared.clone(), server.to_string(), pins.clone());
    }
}

fn write_pins(shared: Arc<Shared>, server: String, pins: ServerPins) {
    tokio::spawn(async move {
        if let Err(e) = shared.pins_put(&server, &pins).await {
            tracing::warn!(server = %server, "tool pins not shared with the other instances: {e}");
        }
    });
}

/// Pins as the shared store holds them: at start (`at_start`: all of them,
/// before any list is checked) or after another instance changed some.
#[derive(Message)]
#[rtype(result = "()")]
pub struct SharedPins {
    pub servers: BTreeMap<String, ServerPins>,
    pub at_start: bool,
}

impl Handler<SharedPins> for Catalog {
    type Result = ();
    fn handle(&mut self, msg: SharedPins, _: &mut Context<Self>) {
        if msg.at_start {
            // Pins only this instance's file has (kept before the switch
            // to Redis) go to the store, for the instances started later.
            let missing: Vec<String> = self
                .pins
                .server_ids()
                .filter(|id| !msg.servers.contains_key(*id))
                .map(str::to_string)
                .collect();
            for id in missing {
                self.share_pins(&id);
            }
        }
        let mut changed = false;
        for (id, pins) in msg.servers {
            if self.pins.server(&id) == Some(&pins) {
                continue;
            }
            self.pins.set_server(id.clone(), pins);
            for slot in self.slots.iter_mut().filter(|s| s.spec.id == id) {
                Self::record_changes(&self.pins, slot);
            }
            changed = true;
        }
        if changed {
            if let Some(to) = &self.persist_pins {
                to.do_send(super::PersistPins(self.pins.to_file()));
            }
            if self.servers_set {
                self.publish();
            }
        }
    }
}
