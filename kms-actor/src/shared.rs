//! [`Shared`]: the state the actor, its handle and its clients share, and
//! [`ReleaseKeystore`], which takes the keystore out of the caller side
//! when the actor ends. Its own file so that the actor and the client both
//! depend on it and not on each other. Token state is not here: it
//! belongs to `crate::token` (`Tokens`), which clients and the handle hold
//! beside this.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use tokio::sync::Notify;

use crate::dispatch::caller::CallerSide;
use crate::metrics::Metrics;
use crate::stats::Counters;

/// State shared by the actor, its handle and its clients.
pub(crate) struct Shared {
    /// Set once by `shutdown`; clients check it before publishing.
    /// Release/Acquire: a client that sees `true` answers ShuttingDown
    /// without publishing; one that sees `false` may publish, and its
    /// request is then either drained or released (`actor.rs`, failure
    /// paths).
    pub(crate) closing: AtomicBool,
    /// Wakes the actor for shutdown (a stored permit if it is busy).
    pub(crate) stop: Notify,
    pub(crate) counters: Counters,
    pub(crate) metrics: Metrics,
    /// The request topic's name (the `topic` field of `tracing` events).
    pub(crate) topic: String,
    /// Where callers' verify requests go ([`CallerSide`]).
    pub(crate) caller: CallerSide,
    /// The keystore's key-set generation (`KmsClient::key_set_generation`).
    pub(crate) generation: kms_core::KeySetGeneration,
}

/// Takes the keystore out of the caller side when dropped (with the
/// [`crate::KmsActor`], on every path): from then on no caller verifies on
/// its own task, and a durable store's lock is released with the actor's
/// own clones (`CallerSide::release_keystore`).
pub(crate) struct ReleaseKeystore(pub(crate) Arc<Shared>);

impl Drop for ReleaseKeystore {
    fn drop(&mut self) {
        self.0.caller.release_keystore();
    }
}
