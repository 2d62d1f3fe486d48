//! [`KmsActor`]: the task that takes requests off the bus, coalesces verify
//! requests into batches for the pool, and serves the other operations.
//!
//! # Lanes
//! Two topics: the request topic carries verify requests, the priority topic
//! (`<request_topic>.priority`) carries sign, rotate, attest and create. The
//! actor's `select!` is biased: shutdown, then the priority lane, then the
//! rotation tick (`KmsConfig`'s scheduled rotations: before the verify
//! lane, so a flood of verifies never delays a rotation that is due), then
//! finished batches, then new verify requests, then the `max_wait` timer.
//! Priority requests are served on the actor task at once, so they never wait
//! behind verify batches, nor for the verify topic's backlog (at most behind
//! one short verification of the inline path, `coalesce.rs`, which runs on
//! this task); the keystore writes, which may fsync, are handed to the
//! [`Writer`] (one thread of tokio's blocking pool, a bounded backlog).
//! (Under a flood of priority requests, reading new verify requests waits;
//! dispatching those already read does not.)
//!
//! # Coalescing
//! After each wake the actor drains what is on the request topic, up to the
//! room [`Dispatch::room`] leaves, then dispatches by the rules of
//! [`crate::coalesce`]: at once to an idle thread, at `target_batch` behind
//! busy ones, and never holding a request past `max_wait`. (On a quiet node a
//! request may never reach the actor: its client verifies it, the caller
//! path, with the keystore and verifier in [`Shared`].)
//!
//! # Failure paths
//! * A request lost to a lagging topic: its reply handle is dropped with it,
//!   so its caller gets [`KmsError::Dropped`].
//! * Shutdown: intake stops; everything already on the topics is answered;
//!   in-flight batches finish; every keystore write accepted is done
//!   (or skipped, if its caller has gone) and the writer's thread exits;
//!   the pool's threads are joined. A request that
//!   reaches a topic after the final drain is released when the actor's
//!   subscribers drop, and its caller gets [`KmsError::ShuttingDown`].
//! * A panic in a batch: its requests get [`KmsError::Internal`]; the pool
//!   thread and the actor keep serving.
//! * A caller that dropped its future: a verify request not yet in a
//!   running batch is skipped, as are sign and attest, and create and
//!   rotate whose write has not started. The request itself is freed with
//!   its batch.
//! * More keystore writes than `write_backlog` accepted and not
//!   done: the next is answered [`KmsError::Overloaded`] (retryable) at
//!   once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use kms_bus::{Bus, RecvError, Subscriber, Topic, TopicConfig, TryRecvError};
use kms_core::{Keystore, KmsError};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::audit;
use crate::batch::{self, Verifier};
use crate::client::KmsClient;
use crate::coalesce::{Dispatch, Reason};
use crate::combine::CombineQueue;
use crate::config::KmsConfig;
use crate::gate::CallerGate;
use crate::jwt;
use crate::metrics::Metrics;
use crate::pool::VerifyPool;
use crate::request::{Op, Request, VerifyRequest};
use crate::shared::{ReleaseKeystore, Shared};
use crate::stats::{Counters, KmsStats};
use crate::token_cache::TokenCache;
use crate::trusted_keys::TrustedKeys;
use crate::writer::Writer;

/// Most priority requests served per wake before the actor looks at its
/// other branches again (count).
const PRIORITY_BURST: usize = 64;

/// The KMS actor. Start it with [`KmsActor::spawn`].
pub struct KmsActor {
    /// The request topic's name, a field of every `tracing` event, so the
    /// events of several actors in one process can be told apart.
    topic: String,
    dispatch: Dispatch,
    keystore: Keystore,
    requests: Subscriber<Request>,
    priority: Subscriber<Request>,
    pool: VerifyPool,
    /// Runs the keystore writes, one at a time, off this task.
    writer: Writer,
    verifier: Verifier,
    shared: Arc<Shared>,
    /// Verify requests read and not yet dispatched; at most `max_batch`.
    pending: Vec<VerifyRequest>,
    /// When the oldest request in `pending` was read; `None` iff empty.
    pending_since: Option<Instant>,
    /// Scratch for draining a topic; empty between wakes.
    drained: Vec<Request>,
    /// Ticks every `auto_rotate_check`, the first at once.
    rotation_check: tokio::time::Interval,
    /// A scheduled rotation check is queued or running on the writer:
    /// set here, cleared by the job when done, so at most one is.
    rotation_pending: Arc<AtomicBool>,
    /// Dropped with the actor however it ends (after shutdown, on a panic,
    /// or with its task when the runtime goes, polled or not): no client
    /// keeps the keystore afterwards.
    _release: ReleaseKeystore,
}

