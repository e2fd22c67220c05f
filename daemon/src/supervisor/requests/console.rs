//! `evoctl ui`: the web console's address with a sign-in token.

use evo_proto::ctl::{self, CtlReply, ErrorKind, Reply};

use crate::console::access::LOGIN_TTL;
use crate::supervisor::Supervisor;

impl Supervisor {
    /// `evoctl ui`: the console's address with a new one-time sign-in
    /// token; without `serve.http`, the console's own loopback listener,
    /// started now if it is not running.
    pub(super) fn ui(&mut self) -> CtlReply {
        let Some(console) = self.console.clone() else {
            return CtlReply::error(
                ErrorKind::Unsupported,
                "the web console is not running in this evod",
            );
        };
        let (base, served) = if let Some(endpoint) = &self.endpoint {
            (endpoint.console_base().to_owned(), "http")
        } else {
            let addr = match console.loopback() {
                Ok(a) => a,
                Err(e) => return CtlReply::error(ErrorKind::Internal, e),
            };
            (format!("http://{addr}"), "loopback")
        };
        match console.mint_login() {
            Ok(token) => CtlReply::data(Reply::Ui(ctl::UiAddress {
                url: format!("{base}/ui/login?token={token}"),
                console: format!("{base}/ui/"),
                served: served.into(),
                expires_s: LOGIN_TTL.as_secs(),
            })),
            Err(e) => CtlReply::error(ErrorKind::Internal, e),
        }
    }
}
