//! Named sessions' activations, profiles' run-time changes and the catalog
//! cache in Redis.