/// Owns a running actor: hands out clients and shuts it down.
pub struct KmsHandle {
    client: KmsClient,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for KmsActor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KmsActor")
            .field("topic", &self.topic)
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for KmsHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KmsHandle")
            .field("topic", &self.shared.topic)
            .finish_non_exhaustive()
    }
}

impl KmsActor {
    /// Starts the actor on the current tokio runtime, subscribed to
    /// `config.request_topic` and its priority topic on `bus`, with a
    /// dedicated verify pool of `config.threads` threads.
    ///
    /// The runtime needs its time driver (`enable_time`, or `enable_all`
    /// as `#[tokio::main]` and `Runtime::new` do) for `max_wait`. Metric
    /// handles are taken now, so install a `metrics` recorder first.
    ///
    /// # Errors
    /// [`KmsError::InvalidConfig`] if `config` is invalid
    /// ([`KmsConfig::validate`]) or a topic name is already used with
    /// another type or configuration or served by another actor;
    /// [`KmsError::Internal`] if the pool cannot start, no tokio runtime
    /// is running, or the runtime has no time driver.
    pub fn spawn(config: KmsConfig, keystore: Keystore, bus: &Bus) -> Result<KmsHandle, KmsError> {
        Self::spawn_with(config, keystore, bus, batch::default_verifier(), |p| p)
    }

