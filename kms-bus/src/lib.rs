//! An in-process publish/subscribe bus with typed, bounded topics.
//!
//! A [`Bus`] hands out [`Topic<T>`]s by name. A topic mints
//! [`Publisher<T>`]s and [`Subscriber<T>`]s; every subscriber receives every
//! message published after it subscribed, in publish order, exactly once,
//! unless it falls behind and is told so. Each topic is a bounded ring of
//! [`TopicConfig::capacity`] messages.
//!
//! # The contract
//!
//! Nothing is lost without someone being told.
//!
//! * **Delivery.** A message is delivered to each subscriber that existed
//!   when it was published. It is cloned for every reader except the last,
//!   which receives the original (moved out of the ring), so with one
//!   subscriber nothing is ever cloned.
//! * **No subscriber.** Publishing to a topic with no subscriber returns
//!   [`PublishError::NoSubscribers`] with the message: nobody would have
//!   received it, and it is not stored for later subscribers.
//! * **Lag** ([`Overflow::Lag`], the default). When the ring is full, a
//!   publish overwrites the oldest message. A subscriber that had not read
//!   it gets [`RecvError::Lagged`]`(n)` with the exact number of messages it
//!   missed, once, and then continues with the oldest message still in the
//!   ring. Publishing never fails for lack of room.
//! * **Reject** ([`Overflow::Reject`]). When the ring is full (its oldest
//!   message is still unread by some subscriber), a publish returns
//!   [`PublishError::Full`] with the message, and the caller decides.
//!   Subscribers never lag.
//! * **Batches.** [`Publisher::publish_batch`] takes one reservation (Soa)
//!   or the topic lock once (Classic) and wakes subscribers once. If a message cannot go in, the ones before it
//!   are published and it and the rest are handed back in order in
//!   [`PublishError::Batch`].
//! * **Closed.** A subscriber gets [`RecvError::Closed`] when no
//!   [`Publisher`] is alive *and* it has read every message; messages
//!   published before the last publisher dropped are still delivered first.
//!   A [`Topic`] handle is not a publisher. Closed describes the moment of
//!   the call: a publisher created later from a `Topic` handle opens the
//!   topic again, and a subscriber created while no publisher exists sees
//!   `Closed` at once.
//! * **Dropping a subscriber** releases its claim on every message it has
//!   not read; a payload is dropped as soon as no subscriber needs it, so a
//!   payload that carries a reply handle is never kept alive by a
//!   subscriber that is gone.
//! * **Locking.** A Classic topic has one lock; `T::clone` runs under it (when
//!   a reader that is not the last one takes a copy). A Soa `Lag` reader is
//!   counted in its slot while it clones, and a Soa `Lag` `drain` among
//!   several subscribers holds off publishers that would overwrite a
//!   message it has still to read until it has read it or ended. Either
//!   way a `Clone` impl must not publish to the same topic, nor wait for
//!   anything that does. Payload drops and the batch iterator never
//!   run inside the ring's protocol.
//! * **Wait** ([`Overflow::Wait`]). [`Publisher::publish_wait`] (and
//!   [`Publisher::blocking_publish_wait`] on plain threads) waits for room;
//!   [`Publisher::publish`] and [`Publisher::publish_batch`] behave as
//!   under `Reject`.
//!
//! # Examples
//!
//! Publish and receive:
//!
//! ```
//! use kms_bus::{Bus, TopicConfig};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let bus = Bus::new();
//! let topic = bus.topic::<String>("greetings", TopicConfig::default())?;
//! let mut sub = topic.subscribe()?;
//! let publisher = topic.publisher();
//!
//! publisher.publish("hello".to_owned()).map_err(|e| e.to_string())?;
//! assert_eq!(sub.try_recv()?, "hello");
//! # Ok(())
//! # }
//! ```
//!
//! A slow subscriber on a [`Overflow::Lag`] topic is told how much it missed:
//!
//! ```
//! use kms_bus::{Bus, Overflow, TopicConfig, TryRecvError};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let bus = Bus::new();
//! let config = TopicConfig { capacity: 2, overflow: Overflow::Lag, ..TopicConfig::default() };
//! let topic = bus.topic::<u32>("ticks", config)?;
//! let mut sub = topic.subscribe()?;
//! let publisher = topic.publisher();
//! for i in 0..5 {
//!     publisher.publish(i).map_err(|e| e.to_string())?;
//! }
//! // Messages 0, 1 and 2 were overwritten; 3 and 4 are still in the ring.
//! assert_eq!(sub.try_recv(), Err(TryRecvError::Lagged(3)));
//! assert_eq!(sub.try_recv()?, 3);
//! assert_eq!(sub.try_recv()?, 4);
//! # Ok(())
//! # }
//! ```
//!
//! A full [`Overflow::Reject`] topic hands the message back:
//!
//! ```
//! use kms_bus::{Bus, Overflow, PublishError, TopicConfig};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let bus = Bus::new();
//! let config = TopicConfig { capacity: 1, overflow: Overflow::Reject, ..TopicConfig::default() };
//! let topic = bus.topic::<u32>("jobs", config)?;
//! let mut sub = topic.subscribe()?;
//! let publisher = topic.publisher();
//! publisher.publish(1).map_err(|e| e.to_string())?;
//! match publisher.publish(2) {
//!     Err(PublishError::Full(msg)) => assert_eq!(msg, 2),
//!     other => panic!("expected Full, got {other:?}"),
//! }
//! assert_eq!(sub.try_recv()?, 1);
//! publisher.publish(2).map_err(|e| e.to_string())?; // room again
//! # Ok(())
//! # }
//! ```
//!
//! When the last publisher is dropped, a subscriber reads what is left and
//! then sees `Closed`:
//!
//! ```
//! use kms_bus::{Bus, RecvError, TopicConfig};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let bus = Bus::new();
//! let topic = bus.topic::<u32>("work", TopicConfig::default())?;
//! let mut sub = topic.subscribe()?;
//! let publisher = topic.publisher();
//! let producer = tokio::spawn(async move {
//!     publisher.publish_batch([1, 2, 3]).map_err(|e| e.to_string())
//!     // `publisher` is dropped here.
//! });
//!
//! let mut got = Vec::new();
//! loop {
//!     match sub.recv().await {
//!         Ok(n) => got.push(n),
//!         Err(RecvError::Closed) => break,
//!         Err(e) => return Err(e.into()),
//!     }
//! }
//! assert_eq!(got, [1, 2, 3]);
//! assert_eq!(producer.await??, 3);
//! # Ok(())
//! # }
//! ```
//!
//! # Backends
//!
//! [`Backend::Classic`] is a bounded ring behind one mutex, the baseline.
//! [`Backend::Soa`] keeps each slot's stamp, per-subscriber bitmask and
//! payload side by side and is lock-free on the publish and read paths; its
//! algorithm and invariants are in the `soa` module's docs
//! (`kms-bus/src/soa.rs`). Soa wakes a parked subscriber once per burst and
//! takes at most 56 subscribers per topic.
//!
//! # Threads
//!
//! Outside an async runtime, [`Subscriber::blocking_recv`] and
//! [`Publisher::blocking_publish_wait`] block the calling thread. They back
//! off first (spin, then yield), as crossbeam-channel does, and park only
//! if the topic stays empty (or full): across threads that avoids a futex
//! sleep and wake-up per message. While a stream flows, `blocking_recv`
//! waits longer before it looks again (so the producers keep the cache
//! line they write), and for a lone message it looks early; on an
//! [`Overflow::Wait`] topic of the Soa backend, after a
//! [`Subscriber::drain`] that caught up with the stream, it waits (at most
//! about 1000 spin hints) for a run of messages to be written before it
//! reads again, rather than reading right behind the producers. They deliver
//! and refuse exactly as `recv` and `publish_wait` do, outside tokio's
//! cooperative budget. Do not call them from async tasks: if the other
//! side runs on the same worker thread, they never return.
//!
//! # Lints
//!
//! * `deny(unsafe_code)`, relaxed only in `soa.rs`, whose payload cells are
//!   handed between threads by the slot protocol; every `unsafe` block there
//!   has a `SAFETY:` comment. `deny(unsafe_op_in_unsafe_fn)`.
//! * `deny(missing_docs)`: every public item says what it does, its errors
//!   and its units.
//! * `deny(clippy::unwrap_used, clippy::expect_used)`: no panics on bad
//!   input; invariants are handled, not asserted.

#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used)]
#![warn(missing_debug_implementations, unreachable_pub)]

mod backend;
#[cfg(not(kms_loom))]
mod blocking;
mod bus;
mod classic;
mod config;
mod error;
mod metrics;
mod outcome;
mod publisher;
mod shared;
mod soa;
mod subscriber;
mod sync;
mod topic;

pub use crate::bus::Bus;
pub use crate::config::{Backend, Overflow, TopicConfig};
pub use crate::error::{BusError, PublishError, RecvError, RejectCause, TryRecvError};
pub use crate::metrics::{describe_metrics, LAGGED_TOTAL, PUBLISHED_TOTAL, REJECTED_TOTAL};
pub use crate::publisher::Publisher;

/// Most live subscribers a [`Backend::Soa`] topic takes (a count): one bit
/// each in a 64-bit mask word whose top 8 bits count readers in a `Lag`
/// read.
pub const SOA_MAX_SUBSCRIBERS: usize = soa::MAX_SUBSCRIBERS;
pub use crate::subscriber::Subscriber;
pub use crate::topic::Topic;
