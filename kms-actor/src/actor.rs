//! [`KmsActor`]: the task that takes requests off the bus, coalesces verify
//! requests into batches for the pool, and serves the other operations.
//!
//! # Coalescing
//! After each wake the actor drains what is on the request topic (up to
//! `max_batch` pending verifies). Verify requests collect in `pending`; a
//! pending batch is dispatched as soon as a pool thread is idle, so at low
//! load a lone request goes out at once, and while every thread is busy the
//! batch grows until a thread frees up or it reaches `max_batch` (then the
//! actor stops reading and the topic's overflow policy pushes back).
//!
//! Priority, in `select!` order: shutdown, then dispatching a pending batch
//! to an idle thread, then reading new requests.
//!
//! # Failure paths
//! * A request lost to a lagging topic: its reply handle is dropped with it,
//!   so its caller gets [`KmsError::Dropped`].
//! * Shutdown: intake stops; everything already on the topic is answered;
//!   in-flight batches finish; the pool's threads are joined. A request that
//!   reaches the topic after the final drain is released when the actor's
//!   subscriber drops, and its caller gets [`KmsError::ShuttingDown`].
//! * A panic in a batch: its requests get [`KmsError::Internal`]; the actor
//!   keeps serving.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use kms_bus::{Bus, RecvError, Subscriber, TopicConfig, TryRecvError};
use kms_core::{Keystore, KmsError};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::batch;
use crate::client::KmsClient;
use crate::config::KmsConfig;
use crate::pool::VerifyPool;
use crate::request::{Op, Request, VerifyRequest};
use crate::stats::{Counters, KmsStats};

/// State shared by the actor, its handle and its clients.
#[derive(Default)]
pub(crate) struct Shared {
    /// Set once by `shutdown`; clients check it before publishing.
    /// Release/Acquire: a client that sees `true` answers ShuttingDown
    /// without publishing; one that sees `false` may publish, and its
    /// request is then either drained or released (see module docs).
    pub(crate) closing: AtomicBool,
    /// Wakes the actor for shutdown (a stored permit if it is busy).
    pub(crate) stop: Notify,
    pub(crate) counters: Counters,
}

/// The KMS actor. Start it with [`KmsActor::spawn`].
pub struct KmsActor {
    config: KmsConfig,
    keystore: Keystore,
    requests: Subscriber<Request>,
    pool: VerifyPool,
    shared: Arc<Shared>,
    /// Verify requests waiting for an idle pool thread; at most `max_batch`.
    pending: Vec<VerifyRequest>,
    /// Scratch for draining the topic; empty between wakes.
    drained: Vec<Request>,
}