    /// [`KmsActor::spawn`] with the batch verifier given (the production
    /// one, or a test's) and the dispatch rules adjusted by `tune` (tests
    /// only).
    pub(crate) fn spawn_with(
        config: KmsConfig,
        keystore: Keystore,
        bus: &Bus,
        verifier: Verifier,
        tune: impl FnOnce(Dispatch) -> Dispatch,
    ) -> Result<KmsHandle, KmsError> {
        config.validate()?;
        let trusted = TrustedKeys::load(&config.trusted_jwks, &config.request_topic)?;
        let runtime = tokio::runtime::Handle::try_current().map_err(|e| KmsError::Internal {
            reason: format!("KmsActor::spawn needs a tokio runtime: {e}"),
        })?;
        // tokio offers no query for its time driver; building a timer
        // without one panics, so try it here (the default panic hook prints
        // tokio's message once) rather than in the actor at its first
        // `max_wait`.
        if std::panic::catch_unwind(|| drop(tokio::time::sleep(Duration::ZERO))).is_err() {
            return Err(KmsError::Internal {
                reason: "KmsActor::spawn needs a tokio runtime with its time driver \
                         (enable_time or enable_all) for max_wait"
                    .to_owned(),
            });
        }
        let topic = |name: String, capacity: usize| -> Result<Topic<Request>, KmsError> {
            let config = TopicConfig {
                capacity,
                backend: config.backend,
                overflow: config.overflow,
            };
            bus.topic::<Request>(&name, config)
                .map_err(|e| KmsError::InvalidConfig {
                    reason: format!("topic `{name}`: {e}"),
                })
        };
        let verify_topic = topic(config.request_topic.clone(), config.queue_capacity)?;
        let priority_topic = topic(config.priority_topic(), config.priority_capacity)?;
        let requests = subscribe_alone(&verify_topic)?;
        let priority = subscribe_alone(&priority_topic)?;
        let metrics = Metrics::new(&config.request_topic);
        let pool = VerifyPool::new(config.threads, metrics.in_flight.clone())?;
        let writer = Writer::spawn(&runtime, keystore.clone(), config.write_backlog);
        let dispatch = tune(Dispatch::new(&config));
        let shared = Arc::new(Shared {
            closing: AtomicBool::new(false),
            stop: Notify::new(),
            counters: Counters::default(),
            metrics,
            topic: config.request_topic.clone(),
            dispatch,
            gate: CallerGate::default(),
            combine: CombineQueue::default(),
            keystore: RwLock::new(Some(keystore.clone())),
            verifier: Arc::clone(&verifier),
            trusted: RwLock::new(Arc::new(trusted)),
            refetch: RwLock::new(None),
            generation: keystore.key_set_generation(),
            token_cache: TokenCache::new(
                config.token_cache,
                config.token_cache_bytes,
                &config.request_topic,
            ),
            token_alg: config.token_alg,
            token_purposes: config.token_purposes.clone(),
        });
        let client = KmsClient::new(
            verify_topic.publisher(),
            priority_topic.publisher(),
            Arc::clone(&shared),
        );
        let actor = KmsActor {
            topic: config.request_topic.clone(),
            dispatch,
            pending: Vec::new(),
            pending_since: None,
            drained: Vec::with_capacity(config.max_batch),
            rotation_check: {
                let mut check = tokio::time::interval(config.auto_rotate_check);
                check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                check
            },
            rotation_pending: Arc::new(AtomicBool::new(false)),
            keystore,
            requests,
            priority,
            pool,
            writer,
            verifier,
            shared: Arc::clone(&shared),
            _release: ReleaseKeystore(Arc::clone(&shared)),
        };
        let backend = kms_core::ed25519::curve_backend();
        tracing::info!(
            topic = %config.request_topic,
            threads = config.threads,
            curve_backend = backend.name(),
            "KMS actor started"
        );
        if let Some(missed) = kms_core::ed25519::missed_curve_backend() {
            tracing::warn!(
                topic = %config.request_topic,
                curve_backend = backend.name(),
                available = missed.name(),
                "this CPU has AVX-512 IFMA but the build lacks curve25519-dalek's avx512 \
                 backend, so verification takes about 1.3-1.7x as long: add \
                 rustflags = ['--cfg=curve25519_dalek_backend=\"avx512\"'] for x86_64 targets \
                 to the embedding project's .cargo/config.toml (kms README, Embedding)"
            );
        }
        let task = runtime.spawn(actor.run());
        Ok(KmsHandle {
            client,
            shared,
            task,
        })
    }

    async fn run(mut self) {
        loop {
            self.dispatch_due();
            let in_flight = self.pool.in_flight();
            let room = self.dispatch.room(self.pending.len(), in_flight);
            // Armed only while requests are held: `max_wait` after the
            // oldest was read.
            let deadline = self.pending_since.map(|t| t + self.dispatch.max_wait());
            tokio::select! {
                biased;
                () = self.shared.stop.notified() => break,
                first = self.priority.recv() => match first {
                    Ok(request) => {
                        self.accept(request);
                        // The rest waits for the next turn of the loop.
                        let _ = self.drain_priority();
                    }
                    Err(RecvError::Lagged(n)) => self.count_lagged(n),
                    // Closed: every publisher is gone (the handle holds
                    // one, so only after shutdown). Any other error: stop.
                    Err(_) => break,
                },
                // Before the verify lane, so a flood of verifies never
                // delays a scheduled rotation; one tick a minute costs
                // one poll of its timer per turn.
                _ = self.rotation_check.tick() => self.rotate_due_keys(),
                // A batch finished: the rules may dispatch or read again.
                // Only awaited when that matters (requests held, or reading
                // stopped), so an idle actor is not woken by every finished
                // batch, which would cost a cross-thread wake-up per request.
                () = self.pool.wait_below(in_flight),
                    if in_flight > 0 && (!self.pending.is_empty() || room == 0) => {}
                first = self.requests.recv(), if room > 0 => match first {
                    Ok(request) => {
                        self.accept(request);
                        self.drain_requests();
                    }
                    Err(RecvError::Lagged(n)) => self.count_lagged(n),
                    Err(_) => break,
                },
                // The future is built only when polled, so no timer exists
                // while nothing is held.
                () = async {
                    if let Some(deadline) = deadline {
                        tokio::time::sleep_until(deadline.into()).await;
                    }
                }, if deadline.is_some() => {}
            }
        }
        self.finish().await;
    }

