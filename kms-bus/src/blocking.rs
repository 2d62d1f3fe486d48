//! Receiving and publishing from plain threads, outside an async runtime.
//!
//! [`Subscriber::blocking_recv`] and [`Publisher::blocking_publish_wait`]
//! first retry the non-blocking operation while backing off ([`Snooze`]:
//! spin hints in growing rounds, then up to four `yield_now`s, the limits
//! of crossbeam-utils' `Backoff`), and only then block the thread on the
//! async operation ([`Subscriber::recv`] or [`Publisher::publish_wait`],
//! polled by [`park_on`], which parks the thread until the topic's
//! wake-up). This is what crossbeam-channel's blocking `recv` and `send`
//! do before they park. A consumer that finds the topic empty for a
//! moment, or a producer that finds it full, then costs microseconds of
//! spinning and yielding instead of a futex sleep and a wake-up with a
//! context switch on both sides. Across threads on two cores that was most
//! of the time: with four producers and one consumer, parking at once made
//! 0.7–1.4 million context switches per benchmark run, backing off first
//! 28–72 thousand (`docs/PERFORMANCE.md`, "Bus: figures the code rests
//! on").
//!
//! # Adaptive start (`blocking_recv`)
//!
//! Every look at an empty topic reads the cache line of the slot the
//! producers write next; each time it does, the producer's next write to
//! that line must first take it back from the consumer's core (a
//! cache-line transfer: about 45 ns on this machine, 200 ns when its two
//! cores sit further apart). A consumer that looks again after one spin
//! hint, as a back-off that always starts at its first round does, pays
//! that transfer on nearly every message of a stream and makes the
//! producers the bottleneck: four producer threads into one draining
//! consumer took 81–94 µs per 4096 messages that way, with most drains
//! taking 2 to 15 messages. So a subscriber keeps the round its back-off
//! starts at (`Subscriber::backoff_start`, `0 ..= MAX_BACKOFF_START`) and
//! adapts it after every wait, once the wait has its answer (a message, a
//! lag report or `Closed`): one round later if the next message is already
//! written too (a stream, which can wait for a longer run; after a lag
//! report the ring is full, so this is the usual case), one round earlier
//! if it is not (a lone message, such as a reply, whose latency the early
//! looks serve). A call that finds a message at once does not wait and
//! changes nothing. A stream's consumer then looks again only after 32
//! spin hints and takes most messages in drains of 64 to 255 (47–54 µs per
//! 4096), while a request and reply between two threads keeps looking
//! again after one hint, and its round trips are unchanged.
//! `docs/PERFORMANCE.md`, "Bus: figures the code rests on", has the
//! figures.
//!
//! # Waiting for a run (`blocking_recv` after a drain that caught up)
//!
//! The adaptive start helps while the topic is empty; a consumer that
//! keeps finding a few messages ready pays the same transfers without ever
//! waiting. Four producer threads publishing 100 000 messages each into one
//! consumer (`threads/4_to_1_sustained`) showed it: the consumer read each
//! message right behind the producers, its free of the slot and its next
//! look pulled the line back and forth on nearly every message, and the
//! producers spent 80 % of the run in the tail's compare-and-swap and the
//! stamp load before it (19.8–20.3 ms per run, 1.5–2.7 × crossbeam-channel).
//! So a [`Subscriber::drain`] that takes messages and then finds the topic
//! empty marks where the subscriber caught up, and the next `blocking_recv`
//! from there first backs off (spin hints in doubling rounds from the
//! adaptive start, up to round [`LAST_RUN_ROUND`]: at most 1023 hints,
//! about 9 µs here at ~9 ns a hint) until the message [`RUN`] ahead looks
//! written, so the reads that follow take runs of lines the producers have
//! finished with. Only `Overflow::Wait` Soa topics wait: there the
//! publishers wait for room while the ring fills, where a `Lag` ring would
//! overwrite unread messages and a `Reject` ring refuse new ones; the
//! run is at most half the ring (`min(RUN, capacity / 2)`, no wait below 4
//! slots), and Classic, which takes its lock for every look, never waits. It does not wait
//! when nothing is reserved past what the drain read (a burst published
//! whole, then nothing), and stops as soon as a round passes in which the
//! publishers took nothing (the stream paused). The run figure is 6.2–6.5
//! ms, 0.60–0.99 × crossbeam-channel's time (`docs/PERFORMANCE.md`, "Bus
//! under sustained fan-in"). A call that found nothing in its drain (a
//! request and its reply) never waits for a run.
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

