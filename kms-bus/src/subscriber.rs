//! `Subscriber<T>`: the receiving side of a topic.

use std::fmt;
use std::pin::pin;

use crate::classic::{DrainStop, Read, ReadOrClosed};
use crate::error::{RecvError, TryRecvError};
use crate::sync::Arc;
use crate::topic::Shared;

/// Receives every message published to one topic after it subscribed, in
/// publish order.
///
/// Obtained from [`Topic::subscribe`](crate::Topic::subscribe). A message is
/// cloned for every subscriber except the last one to read it, which gets
/// the original. Dropping a subscriber releases its claim on every message
/// it has not read, so no payload is kept alive by a subscriber that is
/// gone.
pub struct Subscriber<T> {
    /// The topic; this subscriber is counted in its subscriber count from
    /// construction until drop.
    shared: Arc<Shared<T>>,
    /// Sequence number of the next message this subscriber reads
    /// (`next <= tail` of the ring). Every message from `next` on that is
    /// still in the ring counts this subscriber in its remaining readers.
    next: u64,
}

impl<T> Subscriber<T> {
    /// Registers a new subscriber of `shared`, starting at the tail.
    pub(crate) fn new(shared: Arc<Shared<T>>) -> Self {
        let next = shared.ring.subscribe();
        Self { shared, next }
    }

    /// The name of the topic this subscriber reads.
    pub fn topic_name(&self) -> &str {
        &self.shared.name
    }
}

impl<T: Clone> Subscriber<T> {
    /// Waits for the next message.
    ///
    /// # Errors
    ///
    /// * [`RecvError::Lagged`]`(n)`: on an [`Overflow::Lag`](crate::Overflow::Lag)
    ///   topic this subscriber fell behind and exactly `n` messages were
    ///   overwritten before it read them. Reported once; the next call
    ///   returns the oldest message still in the ring.
    /// * [`RecvError::Closed`]: no [`Publisher`](crate::Publisher) is alive
    ///   and this subscriber has read every message. (A publisher created
    ///   later from a [`Topic`](crate::Topic) handle opens the topic again.)
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe. The only await point waits for a wake-up;
    /// a message is taken from the ring and returned in the same poll, so
    /// dropping the future (for example in `tokio::select!`) never loses a
    /// message.
    pub async fn recv(&mut self) -> Result<T, RecvError> {
        // Disjoint borrows: the registration borrows `shared` while the
        // re-check advances `next`.
        let shared = &*self.shared;
        let next = &mut self.next;
        loop {
            // Register for a wake-up first, then re-check the ring (as
            // crossbeam does before parking: "has the channel become ready
            // just now?"). `notify_waiters` wakes every `Notified` created
            // before it is called; a publisher calls it after releasing the
            // ring lock. So either our check below sees the message (or the
            // last publisher's drop), or the publish/drop happened after
            // this registration and its `notify_waiters` wakes us: no lost
            // wake-up. `enable` also makes the registration explicit before
            // the first poll.
            let mut notified = pin!(shared.notify.notified());
            notified.as_mut().enable();
            match try_recv_at(shared, next) {
                Ok(msg) => return Ok(msg),
                Err(TryRecvError::Lagged(missed)) => return Err(RecvError::Lagged(missed)),
                Err(TryRecvError::Closed) => return Err(RecvError::Closed),
                Err(TryRecvError::Empty) => notified.await,
            }
        }
    }

    /// Takes the next message if one is ready, without waiting.
    ///
    /// # Errors
    ///
    /// * [`TryRecvError::Empty`]: nothing to read now, and a publisher is
    ///   alive.
    /// * [`TryRecvError::Lagged`]`(n)`: as [`RecvError::Lagged`].
    /// * [`TryRecvError::Closed`]: as [`RecvError::Closed`].
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        try_recv_at(&self.shared, &mut self.next)
    }

    /// Appends up to `max` ready messages (a count) to `out`, in order,
    /// under one acquisition of the topic lock, without waiting. Returns
    /// `Ok(n)` with `1 <= n <= max`, the number appended.
    ///
    /// `max == 0` returns `Ok(0)` and reads nothing.
    ///
    /// # Errors
    ///
    /// Only when nothing was appended:
    /// * [`TryRecvError::Empty`]: nothing to read now, and a publisher is
    ///   alive.
    /// * [`TryRecvError::Lagged`]`(n)`: this subscriber missed exactly `n`
    ///   messages before the first one it could read; it is repositioned
    ///   to the oldest retained message, which the next call returns. If the
    ///   lag is found after some messages were appended, this call returns
    ///   `Ok` with those and the next call reports the lag.
    /// * [`TryRecvError::Closed`]: as [`RecvError::Closed`].
    pub fn drain(&mut self, out: &mut Vec<T>, max: usize) -> Result<usize, TryRecvError> {
        if max == 0 {
            return Ok(0);
        }
        let shared = &*self.shared;
        shared
            .ring
            .drain(&mut self.next, out, max, || shared.publishers_gone())
            .map_err(|stop| match stop {
                DrainStop::Empty => TryRecvError::Empty,
                DrainStop::Lagged(missed) => TryRecvError::Lagged(missed),
                DrainStop::Closed => TryRecvError::Closed,
            })
    }
}

/// One non-blocking read for the subscriber at `*next` of `shared`.
fn try_recv_at<T: Clone>(shared: &Shared<T>, next: &mut u64) -> Result<T, TryRecvError> {
    match shared.ring.try_recv(next, || shared.publishers_gone()) {
        ReadOrClosed::Read(Read::Message(msg)) => Ok(msg),
        ReadOrClosed::Read(Read::Empty) => Err(TryRecvError::Empty),
        ReadOrClosed::Read(Read::Lagged(missed)) => Err(TryRecvError::Lagged(missed)),
        ReadOrClosed::Closed => Err(TryRecvError::Closed),
    }
}

impl<T> Drop for Subscriber<T> {
    /// Unregisters this subscriber and releases its claim on every message
    /// it has not read; payloads whose last claim that was are dropped here,
    /// after the topic lock is released.
    fn drop(&mut self) {
        let released = self.shared.ring.unsubscribe(self.next);
        drop(released);
    }
}

impl<T> fmt::Debug for Subscriber<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscriber")
            .field("topic", &self.shared.name)
            .field("next", &self.next)
            .finish_non_exhaustive()
    }
}
