//! [`CallerSide`]: where a verify request goes from its caller's task: the
//! caller path, combining, or the request topic (`coalesce.rs` names the
//! rules); and whether an ML-DSA token is signed on its caller's task
//! ([`CallerSide::sign_if_idle`]) or by the actor on the pool. One per
//! actor, shared by all its clients.
//!
//! [`CallerSide::dispatch`] takes one request and either answers it on
//! the caller's task ([`Dispatched::Answered`]: the caller path verified
//! it, or publishing it failed) or leaves the caller a receiver to await
//! ([`Dispatched::Waiting`]: a leader, the caller itself included, or the
//! actor answers it). A request that the caller path refused counts as
//! outstanding (`CallerGate::publishing`) until `Dispatched::Waiting`'s
//! `counted` guard drops (its caller has the answer or gives up), or, if
//! publishing it failed, until [`CallerSide::dispatch`] returns.
//!
//! Invariants:
//! * A lead is taken and left inside [`CallerSide::lead`], which does not
//!   await: no request waits on a future that might not be polled again
//!   (`combine.rs`).
//! * The keystore slot is read-locked only while a verification or a
//!   signature runs on a caller's task; [`CallerSide::release_keystore`]
//!   takes the keystore out under the write lock when the actor ends, so it
//!   waits for those and afterwards no caller verifies or signs (combining
//!   answers `ShuttingDown`, publishing finds no subscriber).
//! * At most one caller signs on its own task at a time (the one whose
//!   compare-and-swap set `signing`; its [`Signing`] guard clears it
//!   however the signature ends, a panic included, which is answered
//!   `Internal`), and only while the pool has nothing in flight and no
//!   verify request is outstanding: hints read once, so a batch handed to
//!   the pool just after runs beside that one signature.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use kms_bus::Publisher;
use kms_core::{KeyId, Keystore, KmsError};
use kms_jose::Algorithm;

use crate::dispatch::batch::{self, Verifying};
use crate::dispatch::coalesce::{Dispatch, Reason};
use crate::dispatch::combine::{CombineQueue, Leader, Offer, Offered};
use crate::dispatch::gate::{CallerGate, Outstanding, Refused};
use crate::dispatch::pool::Load;
use crate::dispatch::publish::publish;
use crate::dispatch::reply::{Answer, Reply};
use crate::dispatch::request::{Op, Request, VerifyCall};
use crate::metrics::Metrics;
use crate::stats::Counters;
use crate::token::sign;

/// See the module docs.
pub(crate) struct CallerSide {
    /// The dispatch rules; the actor holds a copy.
    dispatch: Dispatch,
    /// What the caller path reads ([`CallerGate`]).
    gate: CallerGate,
    /// Combining's queue ([`CombineQueue`]).
    combine: CombineQueue,
    /// The keystore a caller verifies with, until the actor has finished
    /// (module docs): then `None`, so no clone of it outlives the actor
    /// (a durable store's lock is released) however long clients live.
    keystore: RwLock<Option<Keystore>>,
    /// The verifier and the origin table, shared with the actor's pool.
    verifying: Arc<Verifying>,
    /// The pool's load: a caller signs on its task only while it is idle.
    pool: Arc<Load>,
    /// `KmsConfig::sign_on_caller_when_idle`.
    sign_on_caller: bool,
    /// Set while a caller signs on its own task (module docs).
    signing: AtomicBool,
    /// The request topic's name (the `topic` field of `tracing` events).
    topic: String,
}

impl std::fmt::Debug for CallerSide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallerSide")
            .field("topic", &self.topic)
            .field("gate", &self.gate)
            .field("combine", &self.combine)
            .finish_non_exhaustive()
    }
}

/// What became of a request given to [`CallerSide::dispatch`].
pub(crate) enum Dispatched<'a> {
    /// Its answer: verified on the caller path, or the error publishing it
    /// got.
    Answered(Result<(), KmsError>),
    /// Queued for combining or published: its answer comes on `answer`;
    /// the request counts as outstanding until `counted` drops.
    Waiting {
        /// Counts the request as outstanding (`CallerGate::publishing`).
        counted: Outstanding<'a>,
        /// Where its one answer arrives.
        answer: Answer<()>,
    },
}

