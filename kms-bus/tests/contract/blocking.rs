//! `Subscriber::blocking_recv` and `Publisher::blocking_publish_wait` from
//! plain threads: the async contract (order, exact lag, `Closed`, refusals),
//! and wake-ups after the back-off has given way to parking.
//!
//! Every thread that could hang reports through a channel read with
//! [`DEADLINE`], so a lost wake-up fails the test instead of hanging it.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use kms_bus::{Overflow, PublishError, RecvError, Subscriber, Topic};

use super::common::topic;

/// How long a blocked call may take before the test calls it a hang.
const DEADLINE: Duration = Duration::from_secs(30);

/// Long enough for a blocked call to finish its back-off (microseconds)
/// and park. No public API tells when a call has parked; if a loaded
/// machine stretches the back-off past this, a test only exercises the
/// back-off instead of the wake-up. It cannot fail or hang because of it.
const PARKED: Duration = Duration::from_millis(50);

/// Producer threads of the fan-in tests.
const PRODUCERS: u64 = 4;

/// Starts [`PRODUCERS`] threads, each publishing `each` messages to
/// `topic` with `blocking_publish_wait`: producer `p`'s `i`-th message is
/// `p << 32 | i`.
fn spawn_producers(topic: &Topic<u64>, each: u64) -> Vec<thread::JoinHandle<()>> {
    (0..PRODUCERS)
        .map(|p| {
            let publisher = topic.publisher();
            thread::spawn(move || {
                for i in 0..each {
                    publisher
                        .blocking_publish_wait(p << 32 | i)
                        .expect("a subscriber is alive");
                }
            })
        })
        .collect()
}

/// Checks that `msg` is the next message of its producer (see
/// [`spawn_producers`]) and counts it in `next`.
fn in_order(msg: u64, next: &mut [u64; PRODUCERS as usize]) {
    let (p, i) = ((msg >> 32) as usize, msg & 0xffff_ffff);
    assert_eq!(i, next[p], "producer {p}'s messages in order");
    next[p] += 1;
}

/// Consumes `sub` with `blocking_recv` (each call followed by a `drain`
/// of up to 256 when `drains`) until `Closed`, checking each producer's
/// order, within [`DEADLINE`]; returns how many messages each producer's
/// were. `Closed` comes only once every producer thread has finished
/// (and dropped its publisher).
fn consume(mut sub: Subscriber<u64>, drains: bool) -> [u64; PRODUCERS as usize] {
    within_deadline(move || {
        let mut next = [0u64; PRODUCERS as usize];
        let mut out = Vec::with_capacity(256);
        loop {
            match sub.blocking_recv() {
                Ok(msg) => in_order(msg, &mut next),
                Err(RecvError::Closed) => break,
                Err(e) => panic!("blocking_recv: {e}"),
            }
            if drains && sub.drain(&mut out, 256).is_ok() {
                for msg in out.drain(..) {
                    in_order(msg, &mut next);
                }
            }
        }
        next
    })
}

#[test]
fn four_producers_into_one_consumer_lose_nothing_and_keep_order() {
    const EACH: u64 = 2_000;
    // A ring much smaller than the stream: producers wait for room often.
    let topic = topic::<u64>(4, Overflow::Wait);
    let sub = topic.subscribe().expect("subscribe");
    let producers = spawn_producers(&topic, EACH);
    let next = consume(sub, false);
    assert_eq!(next, [EACH; PRODUCERS as usize], "every message, once");
    for p in producers {
        p.join().expect("producer");
    }
}

