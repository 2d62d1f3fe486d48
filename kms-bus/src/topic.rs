//! `Topic<T>`: a handle to one named topic's shared state.

use std::fmt;

use crate::backend::{Crowded, Ring};
use crate::config::TopicConfig;
use crate::error::BusError;
use crate::metrics::TopicMetrics;
use crate::publisher::Publisher;
use crate::shared::Shared;
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
