//! [`Shared`]: the state the actor, its handle and its clients share, and
//! [`ReleaseKeystore`], which takes the keystore out of it when the actor
//! ends. Its own file so that the actor and the client both depend on it
//! and not on each other.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, PoisonError, RwLock};

use kms_core::Keystore;
use tokio::sync::Notify;

use crate::batch::Verifier;
use crate::coalesce::Dispatch;
use crate::combine::CombineQueue;
use crate::gate::CallerGate;
use crate::metrics::Metrics;
use crate::stats::Counters;
use crate::token_cache::TokenCache;
use crate::trusted_keys::TrustedKeys;

/// State shared by the actor, its handle and its clients.
pub(crate) struct Shared {
    /// Set once by `shutdown`; clients check it before publishing.
    /// Release/Acquire: a client that sees `true` answers ShuttingDown
    /// without publishing; one that sees `false` may publish, and its
    /// request is then either drained or released (see module docs).
    pub(crate) closing: AtomicBool,
    /// Wakes the actor for shutdown (a stored permit if it is busy).
    pub(crate) stop: Notify,
    pub(crate) counters: Counters,
    pub(crate) metrics: Metrics,
    /// The request topic's name (the `topic` field of `tracing` events).
    pub(crate) topic: String,
    /// The coalescing rules; clients apply the caller path.
    pub(crate) dispatch: Dispatch,
    /// What the caller path reads ([`CallerGate`]).
    pub(crate) gate: CallerGate,
    /// Combining's queue ([`CombineQueue`]).
    pub(crate) combine: CombineQueue,
    /// The keystore and verifier a caller uses on the caller path. The keystore
    /// is taken out when the actor finishes, so that after `shutdown` no
    /// clone of it outlives the actor (a durable store's lock is released)
    /// however long clients live; a caller then finds `None` and publishes,
    /// and is answered `ShuttingDown`.
    pub(crate) keystore: RwLock<Option<Keystore>>,
    pub(crate) verifier: Verifier,
    /// Trusted external keys by (issuer, `kid`), replaced whole on reload.
    pub(crate) trusted: RwLock<Arc<TrustedKeys>>,
    /// Asked to refetch an issuer's keys on an unknown `kid`
    /// (`IssuerKeys::set_refetch`); read only on that path.
    pub(crate) refetch: RwLock<Option<Arc<dyn crate::JwksRefetch>>>,
    /// The keystore's key-set generation, which a reload of `trusted` also
    /// advances (after the swap): what caches of verdicts and key sets
    /// compare against.
    pub(crate) generation: kms_core::KeySetGeneration,
    /// Tokens that verified (`KmsConfig::token_cache`); `None`: off.
    pub(crate) token_cache: Option<TokenCache>,
    /// The `alg` of issued tokens and published JWKs.
    pub(crate) token_alg: kms_jose::Algorithm,
    /// Purposes of keystore keys that issue and verify tokens.
    pub(crate) token_purposes: Vec<String>,
}

/// Takes the keystore out of the state clients share when dropped (with the
/// [`crate::KmsActor`], on every path): from then on no caller verifies
/// on the caller path, and a durable store's lock is released with the actor's
/// own clones. `write` waits for the caller-side verifications in
/// progress: one on the caller path (~20 µs for a message of at most 1 KiB), or
/// a batch of at most `combine_max` when combining per leader.
pub(crate) struct ReleaseKeystore(pub(crate) Arc<Shared>);

impl Drop for ReleaseKeystore {
    fn drop(&mut self) {
        drop(
            self.0
                .keystore
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
    }
}
