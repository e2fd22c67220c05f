//! What the Supervisor keeps in step with the shared store (Redis) when
//! instances share it: named sessions' activations, profiles, the sessions
//! list, and what other instances change.

use actix::prelude::*;
use evo_proto::ctl::{CtlReply, ErrorKind};

use super::Supervisor;
use crate::catalog::SharedPins;
use crate::config::serve::DEFAULT_SESSION_TIMEOUT_S;
use crate::console::events::Topic;
use crate::policy::profiles::Changes;
use crate::search::learned::learned;
use crate::session::{self, Session};

impl Supervisor {
    /// Writes session `name`'s activations (as `named` has them) to the
    /// shared store and tells the other instances; if the store cannot take
    /// them now they are written when it is back.
    pub(super) fn share_activations(&mut self, name: String, ctx: &mut Context<Self>) {
        let Some(shared) = self.opts.store.shared().cloned() else {
            return;
        };
        let Some(set) = self.named.get(&name).cloned() else {
            return;
        };
        // HTTP sessions' sets expire with their record; named ones stay.
        let ttl = self
            .sessions
            .values()
            .find(|s| s.name.as_deref() == Some(name.as_str()))
            .filter(|s| s.io == evo_proto::ctl::SessionIo::Http)
            .map(|_| {
                self.config
                    .serve
                    .http
                    .as_ref()
                    .map_or(DEFAULT_SESSION_TIMEOUT_S, |h| h.session_timeout_s)
            });
        self.unsynced.activations.remove(&name);
        let key = name.clone();
        ctx.spawn(
            async move {
                let put = shared.activations_put(&key, &set, ttl).await;
                if put.is_ok() {
                    shared
                        .publish(crate::store::Event::Activations { name: key })
                        .await;
                }
                put
            }
            .into_actor(self)
            .map(move |put, act, _| {
                if let Err(e) = put {
                    tracing::error!(session = %name, "activations not shared with the other instances yet (written when the store is back): {e}");
                    act.unsynced.activations.insert(name);
                }
            }),
        );
    }

    /// Writes the profiles whose changes the shared store has not got yet;
    /// what it cannot take now waits for it to be back.
    pub(super) fn sync_profiles(&mut self) {
        let Some(shared) = self.opts.store.shared().cloned() else {
            return;
        };
        let names = std::mem::take(&mut self.unsynced.profiles);
        let changes: Vec<(String, Option<Changes>)> = names
            .into_iter()
            .map(|n| {
                let c = self.saved_profiles.profiles.get(&n).cloned();
                (n, c)
            })
            .collect();
        let me = self.me.clone();
        tokio::spawn(async move {
            let mut failed = Vec::new();
            for (name, c) in changes {
                if let Err(e) = shared.profile_put(&name, c.as_ref()).await {
                    tracing::error!(profile = %name, "profile change not shared with the other instances yet (written when the store is back): {e}");
                    failed.push(name);
                }
            }
            if failed.is_empty() {
                shared.publish(crate::store::Event::Profiles).await;
            } else if let Some(me) = me {
                me.do_send(ProfilesUnsynced(failed));
            }
        });
    }

    /// Another instance changed session `name`'s activations: read them
    /// and hand them to the live sessions of that name here.
    pub(super) fn shared_activations(&mut self, name: &str, _ctx: &mut Context<Self>) {
        let Some(shared) = self.opts.store.shared().cloned() else {
            return;
        };
        let to: Vec<Addr<Session>> = self
            .sessions
            .values()
            .filter(|s| s.name.as_deref() == Some(name))
            .map(|s| s.addr.clone())
            .collect();
        if to.is_empty() {
            return;
        }
        let name = name.to_string();
        tokio::spawn(async move {
            match shared.activations_get(&name).await {
                Ok(set) => {
                    for addr in to {
                        addr.do_send(session::SetActivations(set.clone()));
                    }
                }
                Err(e) => tracing::warn!(session = %name, "activations not read: {e}"),
            }
        });
    }

    /// Writes this instance's sessions to the shared store, for
    /// `evoctl sessions` on the others (best effort: the next write makes
    /// up for a failed one).
    pub(super) fn publish_sessions(&self) {
        let Some(shared) = self.opts.store.shared().cloned() else {
            return;
        };
        let sessions = self.session_infos();
        actix::spawn(async move {
            if let Err(e) = shared.sessions_put(&sessions.await).await {
                tracing::debug!("sessions not written to the store: {e}");
            }
        });
    }

    /// Another instance's `evoctl activate|deactivate` for session `id`:
    /// if this instance's tag is `id`'s, it changes the session (or says
    /// it has none such) and writes the answer for the asking instance.
    fn answer_set_active(&self, id: String, tools: Vec<String>, active: bool, ticket: String) {
        let Some(shared) = self.opts.store.shared().cloned() else {
            return;
        };
        if id.rsplit_once('@').map(|(_, tag)| tag) != Some(shared.tag()) {
            return;
        }
        let reply: ResponseFuture<CtlReply> = if self.sessions.contains_key(&id) {
            self.set_active(tools, Some(id), active)
        } else {
            let refusal = CtlReply::error(
                ErrorKind::UnknownSession,
                format!("no live session '{id}'; `evoctl sessions` lists them"),
            );
            Box::pin(async move { refusal })
        };
        actix::spawn(async move {
            let reply = reply.await;
            if let Err(e) = shared.answer_put(&ticket, &reply).await {
                tracing::warn!("answer to another instance's activation not written: {e}");
            }
        });
    }

