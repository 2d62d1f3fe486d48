//! kms-core's integration tests, in one binary: keys, the durable store,
//! sealing and verification against the public vectors, properties and a
//! differential run against ed25519-zebra. Two tests are binaries of their
//! own, for what is process-wide: `crash.rs` (it re-runs its own binary and
//! kills it mid-write) and `freed_seeds.rs` (its `#[global_allocator]`).

mod support;

mod batch_property;
mod differential_zebra;
mod durable;
mod key_id_roundtrip;
mod keystore;
mod lifecycle;
mod migration;
mod ml_dsa;
mod ml_dsa_vectors;
mod records;
mod root;
mod root_storage;
mod seal;
mod seal_vectors;
mod shared_store;
mod store_lifecycle;
mod transfer;
mod vectors;
