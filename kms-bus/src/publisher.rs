//! `Publisher<T>`: the sending side of a topic.

use std::fmt;
use std::pin::pin;

use tokio::task::coop;

use crate::config::Overflow;
use crate::error::{PublishError, RejectCause};
use crate::metrics::PUBLISHED_STRIDE;
use crate::shared::Shared;
use crate::sync::{fence, Arc, Ordering};

/// Publishes messages to one topic.
///
/// Obtained from [`Topic::publisher`](crate::Topic::publisher). Publishers
/// are counted: cloning one adds a publisher, dropping one removes it, and
/// when the last one is dropped, subscribers that have read everything
/// observe `Closed`.
pub struct Publisher<T> {
    /// The topic; this publisher is counted in `shared.publishers` from
    /// construction until drop.
    shared: Arc<Shared<T>>,
}

impl<T> Publisher<T> {
    /// Counts a new publisher of `shared`.
    pub(crate) fn new(shared: Arc<Shared<T>>) -> Self {
        // Relaxed: see `Shared::publishers`.
        shared.publishers.fetch_add(1, Ordering::Relaxed);
        Self { shared }
    }

    /// Publishes one message to every current subscriber.
    ///
    /// Each subscriber that existed when the message was published will
    /// receive it (unless it lags and is told so). On an
    /// [`Overflow::Lag`](crate::Overflow::Lag) topic a full ring overwrites
    /// its oldest message; the payload overwritten, if unread, is dropped
    /// before this call returns, outside any lock.
    ///
    /// # Errors
    ///
    /// * [`PublishError::NoSubscribers`] with the message if the topic has
    ///   no subscriber: nobody would receive it.
    /// * [`PublishError::Full`] with the message if the topic is
    ///   [`Overflow::Reject`](crate::Overflow::Reject) or
    ///   [`Overflow::Wait`](crate::Overflow::Wait) and its oldest message is
    ///   still unread by some subscriber.
    #[inline(always)]
    pub fn publish(&self, msg: T) -> Result<(), PublishError<T>> {
        let result = self.offer(msg);
        if let Err(PublishError::Full(_)) = result {
            self.shared.metrics.rejected.increment(1);
        }
        result
    }

    /// [`publish`](Self::publish) without counting a refusal in
    /// `kms_bus_rejected_total`, for `publish_wait`, whose refusals are retries.
    #[inline(always)]
    pub(crate) fn offer(&self, msg: T) -> Result<(), PublishError<T>> {
        match self.shared.ring.publish_one(msg) {
            Ok(published) => {
                if published.wake {
                    self.shared.notify.notify_waiters();
                }
                if published.seq % PUBLISHED_STRIDE == 0 {
                    self.shared.metrics.published.absolute(published.seq + 1);
                }
                drop(published.evicted);
                Ok(())
            }
            Err((msg, RejectCause::Full)) => Err(PublishError::Full(msg)),
            Err((msg, RejectCause::NoSubscribers)) => Err(PublishError::NoSubscribers(msg)),
        }
    }

    /// Publishes `msgs` in order with one reservation and one wake-up for
    /// the whole batch (not one per message).
    ///
    /// The iterator is collected before anything is reserved, so its code
    /// never runs inside the ring's protocol. Returns the number of messages
    /// published (a count; 0 for an empty batch). On a
    /// [`Backend::Soa`](crate::Backend::Soa) topic the batch takes
    /// consecutive sequence numbers with one compare-and-swap and each
    /// message becomes readable as its slot is written, so a reader may
    /// see the first messages of a batch before the rest; on a Classic
    /// topic, one lock acquisition, so a reader sees all of it or none.
    ///
    /// # Errors
    ///
    /// [`PublishError::Batch`] if a message could not go in (no subscriber,
    /// or a full [`Overflow::Reject`](crate::Overflow::Reject) or
    /// [`Overflow::Wait`](crate::Overflow::Wait) ring): the messages before
    /// it were published in order (`published` of them) and it and every
    /// message after it are handed back in order in `rejected`, with the
    /// `cause`. `published` may be 0.
    pub fn publish_batch(
        &self,
        msgs: impl IntoIterator<Item = T>,
    ) -> Result<usize, PublishError<T>> {
        let msgs: Vec<T> = msgs.into_iter().collect();
        if msgs.is_empty() {
            return Ok(0);
        }
        let outcome = self.shared.ring.publish_batch(msgs);
        if outcome.wake {
            self.shared.notify.notify_waiters();
        }
        let metrics = &self.shared.metrics;
        if outcome.published > 0 {
            metrics.published.absolute(outcome.end);
        }
        drop(outcome.evicted);
        match outcome.rejected {
            None => Ok(outcome.published),
            Some((rejected, cause)) => {
                if cause == RejectCause::Full {
                    metrics.rejected.increment(rejected.len() as u64);
                }
                Err(PublishError::Batch {
                    published: outcome.published,
                    rejected,
                    cause,
                })
            }
        }
    }