    /// Another instance changed `server`'s tool pins (`None`: the store is
    /// back, any may have changed): the Catalog takes them as they are.
    fn shared_pins(&self, server: Option<String>) {
        let Some(shared) = self.opts.store.shared().cloned() else {
            return;
        };
        let catalog = self.catalog.clone();
        tokio::spawn(async move {
            let only = server.map(|s| vec![s]);
            match shared.pins_get(only.as_deref()).await {
                Ok(servers) => catalog.do_send(SharedPins {
                    servers,
                    at_start: false,
                }),
                Err(e) => tracing::warn!("tool pins not read from the store: {e}"),
            }
        });
    }

    /// Another instance changed profiles (or the store is back): read the
    /// saved changes again and put them in force.
    pub(super) fn shared_profiles(&mut self, ctx: &mut Context<Self>) {
        let Some(shared) = self.opts.store.shared().cloned() else {
            return;
        };
        ctx.spawn(
            async move { shared.profiles_get().await }
                .into_actor(self)
                .map(|got, act, _| match got {
                    Ok(saved) => {
                        act.saved_profiles = saved;
                        act.apply_profiles();
                    }
                    Err(e) => tracing::warn!("profiles not read from the store: {e}"),
                }),
        );
    }
}

/// Another instance's change, or a new subscription to them.
impl Handler<crate::store::Delivery> for Supervisor {
    type Result = ();
    fn handle(&mut self, msg: crate::store::Delivery, ctx: &mut Context<Self>) {
        use crate::store::{Delivery, Event};
        match msg {
            Delivery::Event(Event::SessionEnded { id }) => {
                if let Some(endpoint) = &self.endpoint {
                    endpoint.end_session(&id);
                }
            }
            Delivery::Event(Event::Approval { .. }) => {
                self.opts.events.changed(Topic::Approvals);
            }
            Delivery::Event(Event::Tokens) => self.shared_tokens(ctx),
            // Kept by the subscriber itself (`store::breaker::Mirror`).
            Delivery::Event(Event::Breaker { .. }) => {}
            Delivery::Event(Event::Activations { name }) => self.shared_activations(&name, ctx),
            Delivery::Event(Event::Profiles) => self.shared_profiles(ctx),
            Delivery::Event(Event::Pins { server }) => self.shared_pins(Some(server)),
            Delivery::Event(Event::Learned(pair)) => learned().apply(pair),
            Delivery::Event(Event::LearnedForgotten { tool }) => {
                learned().forgotten_elsewhere(tool.as_deref());
            }
            Delivery::Event(Event::SetActive {
                id,
                tools,
                active,
                ticket,
            }) => self.answer_set_active(id, tools, active, ticket),
            Delivery::Resync => {
                self.shared_tokens(ctx);
                self.shared_pins(None);
                tokio::spawn(async { learned().read_shared().await });
                // What this instance changed while the store was away goes
                // there first; the rest is read back.
                let pushed = std::mem::take(&mut self.unsynced.activations);
                for name in &pushed {
                    self.share_activations(name.clone(), ctx);
                }
                if self.unsynced.profiles.is_empty() {
                    self.shared_profiles(ctx);
                } else {
                    self.sync_profiles();
                }
                let names: Vec<String> = self
                    .sessions
                    .values()
                    .filter_map(|s| s.name.clone())
                    .filter(|n| !pushed.contains(n))
                    .collect();
                for name in names {
                    self.shared_activations(&name, ctx);
                }
            }
        }
    }
}

/// Profiles whose changes the shared store could not take: written when
/// it is back.
#[derive(Message)]
#[rtype(result = "()")]
struct ProfilesUnsynced(Vec<String>);

impl Handler<ProfilesUnsynced> for Supervisor {
    type Result = ();
    fn handle(&mut self, msg: ProfilesUnsynced, _: &mut Context<Self>) {
        self.unsynced.profiles.extend(msg.0);
    }
}

/// An HTTP session got its `Mcp-Session-Id`: with the shared store, its
/// activations are kept there under it, and `evoctl --session ID` finds it.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ShareSession {
    pub session: Addr<Session>,
    pub name: String,
}

impl Handler<ShareSession> for Supervisor {
    type Result = ();
    fn handle(&mut self, msg: ShareSession, _: &mut Context<Self>) {
        if let Some(e) = self.sessions.values_mut().find(|e| e.addr == msg.session) {
            e.name = Some(msg.name.clone());
            msg.session.do_send(session::ShareAs { name: msg.name });
        }
    }
}
