//! [`KmsHandle`]: what the program that spawned the actor holds: it hands
//! out clients, reloads the trusted JWK Sets, reports counters, and shuts
//! the actor down.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use kms_core::KmsError;
use tokio::task::JoinHandle;

use crate::client::KmsClient;
use crate::shared::Shared;
use crate::stats::KmsStats;
use crate::token::issuer_keys::IssuerKeys;

/// Owns a running actor: hands out clients and shuts it down.
pub struct KmsHandle {
    client: KmsClient,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for KmsHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KmsHandle")
            .field("topic", &self.shared.topic)
            .finish_non_exhaustive()
    }
}

impl KmsHandle {
    pub(crate) fn new(client: KmsClient, shared: Arc<Shared>, task: JoinHandle<()>) -> Self {
        KmsHandle {
            client,
            shared,
            task,
        }
    }

    /// A client for other actors to hold; clone it freely.
    pub fn client(&self) -> KmsClient {
        self.client.clone()
    }

    /// Replaces the trusted external JWK Sets at once, unbound and bound to
    /// issuers (`TrustedJwkSet::issuer`): a `verify_jwt` sees either the
    /// old keys or the new ones, never a mix. The keys of issuers kept
    /// through [`KmsHandle::issuer_keys`] (remote `jwks_uri`s) stay.
    /// Returns how many keys are now trusted.
    ///
    /// # Errors
    /// [`KmsError::InvalidConfig`] naming a `kid` that appears twice among
    /// the unbound sets or among one issuer's, or has the `KeyId` text
    /// form (the keystore's namespace), or a set bound to an issuer whose
    /// keys are remote; the old sets stay.
    pub fn reload_trusted_jwks(&self, sets: &[kms_jose::TrustedJwkSet]) -> Result<usize, KmsError> {
        self.client.tokens().reload(sets)
    }

    /// What keeps issuers' keys current from outside (an OpenID
    /// provider's `jwks_uri`) holds of this actor: it replaces one
    /// issuer's keys and is asked to refetch on an unknown `kid`
    /// ([`crate::IssuerKeys`]).
    pub fn issuer_keys(&self) -> IssuerKeys {
        IssuerKeys::new(self.client.tokens_shared())
    }

    /// The curve25519-dalek backend this process verifies with
    /// (`kms_core::ed25519::curve_backend`); also the `curve_backend` label
    /// of `kms_build_info` and a field of the actor's start event, with a
    /// warning when the CPU could run a faster one than the build has.
    pub fn curve_backend(&self) -> kms_core::ed25519::CurveBackend {
        kms_core::ed25519::curve_backend()
    }

    /// Counters since spawn.
    pub fn stats(&self) -> KmsStats {
        self.shared.counters.snapshot()
    }

    /// Stops intake, answers every request already queued on the topics,
    /// finishes in-flight batches and every keystore write accepted (so
    /// none is still writing when this returns, and the actor's keystore
    /// clones are dropped), and joins the pool. Requests made after this is
    /// called get [`KmsError::ShuttingDown`]. A verify admitted before it
    /// and queued for a combining caller (`KmsConfig::combine_max`)
    /// is answered by that caller: verified if it leads before the actor
    /// has finished, else [`KmsError::ShuttingDown`].
    ///
    /// # Cancel safety
    /// Dropping the future does not stop the shutdown once it has begun; the
    /// actor finishes it on its own.
    pub async fn shutdown(self) {
        // Release pairs with the clients' Acquire load of `closing`.
        self.shared.closing.store(true, Ordering::Release);
        self.shared.stop.notify_one();
        let _ = self.task.await;
    }
}