use tokio::task::coop;

use crate::error::{PublishError, RecvError};
use crate::subscriber::recv_result;
use crate::{Publisher, Subscriber};

impl<T: Clone> Subscriber<T> {
    /// Waits for the next message, blocking the calling thread: for
    /// consumers on plain threads (or inside `tokio::task::spawn_blocking`).
    ///
    /// Backs off while the topic is empty (spin hints in rounds of 1, 2, 4,
    /// ... 64, 127 in all, then up to four `yield_now`s), then parks the
    /// thread until a publish, or the last publisher's drop, wakes it. A
    /// subscriber whose waits keep ending with more than one message ready
    /// (a stream) starts its back-off up to five rounds later, so it looks
    /// again only after 32 spin hints and takes longer runs; each wait that
    /// ends with a lone message moves the start one round back towards the
    /// first (see the module docs). After a [`drain`](Subscriber::drain)
    /// that took messages and then found the topic empty, it first waits
    /// up to about 1000 spin hints (about 9 µs on the machine of
    /// `docs/PERFORMANCE.md`) for the message 255 ahead to be written,
    /// unless nothing is reserved past what the drain read, and stops
    /// waiting once the publishers take nothing for a round (module docs,
    /// "Waiting for a run").
    ///
    /// The messages, their order, the lag counts and the errors are those
    /// of [`recv`](Subscriber::recv). Unlike `recv`, it does not take part
    /// in tokio's cooperative budget: a parked thread has no scheduler to
    /// yield to.
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
        if self.caught_up_at.take() == Some(self.next_position()) {
            self.wait_for_run();
        }
        let mut snooze = Snooze::starting_at(self.backoff_start);
        let mut waited = false;
        loop {
            // `recv`'s own mapping: everything but `Empty` is an answer.
            if let Some(result) = recv_result(self.try_recv()) {
                if waited {
                    self.adapt_backoff();
                }
                return result;
            }
            if snooze.is_completed() {
                let result = park_on(coop::unconstrained(self.recv()));
                self.adapt_backoff();
                return result;
            }
            snooze.snooze();
            waited = true;
        }
    }

    /// After a drain that caught up with a stream's publishers, on a topic
    /// that waits for runs (`Subscriber::run_ahead`: `Wait` Soa topics, at
    /// most half the ring ahead): unless nothing is reserved past what it
    /// read, backs off until the message that far ahead looks written, the
    /// publishers take nothing for a round, or round [`LAST_RUN_ROUND`]
    /// ends, so the next reads take a run of whole cache lines the
    /// publishers have finished with (module docs, "Waiting for a run").
    fn wait_for_run(&self) {
        let Some(ahead) = self.run_ahead(RUN) else {
            return;
        };
        let mut taken = self.sequence();
        if taken <= self.next_position() {
            // Nothing reserved past what the drain read: the publishers
            // have stopped (a burst published whole), not fallen behind.
            return;
        }
        for round in self.backoff_start..=LAST_RUN_ROUND {
            if self.looks_ready_ahead(ahead) {
                return;
            }
            for _ in 0..1u32 << round {
                std::hint::spin_loop();
            }
            // A round in which the publishers took nothing: the stream has
            // paused (the end of a burst), so a run will not come soon.
            let now = self.sequence();
            if now == taken {
                return;
            }
            taken = now;
        }
    }

    /// After a wait that ended with an answer (a message, a lag report or
    /// `Closed`): starts the next wait's back-off one round later if the
    /// next message is already written (a stream), one round earlier if not
    /// (module docs, "Adaptive start").
    fn adapt_backoff(&mut self) {
        self.backoff_start = if self.looks_ready_ahead(0) {
            (self.backoff_start + 1).min(MAX_BACKOFF_START)
        } else {
            self.backoff_start.saturating_sub(1)
        };
    }
}

