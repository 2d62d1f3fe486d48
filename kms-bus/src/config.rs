//! Per-topic configuration: ring capacity, backend and overflow policy.

use crate::error::BusError;

/// How a topic is built and what it does when its ring is full.
///
/// A topic's configuration is fixed when the topic is first opened; opening
/// the same name again with a different configuration is
/// [`BusError::ConfigMismatch`].
///
/// ```
/// use kms_bus::{Backend, Overflow, TopicConfig};
///
/// let config = TopicConfig { capacity: 64, overflow: Overflow::Reject, ..TopicConfig::default() };
/// assert_eq!(config.backend, Backend::Classic);
/// ```
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(default, deny_unknown_fields)
)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicConfig {
    /// Number of messages the ring holds (a count of messages, not bytes).
    ///
    /// Must be in `1..=TopicConfig::MAX_CAPACITY`; anything else is
    /// [`BusError::InvalidConfig`]. The ring allocates all slots up front.
    pub capacity: usize,
    /// Which ring implementation backs the topic.
    pub backend: Backend,
    /// What a publish does when the ring has no free slot.
    pub overflow: Overflow,
}

impl TopicConfig {
    /// The largest accepted [`capacity`](TopicConfig::capacity): 2^24
    /// messages. It bounds the up-front allocation of a topic.
    pub const MAX_CAPACITY: usize = 1 << 24;

    /// Checks that this configuration can build a topic.
    ///
    /// # Errors
    ///
    /// [`BusError::InvalidConfig`] if `capacity` is 0 or greater than
    /// [`TopicConfig::MAX_CAPACITY`].
    pub fn validate(&self) -> Result<(), BusError> {
        if self.capacity == 0 {
            return Err(BusError::InvalidConfig {
                reason: "capacity must be at least 1",
            });
        }
        if self.capacity > Self::MAX_CAPACITY {
            return Err(BusError::InvalidConfig {
                reason: "capacity must be at most TopicConfig::MAX_CAPACITY (2^24)",
            });
        }
        Ok(())
    }
}

impl Default for TopicConfig {
    /// Capacity 1024 messages, [`Backend::Classic`], [`Overflow::Lag`].
    fn default() -> Self {
        Self {
            capacity: 1024,
            backend: Backend::Classic,
            overflow: Overflow::Lag,
        }
    }
}

/// The ring implementation behind a topic. All backends have the same API
/// and the same delivery contract (see the crate docs).
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// A bounded ring of slots behind one mutex: simple, obviously correct,
    /// the baseline the other backends are measured and tested against. No
    /// limit on subscribers; every publish wakes parked subscribers.
    #[default]
    Classic,
    /// Slots of a sequence stamp, a per-subscriber bitmask and the payload
    /// side by side, one struct per slot (despite the name, not a structure
    /// of arrays), lock-free on the publish and read paths. The last reader
    /// of a message moves it out instead of cloning it, a parked subscriber is
    /// woken once per burst, and [`Publisher::publish_batch`](crate::Publisher::publish_batch)
    /// reserves the whole batch at once. At most
    /// [`SOA_MAX_SUBSCRIBERS`](crate::SOA_MAX_SUBSCRIBERS) (56) subscribers
    /// at a time; the next [`subscribe`](crate::Topic::subscribe) is
    /// [`BusError::TooManySubscribers`].
    Soa,
}

/// What a publish does when the ring has no free slot, that is when the
/// oldest slot still holds a message that some subscriber has not read.
///
/// Nothing is lost without someone being told: under `Lag` the slow
/// subscriber is told how many messages it missed; under `Reject` the
/// publisher gets the message back; under `Wait` the publisher waits.
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overflow {
    /// Overwrite the oldest message. Each subscriber that had not read it
    /// gets [`RecvError::Lagged`](crate::RecvError::Lagged) with the exact
    /// number of messages it missed, once, and then continues from the oldest
    /// message still in the ring. Publishing never fails for lack of room.
    #[default]
    Lag,
    /// Refuse the message: [`Publisher::publish`](crate::Publisher::publish)
    /// returns [`PublishError::Full`](crate::PublishError::Full) with the
    /// message, and the caller decides (retry, shed, answer "overloaded").
    /// Subscribers never lag.
    Reject,
    /// Backpressure: [`Publisher::publish_wait`](crate::Publisher::publish_wait)
    /// (and, on plain threads,
    /// [`Publisher::blocking_publish_wait`](crate::Publisher::blocking_publish_wait))
    /// waits until the slowest subscriber has read the oldest message, then
    /// publishes. [`Publisher::publish`](crate::Publisher::publish)
    /// and [`Publisher::publish_batch`](crate::Publisher::publish_batch)
    /// behave as under `Reject` (they never wait). Subscribers never lag.
    /// Reads that free a slot wake waiting publishers, which costs a Soa
    /// reader one fence per read call that frees a slot (one per `drain`,
    /// however many slots it frees) that the other policies do not pay.
    Wait,
}
