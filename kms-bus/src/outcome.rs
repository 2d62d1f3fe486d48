//! What a ring's publish and read report back to the topic's publisher or
//! subscriber: the same types for both backends (`classic.rs`, `soa.rs`),
//! so neither backend depends on the other.

use crate::error::RejectCause;

/// What a publish did.
pub(crate) struct Published<T> {
    /// Number of messages published from the front of the batch.
    pub(crate) published: usize,
    /// One past the sequence number of the last message published (0 if
    /// none was).
    pub(crate) end: u64,
    /// The messages not published, in order, and why.
    pub(crate) rejected: Option<(Vec<T>, RejectCause)>,
    /// Unread payloads that `Lag` publishes overwrote; the caller drops them.
    pub(crate) evicted: Vec<T>,
    /// Whether a subscriber was parked and must be woken.
    pub(crate) wake: bool,
}

/// What a single-message publish did.
pub(crate) struct PublishedOne<T> {
    /// The message's sequence number.
    pub(crate) seq: u64,
    /// The unread payload a `Lag` publish overwrote; the caller drops it.
    pub(crate) evicted: Option<T>,
    /// Whether a subscriber was parked and must be woken.
    pub(crate) wake: bool,
}

/// Result of one read attempt.
pub(crate) enum Read<T> {
    /// The next message for this subscriber.
    Message(T),
    /// Nothing ready at `next`.
    Empty,
    /// The subscriber missed this many messages and was moved to the oldest
    /// one still retained.
    Lagged(u64),
}

/// Result of one read step, with what the caller must do afterwards.
pub(crate) struct Step<T> {
    /// The read result.
    pub(crate) read: Read<T>,
    /// A payload this reader became the last claimant of after cloning; the
    /// caller drops it.
    pub(crate) spare: Option<T>,
    /// Whether the read freed a slot that publishers may be waiting for:
    /// after its last read of a batch the caller asks
    /// `Ring::room_wanted` once, and wakes them if it says so.
    pub(crate) room: bool,
}

impl<T> Step<T> {
    /// A step with nothing for the caller to do but take `read`.
    pub(crate) fn of(read: Read<T>) -> Self {
        Self {
            read,
            spare: None,
            room: false,
        }
    }
}
