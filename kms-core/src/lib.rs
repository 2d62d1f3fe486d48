//! kms-core: keys, key ids, the keystore, Ed25519 single and batch
//! verification, and the KMS error type. No async runtime, no bus.
//!
//! * [`ed25519`]: verification under docs/DESIGN.md §3.2 — one rule for
//!   [`ed25519::verify`] and [`ed25519::verify_batch`].
//! * [`KeyId`], written `kms:<tenant>:<purpose>:<alg>:<uuid>:v<version>`.
//! * [`Keystore`]: in-memory versioned keys; only the head signs, every
//!   version verifies; secrets are zeroized on drop and never printed.
//! * [`KmsError`]: one error enum with stable codes and `is_retryable`.
//!
//! * [`seal`]: XChaCha20-Poly1305 envelopes with an authenticated, versioned
//!   header and an anti-rollback policy.
//!
//! * Durable storage: [`Keystore::create`] makes a store and
//!   [`Keystore::open`] (or [`Keystore::open_with_keyring`]) reopens it;
//!   each key version is its own sealed record in a [`storage::Storage`]
//!   (by default a redb database file), written in one atomic commit per
//!   mutation and held by one keystore at a time (an exclusive file
//!   lock); [`Keystore::rewrap`] moves it to a new master key; sealed
//!   export and import ([`Keystore::export_sealed`],
//!   [`Keystore::import_sealed`]).
//!
//! * [`ml_dsa`] (feature `ml-dsa`): ML-DSA-44/65/87 keys (FIPS 204)
//!   through aws-lc-rs; a key's algorithm ([`Alg`]) is chosen when it is
//!   created ([`Keystore::create_key`]) and kept by every version.
//!
//! Ed25519 is "pure" Ed25519 (RFC 8032 §5.1): not Ed25519ph, not
//! Ed25519ctx. ML-DSA is pure ML-DSA with the empty context: not
//! HashML-DSA.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used)]
#![warn(missing_debug_implementations, unreachable_pub)]

mod bytes;
pub mod ed25519;
mod error;
mod key_id;
mod keystore;
#[cfg(feature = "ml-dsa")]
pub mod ml_dsa;
mod random;
pub mod root;
pub mod seal;
#[cfg(feature = "serde")]
mod serde_impls;
pub mod storage;
mod sync;

pub use error::KmsError;
pub use key_id::{Alg, KeyId, KeyIdField, KeyIdParseError, MAX_NAME_LEN};
pub use keystore::{
    Attestation, KeyPolicy, KeySetGeneration, Keystore, Origin, Rewrapped, Signature, VersionInfo,
    CONFLICT_ATTEMPTS, EXPORT_AAD, MIN_AUTO_ROTATE, STORE_FILE,
};