/// Owns a running actor: hands out clients and shuts it down.
pub struct KmsHandle {
    client: KmsClient,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl KmsActor {
    /// Starts the actor on the current tokio runtime, subscribed to
    /// `config.request_topic` on `bus`, with a dedicated verify pool of
    /// `config.threads` threads.
    ///
    /// # Errors
    /// [`KmsError::InvalidConfig`] if `config` is invalid or the topic name
    /// is already used with another type or configuration;
    /// [`KmsError::Internal`] if the pool cannot start or no tokio runtime
    /// is running.
    pub fn spawn(config: KmsConfig, keystore: Keystore, bus: &Bus) -> Result<KmsHandle, KmsError> {
        config.validate()?;
        let runtime = tokio::runtime::Handle::try_current().map_err(|e| KmsError::Internal {
            reason: format!("KmsActor::spawn needs a tokio runtime: {e}"),
        })?;
        let topic = bus
            .topic::<Request>(
                &config.request_topic,
                TopicConfig {
                    capacity: config.queue_capacity,
                    backend: config.backend,
                    overflow: config.overflow,
                },
            )
            .map_err(|e| KmsError::InvalidConfig {
                reason: format!("request topic `{}`: {e}", config.request_topic),
            })?;
        let requests = topic.subscribe().map_err(|e| KmsError::InvalidConfig {
            reason: format!("request topic `{}`: {e}", config.request_topic),
        })?;
        // The actor must be the topic's only subscriber: a second reader
        // would run every request twice, and one that never reads would
        // fill a Reject topic or strand requests at shutdown.
        if topic.subscriber_count() != 1 {
            return Err(KmsError::InvalidConfig {
                reason: format!(
                    "request topic `{}` is already served by another actor",
                    config.request_topic
                ),
            });
        }
        let pool = VerifyPool::new(config.threads)?;
        let shared = Arc::new(Shared::default());
        let client = KmsClient::new(topic.publisher(), Arc::clone(&shared));
        let actor = KmsActor {
            pending: Vec::new(),
            drained: Vec::with_capacity(config.max_batch),
            config,
            keystore,
            requests,
            pool,
            shared: Arc::clone(&shared),
        };
        let task = runtime.spawn(actor.run());
        Ok(KmsHandle {
            client,
            shared,
            task,
        })
    }

    async fn run(mut self) {
        loop {
            let can_read = self.pending.len() < self.config.max_batch;
            tokio::select! {
                biased;
                () = self.shared.stop.notified() => break,
                () = self.pool.wait_below(self.pool.threads()), if !self.pending.is_empty() => {
                    self.dispatch();
                }
                first = self.requests.recv(), if can_read => match first {
                    Ok(request) => {
                        self.accept(request);
                        self.drain_available();
                    }
                    Err(RecvError::Lagged(n)) => Counters::add(&self.shared.counters.lagged_requests, n),
                    // Closed: every publisher is gone (the handle holds one,
                    // so only after shutdown). Any other error: stop too.
                    Err(_) => break,
                },
            }
        }
        self.finish().await;
    }

    /// Takes what is on the topic now, up to the room left in `pending`.
    fn drain_available(&mut self) {
        loop {
            let room = self.config.max_batch.saturating_sub(self.pending.len());
            if room == 0 {
                return;
            }
            match self.requests.drain(&mut self.drained, room) {
                Ok(_) => {
                    // Taken out and put back: `accept` needs `&mut self`.
                    let mut drained = std::mem::take(&mut self.drained);
                    for request in drained.drain(..) {
                        self.accept(request);
                    }
                    self.drained = drained;
                }
                Err(TryRecvError::Lagged(n)) => {
                    Counters::add(&self.shared.counters.lagged_requests, n);
                }
                // Empty, Closed, or anything else: nothing more to take now.
                Err(_) => return,
            }
        }
    }

    /// Queues a verify request, or serves any other request at once, so
    /// those never wait for a verify batch to run. (They can still wait to
    /// be read: while `pending` is full and every pool thread is busy, the
    /// actor reads nothing. A separate priority lane is not built yet.)
    fn accept(&mut self, request: Request) {
        let ks = &self.keystore;
        match request.op {
            Op::Verify(v) => {
                self.pending.push(v);
                return;
            }
            Op::Sign {
                key,
                message,
                reply,
            } => reply.send(ks.sign(&key, &message)),
            Op::CreateKey {
                tenant,
                purpose,
                reply,
            } => reply.send(ks.create_ed25519(&tenant, &purpose)),
            Op::Rotate { key, reply } => reply.send(ks.rotate(&key)),
            Op::Attest { key, reply } => reply.send(ks.attest(&key)),
        }
        Counters::add(&self.shared.counters.other_requests, 1);
    }

    /// Hands the pending verify requests to the pool as one batch.
    fn dispatch(&mut self) {
        let batch = std::mem::take(&mut self.pending);
        Counters::add(&self.shared.counters.batches, 1);
        Counters::add(&self.shared.counters.batched_requests, batch.len() as u64);
        let keystore = self.keystore.clone();
        self.pool.spawn(move || batch::run(batch, &keystore));
    }

    /// Shutdown: answer everything already on the topic, let in-flight
    /// batches finish, join the pool.
    async fn finish(mut self) {
        loop {
            self.drain_available();
            if self.pending.is_empty() {
                break;
            }
            self.pool.wait_below(self.pool.threads()).await;
            self.dispatch();
        }
        // Releases anything published after the final drain: those callers
        // see their reply dropped and, with `closing` set, ShuttingDown.
        drop(self.requests);
        self.pool.wait_below(1).await;
        let pool = self.pool;
        // Joining blocks until rayon's threads exit; keep it off the runtime.
        let _ = tokio::task::spawn_blocking(move || pool.join()).await;
    }
}

impl KmsHandle {
    /// A client for other actors to hold; clone it freely.
    pub fn client(&self) -> KmsClient {
        self.client.clone()
    }

    /// Counters since spawn.
    pub fn stats(&self) -> KmsStats {
        self.shared.counters.snapshot()
    }

    /// Stops intake, answers every request already queued, finishes
    /// in-flight batches and joins the pool. Requests made after this is
    /// called get [`KmsError::ShuttingDown`].
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