impl<T> Publisher<T> {
    /// Publishes one message, blocking the calling thread while the ring is
    /// full: for producers on plain threads (or inside
    /// `tokio::task::spawn_blocking`).
    ///
    /// On an [`Overflow::Wait`](crate::Overflow::Wait) topic it backs off
    /// while the ring is full (spin hints in rounds of 1, 2, 4, ... 64, 127
    /// in all, then up to four `yield_now`s), then parks the thread
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
    pub fn blocking_publish_wait(&self, mut msg: T) -> Result<(), PublishError<T>> {
        if !self.waits_for_room() {
            return self.publish(msg);
        }
        let mut snooze = Snooze::starting_at(0);
        loop {
            match self.offer(msg) {
                Err(PublishError::Full(back)) if snooze.is_completed() => {
                    return park_on(coop::unconstrained(self.publish_wait(back)));
                }
                Err(PublishError::Full(back)) => {
                    msg = back;
                    snooze.snooze();
                }
                other => return other,
            }
        }
    }
}

/// The latest round `blocking_recv`'s back-off starts at: after a look
/// that found the topic empty, it then looks again after `2^5 = 32` spin
/// hints (about 0.7 µs here), and it still spins `32 + 64` hints before it
/// yields. Chosen side by side with 0, 4 and 6 (`docs/PERFORMANCE.md`).
pub(crate) const MAX_BACKOFF_START: u32 = 5;

/// How far ahead of a subscriber that caught up in a drain its wait for
/// a run looks for a written message (messages; at most half the ring).
const RUN: u64 = 255;

/// The last round of the wait for a run: from round 0, `1 + 2 + ... + 512
/// = 1023` spin hints in all (about 9 µs here, ~9 ns a hint); from
/// [`MAX_BACKOFF_START`], 992.
const LAST_RUN_ROUND: u32 = 9;

/// The last round of spin hints: round `r <= LAST_SPIN_ROUND` issues `2^r`
/// hints (1 + 2 + ... + 64 = 127 from round 0).
const LAST_SPIN_ROUND: u32 = 6;

/// The last round; rounds after [`LAST_SPIN_ROUND`] yield the thread once
/// each (four yields).
const LAST_ROUND: u32 = 10;

/// A back-off in rounds, the schedule of crossbeam-utils' `Backoff`
/// (`snooze`, with its limits 6 and 10) that can start at a later round.
struct Snooze {
    /// The round the next [`Snooze::snooze`] runs.
    round: u32,
}

impl Snooze {
    /// A back-off whose first round is `round` (0 for the full schedule).
    fn starting_at(round: u32) -> Self {
        Self { round }
    }

    /// Whether every round has run: time to park.
    fn is_completed(&self) -> bool {
        self.round > LAST_ROUND
    }

    /// Runs one round: `2^round` spin hints up to round
    /// [`LAST_SPIN_ROUND`], after it one `yield_now`.
    fn snooze(&mut self) {
        if self.round <= LAST_SPIN_ROUND {
            for _ in 0..1u32 << self.round {
                std::hint::spin_loop();
            }
        } else {
            thread::yield_now();
        }
        self.round += 1;
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Snooze, LAST_ROUND, MAX_BACKOFF_START};
    use crate::{Backend, Bus, Overflow, Subscriber, Topic, TopicConfig};