impl CallerSide {
    /// The caller side of an actor on `topic` with these rules, verifying
    /// with `keystore` and `verifying` until [`CallerSide::release_keystore`],
    /// signing ML-DSA tokens on callers' tasks if `sign_on_caller` while
    /// `pool` is idle.
    pub(crate) fn new(
        dispatch: Dispatch,
        keystore: Keystore,
        verifying: Arc<Verifying>,
        pool: Arc<Load>,
        sign_on_caller: bool,
        topic: &str,
    ) -> Self {
        CallerSide {
            dispatch,
            gate: CallerGate::default(),
            combine: CombineQueue::default(),
            keystore: RwLock::new(Some(keystore)),
            verifying,
            pool,
            sign_on_caller,
            signing: AtomicBool::new(false),
            topic: topic.to_owned(),
        }
    }

    /// Verify requests published or queued and not yet answered (count; a
    /// hint, `CallerGate::outstanding`): an input of the actor's rules.
    pub(crate) fn outstanding(&self) -> usize {
        self.gate.outstanding()
    }

    /// Takes the keystore out (the actor has finished): waits for the
    /// caller-side verifications and signature in progress (one on the
    /// caller path, ~20 µs for a message of at most 1 KiB, a batch of at
    /// most `combine_max` per leader, or one ML-DSA signature, ~130 µs for
    /// ML-DSA-65); afterwards none starts.
    pub(crate) fn release_keystore(&self) {
        drop(
            self.keystore
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
    }

    /// Dispatches one verify request from its caller's task: the caller
    /// path if the node is quiet, else combining (lead, gather, join), else
    /// `requests` (the request topic). Counts what it verifies here in
    /// `counters` and `metrics`.
    pub(crate) async fn dispatch(
        &self,
        requests: &Publisher<Request>,
        counters: &Counters,
        metrics: &Metrics,
        call: VerifyCall,
    ) -> Dispatched<'_> {
        let refused = match self.verify_on_caller(counters, metrics, &call) {
            Ok(verdict) => {
                // Not a tokio resource: spend the cooperative budget by
                // hand, so a task looping on verifies of a quiet node
                // still yields.
                tokio::task::coop::consume_budget().await;
                return Dispatched::Answered(verdict);
            }
            Err(refused) => refused,
        };
        let counted = self.gate.publishing();
        let (reply, answer) = Reply::new();
        let request = call.with_reply(reply);
        let offer = Offer {
            outstanding: counted.outstanding(),
            run: refused == Refused::Run,
        };
        let leader = match self.combine.offer(&self.dispatch, requests, offer, request) {
            Ok(Offered::Lead(leader)) => Some(leader),
            Ok(Offered::Gather(gatherer)) => {
                tokio::task::yield_now().await;
                gatherer.lead()
            }
            Ok(Offered::Joined) => None,
            Err(request) => {
                let request = Request {
                    op: Op::Verify(*request),
                    // Verifies use no secret: not audited, no principal.
                    principal: None,
                };
                if let Err(e) = publish(requests, request) {
                    return Dispatched::Answered(Err(e));
                }
                None
            }
        };
        if let Some(leader) = leader {
            let verified = self.lead(counters, metrics, leader);
            spend_budget(verified).await;
        }
        Dispatched::Waiting { counted, answer }
    }

    /// The caller path (`coalesce.rs`): `Ok(verdict)` if the node is quiet
    /// and the request was verified here, on the caller's task.
    ///
    /// # Errors
    /// Why the caller path refused ([`Refused`]); then combining applies.
    fn verify_on_caller(
        &self,
        counters: &Counters,
        metrics: &Metrics,
        request: &VerifyCall,
    ) -> Result<Result<(), KmsError>, Refused> {
        let permit = self.gate.try_enter(&self.dispatch, request.message.len())?;
        let keystore = self.keystore.read().unwrap_or_else(PoisonError::into_inner);
        // `None`: the actor has finished; combining then answers ShuttingDown
        // or publishes, which answers it too.
        let Some(keystore_now) = keystore.as_ref() else {
            return Err(Refused::Busy);
        };
        let verdict = batch::verify_one(request, keystore_now, &self.verifying);
        drop(keystore);
        drop(permit);
        Counters::add(&counters.caller_verified, 1);
        metrics.dispatched(Reason::Caller, 1);
        tracing::debug!(
            target: "kms_actor::coalesce",
            topic = self.topic.as_str(),
            batch_size = 1_u64,
            reason = Reason::Caller.as_str(),
            "dispatch"
        );
        Ok(verdict)
    }