    /// Dispatches pending requests for as long as the rules say so.
    fn dispatch_due(&mut self) {
        // `dispatch` takes everything pending, so one decision per wake. The
        // clock is read only while something is held, and once.
        let waited = self.waited();
        let first_len = self.pending.first().map_or(0, |r| r.message.len());
        let outstanding = self.shared.gate.outstanding();
        if let Some(reason) = self.dispatch.decide(
            self.pending.len(),
            waited,
            self.pool.in_flight(),
            first_len,
            outstanding,
        ) {
            self.dispatch(reason, waited);
        } else if !self.pending.is_empty() {
            tracing::trace!(
                target: "kms_actor::coalesce",
                topic = self.topic.as_str(),
                pending = self.pending.len(),
                in_flight = self.pool.in_flight(),
                threads = self.pool.threads(),
                "holding: every thread is busy"
            );
        }
    }

    /// How long the oldest pending request has been held (zero if none).
    fn waited(&self) -> Duration {
        self.pending_since.map_or(Duration::ZERO, |t| t.elapsed())
    }

    /// Takes what is on the request topic now, up to the room the rules
    /// leaves.
    fn drain_requests(&mut self) {
        loop {
            let room = self
                .dispatch
                .room(self.pending.len(), self.pool.in_flight());
            if room == 0 {
                return;
            }
            match self.requests.drain(&mut self.drained, room) {
                Ok(_) => self.accept_drained(),
                Err(TryRecvError::Lagged(n)) => self.count_lagged(n),
                // Empty, Closed, or anything else: nothing more to take now.
                Err(_) => return,
            }
        }
    }

    /// Serves up to [`PRIORITY_BURST`] more priority requests; returns
    /// whether the topic may hold more (something was taken or a lag was
    /// counted).
    fn drain_priority(&mut self) -> bool {
        match self.priority.drain(&mut self.drained, PRIORITY_BURST) {
            Ok(_) => {
                self.accept_drained();
                true
            }
            Err(TryRecvError::Lagged(n)) => {
                self.count_lagged(n);
                true
            }
            Err(_) => false,
        }
    }

    fn accept_drained(&mut self) {
        // Taken out and put back: `accept` needs `&mut self`.
        let mut drained = std::mem::take(&mut self.drained);
        for request in drained.drain(..) {
            self.accept(request);
        }
        self.drained = drained;
    }

    fn count_lagged(&self, n: u64) {
        Counters::add(&self.shared.counters.lagged_requests, n);
        tracing::warn!(
            target: "kms_actor::coalesce",
            topic = self.topic.as_str(),
            lost = n,
            "requests lost to a lagging topic; their callers get Dropped"
        );
    }

