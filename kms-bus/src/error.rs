//! Error types. Each enum is `#[non_exhaustive]`; each value has a stable
//! machine code ([`code`](BusError::code)) and says whether retrying the same
//! operation later can succeed ([`is_retryable`](BusError::is_retryable)).
//!
//! Errors of a publish hand the message(s) back to the caller, like tokio's
//! `SendError<T>`, so nothing is dropped silently.

use std::fmt;

/// Opening a topic failed.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BusError {
    /// The name is already open with a different message type.
    /// Code `bus.type_mismatch`.
    #[error("topic {name:?} carries {existing}, not {requested}")]
    TypeMismatch {
        /// The topic name.
        name: String,
        /// Type name the topic was first opened with (from
        /// [`std::any::type_name`]; for messages, not for matching).
        existing: &'static str,
        /// Type name of this request.
        requested: &'static str,
    },
    /// The name is already open with the same type but a different
    /// [`TopicConfig`](crate::TopicConfig). Code `bus.config_mismatch`.
    #[error("topic {name:?} is already open with a different configuration")]
    ConfigMismatch {
        /// The topic name.
        name: String,
    },
    /// The configuration cannot build a topic (for example capacity 0).
    /// Code `bus.invalid_config`.
    #[error("invalid topic configuration: {reason}")]
    InvalidConfig {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A [`Backend::Soa`](crate::Backend::Soa) topic already has `limit`
    /// live subscribers ([`SOA_MAX_SUBSCRIBERS`](crate::SOA_MAX_SUBSCRIBERS):
    /// one bit each in the slot's mask word, whose top 8 bits count
    /// readers). Code
    /// `bus.too_many_subscribers`; retryable once a subscriber is dropped.
    #[error("topic {name:?} already has {limit} subscribers, the most its backend supports")]
    TooManySubscribers {
        /// The topic name.
        name: String,
        /// The most subscribers the topic can have at once (a count).
        limit: usize,
    },
}

impl BusError {
    /// Stable machine-readable code: `bus.type_mismatch`,
    /// `bus.config_mismatch`, `bus.invalid_config` or
    /// `bus.too_many_subscribers`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::TypeMismatch { .. } => "bus.type_mismatch",
            Self::ConfigMismatch { .. } => "bus.config_mismatch",
            Self::InvalidConfig { .. } => "bus.invalid_config",
            Self::TooManySubscribers { .. } => "bus.too_many_subscribers",
        }
    }

    /// `true` only for [`BusError::TooManySubscribers`], which can succeed
    /// once another subscriber is dropped; the others are programming or
    /// configuration errors that the same call repeated will hit again.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::TypeMismatch { .. }
            | Self::ConfigMismatch { .. }
            | Self::InvalidConfig { .. } => false,
            Self::TooManySubscribers { .. } => true,
        }
    }
}

/// Why a publish handed messages back.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectCause {
    /// An [`Overflow::Reject`](crate::Overflow::Reject) topic had no free
    /// slot.
    Full,
    /// The topic had no subscriber, so nobody would have received it.
    NoSubscribers,
}

impl fmt::Display for RejectCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Full => "topic is full",
            Self::NoSubscribers => "topic has no subscribers",
        })
    }
}

/// A publish did not deliver (all of) its messages; they are handed back.
///
/// `Debug` does not require `T: Debug`: it prints the variant and counts, not
/// the payloads.
#[non_exhaustive]
#[derive(Clone, PartialEq, Eq)]
pub enum PublishError<T> {
    /// An [`Overflow::Reject`](crate::Overflow::Reject) topic had no free
    /// slot (its oldest message is still unread by some subscriber). The
    /// message was not published and is handed back. Code `bus.full`;
    /// retryable.
    Full(T),
    /// The topic had no subscriber at the moment of the publish, so nobody
    /// would have received the message. It was not published and is handed
    /// back. Code `bus.no_subscribers`; not retryable.
    NoSubscribers(T),
    /// [`Publisher::publish_batch`](crate::Publisher::publish_batch) published
    /// the first `published` messages, in order, and stopped at the first one
    /// that could not go in. Code `bus.full` or `bus.no_subscribers`, after
    /// `cause`.
    Batch {
        /// Number of messages from the front of the batch that were
        /// published.
        published: usize,
        /// The messages that were not published, in their original order
        /// (never empty).
        rejected: Vec<T>,
        /// Why the first of `rejected` could not go in.
        cause: RejectCause,
    },
}

impl<T> PublishError<T> {
    /// Why the message(s) were handed back.
    pub fn cause(&self) -> RejectCause {
        match self {
            Self::Full(_) => RejectCause::Full,
            Self::NoSubscribers(_) => RejectCause::NoSubscribers,
            Self::Batch { cause, .. } => *cause,
        }
    }

