//! evo's test support, shared by the integration tests (`tests/it`) and the
//! benches (`evo-bench`).

pub mod harness;