    /// Queues a verify request, or serves any other request at once
    /// (auditing those that change or use a secret, `crate::audit`).
    fn accept(&mut self, request: Request) {
        let ks = &self.keystore;
        // `None` for every verify request (and a client without one).
        let principal = request.principal;
        let who = principal.as_deref();
        match request.op {
            Op::Verify(v) => {
                if self.pending.is_empty() {
                    self.pending_since = Some(Instant::now());
                }
                self.pending.push(v);
                return;
            }
            Op::Sign {
                key,
                message,
                reply,
            } => {
                if !reply.is_abandoned() {
                    let result = ks.sign(&key, &message);
                    audit::key_op("sign", &key, who, &result, |(id, _)| Some(id), "");
                    reply.send(result);
                }
            }
            Op::SignJwt {
                key,
                alg,
                claims,
                reply,
            } => {
                if !reply.is_abandoned() {
                    let result = jwt::sign(ks, &key, alg, &claims);
                    audit::key_op("sign", &key, who, &result, |(id, _)| Some(id), "");
                    reply.send(result.map(|(_, token)| token));
                }
            }
            Op::Attest { key, reply } => {
                if !reply.is_abandoned() {
                    reply.send(ks.attest(&key));
                }
            }
            Op::Policy { key, reply } => {
                if !reply.is_abandoned() {
                    reply.send(ks.policy(&key));
                }
            }
            Op::Export { key, to, reply } => {
                if !reply.is_abandoned() {
                    let result = ks.export_sealed(&key, &to);
                    audit::key_op("export", &key, who, &result, |_| None, "");
                    reply.send(result);
                }
            }
            // The writes: a durable keystore fsyncs, which must not stall
            // the actor's task (and with it every lane), so they go to the
            // writer, which audits each when it is done.
            Op::CreateKey {
                tenant,
                purpose,
                reply,
            } => self.writer.submit(reply, move |ks| {
                let result = ks.create_ed25519(&tenant, &purpose);
                audit::new_key(
                    "create_key",
                    &tenant,
                    &purpose,
                    principal.as_deref(),
                    &result,
                );
                result
            }),
            Op::Import {
                tenant,
                purpose,
                from,
                envelope,
                reply,
            } => self.writer.submit(reply, move |ks| {
                let result = ks.import_sealed(&tenant, &purpose, &from, &envelope);
                audit::new_key("import", &tenant, &purpose, principal.as_deref(), &result);
                result
            }),
            Op::Rotate { key, reply } => self.writer.submit(reply, move |ks| {
                let result = ks.rotate(&key);
                audit::key_op(
                    "rotate",
                    &key,
                    principal.as_deref(),
                    &result,
                    |id| Some(id),
                    "",
                );
                result
            }),
            Op::SetPolicy { key, policy, reply } => self.writer.submit(reply, move |ks| {
                let detail = audit::policy_detail(&policy);
                let result = ks.set_policy(&key, policy);
                audit::key_op(
                    "set_policy",
                    &key,
                    principal.as_deref(),
                    &result,
                    |_| None,
                    &detail,
                );
                result
            }),
            Op::Trim { key, below, reply } => self.writer.submit(reply, move |ks| {
                let result = ks.trim(&key, below);
                let detail = format!("below={below}");
                audit::key_op(
                    "trim",
                    &key,
                    principal.as_deref(),
                    &result,
                    |_| None,
                    &detail,
                );
                result
            }),
            Op::Destroy { key, reply } => self.writer.submit(reply, move |ks| {
                let result = ks.destroy(&key);
                audit::key_op(
                    "destroy",
                    &key,
                    principal.as_deref(),
                    &result,
                    |()| None,
                    "",
                );
                result
            }),
        }
        Counters::add(&self.shared.counters.other_requests, 1);
    }

    /// Rotates, on the writer, every key whose `auto_rotate_after` has
    /// passed since its head was made (`KmsConfig::auto_rotate_check`).
    /// Skipped while the previous check is still queued or running.
    fn rotate_due_keys(&self) {
        // Acquire pairs with the job's Release store: what that check
        // rotated is done before another is queued.
        if self.rotation_pending.swap(true, Ordering::Acquire) {
            return;
        }
        let pending = Arc::clone(&self.rotation_pending);
        let submitted = self.writer.submit_detached(move |ks| {
            // Cleared however the check ends (a panic included).
            struct Done(Arc<AtomicBool>);
            impl Drop for Done {
                fn drop(&mut self) {
                    self.0.store(false, Ordering::Release);
                }
            }
            let _done = Done(pending);
            let now = std::time::SystemTime::now();
            for head in ks.due_for_rotation(now) {
                let result = ks.rotate_if_due(&head, now);
                if let Ok(None) = result {
                    continue;
                }
                let scheduler = Some(audit::SCHEDULER);
                audit::key_op("auto_rotate", &head, scheduler, &result, Option::as_ref, "");
            }
        });
        if !submitted {
            // The writer has stopped (shutdown): nothing to schedule.
            self.rotation_pending.store(false, Ordering::Release);
        }
    }

