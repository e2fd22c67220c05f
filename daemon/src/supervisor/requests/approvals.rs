//! `evoctl approve|deny|approvals`: calls held for a person.

use std::time::Instant;

use actix::prelude::*;
use evo_proto::ctl::{self, CtlReply, ErrorKind, Reply};

use crate::console::events::Topic;
use crate::policy::approvals::Approval;
use crate::store::Event;
use crate::supervisor::Supervisor;

impl Supervisor {
    /// `evoctl approve|deny ID`: in the book, or in the shared store
    /// (where any instance's held call can be decided).
    pub(super) fn decide(&mut self, id: String, approve: bool) -> ResponseFuture<CtlReply> {
        let shown = id.clone();
        let answer = move |decided: Result<String, String>| match decided {
            Ok(tool) => {
                let verb = if approve { "approved" } else { "denied" };
                let id = &shown;
                tracing::info!(id = %id, tool = %tool, "held call {verb} by a person");
                CtlReply::data(Reply::Action(ctl::ActionReport {
                    message: if approve {
                        format!(
                            "{id} approved: the identical call to {tool} passes once within 5 minutes"
                        )
                    } else {
                        format!("{id} denied: the identical call to {tool} is refused")
                    },
                    ..Default::default()
                }))
            }
            Err(e) => CtlReply::error(ErrorKind::NotFound, e),
        };
        let events = self.opts.events.clone();
        let approvals_changed = move || events.changed(Topic::Approvals);
        if let Some(shared) = self.opts.store.shared().cloned() {
            return Box::pin(async move {
                let decided = shared.approval_decide(&id, approve).await;
                if decided.is_ok() {
                    shared.publish(Event::Approval { id: id.clone() }).await;
                }
                approvals_changed();
                answer(decided)
            });
        }
        let decided = self
            .approvals
            .decide(&id, approve, Instant::now())
            .map(|a| a.tool);
        approvals_changed();
        Box::pin(std::future::ready(answer(decided)))
    }

    /// `evoctl approvals`: the held calls of this instance, or of every
    /// instance (from the shared store).
    pub(super) fn pending_approvals(&mut self) -> ResponseFuture<CtlReply> {
        let row = |a: Approval, age_s: u64| ctl::PendingApproval {
            age_s,
            id: a.id,
            tool: a.tool,
            arguments: a.preview,
            identity: Some(a.identity.unwrap_or_else(|| ctl::LOCAL_IDENTITY.into())),
        };
        if let Some(shared) = self.opts.store.shared().cloned() {
            return Box::pin(async move {
                match shared.approvals_pending().await {
                    Ok(list) => CtlReply::data(Reply::Approvals(ctl::ApprovalsReport {
                        approvals: list.into_iter().map(|(a, age)| row(a, age)).collect(),
                    })),
                    Err(e) => CtlReply::error(ErrorKind::InvalidRequest, e.to_string()),
                }
            });
        }
        let now = Instant::now();
        let approvals = self
            .approvals
            .pending(now)
            .into_iter()
            .map(|a| {
                let age = now.duration_since(a.since).as_secs();
                row(a, age)
            })
            .collect();
        Box::pin(std::future::ready(CtlReply::data(Reply::Approvals(
            ctl::ApprovalsReport { approvals },
        ))))
    }
}