    /// Publishes one message, waiting for room if the ring is full: the
    /// backpressure of [`Overflow::Wait`](crate::Overflow::Wait).
    ///
    /// On a `Wait` topic this waits until the slowest subscriber has read
    /// the oldest message (a subscriber that is dropped also makes room). On
    /// a `Lag` topic it is [`publish`](Self::publish), which never finds the
    /// ring full; on a `Reject` topic it is `publish` too, returning `Full`
    /// at once, because readers of a `Reject` topic do not signal room.
    ///
    /// # Errors
    ///
    /// * [`PublishError::NoSubscribers`] with the message if the topic has
    ///   no subscriber (also when the last one leaves while this waits).
    /// * [`PublishError::Full`] with the message, only on a `Reject` topic.
    ///
    /// # Cooperative scheduling
    ///
    /// Inside a tokio runtime each call consumes one unit of the task's
    /// cooperative budget (`tokio::task::coop::consume_budget`) before it
    /// offers the message, so a task that loops on `publish_wait` into a
    /// topic that always has room still yields to the other tasks of its
    /// worker.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before it completes drops the message unpublished
    /// (as tokio's `mpsc::Sender::send` does): it was either published in
    /// full or not at all, never in part.
    pub async fn publish_wait(&self, msg: T) -> Result<(), PublishError<T>> {
        // One unit of tokio's cooperative budget per call, taken before the
        // message is offered (so a yield here publishes nothing).
        coop::consume_budget().await;
        let shared = &*self.shared;
        if !self.waits_for_room() {
            return self.publish(msg);
        }
        let mut msg = match self.offer(msg) {
            Err(PublishError::Full(msg)) => msg,
            other => return other,
        };
        loop {
            // Register for the room wake-up and count ourselves as waiting
            // before the re-check, so a read that frees the slot after the
            // re-check sees the count and wakes us (see `Overflow::Wait`).
            let mut notified = pin!(shared.room.notified());
            notified.as_mut().enable();
            let waiting = Waiting::new(shared);
            msg = match self.offer(msg) {
                Err(PublishError::Full(msg)) => msg,
                other => return other,
            };
            notified.await;
            drop(waiting);
        }
    }

    /// Whether the topic is an [`Overflow::Wait`] topic, whose full ring
    /// makes `publish_wait` wait.
    pub(crate) fn waits_for_room(&self) -> bool {
        self.shared.config.overflow == Overflow::Wait
    }

    /// The name of the topic this publisher sends to.
    pub fn topic_name(&self) -> &str {
        &self.shared.name
    }
}

impl<T> Clone for Publisher<T> {
    /// Another publisher of the same topic (counted separately).
    fn clone(&self) -> Self {
        Self::new(Arc::clone(&self.shared))
    }
}

impl<T> Drop for Publisher<T> {
    /// Uncounts this publisher; the last one wakes parked subscribers so
    /// they can observe `Closed`.
    fn drop(&mut self) {
        // Release: see `Shared::publishers` and `Shared::publishers_gone`.
        if self.shared.publishers.fetch_sub(1, Ordering::Release) == 1 {
            // SeqCst fence: pairs with the fence in a Soa subscriber's
            // `park` (flag, fence, then the closed check): either its check
            // sees the count at zero, or this wake-up comes after its
            // `Notified` exists. (The Notify's own ordering gives the same;
            // the fence states it in atomics that loom models.)
            fence(Ordering::SeqCst);
            self.shared.notify.notify_waiters();
        }
    }
}

impl<T> fmt::Debug for Publisher<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Publisher")
            .field("topic", &self.shared.name)
            .finish_non_exhaustive()
    }
}

/// A publisher counted as waiting for room for as long as this lives
/// (including when `publish_wait` is cancelled).
struct Waiting<'a, T> {
    /// The topic whose ring counts the waiter.
    shared: &'a Shared<T>,
}

impl<'a, T> Waiting<'a, T> {
    /// Counts a waiting publisher.
    fn new(shared: &'a Shared<T>) -> Self {
        shared.ring.start_waiting();
        Self { shared }
    }
}

impl<T> Drop for Waiting<'_, T> {
    fn drop(&mut self) {
        self.shared.ring.stop_waiting();
    }
}