#[test]
fn four_producers_into_a_draining_consumer_lose_nothing_at_any_capacity() {
    // `blocking_recv` then `drain`, the pattern whose drains catch up with
    // the producers and make the next `blocking_recv` wait for a run (on
    // `Wait` topics of at least 4 slots, at most half the ring ahead): every
    // message once and in each producer's order, at ring sizes below,
    // around and above the run.
    const EACH: u64 = 5_000;
    for capacity in [1, 3, 4, 16, 300, 1024] {
        let topic = topic::<u64>(capacity, Overflow::Wait);
        let sub = topic.subscribe().expect("subscribe");
        let producers = spawn_producers(&topic, EACH);
        let next = consume(sub, true);
        assert_eq!(
            next, [EACH; PRODUCERS as usize],
            "capacity {capacity}: every message, once"
        );
        for p in producers {
            p.join().expect("producer");
        }
    }
}

/// Runs `f` on its own thread and returns its result, failing the test if
/// it takes longer than [`DEADLINE`] (a call that blocks when it should
/// not, or a lost wake-up).
fn within_deadline<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let (done, result) = mpsc::channel();
    thread::spawn(move || done.send(f()).expect("test alive"));
    result
        .recv_timeout(DEADLINE)
        .expect("finished before the deadline")
}

#[test]
fn blocking_recv_reports_the_exact_lag_then_the_oldest_retained() {
    let topic = topic::<u64>(4, Overflow::Lag);
    let mut sub = topic.subscribe().expect("subscribe");
    let publisher = topic.publisher();
    for i in 0..10 {
        publisher.publish(i).expect("publish");
    }
    drop(publisher);
    let got = within_deadline(move || (0..6).map(|_| sub.blocking_recv()).collect::<Vec<_>>());
    assert_eq!(
        got,
        [
            Err(RecvError::Lagged(6)),
            Ok(6),
            Ok(7),
            Ok(8),
            Ok(9),
            Err(RecvError::Closed)
        ]
    );
}

/// Inside a tokio task, a blocking call that parks must not depend on the
/// task's cooperative budget: with the budget spent, tokio defers the
/// wake-up to the scheduler of the very thread that is parked, and the call
/// would never return. The task spends its whole budget (tokio's is 128
/// units, one per message `recv` takes) and then parks in `blocking_recv`
/// until another thread publishes.
#[test]
fn blocking_recv_inside_a_runtime_does_not_wait_on_the_budget() {
    const BUDGET: u64 = 128;
    let topic = topic::<u64>(256, Overflow::Lag);
    let mut sub = topic.subscribe().expect("subscribe");
    let publisher = topic.publisher();
    for i in 0..BUDGET {
        publisher.publish(i).expect("publish");
    }
    let late = thread::spawn(move || {
        thread::sleep(PARKED);
        publisher.publish(BUDGET).expect("publish");
    });
    let got = within_deadline(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            for i in 0..BUDGET {
                assert_eq!(sub.recv().await, Ok(i), "ready, taken within the budget");
            }
            sub.blocking_recv()
        })
    });
    assert_eq!(got, Ok(BUDGET));
    late.join().expect("publisher");
}

#[test]
fn blocking_recv_after_a_drain_that_caught_up_takes_what_comes_without_a_run() {
    // A drain that takes messages and then finds the topic empty makes the
    // next `blocking_recv` wait for a run of messages; when none comes (the
    // stream paused, or ended), it must still take the few that are there,
    // and `Closed` once the publishers are gone.
    let topic = topic::<u64>(1024, Overflow::Wait);
    let mut sub = topic.subscribe().expect("subscribe");
    let publisher = topic.publisher();
    for i in 0..3 {
        publisher.publish(i).expect("room");
    }
    let (sub, first, drained) = within_deadline(move || {
        let first = sub.blocking_recv();
        let mut out = Vec::new();
        let drained = sub.drain(&mut out, 256).map(|_| out);
        (sub, first, drained)
    });
    assert_eq!(first, Ok(0));
    assert_eq!(
        drained,
        Ok(vec![1, 2]),
        "the drain took the rest and caught up"
    );
    for i in 3..5 {
        publisher.publish(i).expect("room");
    }
    let (mut sub, got) = within_deadline(move || {
        let mut sub = sub;
        let got = [sub.blocking_recv(), sub.blocking_recv()];
        (sub, got)
    });
    assert_eq!(got, [Ok(3), Ok(4)], "two messages, far fewer than a run");
    publisher.publish(5).expect("room");
    let mut out = Vec::new();
    assert_eq!(sub.drain(&mut out, 256), Ok(1));
    drop(publisher);
    let end = within_deadline(move || sub.blocking_recv());
    assert_eq!(end, Err(RecvError::Closed));
}