    /// Number of messages that were published before the rejection: 0 for
    /// `Full` and `NoSubscribers`, `published` for `Batch`.
    pub fn published(&self) -> usize {
        match self {
            Self::Full(_) | Self::NoSubscribers(_) => 0,
            Self::Batch { published, .. } => *published,
        }
    }

    /// The messages that were not published, in order.
    pub fn rejected(&self) -> &[T] {
        match self {
            Self::Full(msg) | Self::NoSubscribers(msg) => std::slice::from_ref(msg),
            Self::Batch { rejected, .. } => rejected,
        }
    }

    /// Takes back the messages that were not published, in order.
    pub fn into_rejected(self) -> Vec<T> {
        match self {
            Self::Full(msg) | Self::NoSubscribers(msg) => vec![msg],
            Self::Batch { rejected, .. } => rejected,
        }
    }

    /// Takes back the message of a single publish (`Full` or
    /// `NoSubscribers`); `None` for `Batch` (use
    /// [`into_rejected`](Self::into_rejected)).
    pub fn into_inner(self) -> Option<T> {
        match self {
            Self::Full(msg) | Self::NoSubscribers(msg) => Some(msg),
            Self::Batch { .. } => None,
        }
    }

    /// Stable machine-readable code: `bus.full` or `bus.no_subscribers`
    /// (a `Batch` takes the code of its cause).
    pub fn code(&self) -> &'static str {
        match self.cause() {
            RejectCause::Full => "bus.full",
            RejectCause::NoSubscribers => "bus.no_subscribers",
        }
    }

    /// `true` for `Full`: room appears as subscribers read. `false` for
    /// `NoSubscribers`: nothing says a subscriber will appear.
    pub fn is_retryable(&self) -> bool {
        match self.cause() {
            RejectCause::Full => true,
            RejectCause::NoSubscribers => false,
        }
    }
}

impl<T> fmt::Debug for PublishError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full(_) => f.write_str("Full(..)"),
            Self::NoSubscribers(_) => f.write_str("NoSubscribers(..)"),
            Self::Batch {
                published,
                rejected,
                cause,
            } => f
                .debug_struct("Batch")
                .field("published", published)
                .field("rejected", &format_args!("[..; {}]", rejected.len()))
                .field("cause", cause)
                .finish(),
        }
    }
}

impl<T> fmt::Display for PublishError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full(_) | Self::NoSubscribers(_) => {
                write!(f, "message not published: {}", self.cause())
            }
            Self::Batch {
                published,
                rejected,
                cause,
            } => write!(
                f,
                "batch stopped after {published} published, {} handed back: {cause}",
                rejected.len()
            ),
        }
    }
}

impl<T> std::error::Error for PublishError<T> {}

/// [`Subscriber::recv`](crate::Subscriber::recv) returned no message.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RecvError {
    /// This subscriber fell behind on an [`Overflow::Lag`](crate::Overflow::Lag)
    /// topic and missed exactly this many messages (a count). It is reported
    /// once; the next receive returns the oldest message still in the ring.
    /// Code `bus.lagged`; retryable.
    #[error("subscriber lagged and missed {0} messages")]
    Lagged(u64),
    /// No [`Publisher`](crate::Publisher) is alive and this subscriber has
    /// read every message. Code `bus.closed`; not retryable.
    #[error("topic closed: no publisher is alive and every message was read")]
    Closed,
}

impl RecvError {
    /// Stable machine-readable code: `bus.lagged` or `bus.closed`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Lagged(_) => "bus.lagged",
            Self::Closed => "bus.closed",
        }
    }

    /// `true` for `Lagged` (the next receive continues), `false` for
    /// `Closed`.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Lagged(_) => true,
            Self::Closed => false,
        }
    }
}

/// [`Subscriber::try_recv`](crate::Subscriber::try_recv) or
/// [`Subscriber::drain`](crate::Subscriber::drain) returned no message.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TryRecvError {
    /// Nothing to read right now, and a publisher is alive. Code
    /// `bus.empty`; retryable.
    #[error("no message available")]
    Empty,
    /// As [`RecvError::Lagged`]: missed exactly this many messages, reported
    /// once. Code `bus.lagged`; retryable.
    #[error("subscriber lagged and missed {0} messages")]
    Lagged(u64),
    /// As [`RecvError::Closed`]. Code `bus.closed`; not retryable.
    #[error("topic closed: no publisher is alive and every message was read")]
    Closed,
}

impl TryRecvError {
    /// Stable machine-readable code: `bus.empty`, `bus.lagged` or
    /// `bus.closed`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Empty => "bus.empty",
            Self::Lagged(_) => "bus.lagged",
            Self::Closed => "bus.closed",
        }
    }

    /// `true` for `Empty` and `Lagged`, `false` for `Closed`.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Empty | Self::Lagged(_) => true,
            Self::Closed => false,
        }
    }
}