    /// Verifies one signature that cannot join a batch (an ML-DSA key of
    /// the keystore's) on the caller's task, under the keystore slot's
    /// read lock ([`kms_core::Keystore::verify_message`]).
    ///
    /// # Errors
    /// [`KmsError::ShuttingDown`] once the actor has finished; the
    /// keystore's verdict.
    pub(crate) fn verify_alone(
        &self,
        key: &kms_core::KeyId,
        message: &[u8],
        signature: &[u8],
    ) -> Result<(), KmsError> {
        let keystore = self.keystore.read().unwrap_or_else(PoisonError::into_inner);
        match keystore.as_ref() {
            Some(keystore) => keystore.verify_message(key, message, signature),
            None => Err(KmsError::ShuttingDown),
        }
    }

    /// Signs a token of `claims` with the head of `key`'s key (an ML-DSA
    /// key: `sign::sign`, audited as by `principal`) on the caller's task
    /// if the node is idle for it:
    /// `KmsConfig::sign_on_caller_when_idle` on, nothing in flight on the
    /// pool, no verify request outstanding, no other caller signing on its
    /// task, the actor not finished. `None` when it does not apply: the
    /// caller then sends the request to the actor, which signs it on the
    /// pool. Counts what it answers in `counters`.
    ///
    /// # Errors
    /// Those of `sign::sign`; [`KmsError::Internal`] if signing panics
    /// (the actor's path answers its caller `Dropped` then).
    pub(crate) fn sign_if_idle(
        &self,
        counters: &Counters,
        key: &KeyId,
        alg: Algorithm,
        claims: &[u8],
        principal: Option<&str>,
    ) -> Option<Result<String, KmsError>> {
        if !self.sign_on_caller || self.pool.in_flight() > 0 || self.gate.outstanding() > 0 {
            return None;
        }
        // Relaxed: the flag only keeps to one the callers signing on their
        // tasks; it guards no memory (the keystore has its own locks).
        self.signing
            .compare_exchange(false, true, Ordering::Relaxed, Ordering::Relaxed)
            .ok()?;
        let _signing = Signing(&self.signing);
        let keystore = self.keystore.read().unwrap_or_else(PoisonError::into_inner);
        // `None`: the actor has finished; the actor's lane answers
        // `ShuttingDown`.
        let keystore = keystore.as_ref()?;
        let result = catch_unwind(AssertUnwindSafe(|| {
            sign::sign(keystore, key, alg, claims, principal)
        }))
        .unwrap_or_else(|_| {
            Err(KmsError::Internal {
                reason: "signing a token panicked".to_owned(),
            })
        });
        Counters::add(&counters.caller_signed, 1);
        Some(result)
    }

    /// Combining (`coalesce.rs`): verifies what is queued in batches on
    /// this task until `leader` has taken its share or the queue is empty,
    /// then leaves the lead (the hand-off, `combine.rs`). Synchronous, so
    /// the lead is never held across an `.await`. Ends the node's run
    /// when the leader led alone and verified only its own request
    /// (`gate.rs`). Returns how many requests it verified.
    fn lead(&self, counters: &Counters, metrics: &Metrics, mut leader: Leader<'_>) -> usize {
        loop {
            let batch = leader.take();
            if batch.is_empty() {
                break;
            }
            let n = batch.len() as u64;
            tracing::debug!(
                target: "kms_actor::coalesce",
                topic = self.topic.as_str(),
                batch_size = n,
                reason = Reason::Combined.as_str(),
                "dispatch"
            );
            let keystore = self.keystore.read().unwrap_or_else(PoisonError::into_inner);
            match keystore.as_ref() {
                Some(keystore) => batch::run(batch, keystore, &self.verifying),
                // The actor has finished: nothing more is verified.
                None => {
                    for request in batch {
                        request.reply.send(Err(KmsError::ShuttingDown));
                    }
                }
            }
            drop(keystore);
            Counters::add(&counters.combined_batches, 1);
            Counters::add(&counters.combined_requests, n);
            metrics.dispatched(Reason::Combined, n);
        }
        if leader.led_alone() {
            self.gate.end_run();
        }
        leader.taken()
    }
}

/// Clears `CallerSide::signing` when a caller-side signature ends,
/// however it ends.
struct Signing<'a>(&'a AtomicBool);

impl Drop for Signing<'_> {
    fn drop(&mut self) {
        // Relaxed: as the compare-and-swap in `CallerSide::sign_if_idle`.
        self.0.store(false, Ordering::Relaxed);
    }
}

/// Spends one unit of tokio's cooperative budget per request a leader
/// verified on this task (combining; a signature is ~15 µs in a batch), so
/// that a task whose futures lead again and again (a `join_all` of many
/// verifies) yields after about the work of 128 budget units, as it would
/// for as many operations on tokio's own resources.
async fn spend_budget(verified: usize) {
    for _ in 0..verified.max(1) {
        tokio::task::coop::consume_budget().await;
    }
}
