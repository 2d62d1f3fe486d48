//! `Publisher<T>`: the sending side of a topic.

use std::fmt;

use crate::error::{PublishError, RejectCause};
use crate::sync::{Arc, Ordering};
use crate::topic::Shared;

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
    /// Each subscriber that existed when this call took the topic lock will
    /// receive it (unless it lags and is told so). On an
    /// [`Overflow::Lag`](crate::Overflow::Lag) topic a full ring overwrites
    /// its oldest message; the payload overwritten, if unread, is dropped
    /// after the lock is released.
    ///
    /// # Errors
    ///
    /// * [`PublishError::NoSubscribers`] with the message if the topic has
    ///   no subscriber: nobody would receive it.
    /// * [`PublishError::Full`] with the message if the topic is
    ///   [`Overflow::Reject`](crate::Overflow::Reject) and its oldest
    ///   message is still unread by some subscriber.
    pub fn publish(&self, msg: T) -> Result<(), PublishError<T>> {
        let published = self
            .shared
            .ring
            .publish(msg)
            .map_err(|(msg, cause)| match cause {
                RejectCause::Full => PublishError::Full(msg),
                RejectCause::NoSubscribers => PublishError::NoSubscribers(msg),
            })?;
        // The ring lock is released: wake parked subscribers.
        self.shared.notify.notify_waiters();
        drop(published.evicted);
        Ok(())
    }

    /// Publishes `msgs` in order, taking the topic lock once for the whole
    /// batch and waking subscribers once (not once per message).
    ///
    /// The iterator is collected before the lock is taken, so its code never
    /// runs under the topic lock. Returns the number of messages published
    /// (a count; 0 for an empty batch).
    ///
    /// # Errors
    ///
    /// [`PublishError::Batch`] if a message could not go in (no subscriber,
    /// or a full [`Overflow::Reject`](crate::Overflow::Reject) ring): the
    /// messages before it were published in order (`published` of them) and
    /// it and every message after it are handed back in order in
    /// `rejected`, with the `cause`. `published` may be 0.
    pub fn publish_batch(
        &self,
        msgs: impl IntoIterator<Item = T>,
    ) -> Result<usize, PublishError<T>> {
        let msgs: Vec<T> = msgs.into_iter().collect();
        if msgs.is_empty() {
            return Ok(0);
        }
        let outcome = self.shared.ring.publish_batch(msgs);
        if outcome.published > 0 {
            // The ring lock is released: one wake for the whole batch.
            self.shared.notify.notify_waiters();
        }
        drop(outcome.evicted);
        match outcome.rejected {
            None => Ok(outcome.published),
            Some((rejected, cause)) => Err(PublishError::Batch {
                published: outcome.published,
                rejected,
                cause,
            }),
        }
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
