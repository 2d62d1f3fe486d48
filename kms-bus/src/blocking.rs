//! Receiving and publishing from plain threads, outside an async runtime.
//!
//! [`Subscriber::blocking_recv`] and [`Publisher::blocking_publish_wait`]
//! first retry the non-blocking operation while backing off
//! (`crossbeam_utils::Backoff`: 127 spin hints in growing rounds, then up to
//! four `yield_now`s), and only then block the thread on the async
//! operation ([`Subscriber::recv`] or [`Publisher::publish_wait`], polled by
//! [`park_on`], which parks the thread until the topic's wake-up). This is
//! what crossbeam-channel's blocking `recv` and `send` do before they park.
//! A consumer that finds the topic empty for a moment, or a producer that
//! finds it full, then costs microseconds of spinning and yielding instead
//! of a futex sleep and a wake-up with a context switch on both sides.
//! Across threads on two cores that was most of the time: with four
//! producers and one consumer, parking at once made 0.7–1.4 million context
//! switches per benchmark run, backing off first 28–72 thousand
//! (`docs/PERFORMANCE.md`, "Bus across threads after the cross-thread work").
//!
//! The contract is that of the async operations: the same messages, order,
//! lag counts and errors, and nothing taken is lost. The async operation
//! runs outside tokio's cooperative budget (`coop::unconstrained`): a
//! blocked thread has no scheduler to give a turn to, so a spent budget
//! would leave it waiting for a wake-up nobody sends.
//!
//! This module is not part of the loom build (`cfg(kms_loom)`): it adds no
//! shared state, only a thread's own back-off and park around the calls
//! the models check.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

use crossbeam_utils::Backoff;
use tokio::task::coop;

use crate::error::{PublishError, RecvError};
use crate::subscriber::recv_result;
use crate::{Publisher, Subscriber};

impl<T: Clone> Subscriber<T> {
    /// Waits for the next message, blocking the calling thread: for
    /// consumers on plain threads (or inside `tokio::task::spawn_blocking`).
    ///
    /// Backs off while the topic is empty (crossbeam-utils' `Backoff`: 127
    /// spin hints in growing rounds, then up to four `yield_now`s), then
    /// parks the thread until a publish, or the last publisher's drop,
    /// wakes it. The messages, their order, the lag counts and the errors
    /// are those of [`recv`](Subscriber::recv). Unlike `recv`, it does not
    /// take part in tokio's cooperative budget: a parked thread has no
    /// scheduler to yield to.
    ///
    /// Do not call it from an async task; use `recv` there. It blocks the
    /// task's worker thread until a message comes, and if the message must
    /// come from a task on that same worker (always so on a
    /// `current_thread` runtime), it never comes and the call never
    /// returns.
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
            // `recv`'s own mapping: everything but `Empty` is an answer.
            if let Some(result) = recv_result(self.try_recv()) {
                return result;
            }
            if backoff.is_completed() {
                return park_on(coop::unconstrained(self.recv()));
            }
            backoff.snooze();
        }
    }
}

impl<T> Publisher<T> {
    /// Publishes one message, blocking the calling thread while the ring is
    /// full: for producers on plain threads (or inside
    /// `tokio::task::spawn_blocking`).
    ///
    /// On an [`Overflow::Wait`](crate::Overflow::Wait) topic it backs off
    /// while the ring is full (crossbeam-utils' `Backoff`: 127 spin hints in
    /// growing rounds, then up to four `yield_now`s), then parks the thread
    /// until a read, or a departing subscriber, makes room. It publishes
    /// what [`publish_wait`](Publisher::publish_wait) would, with the same
    /// errors, but does not take part in tokio's cooperative budget. On
    /// `Lag` and `Reject` topics it is [`publish`](Publisher::publish) and
    /// never blocks.
    ///
    /// Do not call it from an async task; use `publish_wait` there. It
    /// blocks the task's worker thread while the ring is full, and if the
    /// reads that make room must come from a task on that same worker
    /// (always so on a `current_thread` runtime), they never come and the
    /// call never returns.
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
                    return park_on(coop::unconstrained(self.publish_wait(back)));
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

/// Wakes a parked thread.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `future` to completion on this thread, parking it between polls
/// until the future's waker unparks it (the pattern of the `Wake` trait's
/// documentation in `std::task`). A spurious unpark, or a wake-up from a
/// waker that fires after the future completed, only costs one more poll
/// later. It keeps no thread-local state, so it also runs where a futures
/// executor is already running on the thread (where
/// `futures::executor::block_on` refuses with a panic).
fn park_on<F: Future>(future: F) -> F::Output {
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        thread::park();
    }
}
