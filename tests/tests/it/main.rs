//! evo's integration tests, one test binary: real `evod`, `evoctl` and
//! fixture processes driven through `evo_tests::harness`. Each module is
//! one area; run one test with
//! `cargo test -p evo-tests --test it supervision::shutdown_answers_calls_in_flight`.

mod activation;
mod add;
mod cache;
mod catalog;
mod code_mode;
mod code_mode_signatures;
mod config;
mod console;
mod correction;
mod discovery;
mod foundation;
mod hostile;
mod http;
mod http_auth;
mod integrity;
mod learning;
mod limits;
mod offers;
mod operator;
mod overrides;
mod permissions;
mod profiles;
mod reference;
mod reload;
mod remote;
mod sandbox;
mod scaleout;
mod semantic;
mod starting;
mod stopping;
mod supervision;
mod telemetry;
