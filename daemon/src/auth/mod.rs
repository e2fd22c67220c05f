//! Who is calling the HTTP endpoint: [`tokens`] (the API tokens file),
//! [`jwt`] (OAuth access tokens checked against the issuer's keys) and
//! [`check`] (the one request check both the MCP front in `http` and the web
//! console in `console` use), [`origin`] (the Host and Origin checks both
//! make, and the config validates `allowed_origins` with), and [`endpoint`]
//! (what the Supervisor holds of the HTTP endpoint). Below both, so neither imports the other for it.
//!
//! evo as an OAuth *client* of remote servers is another thing: `oauth`.

pub mod check;
pub mod endpoint;
pub mod jwt;
pub mod origin;
pub mod tokens;
