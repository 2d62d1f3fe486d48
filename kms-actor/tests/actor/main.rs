//! kms-actor's integration tests, in one binary: the actor through its
//! client, tokens, issuers' keys, rotations under load, keystore writes.
//! Four are binaries of their own, each installing a process-wide
//! `tracing` subscriber or `metrics` recorder whose captures other tests
//! would pollute: `faults.rs`, `lifecycle.rs`, `token_refusals.rs` and
//! `metrics_topic.rs`.

mod actor;
mod issuers;
mod jwt;
mod ml_dsa;
mod rotation_stress;
#[cfg(feature = "rsa-ecdsa")]
mod rsa_ecdsa;
mod support;
mod token_cache;
#[cfg(feature = "serde")]
mod with_serde;
#[cfg(feature = "tower")]
mod with_tower;
mod writes;
