//! The console as the Supervisor reaches it for `evoctl ui`, without its
//! type: a sign-in token, and the address of the console's own loopback
//! listener (started on demand when evod has no HTTP endpoint). `main` makes
//! the one implementation ([`super::listener::Loopback`]) and hands it over.

use std::net::SocketAddr;
use std::time::Duration;

/// How long an unused sign-in token stays valid.
pub const LOGIN_TTL: Duration = Duration::from_secs(600);

/// See the module docs.
pub trait ConsoleAccess: Send + Sync {
    /// A new one-time sign-in token (valid for [`LOGIN_TTL`]).
    fn mint_login(&self) -> Result<String, String>;

    /// Where the console's own loopback listener serves, started now if it
    /// is not running.
    fn loopback(&self) -> Result<SocketAddr, String>;
}
