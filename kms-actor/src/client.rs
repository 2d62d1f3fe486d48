//! [`KmsClient`]: what other actors hold to talk to the KMS over the bus.
//!
//! Every call publishes one request carrying its own reply handle and waits
//! for exactly one answer, except verifies, which `crate::dispatch`'s
//! caller side takes: one made while the node is quiet is verified on its
//! caller's task (the caller path), and under moderate load callers
//! combine theirs, one caller per pool thread verifying what the others
//! queued as one batch on its own task (combining); the rest are
//! published; and ML-DSA tokens, one of which is signed on its caller's
//! task while the verify pool is idle (`CallerSide::sign_if_idle`).
//! Verify requests go to the request topic, the others to the priority
//! topic. Each answer, whatever it is, is
//! counted in `kms_ops_total` and timed in `kms_op_duration_seconds` here,
//! the one place every outcome passes (including `Overloaded`, which never
//! reaches the actor). A caller never hangs: if the request is lost (lagging
//! topic) or the actor goes away, the reply handle is dropped and the call
//! returns an error that says why.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use kms_bus::Publisher;
use kms_core::seal::{Envelope, SealKey};
use kms_core::{Alg, Attestation, KeyId, KeyPolicy, KmsError};

use crate::dispatch::caller::Dispatched;
use crate::dispatch::publish::publish;
use crate::dispatch::reply::{Answer, Reply};
use crate::dispatch::request::{Op, Request, VerifyBy, VerifyCall};
use crate::metrics::OpKind;
use crate::origin::Origin;
use crate::shared::Shared;
use crate::stats::Counters;
use crate::token::tokens::Tokens;

/// A handle to the KMS actor. `Clone + Send + Sync`; clones share the
/// publishers of the request and priority topics.
///
/// # Errors (all methods)
/// Besides the operation's own errors:
/// * [`KmsError::Overloaded`] (retryable): the request topic is full, or
///   (the keystore writes: create, rotate, set_policy, trim, destroy,
///   import) `write_backlog` of them are already waiting or
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
    /// Token verification's state (`crate::token`).
    tokens: Arc<Tokens>,
    /// Who this client's requests are made for, in the audit events.
    principal: Option<Arc<str>>,
}

impl std::fmt::Debug for KmsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KmsClient")
            .field("principal", &self.principal)
            .finish_non_exhaustive()
    }
}

impl KmsClient {
    pub(crate) fn new(
        requests: Publisher<Request>,
        priority: Publisher<Request>,
        shared: Arc<Shared>,
        tokens: Arc<Tokens>,
    ) -> Self {
        KmsClient {
            requests,
            priority,
            shared,
            tokens,
            principal: None,
        }
    }

    /// A client like this one whose requests carry `principal`: the
    /// `principal` field of every audit event they cause (target
    /// `kms::audit`; docs/SECURITY.md, "Audit events"). A client made
    /// without one audits as `unspecified`. The text is the caller's
    /// (a service name, a user, a token's `sub`); it is logged as given.
    #[must_use]
    pub fn with_principal(&self, principal: impl Into<String>) -> KmsClient {
        KmsClient {
            principal: Some(Arc::from(principal.into())),
            ..self.clone()
        }
    }

