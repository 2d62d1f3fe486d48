//! [`Shared`]: the state every handle, publisher and subscriber of one
//! topic shares. Its own file so that `Topic`, `Publisher` and
//! `Subscriber` all depend on it and not on each other.

use crate::backend::Ring;
use crate::config::TopicConfig;
use crate::metrics::TopicMetrics;
use crate::sync::{AtomicUsize, Notify, Ordering};

/// State shared by all handles of one topic.
pub(crate) struct Shared<T> {
    /// The name the topic is registered under in its [`Bus`](crate::Bus).
    pub(crate) name: String,
    /// Fixed at creation; already validated.
    pub(crate) config: TopicConfig,
    /// The ring, of the configured backend.
    pub(crate) ring: Ring<T>,
    /// Wakes subscribers parked in `recv`. Publishers call `notify_waiters`
    /// after a publish when the ring says so (Classic: every publish or
    /// batch; Soa: when a subscriber announced it parks), and the last
    /// publisher's drop always does.
    pub(crate) notify: Notify,
    /// Wakes publishers parked in `publish_wait` (Overflow::Wait). A reader
    /// that frees a slot while the ring counts a waiting publisher calls
    /// `notify_waiters`, as does a departing subscriber.
    pub(crate) room: Notify,
    /// Number of live [`Publisher`](crate::Publisher)s (a count).
    ///
    /// Incremented with `Relaxed` (as `Arc::clone` does): an increment
    /// publishes no data, and a subscriber that misses a concurrent
    /// increment reports `Closed`, which was true when it looked.
    /// Decremented with `Release`, paired with the `Acquire` load in
    /// [`Shared::publishers_gone`]: a subscriber that reads zero has seen
    /// every publish the dropped publishers made.
    pub(crate) publishers: AtomicUsize,
    /// This topic's `kms_bus_*` counters.
    pub(crate) metrics: TopicMetrics,
}

impl<T> Shared<T> {
    /// Whether no publisher is alive. Called by a subscriber after a read
    /// found nothing (`Subscriber::after_empty`), outside any lock.
    ///
    /// `Acquire` pairs with the `Release` decrement in `Publisher::drop`:
    /// if this reads the zero written by the last drop, every publish those
    /// publishers made happened before this load, so the second read that
    /// `after_empty` makes next sees all of them; only if that read is
    /// empty too is the topic `Closed`. If this reads a non-zero count, the
    /// subscriber does not report `Closed`; a subscriber in `recv`
    /// registered its wake-up before this check, and the last drop calls
    /// `notify_waiters` after its decrement, so it is woken and looks again.
    pub(crate) fn publishers_gone(&self) -> bool {
        self.publishers.load(Ordering::Acquire) == 0
    }
}