    fn topic(backend: Backend) -> Topic<u64> {
        Bus::new()
            .topic::<u64>(
                "blocking",
                TopicConfig {
                    capacity: 16,
                    backend,
                    overflow: Overflow::Wait,
                },
            )
            .expect("valid config")
    }

    /// Counts the rounds a back-off runs before it is completed.
    fn rounds(mut snooze: Snooze) -> u32 {
        let mut rounds = 0;
        while !snooze.is_completed() {
            snooze.snooze();
            rounds += 1;
        }
        rounds
    }

    #[test]
    fn a_later_start_skips_the_first_spin_rounds_only() {
        // Rounds 0..=6 spin, 7..=10 yield: crossbeam-utils' schedule.
        assert_eq!(rounds(Snooze::starting_at(0)), LAST_ROUND + 1);
        // Started at round 5: rounds 5 and 6 spin, then the same 4 yields.
        assert_eq!(
            rounds(Snooze::starting_at(MAX_BACKOFF_START)),
            LAST_ROUND + 1 - MAX_BACKOFF_START
        );
    }

    /// Takes one message without waiting and adapts as after a wait.
    fn take_and_adapt(sub: &mut Subscriber<u64>) -> u32 {
        sub.try_recv().expect("a message is ready");
        sub.adapt_backoff();
        sub.backoff_start
    }

    #[test]
    fn the_start_moves_later_while_messages_queue_and_earlier_for_a_lone_one() {
        for backend in [Backend::Soa, Backend::Classic] {
            let topic = topic(backend);
            let mut sub = topic.subscribe().expect("subscribe");
            let publisher = topic.publisher();
            let messages = MAX_BACKOFF_START as u64 + 3;
            publisher.publish_batch(0..messages).expect("room");
            // Each take but the last leaves the next message ready: one
            // round later each time, capped.
            let starts: Vec<u32> = (0..messages).map(|_| take_and_adapt(&mut sub)).collect();
            let mut expected: Vec<u32> = (1..messages as u32)
                .map(|s| s.min(MAX_BACKOFF_START))
                .collect();
            // The last message is alone: one round earlier.
            expected.push(MAX_BACKOFF_START - 1);
            assert_eq!(starts, expected, "{backend:?}");
            // Lone messages bring it back to the first round, and no lower.
            for _ in 0..MAX_BACKOFF_START + 1 {
                publisher.publish(0).expect("room");
                take_and_adapt(&mut sub);
            }
            assert_eq!(sub.backoff_start, 0, "{backend:?}");
        }
    }

    #[test]
    fn blocking_recv_adapts_after_a_wait_only() {
        let topic = topic(Backend::Soa);
        let mut sub = topic.subscribe().expect("subscribe");
        let publisher = topic.publisher();
        // A message ready at once: no wait, no change, though nothing
        // follows it.
        sub.backoff_start = 3;
        publisher.publish(1).expect("subscribed");
        assert_eq!(sub.blocking_recv(), Ok(1));
        assert_eq!(sub.backoff_start, 3);
        // One message, 50 ms after the call starts waiting (it parks within
        // microseconds): a lone message, so one round earlier. A call that
        // was held off the CPU until the message was there does not wait
        // and changes nothing; such an attempt is repeated, up to 5 times.
        let adapted = (0..5).any(|_| {
            sub.backoff_start = MAX_BACKOFF_START;
            let late = std::thread::spawn({
                let publisher = publisher.clone();
                move || {
                    std::thread::sleep(Duration::from_millis(50));
                    publisher.publish(7).expect("subscribed");
                }
            });
            assert_eq!(sub.blocking_recv(), Ok(7));
            late.join().expect("publisher");
            match sub.backoff_start {
                MAX_BACKOFF_START => false,
                start => {
                    assert_eq!(start, MAX_BACKOFF_START - 1);
                    true
                }
            }
        });
        assert!(adapted, "no wait in five attempts moved the start");
    }
}
