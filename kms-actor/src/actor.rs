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
//! Priority requests are served on the actor task at once (`ops.rs`), so
//! they never wait behind verify batches, nor for the verify topic's
//! backlog (at most behind one short verification of the inline path,
//! which runs on this task); the keystore writes, which may fsync, are
//! handed to the [`Writer`] (one thread of tokio's blocking pool, a bounded
//! backlog).
//! (Under a flood of priority requests, reading new verify requests waits;
//! dispatching those already read does not.)
//!
//! # Coalescing
//! After each wake the actor drains what is on the request topic, up to the
//! room [`Pending::room`] leaves, then [`Pending`] dispatches by the rules
//! of `dispatch/coalesce.rs`: at once to an idle thread, at `target_batch`
//! behind busy ones, and never holding a request past `max_wait`. (On a
//! quiet node or under moderate load a request may never reach the actor:
//! `CallerSide` verifies it on its caller's task, `dispatch/caller.rs`.)
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
use std::sync::Arc;
use std::time::Duration;

use kms_bus::{Bus, RecvError, Subscriber, Topic, TopicConfig, TryRecvError};
use kms_core::{Keystore, KmsError};
use tokio::sync::Notify;

use crate::audit;
use crate::client::KmsClient;
use crate::config::KmsConfig;
use crate::dispatch::batch::{self, Verifier, Verifying};
use crate::dispatch::caller::CallerSide;
use crate::dispatch::coalesce::{Dispatch, Reason};
use crate::dispatch::origins::OriginTable;
use crate::dispatch::pending::Pending;
use crate::dispatch::pool::VerifyPool;
use crate::dispatch::request::Request;
use crate::handle::KmsHandle;
use crate::metrics::Metrics;
use crate::ops;
use crate::shared::{ReleaseKeystore, Shared};
use crate::stats::Counters;
use crate::token::tokens::Tokens;
use crate::token::trusted_keys::TrustedKeys;
use crate::writer::Writer;

/// Most priority requests served per wake before the actor looks at its
/// other branches again (count).
const PRIORITY_BURST: usize = 64;

/// The KMS actor. Start it with [`KmsActor::spawn`].
pub struct KmsActor {
    /// The request topic's name, a field of every `tracing` event, so the
    /// events of several actors in one process can be told apart.
    topic: String,
    keystore: Keystore,
    requests: Subscriber<Request>,
    priority: Subscriber<Request>,
    /// Verify requests read and not yet dispatched, the rules that
    /// dispatch them and the pool they go to ([`Pending`]).
    pending: Pending,
    /// Runs the keystore writes, one at a time, off this task.
    writer: Writer,
    shared: Arc<Shared>,
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

impl std::fmt::Debug for KmsActor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KmsActor")
            .field("topic", &self.topic)
            .field("pending", &self.pending)
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
        let tokens = Arc::new(Tokens::new(&config, trusted, keystore.key_set_generation()));
        let verifying = Arc::new(Verifying {
            verifier,
            origins: OriginTable::new(config.origin_table, &config.request_topic),
        });
        let shared = Arc::new(Shared {
            closing: AtomicBool::new(false),
            stop: Notify::new(),
            counters: Counters::default(),
            metrics,
            topic: config.request_topic.clone(),
            caller: CallerSide::new(
                dispatch,
                keystore.clone(),
                Arc::clone(&verifying),
                pool.load(),
                config.sign_on_caller_when_idle,
                &config.request_topic,
            ),
            generation: keystore.key_set_generation(),
        });
        let client = KmsClient::new(
            verify_topic.publisher(),
            priority_topic.publisher(),
            Arc::clone(&shared),
            tokens,
        );
        let actor = KmsActor {
            topic: config.request_topic.clone(),
            pending: Pending::new(
                dispatch,
                pool,
                keystore.clone(),
                verifying,
                &config.request_topic,
            ),
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
            writer,
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
        Ok(KmsHandle::new(client, shared, task))
    }

    async fn run(mut self) {
        loop {
            self.dispatch_due();
            let in_flight = self.pending.in_flight();
            let room = self.pending.room_at(in_flight);
            // Armed only while requests are held: `max_wait` after the
            // oldest was read.
            let deadline = self.pending.deadline();
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
                () = self.pending.pool().wait_below(in_flight),
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

    /// Dispatches pending requests if the rules say so now.
    fn dispatch_due(&mut self) {
        let shared = &*self.shared;
        self.pending.dispatch_due(
            shared.caller.outstanding(),
            &shared.metrics,
            &shared.counters,
        );
    }

    /// Takes what is on the request topic now, up to the room the rules
    /// leaves.
    fn drain_requests(&mut self) {
        loop {
            let room = self.pending.room();
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
    /// (`ops.rs`).
    fn accept(&mut self, request: Request) {
        match ops::serve(request, &self.keystore, &self.writer, self.pending.pool()) {
            Some(verify) => self.pending.push(verify),
            None => Counters::add(&self.shared.counters.other_requests, 1),
        }
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

    /// Shutdown: answer everything already on the topics, let in-flight
    /// batches and accepted writes finish, join the pool.
    async fn finish(mut self) {
        loop {
            while self.drain_priority() {}
            // Room to read first: `drain_requests` reads nothing while the
            // pool's queue is full, and an empty `pending` must mean an
            // empty topic, not a full queue.
            self.pending.wait_for_room().await;
            self.drain_requests();
            if self.pending.is_empty() {
                break;
            }
            let shared = &*self.shared;
            self.pending
                .dispatch_now(Reason::Shutdown, &shared.metrics, &shared.counters);
        }
        // Releases anything published after the final drain: those callers
        // see their reply dropped and, with `closing` set, ShuttingDown.
        drop(self.requests);
        drop(self.priority);
        let pool = self.pending.into_pool();
        pool.wait_below(1).await;
        // Every keystore write accepted is done when this returns.
        self.writer.finish().await;
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