    /// Hands the pending verify requests to the pool as one batch, split
    /// into one job per idle thread ([`Dispatch::chunks`]). `waited` is how
    /// long the oldest of them was held.
    fn dispatch(&mut self, reason: Reason, waited: Duration) {
        let batch = std::mem::take(&mut self.pending);
        self.pending_since = None;
        let metrics = &self.shared.metrics;
        metrics.batch_size.record(batch.len() as f64);
        metrics.batch_wait.record(waited.as_secs_f64());
        Counters::add(&self.shared.counters.batches, 1);
        Counters::add(&self.shared.counters.batched_requests, batch.len() as u64);
        let in_flight = self.pool.in_flight();
        // 0 on an inline dispatch: no job.
        let chunks = if reason == Reason::Inline {
            0
        } else {
            self.dispatch.chunks(batch.len(), in_flight)
        };
        tracing::debug!(
            target: "kms_actor::coalesce",
            topic = self.topic.as_str(),
            batch_size = batch.len(),
            chunks,
            waited_us = waited.as_micros() as u64,
            in_flight,
            threads = self.pool.threads(),
            reason = reason.as_str(),
            "dispatch"
        );
        if reason == Reason::Inline {
            // On this task: no pool thread to wake (the inline path).
            batch::run(batch, &self.keystore, &self.verifier);
            return;
        }
        debug_assert!(chunks >= 1 && chunks <= batch.len(), "no empty job");
        let mut rest = batch.into_iter();
        for size in Dispatch::chunk_sizes(rest.len(), chunks) {
            let chunk: Vec<VerifyRequest> = rest.by_ref().take(size).collect();
            let (keystore, verifier) = (self.keystore.clone(), Arc::clone(&self.verifier));
            self.pool
                .spawn(move || batch::run(chunk, &keystore, &verifier));
        }
    }

    /// Shutdown: answer everything already on the topics, let in-flight
    /// batches and accepted writes finish, join the pool.
    async fn finish(mut self) {
        loop {
            while self.drain_priority() {}
            // Room to read first: `drain_requests` reads nothing while the
            // pool's queue is full, and an empty `pending` must mean an
            // empty topic, not a full queue.
            self.pool.wait_below(self.dispatch.queue_limit()).await;
            self.drain_requests();
            if self.pending.is_empty() {
                break;
            }
            let waited = self.waited();
            self.dispatch(Reason::Shutdown, waited);
        }
        // Releases anything published after the final drain: those callers
        // see their reply dropped and, with `closing` set, ShuttingDown.
        drop(self.requests);
        drop(self.priority);
        self.pool.wait_below(1).await;
        // Every keystore write accepted is done when this returns.
        self.writer.finish().await;
        let pool = self.pool;
        // Joining blocks until rayon's threads exit; keep it off the runtime.
        let _ = tokio::task::spawn_blocking(move || pool.join()).await;
    }
}

/// Subscribes the actor to `topic`, which must have no other subscriber: a
/// second reader would run every request twice, and one that never reads
/// would fill a `Reject` topic or strand requests at shutdown.
fn subscribe_alone(topic: &Topic<Request>) -> Result<Subscriber<Request>, KmsError> {
    let subscriber = topic.subscribe().map_err(|e| KmsError::InvalidConfig {
        reason: format!("topic `{}`: {e}", topic.name()),
    })?;
    if topic.subscriber_count() != 1 {
        return Err(KmsError::InvalidConfig {
            reason: format!(
                "topic `{}` is already served by another actor",
                topic.name()
            ),
        });
    }
    Ok(subscriber)
}

impl KmsHandle {
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
        let loaded = TrustedKeys::load(sets, &self.shared.topic)?;
        let mut trusted = self
            .shared
            .trusted
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let loaded = loaded.keeping_remote(&trusted)?;
        let count = loaded.len();
        *trusted = Arc::new(loaded);
        drop(trusted);
        self.shared.generation.advance();
        Ok(count)
    }

    /// What keeps issuers' keys current from outside (an OpenID
    /// provider's `jwks_uri`) holds of this actor: it replaces one
    /// issuer's keys and is asked to refetch on an unknown `kid`
    /// ([`crate::IssuerKeys`]).
    pub fn issuer_keys(&self) -> crate::IssuerKeys {
        crate::IssuerKeys::new(Arc::clone(&self.shared))
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
