//! The two ring backends behind one internal interface.
//!
//! `Publisher` and `Subscriber` talk to a [`Ring`] only; each method
//! forwards to [`Classic`] or [`Soa`]. Both return the same outcome types
//! (`outcome.rs`: [`Published`], [`Step`], [`Read`](crate::outcome::Read)), so the handles implement the
//! delivery contract (closed detection, wake-ups, room for `Wait`) once.

use crate::classic::Classic;
use crate::config::{Backend, TopicConfig};
use crate::error::RejectCause;
use crate::outcome::{Published, PublishedOne, Step};
use crate::soa::{Soa, MAX_SUBSCRIBERS};

/// A topic's ring.
// The Soa variant is larger (cache-padded counters); there is one `Ring` per
// topic, inside the topic's `Arc`, so boxing would only add an indirection
// to every publish and read.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Ring<T> {
    /// One mutex around a ring of `Option<T>` slots.
    Classic(Classic<T>),
    /// Lock-free slots of stamp, mask and payload.
    Soa(Soa<T>),
}

/// Where a subscriber is in the ring.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Position {
    /// Sequence number of the next message to read.
    pub(crate) next: u64,
    /// The subscriber's bit in the Soa masks (unused by Classic).
    pub(crate) bit: u32,
}

/// A subscribe was refused: the topic has [`MAX_SUBSCRIBERS`] already.
pub(crate) struct Crowded {
    /// The limit that was reached.
    pub(crate) limit: usize,
}

impl<T> Ring<T> {
    /// An empty ring for a validated configuration.
    pub(crate) fn new(config: TopicConfig) -> Self {
        match config.backend {
            Backend::Classic => Self::Classic(Classic::new(config.capacity, config.overflow)),
            Backend::Soa => Self::Soa(Soa::new(config.capacity, config.overflow)),
        }
    }

    /// Number of live subscribers (a snapshot).
    pub(crate) fn subscriber_count(&self) -> usize {
        match self {
            Self::Classic(ring) => ring.subscriber_count(),
            Self::Soa(ring) => ring.subscriber_count(),
        }
    }

    /// Registers a subscriber that starts at the tail.
    pub(crate) fn subscribe(&self) -> Result<Position, Crowded> {
        match self {
            Self::Classic(ring) => Ok(Position {
                next: ring.subscribe(),
                bit: 0,
            }),
            Self::Soa(ring) => match ring.subscribe() {
                Some((bit, next)) => Ok(Position { next, bit }),
                None => Err(Crowded {
                    limit: MAX_SUBSCRIBERS,
                }),
            },
        }
    }

    /// Unregisters a subscriber; returns the payloads it held the last claim
    /// on (for the caller to drop) and whether publishers waiting for room
    /// must be woken.
    pub(crate) fn unsubscribe(&self, position: Position) -> (Vec<T>, bool) {
        match self {
            Self::Classic(ring) => ring.unsubscribe(position.next),
            Self::Soa(ring) => ring.unsubscribe(position.bit, position.next),
        }
    }

    /// Publishes one message.
    ///
    /// # Errors
    ///
    /// The message and why, if it could not go in.
    #[inline]
    pub(crate) fn publish_one(&self, msg: T) -> Result<PublishedOne<T>, (T, RejectCause)> {
        match self {
            Self::Classic(ring) => ring.publish_one(msg),
            Self::Soa(ring) => ring.publish_one(msg),
        }
    }

    /// Publishes `msgs` in order, stopping at the first that cannot go in.
    pub(crate) fn publish_batch(&self, msgs: Vec<T>) -> Published<T> {
        match self {
            Self::Classic(ring) => ring.publish(msgs.into_iter()),
            Self::Soa(ring) => ring.publish_batch(msgs),
        }
    }

    /// Sequence numbers taken so far (see `kms_bus_published_total`).
    pub(crate) fn sequence(&self) -> u64 {
        match self {
            Self::Classic(ring) => ring.sequence(),
            Self::Soa(ring) => ring.sequence(),
        }
    }

    /// Whether the message `ahead` after `position` (`ahead` clamped to
    /// one lap, `capacity - 1`) looks written (or overwritten) now: a hint
    /// that orders nothing, for `blocking_recv`'s back-off and its wait for
    /// a run. Classic reads its tail under the lock; Soa loads one stamp.
    #[cfg_attr(kms_loom, allow(dead_code))]
    pub(crate) fn looks_ready(&self, position: &Position, ahead: u64) -> bool {
        match self {
            Self::Classic(ring) => ring.looks_ready(position.next, ahead),
            Self::Soa(ring) => ring.looks_ready(position.next, ahead),
        }
    }

    /// Announces a subscriber at `position` about to park; call after
    /// creating its `Notified` and before its final re-check. Returns `true`
    /// if the caller must yield and look again instead of sleeping (a
    /// publish is between reservation and ready stamp).
    pub(crate) fn park(&self, position: &Position) -> bool {
        match self {
            // Classic wakes on every publish.
            Self::Classic(_) => false,
            Self::Soa(ring) => ring.park(position.next),
        }
    }

    /// Starts a drain of at most `max` messages at `position`: Soa under
    /// `Lag` with more than one subscriber covers it when `max >= 2`
    /// (`Soa::cover`), so its reads that are not the last claim need one
    /// compare-and-swap instead of two. Returns whether it did; then
    /// [`Ring::uncover`] must follow. Classic never covers.
    pub(crate) fn cover(&self, position: &Position, max: usize) -> bool {
        match self {
            Self::Classic(_) => false,
            Self::Soa(ring) => ring.cover(position.bit, position.next, max),
        }
    }

    /// Ends a drain that [`Ring::cover`] covered.
    pub(crate) fn uncover(&self, position: &Position) {
        if let Self::Soa(ring) = self {
            ring.uncover(position.bit);
        }
    }

    /// Counts a publisher waiting for room; call after creating its
    /// `Notified` and before its final re-check.
    pub(crate) fn start_waiting(&self) {
        match self {
            Self::Classic(ring) => ring.start_waiting(),
            Self::Soa(ring) => ring.start_waiting(),
        }
    }

    /// After reads whose [`Step::room`] was `true`: whether publishers wait
    /// for room and must be woken. Classic decided that under its lock
    /// already; Soa issues its one fence for the whole batch of reads here
    /// (`Soa::room_wanted`).
    #[inline]
    pub(crate) fn room_wanted(&self) -> bool {
        match self {
            Self::Classic(_) => true,
            Self::Soa(ring) => ring.room_wanted(),
        }
    }

    /// Undoes [`Ring::start_waiting`].
    pub(crate) fn stop_waiting(&self) {
        match self {
            Self::Classic(ring) => ring.stop_waiting(),
            Self::Soa(ring) => ring.stop_waiting(),
        }
    }
}

impl<T: Clone> Ring<T> {
    /// One read at `position`; `covered` inside a drain that
    /// [`Ring::cover`] covered.
    #[inline]
    pub(crate) fn read(&self, position: &mut Position, covered: bool) -> Step<T> {
        match self {
            Self::Classic(ring) => ring.read(&mut position.next),
            Self::Soa(ring) => ring.read(position.bit, &mut position.next, covered),
        }
    }
}