    /// Verifies a 64-byte `signature` on `message` under a raw 32-byte
    /// Ed25519 `public_key`, with the criteria of docs/DESIGN.md §3.2: in a
    /// batch on the pool or on a combining caller's task
    /// ([`crate::KmsConfig::combine_max`]), or alone on this task when the
    /// node is quiet ([`crate::KmsConfig::verify_on_caller_when_idle`]).
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
        self.verify_by(
            VerifyBy::PublicKey(public_key),
            message.into(),
            signature,
            None,
        )
        .await
    }

    /// Verifies a 64-byte `signature` on `message` under the key version
    /// `key` names (any version from the key's `min_verify_version` to its
    /// head): in a batch on the pool or on a combining caller's task
    /// ([`crate::KmsConfig::combine_max`]), or alone on this task when the
    /// node is quiet ([`crate::KmsConfig::verify_on_caller_when_idle`]).
    ///
    /// # Errors
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`],
    /// [`KmsError::VersionDisallowed`] below the key's `min_verify_version`,
    /// [`KmsError::KeyDestroyed`], [`KmsError::InvalidSignature`], or one
    /// of the errors listed on [`KmsClient`].
    pub async fn verify(
        &self,
        key: &KeyId,
        message: impl Into<Bytes>,
        signature: [u8; 64],
    ) -> Result<(), KmsError> {
        self.verify_by(VerifyBy::Key(key.clone()), message.into(), signature, None)
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
    /// [`KmsError::EntropyUnavailable`], on a durable keystore
    /// [`KmsError::Io`] if its write fails (then [`KmsError::Internal`]
    /// for every later write until the store is reopened), or one of the
    /// errors listed on [`KmsClient`].
    pub async fn create_key(&self, tenant: &str, purpose: &str) -> Result<KeyId, KmsError> {
        self.create_key_of(tenant, purpose, Alg::Ed25519).await
    }

    /// Creates a key of algorithm `alg` (every later version keeps it);
    /// returns the id of its version 1.
    ///
    /// # Errors
    /// As [`KmsClient::create_key`]; [`KmsError::AlgorithmNotBuilt`] for
    /// ML-DSA in a build without kms-core's `ml-dsa` feature.
    pub async fn create_key_of(
        &self,
        tenant: &str,
        purpose: &str,
        alg: Alg,
    ) -> Result<KeyId, KmsError> {
        let (tenant, purpose) = (tenant.to_owned(), purpose.to_owned());
        self.call(|reply| Op::CreateKey {
            tenant,
            purpose,
            alg,
            reply,
        })
        .await
    }

    /// Adds a new head version to `key`'s key; returns its id.
    ///
    /// # Errors
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`],
    /// [`KmsError::VersionsExhausted`], [`KmsError::EntropyUnavailable`],
    /// on a durable keystore [`KmsError::Io`] if its write fails (as
    /// [`KmsClient::create_key`]), or one of the errors listed on
    /// [`KmsClient`].
    pub async fn rotate(&self, key: &KeyId) -> Result<KeyId, KmsError> {
        let key = key.clone();
        self.call(|reply| Op::Rotate { key, reply }).await
    }

    /// Reports `key`'s algorithm, head, policy and versions with creation
    /// times ([`kms_core::Keystore::attest`]).
    ///
    /// # Errors
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`],
    /// [`KmsError::KeyDestroyed`], or one of the errors listed on
    /// [`KmsClient`].
    pub async fn attest(&self, key: &KeyId) -> Result<Attestation, KmsError> {
        let key = key.clone();
        self.call(|reply| Op::Attest { key, reply }).await
    }

    /// The policy of `key`'s key ([`kms_core::Keystore::policy`]).
    ///
    /// # Errors
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`],
    /// [`KmsError::KeyDestroyed`], or one of the errors listed on
    /// [`KmsClient`].
    pub async fn policy(&self, key: &KeyId) -> Result<KeyPolicy, KmsError> {
        let key = key.clone();
        self.call(|reply| Op::Policy { key, reply }).await
    }

    /// Replaces the policy of `key`'s key, durably, and returns it
    /// ([`kms_core::Keystore::set_policy`]); written off the actor's task,
    /// as rotations are. Audited as `set_policy`.
    ///
    /// # Errors
    /// The errors of [`kms_core::Keystore::set_policy`] (an
    /// [`KmsError::InvalidArgument`] naming the rule a change breaks), or
    /// one of the errors listed on [`KmsClient`].
    pub async fn set_policy(&self, key: &KeyId, policy: KeyPolicy) -> Result<KeyPolicy, KmsError> {
        let key = key.clone();
        self.call(|reply| Op::SetPolicy { key, policy, reply })
            .await
    }

    /// Destroys the secrets of the versions of `key`'s key below `below`
    /// ([`kms_core::Keystore::trim`]); returns the key's
    /// `min_available_version` afterwards. Audited as `trim`.
    ///
    /// # Errors
    /// The errors of [`kms_core::Keystore::trim`], or one of the errors
    /// listed on [`KmsClient`].
    pub async fn trim(&self, key: &KeyId, below: u32) -> Result<u32, KmsError> {
        let key = key.clone();
        self.call(|reply| Op::Trim { key, below, reply }).await
    }

    /// Destroys `key`'s key, for good ([`kms_core::Keystore::destroy`]).
    /// Audited as `destroy`.
    ///
    /// # Errors
    /// The errors of [`kms_core::Keystore::destroy`], or one of the errors
    /// listed on [`KmsClient`].
    pub async fn destroy(&self, key: &KeyId) -> Result<(), KmsError> {
        let key = key.clone();
        self.call(|reply| Op::Destroy { key, reply }).await
    }

    /// Exports the version `key` names sealed under `to`
    /// ([`kms_core::Keystore::export_sealed`]). Audited as `export`.
    ///
    /// # Errors
    /// The errors of [`kms_core::Keystore::export_sealed`]
    /// ([`KmsError::NotExportable`] unless the key's policy allows it), or
    /// one of the errors listed on [`KmsClient`].
    pub async fn export_sealed(&self, key: &KeyId, to: Arc<SealKey>) -> Result<Envelope, KmsError> {
        let key = key.clone();
        self.call(|reply| Op::Export { key, to, reply }).await
    }

    /// Imports the key in `envelope`, sealed under `from`, as a new key of
    /// `tenant` and `purpose` ([`kms_core::Keystore::import_sealed`]);
    /// written off the actor's task, as creates are. Audited as `import`.
    ///
    /// # Errors
    /// The errors of [`kms_core::Keystore::import_sealed`], or one of the
    /// errors listed on [`KmsClient`].
    pub async fn import_sealed(
        &self,
        tenant: &str,
        purpose: &str,
        from: Arc<SealKey>,
        envelope: Envelope,
    ) -> Result<KeyId, KmsError> {
        let (tenant, purpose) = (tenant.to_owned(), purpose.to_owned());
        self.call(|reply| Op::Import {
            tenant,
            purpose,
            from,
            envelope,
            reply,
        })
        .await
    }

    /// Verifies by the caller side's rules (`crate::dispatch::caller`),
    /// then counts and times the answer.
    pub(crate) async fn verify_by(
        &self,
        by: VerifyBy,
        message: Bytes,
        signature: [u8; 64],
        origin: Option<Origin>,
    ) -> Result<(), KmsError> {
        let started = Instant::now();
        // Checked once, when the call starts (as for the other operations);
        // a call admitted here is then drained or released like any other
        // (`Shared::closing`).
        let answer = if self.shutting_down() {
            Err(KmsError::ShuttingDown)
        } else {
            let shared = &*self.shared;
            let dispatched = shared
                .caller
                .dispatch(
                    &self.requests,
                    &shared.counters,
                    &shared.metrics,
                    VerifyCall {
                        by,
                        message,
                        signature,
                        origin,
                    },
                )
                .await;
            match dispatched {
                Dispatched::Answered(answer) => answer,
                Dispatched::Waiting { counted, answer } => {
                    let answer = self.wait(answer).await;
                    drop(counted);
                    answer
                }
            }
        };
        self.record_verify(started, answer)
    }

    /// [`crate::dispatch::caller::CallerSide::verify_alone`] of this
    /// client's actor: one signature a batch cannot take, on this task.
    pub(crate) fn verify_alone(
        &self,
        key: &KeyId,
        message: &[u8],
        signature: &[u8],
    ) -> Result<(), KmsError> {
        self.shared.caller.verify_alone(key, message, signature)
    }

    /// [`crate::dispatch::caller::CallerSide::sign_if_idle`] of this
    /// client's actor, audited under this client's principal and counted
    /// and timed from `started` as a sign request: `None` when the actor
    /// must sign it.
    pub(crate) fn sign_if_idle(
        &self,
        started: Instant,
        key: &KeyId,
        alg: kms_jose::Algorithm,
        claims: &[u8],
    ) -> Option<Result<String, KmsError>> {
        let shared = &self.shared;
        let answer =
            shared
                .caller
                .sign_if_idle(&shared.counters, key, alg, claims, self.principal())?;
        shared
            .metrics
            .record_op(OpKind::Sign, &answer, started.elapsed());
        Some(answer)
    }

    /// Counts and times a verify call's `answer`; returns it.
    pub(crate) fn record_verify(
        &self,
        started: Instant,
        answer: Result<(), KmsError>,
    ) -> Result<(), KmsError> {
        self.shared
            .metrics
            .record_op(OpKind::Verify, &answer, started.elapsed());
        answer
    }

    /// The actor's request topic: the `topic` label of its metrics.
    pub fn topic(&self) -> &str {
        &self.shared.topic
    }

    /// The principal this client's requests name in audit events
    /// ([`KmsClient::with_principal`]); `None` when it names no one.
    pub fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }

    /// The key-set generation: a count that advances after every change
    /// that could change a verdict or a JWK Set, made anywhere in this
    /// actor's keys (a key created, rotated, its policy changed, trimmed or
    /// destroyed, a fleet update applied, the trusted JWK Sets reloaded;
    /// `kms_core::KeySetGeneration`). Reading it costs one atomic load and
    /// no request. A cache tags what it computed with the generation read
    /// before computing it, and uses it only while this still returns
    /// that tag.
    pub fn key_set_generation(&self) -> u64 {
        self.shared.generation.get()
    }

    /// The actor's counters (`KmsHandle::stats`).
    pub(crate) fn counters(&self) -> &Counters {
        &self.shared.counters
    }

    /// Token verification's state (`crate::token`).
    pub(crate) fn tokens(&self) -> &Tokens {
        &self.tokens
    }

    /// Token verification's state, shared (`KmsHandle::issuer_keys`).
    pub(crate) fn tokens_shared(&self) -> Arc<Tokens> {
        Arc::clone(&self.tokens)
    }

    /// Publishes one request on its lane, waits for its one answer, and
    /// counts and times the answer.
    pub(crate) async fn call<T>(&self, op: impl FnOnce(Reply<T>) -> Op) -> Result<T, KmsError> {
        self.call_from(Instant::now(), !self.shutting_down(), op)
            .await
    }

    /// [`KmsClient::call`] for a call that started at `started` and was
    /// `admitted` (the actor was not shutting down) then.
    async fn call_from<T>(
        &self,
        started: Instant,
        admitted: bool,
        op: impl FnOnce(Reply<T>) -> Op,
    ) -> Result<T, KmsError> {
        let (reply, answer) = Reply::new();
        let op = op(reply);
        let kind = op.kind();
        let answer = if admitted {
            self.publish_and_wait(op, answer).await
        } else {
            Err(KmsError::ShuttingDown)
        };
        self.shared
            .metrics
            .record_op(kind, &answer, started.elapsed());
        answer
    }

    /// Whether `KmsHandle::shutdown` has begun.
    pub(crate) fn shutting_down(&self) -> bool {
        // Acquire pairs with the Release store in `KmsHandle::shutdown`.
        self.shared.closing.load(Ordering::Acquire)
    }

    async fn publish_and_wait<T>(&self, op: Op, answer: Answer<T>) -> Result<T, KmsError> {
        // Verifies use no secret, so they are not audited and carry no
        // principal (no reference count touched on the hot path).
        let (lane, principal) = match op {
            Op::Verify(_) => (&self.requests, None),
            _ => (&self.priority, self.principal.clone()),
        };
        publish(lane, Request { op, principal })?;
        self.wait(answer).await
    }

    async fn wait<T>(&self, answer: Answer<T>) -> Result<T, KmsError> {
        match answer.await {
            Ok(result) => result,
            // The reply handle was dropped unanswered: released at shutdown,
            // or overwritten on a lagging topic.
            Err(_) if self.shutting_down() => Err(KmsError::ShuttingDown),
            Err(_) => Err(KmsError::Dropped),
        }
    }
}
