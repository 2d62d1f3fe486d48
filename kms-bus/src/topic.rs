//! `Topic<T>`: a handle to one named topic's shared state.

use std::fmt;

use crate::backend::{Crowded, Ring};
use crate::config::TopicConfig;
use crate::error::BusError;
use crate::metrics::TopicMetrics;
use crate::publisher::Publisher;
use crate::subscriber::Subscriber;
use crate::sync::{Arc, AtomicUsize, Notify, Ordering};

/// A typed topic: mints [`Publisher`]s and [`Subscriber`]s.
///
/// Obtained from [`Bus::topic`](crate::Bus::topic). Cloning a `Topic` (or
/// opening the same name again) gives another handle to the same topic.
/// A `Topic` handle does not count as a publisher: holding one does not keep
/// subscribers from observing `Closed`.
pub struct Topic<T> {
    /// The state shared by every handle, publisher and subscriber of this
    /// topic.
    pub(crate) shared: Arc<Shared<T>>,
}

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
    /// Number of live [`Publisher`]s (a count).
    ///
    /// Incremented with `Relaxed` (as `Arc::clone` does): an increment
    /// publishes no data, and a subscriber that misses a concurrent
    /// increment reports `Closed`, which was true when it looked.
    /// Decremented with `Release`, paired with the `Acquire` load in
    /// [`Shared::publishers_gone`]: a subscriber that reads zero has seen
    /// every publish the dropped publishers made.
    pub(crate) publishers: AtomicUsize,
    /// This topic's `bus_*` counters.
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

impl<T> Topic<T> {
    /// Builds a topic from a configuration that `validate` accepted.
    pub(crate) fn new(name: &str, config: TopicConfig) -> Self {
        Self {
            shared: Arc::new(Shared {
                name: name.to_owned(),
                config,
                ring: Ring::new(config),
                notify: Notify::new(),
                room: Notify::new(),
                publishers: AtomicUsize::new(0),
                metrics: TopicMetrics::new(name),
            }),
        }
    }

    /// A new publisher for this topic. Publishers are counted; while at
    /// least one is alive, subscribers never observe `Closed`.
    pub fn publisher(&self) -> Publisher<T> {
        Publisher::new(Arc::clone(&self.shared))
    }

    /// A new subscriber. It receives every message published after this
    /// call returns (and none before), in order.
    ///
    /// # Errors
    ///
    /// [`BusError::TooManySubscribers`] if the topic is
    /// [`Backend::Soa`](crate::Backend::Soa) and already has
    /// [`SOA_MAX_SUBSCRIBERS`](crate::SOA_MAX_SUBSCRIBERS) (56) live
    /// subscribers. The Classic backend has no limit.
    pub fn subscribe(&self) -> Result<Subscriber<T>, BusError> {
        Subscriber::new(Arc::clone(&self.shared)).map_err(|Crowded { limit }| {
            BusError::TooManySubscribers {
                name: self.shared.name.clone(),
                limit,
            }
        })
    }

    /// The name this topic is registered under.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The configuration this topic was created with.
    pub fn config(&self) -> TopicConfig {
        self.shared.config
    }

    /// Number of live subscribers (a snapshot; it may change at once).
    pub fn subscriber_count(&self) -> usize {
        self.shared.ring.subscriber_count()
    }

    /// Number of live publishers (a snapshot; it may change at once).
    pub fn publisher_count(&self) -> usize {
        // Relaxed: a snapshot for monitoring; nothing is read through it.
        self.shared.publishers.load(Ordering::Relaxed)
    }
}

impl<T> Clone for Topic<T> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<T> fmt::Debug for Topic<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Topic")
            .field("name", &self.shared.name)
            .field("config", &self.shared.config)
            .field("publishers", &self.publisher_count())
            .field("subscribers", &self.subscriber_count())
            .finish()
    }
}
