//! [`KmsClient`]: what other actors hold to talk to the KMS over the bus.
//!
//! Every call publishes one request carrying its own reply handle and waits
//! for exactly one answer. Verify requests go to the request topic, the
//! others to the priority topic. Each answer, whatever it is, is counted in
//! `kms_ops_total` and timed in `kms_op_duration_seconds` here, the one
//! place every outcome passes (including `Overloaded`, which never reaches
//! the actor). A caller never hangs: if the request is lost
//! (lagging topic) or the actor goes away, the reply handle is dropped and
//! the call returns an error that says why.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use kms_bus::{PublishError, Publisher};
use kms_core::{Attestation, KeyId, KmsError};

use crate::actor::Shared;
use crate::reply::{Answer, Reply};
use crate::request::{Op, Request, VerifyBy, VerifyRequest};

/// A handle to the KMS actor. `Clone + Send + Sync`; clones share the
/// publishers of the request and priority topics.
///
/// # Errors (all methods)
/// Besides the operation's own errors:
/// * [`KmsError::Overloaded`] (retryable): the request topic is full, or
///   (create and rotate) `write_backlog` of them are already waiting or
///   being written ([`crate::KmsConfig::write_backlog`]).
/// * [`KmsError::Dropped`] (retryable): the request was lost on a lagging
///   topic before the actor read it.
/// * [`KmsError::ShuttingDown`]: the actor is shutting down or gone.
/// * [`KmsError::Internal`]: the batch holding the request failed.
///
/// # Cancel safety
/// Every method is cancel safe in the sense that dropping its future loses
/// nothing else: the request may still run, its answer is discarded, and a
/// verify request whose caller has gone is skipped if its batch has not
/// started, a create or rotate if its write has not started.
#[derive(Clone)]
pub struct KmsClient {
    requests: Publisher<Request>,
    priority: Publisher<Request>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for KmsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KmsClient").finish_non_exhaustive()
    }
}

impl KmsClient {
    pub(crate) fn new(
        requests: Publisher<Request>,
        priority: Publisher<Request>,
        shared: Arc<Shared>,
    ) -> Self {
        KmsClient {
            requests,
            priority,
            shared,
        }
    }

    /// Verifies a 64-byte `signature` on `message` under a raw 32-byte
    /// Ed25519 `public_key`, with the criteria of DESIGN §3.2, in a batch.
    ///
    /// # Errors
    /// [`KmsError::InvalidSignature`] naming the rule that failed, or one of
    /// the errors listed on [`KmsClient`].
    pub async fn verify_with_public_key(
        &self,
        public_key: [u8; 32],
        message: impl Into<Bytes>,
        signature: [u8; 64],
    ) -> Result<(), KmsError> {
        self.verify_by(VerifyBy::PublicKey(public_key), message.into(), signature)
            .await
    }

    /// Verifies a 64-byte `signature` on `message` under the key version
    /// `key` names (any retained version), in a batch.
    ///
    /// # Errors
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`],
    /// [`KmsError::InvalidSignature`], or one of the errors listed on
    /// [`KmsClient`].
    pub async fn verify(
        &self,
        key: &KeyId,
        message: impl Into<Bytes>,
        signature: [u8; 64],
    ) -> Result<(), KmsError> {
        self.verify_by(VerifyBy::Key(key.clone()), message.into(), signature)
            .await
    }

    /// Signs `message` with the head version of `key`'s key; returns the
    /// head's id and the 64-byte signature.
    ///
    /// # Errors
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`], or one of the
    /// errors listed on [`KmsClient`].
    pub async fn sign(
        &self,
        key: &KeyId,
        message: impl Into<Bytes>,
    ) -> Result<(KeyId, [u8; 64]), KmsError> {
        let message = message.into();
        let key = key.clone();
        self.call(|reply| Op::Sign {
            key,
            message,
            reply,
        })
        .await
    }

    /// Creates an Ed25519 key; returns the id of its version 1.
    ///
    /// # Errors
    /// [`KmsError::InvalidKeyId`] for a bad tenant or purpose,
    /// [`KmsError::EntropyUnavailable`], or one of the errors listed on
    /// [`KmsClient`].
    pub async fn create_key(&self, tenant: &str, purpose: &str) -> Result<KeyId, KmsError> {
        let (tenant, purpose) = (tenant.to_owned(), purpose.to_owned());
        self.call(|reply| Op::CreateKey {
            tenant,
            purpose,
            reply,
        })
        .await
    }

    /// Adds a new head version to `key`'s key; returns its id.
    ///
    /// # Errors
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`],
    /// [`KmsError::VersionsExhausted`], [`KmsError::EntropyUnavailable`], or
    /// one of the errors listed on [`KmsClient`].
    pub async fn rotate(&self, key: &KeyId) -> Result<KeyId, KmsError> {
        let key = key.clone();
        self.call(|reply| Op::Rotate { key, reply }).await
    }

    /// Reports `key`'s algorithm, head and versions with creation times.
    ///
    /// # Errors
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`], or one of the
    /// errors listed on [`KmsClient`].
    pub async fn attest(&self, key: &KeyId) -> Result<Attestation, KmsError> {
        let key = key.clone();
        self.call(|reply| Op::Attest { key, reply }).await
    }

    async fn verify_by(
        &self,
        by: VerifyBy,
        message: Bytes,
        signature: [u8; 64],
    ) -> Result<(), KmsError> {
        self.call(|reply| {
            Op::Verify(VerifyRequest {
                by,
                message,
                signature,
                reply,
            })
        })
        .await
    }

    /// Publishes one request on its lane, waits for its one answer, and
    /// counts and times the answer.
    async fn call<T>(&self, op: impl FnOnce(Reply<T>) -> Op) -> Result<T, KmsError> {
        let started = Instant::now();
        let (reply, answer) = Reply::new();
        let op = op(reply);
        let kind = op.kind();
        let answer = self.publish_and_wait(op, answer).await;
        self.shared
            .metrics
            .record_op(kind, &answer, started.elapsed());
        answer
    }

    async fn publish_and_wait<T>(&self, op: Op, answer: Answer<T>) -> Result<T, KmsError> {
        // Acquire pairs with the Release store in `KmsHandle::shutdown`.
        if self.shared.closing.load(Ordering::Acquire) {
            return Err(KmsError::ShuttingDown);
        }
        let lane = match op {
            Op::Verify(_) => &self.requests,
            _ => &self.priority,
        };
        match lane.publish(Request { op }) {
            Ok(()) => {}
            Err(PublishError::Full(_)) => return Err(KmsError::Overloaded),
            Err(PublishError::NoSubscribers(_)) => return Err(KmsError::ShuttingDown),
            Err(e) => {
                return Err(KmsError::Internal {
                    reason: format!("publishing the request failed: {e}"),
                })
            }
        }
        self.wait(answer).await
    }

    async fn wait<T>(&self, answer: Answer<T>) -> Result<T, KmsError> {
        match answer.await {
            Ok(result) => result,
            // The reply handle was dropped unanswered: released at shutdown,
            // or overwritten on a lagging topic.
            Err(_) if self.shared.closing.load(Ordering::Acquire) => Err(KmsError::ShuttingDown),
            Err(_) => Err(KmsError::Dropped),
        }
    }
}