#[test]
fn blocking_recv_parks_and_is_woken_by_a_later_publish() {
    let topic = topic::<u64>(8, Overflow::Lag);
    let mut sub = topic.subscribe().expect("subscribe");
    let publisher = topic.publisher();
    let (done, result) = mpsc::channel();
    thread::spawn(move || {
        let first = sub.blocking_recv();
        let second = sub.blocking_recv();
        done.send((first, second)).expect("test alive");
    });
    thread::sleep(PARKED);
    publisher.publish(7).expect("publish");
    thread::sleep(PARKED);
    // The last publisher leaving wakes the parked reader with `Closed`.
    drop(publisher);
    let (first, second) = result.recv_timeout(DEADLINE).expect("woken");
    assert_eq!(first, Ok(7));
    assert_eq!(second, Err(RecvError::Closed));
}

#[test]
fn blocking_publish_wait_parks_until_a_read_makes_room() {
    let topic = topic::<u64>(1, Overflow::Wait);
    let mut sub = topic.subscribe().expect("subscribe");
    let publisher = topic.publisher();
    publisher.publish(1).expect("room for one");
    let (done, result) = mpsc::channel();
    let waiting = publisher.clone();
    thread::spawn(move || {
        done.send(waiting.blocking_publish_wait(2))
            .expect("test alive");
    });
    thread::sleep(PARKED);
    assert!(
        result.try_recv().is_err(),
        "the publish waits while the ring is full"
    );
    assert_eq!(sub.try_recv(), Ok(1));
    assert!(matches!(result.recv_timeout(DEADLINE), Ok(Ok(()))));
    assert_eq!(sub.try_recv(), Ok(2));
}

#[test]
fn blocking_publish_wait_gives_the_message_back_when_the_last_subscriber_leaves() {
    let topic = topic::<u64>(1, Overflow::Wait);
    let sub = topic.subscribe().expect("subscribe");
    let publisher = topic.publisher();
    publisher.publish(1).expect("room for one");
    let (done, result) = mpsc::channel();
    thread::spawn(move || {
        done.send(publisher.blocking_publish_wait(2))
            .expect("test alive");
    });
    thread::sleep(PARKED);
    drop(sub);
    match result.recv_timeout(DEADLINE).expect("woken") {
        Err(PublishError::NoSubscribers(msg)) => assert_eq!(msg, 2),
        other => panic!("expected NoSubscribers(2), got {other:?}"),
    }
}

#[test]
fn blocking_publish_wait_does_not_wait_on_reject_or_lag_topics() {
    within_deadline(refusals_and_overwrites);
}

fn refusals_and_overwrites() {
    let reject = topic::<u64>(1, Overflow::Reject);
    let _sub = reject.subscribe().expect("subscribe");
    let publisher = reject.publisher();
    publisher.blocking_publish_wait(1).expect("room for one");
    assert!(matches!(
        publisher.blocking_publish_wait(2),
        Err(PublishError::Full(2))
    ));
    let lag = topic::<u64>(1, Overflow::Lag);
    let mut sub = lag.subscribe().expect("subscribe");
    let publisher = lag.publisher();
    publisher
        .blocking_publish_wait(1)
        .expect("lag never refuses");
    publisher
        .blocking_publish_wait(2)
        .expect("lag never refuses");
    assert_eq!(sub.try_recv(), Err(kms_bus::TryRecvError::Lagged(1)));
    let nobody = topic::<u64>(1, Overflow::Wait);
    assert!(matches!(
        nobody.publisher().blocking_publish_wait(3),
        Err(PublishError::NoSubscribers(3))
    ));
}
