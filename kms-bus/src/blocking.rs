//! Receiving and publishing from plain threads, outside an async runtime.
//!
//! [`Subscriber::blocking_recv`] and [`Publisher::blocking_publish_wait`]
//! first retry the non-blocking operation while backing off
//! (`crossbeam_utils::Backoff`: spin hints, growing, then `yield_now` a few
//! times), and only then block the thread on the async operation
//! (`futures_executor::block_on` of [`Subscriber::recv`] or
//! [`Publisher::publish_wait`], which parks the thread until the topic's
//! wake-up). This is what crossbeam-channel's blocking `recv` and `send` do
//! before they park. A consumer that finds the topic empty for a moment, or
//! a producer that finds it full, then costs a few hundred nanoseconds
//! instead of a futex sleep and a wake-up (several microseconds and a
//! context switch each) per message: on two cores with four producers and a
//! consumer, parking at once switched context once every ~75 messages.
//!
//! The contract is that of the async operations: the same messages, order,
//! lag counts and errors, and nothing taken is lost.

use crossbeam_utils::Backoff;

use crate::error::{PublishError, RecvError, TryRecvError};
use crate::{Publisher, Subscriber};

impl<T: Clone> Subscriber<T> {
    /// Waits for the next message, blocking the calling thread: for
    /// consumers on plain threads. In async code use
    /// [`recv`](Subscriber::recv), which yields to the runtime instead;
    /// this call would block a runtime's worker thread.
    ///
    /// Backs off (spins, then yields the thread) while the topic is empty,
    /// then parks the thread until a publish wakes it (see the module docs).
    ///
    /// # Errors
    ///
    /// As [`recv`](Subscriber::recv): [`RecvError::Lagged`]`(n)` once after
    /// `n` messages were overwritten unread (`Lag` topics), and
    /// [`RecvError::Closed`] when no publisher is alive and every message
    /// has been read.
    pub fn blocking_recv(&mut self) -> Result<T, RecvError> {
        let backoff = Backoff::new();
        loop {
            match self.try_recv() {
                Ok(msg) => return Ok(msg),
                Err(TryRecvError::Lagged(missed)) => return Err(RecvError::Lagged(missed)),
                Err(TryRecvError::Closed) => return Err(RecvError::Closed),
                Err(TryRecvError::Empty) if backoff.is_completed() => {
                    return futures_executor::block_on(self.recv());
                }
                Err(TryRecvError::Empty) => backoff.snooze(),
            }
        }
    }
}

impl<T> Publisher<T> {
    /// Publishes one message, blocking the calling thread while the ring is
    /// full: for producers on plain threads. In async code use
    /// [`publish_wait`](Publisher::publish_wait); this call would block a
    /// runtime's worker thread.
    ///
    /// On an [`Overflow::Wait`](crate::Overflow::Wait) topic it backs off
    /// (spins, then yields the thread) while the ring is full, then parks
    /// the thread until a read makes room (see the module docs). On `Lag`
    /// and `Reject` topics it is [`publish`](Publisher::publish) and never
    /// blocks.
    ///
    /// # Errors
    ///
    /// As [`publish_wait`](Publisher::publish_wait):
    /// [`PublishError::NoSubscribers`] with the message if the topic has no
    /// subscriber (also when the last one leaves while this call waits), and
    /// on a `Reject` topic [`PublishError::Full`] with the message if the
    /// ring is full.
    pub fn blocking_publish_wait(&self, msg: T) -> Result<(), PublishError<T>> {
        if !self.waits_for_room() {
            return self.publish(msg);
        }
        let backoff = Backoff::new();
        let mut msg = msg;
        loop {
            match self.offer(msg) {
                Err(PublishError::Full(back)) if backoff.is_completed() => {
                    return futures_executor::block_on(self.publish_wait(back));
                }
                Err(PublishError::Full(back)) => {
                    msg = back;
                    backoff.snooze();
                }
                other => return other,
            }
        }
    }
}
