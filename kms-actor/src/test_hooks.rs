//! The one test hook: start an actor whose batch verifier is the caller's
//! (one that blocks until a test opens a gate, or panics on cue) and whose
//! caller-side quiet gap (the caller path, `coalesce.rs`) is the caller's, so
//! a busy pool, a panicking batch and a caller that leaves mid-flight happen
//! deterministically in `tests/faults.rs`. Everything else (bus, coalescer,
//! pool, replies) is the production code.
//!
//! Behind the `test-hooks` feature, which this crate's own tests turn on
//! (a dev-dependency on itself); not part of the stable API, and nothing in
//! a library build uses it.

use std::sync::Arc;
use std::time::Duration;

use kms_bus::Bus;
use kms_core::ed25519::{BatchItem, SignatureError};
use kms_core::{Keystore, KmsError};

use crate::{KmsActor, KmsConfig, KmsHandle};

/// How many caller-side verifications in a row, each within the quiet gap
/// of the last, the caller path allows before the next request is published
/// (count; `coalesce.rs`).
pub const CALLER_MAX_STREAK: u32 = crate::dispatch::coalesce::CALLER_MAX_STREAK;

/// A batch verifier: one verdict per item, in order, as
/// `kms_core::ed25519::verify_batch` gives.
pub type BatchVerifier =
    Arc<dyn Fn(&[BatchItem<'_>]) -> Vec<Result<(), SignatureError>> + Send + Sync>;

/// [`KmsActor::spawn`] with `verifier` in place of
/// `kms_core::ed25519::verify_batch` (on the pool, on the actor's task on the
/// inline path and on callers' tasks on the caller path), and the caller
/// path's quiet gap fixed at `quiet_gap` when given (by default it is
/// four times the measured cost of a caller-side verification).
///
/// # Errors
/// As [`KmsActor::spawn`].
pub fn spawn_with_verifier(
    config: KmsConfig,
    keystore: Keystore,
    bus: &Bus,
    verifier: BatchVerifier,
    quiet_gap: Option<Duration>,
) -> Result<KmsHandle, KmsError> {
    KmsActor::spawn_with(
        config,
        keystore,
        bus,
        verifier,
        |dispatch| match quiet_gap {
            Some(gap) => dispatch.with_quiet_gap(gap),
            None => dispatch,
        },
    )
}
