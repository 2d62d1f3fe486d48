//! [`Pending`]: the verify requests the actor has read and not yet
//! dispatched, with the rules that dispatch them (`coalesce.rs`) and the
//! pool they go to. Owned by the actor and used only on its task.
//!
//! Invariants:
//! * `since` is `Some` exactly while `requests` is non-empty: the time the
//!   oldest was read, from which `max_wait` counts.
//! * A dispatch takes every pending request (one decision per wake), so
//!   `requests` never exceeds `max_batch` when the actor reads at most
//!   [`Pending::room`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use kms_core::Keystore;

use crate::dispatch::batch::{self, Verifying};
use crate::dispatch::coalesce::{Dispatch, Reason};
use crate::dispatch::pool::VerifyPool;
use crate::dispatch::request::VerifyRequest;
use crate::metrics::Metrics;
use crate::stats::Counters;

/// See the module docs.
pub(crate) struct Pending {
    dispatch: Dispatch,
    pool: VerifyPool,
    keystore: Keystore,
    verifying: Arc<Verifying>,
    /// The request topic's name (the `topic` field of `tracing` events).
    topic: String,
    /// Verify requests read and not yet dispatched; at most `max_batch`.
    requests: Vec<VerifyRequest>,
    /// When the oldest request in `requests` was read; `None` iff empty.
    since: Option<Instant>,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("requests", &self.requests.len())
            .field("in_flight", &self.pool.in_flight())
            .finish_non_exhaustive()
    }
}

impl Pending {
    /// Nothing pending yet; batches go to `pool`, verified with `keystore`
    /// and `verifier`, by the rules of `dispatch`.
    pub(crate) fn new(
        dispatch: Dispatch,
        pool: VerifyPool,
        keystore: Keystore,
        verifying: Arc<Verifying>,
        topic: &str,
    ) -> Self {
        Pending {
            dispatch,
            pool,
            keystore,
            verifying,
            topic: topic.to_owned(),
            requests: Vec::new(),
            since: None,
        }
    }

    /// Holds `request` until the rules dispatch it.
    pub(crate) fn push(&mut self, request: VerifyRequest) {
        if self.requests.is_empty() {
            self.since = Some(Instant::now());
        }
        self.requests.push(request);
    }

    /// Whether nothing is pending.
    pub(crate) fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    /// Jobs running or queued on the pool (count).
    pub(crate) fn in_flight(&self) -> usize {
        self.pool.in_flight()
    }

    /// How many more requests the actor may read now
    /// ([`Dispatch::room`]).
    pub(crate) fn room(&self) -> usize {
        self.room_at(self.pool.in_flight())
    }

    /// [`Pending::room`] with `in_flight` jobs on the pool, as the caller
    /// read it (one reading for every decision of a turn).
    pub(crate) fn room_at(&self, in_flight: usize) -> usize {
        self.dispatch.room(self.requests.len(), in_flight)
    }

    /// When the oldest pending request will have waited `max_wait`;
    /// `None` while nothing is pending.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.since.map(|t| t + self.dispatch.max_wait())
    }

    /// The pool, to wait for jobs to finish (`VerifyPool::wait_below`).
    pub(crate) fn pool(&self) -> &VerifyPool {
        &self.pool
    }

    /// Waits until the pool's queue has room, so that reading may go on
    /// (shutdown's drain: an empty `Pending` must then mean an empty
    /// topic, not a full queue).
    pub(crate) async fn wait_for_room(&self) {
        self.pool.wait_below(self.dispatch.queue_limit()).await;
    }

    /// The pool, once nothing more is dispatched (shutdown).
    pub(crate) fn into_pool(self) -> VerifyPool {
        self.pool
    }

    /// Dispatches what is pending if the rules say so now
    /// ([`Dispatch::decide`]); `outstanding` counts the verify requests
    /// callers wait for (`CallerSide::outstanding`).
    pub(crate) fn dispatch_due(
        &mut self,
        outstanding: usize,
        metrics: &Metrics,
        counters: &Counters,
    ) {
        // One decision per wake: a dispatch takes everything pending. The
        // clock is read only while something is held, and once.
        let waited = self.waited();
        let first_len = self.requests.first().map_or(0, |r| r.message.len());
        if let Some(reason) = self.dispatch.decide(
            self.requests.len(),
            waited,
            self.pool.in_flight(),
            first_len,
            outstanding,
        ) {
            self.dispatch(reason, waited, metrics, counters);
        } else if !self.requests.is_empty() {
            tracing::trace!(
                target: "kms_actor::coalesce",
                topic = self.topic.as_str(),
                pending = self.requests.len(),
                in_flight = self.pool.in_flight(),
                threads = self.pool.threads(),
                "holding: every thread is busy"
            );
        }
    }

    /// Dispatches everything pending now, for `reason` (shutdown's drain).
    pub(crate) fn dispatch_now(&mut self, reason: Reason, metrics: &Metrics, counters: &Counters) {
        let waited = self.waited();
        self.dispatch(reason, waited, metrics, counters);
    }

    /// How long the oldest pending request has been held (zero if none).
    fn waited(&self) -> Duration {
        self.since.map_or(Duration::ZERO, |t| t.elapsed())
    }

    /// Hands the pending verify requests out as one batch: on this task
    /// for [`Reason::Inline`], else to the pool, split into one job per
    /// idle thread ([`Dispatch::chunks`]). `waited` is how long the oldest
    /// of them was held.
    fn dispatch(
        &mut self,
        reason: Reason,
        waited: Duration,
        metrics: &Metrics,
        counters: &Counters,
    ) {
        let batch = std::mem::take(&mut self.requests);
        self.since = None;
        metrics.batch_size.record(batch.len() as f64);
        metrics.dispatched(reason, batch.len() as u64);
        metrics.batch_wait.record(waited.as_secs_f64());
        Counters::add(&counters.batches, 1);
        Counters::add(&counters.batched_requests, batch.len() as u64);
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
            batch::run(batch, &self.keystore, &self.verifying);
            return;
        }
        debug_assert!(chunks >= 1 && chunks <= batch.len(), "no empty job");
        let mut rest = batch.into_iter();
        for size in Dispatch::chunk_sizes(rest.len(), chunks) {
            let chunk: Vec<VerifyRequest> = rest.by_ref().take(size).collect();
            let (keystore, verifying) = (self.keystore.clone(), Arc::clone(&self.verifying));
            self.pool
                .spawn(move || batch::run(chunk, &keystore, &verifying));
        }
    }
}
