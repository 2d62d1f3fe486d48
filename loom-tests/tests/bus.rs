//! Loom models of the Soa ring (docs/DESIGN.md §6: slot claim, last-reader move,
//! ring wrap, edge notify). Every model publishes `Arc` payloads and, after
//! every handle is dropped, checks that each payload's strong count is back
//! to 1: a leaked payload leaves it higher, a double drop lower. Each model
//! also checks counts: per subscriber, delivered + lagged = published.
//!
//! `Overflow::Wait` is modelled at capacity, freed by one read and by one
//! `drain` (whose single `SeqCst` fence orders all its frees before the
//! waiter check). `Overflow::Lag` is modelled too: an overwrite racing two
//! readers, two covered drains, a batch overwriting ahead of two covered
//! drains, and a covered drain racing an unsubscribe (soa.rs, invariant 8),
//! a wrap with two
//! subscribers, exact lag counts, and a subscriber
//! dropped mid-stream (under `Reject` and under `Lag`). These models once failed
//! with a causality violation: `commit` stored a new lap's mask `Relaxed`,
//! so a reader's claim on it did not synchronise with the overwrite's
//! writing stamp (`soa.rs`, invariant 4).
//!
//! Subscribers read with `recv().await` driven by `loom::future::block_on`,
//! so the real wake-up path (`parked` flag, fences, `Notify`) is modelled,
//! and a lost wake-up is a loom deadlock.

#![cfg(kms_loom)]

use std::sync::Arc;

use kms_bus::{
    Backend, Bus, Overflow, PublishError, RecvError, Subscriber, Topic, TopicConfig, TryRecvError,
};
use loom::future::block_on;
use loom::thread;

fn topic(capacity: usize, overflow: Overflow) -> Topic<Arc<u64>> {
    Bus::new()
        .topic(
            "loom",
            TopicConfig {
                capacity,
                backend: Backend::Soa,
                overflow,
            },
        )
        .expect("valid config")
}

fn payloads(n: u64) -> Vec<Arc<u64>> {
    (1..=n).map(Arc::new).collect()
}

/// Receives until `Closed`; returns the values delivered and the total lag.
fn recv_all(sub: &mut Subscriber<Arc<u64>>) -> (Vec<u64>, u64) {
    let mut got = Vec::new();
    let mut lagged = 0;
    loop {
        match block_on(sub.recv()) {
            Ok(v) => got.push(*v),
            Err(RecvError::Lagged(n)) => lagged += n,
            Err(RecvError::Closed) => return (got, lagged),
            Err(e) => panic!("unexpected {e}"),
        }
    }
}

/// One `try_recv` while other threads run, recorded into `got` and
/// `lagged` (`Empty` and `Closed` record nothing). The Lag models read this
/// way: one racing read is where the overwrite race lives, and the blocking
/// `recv` path (covered by `edge_notify_races_a_publish`) multiplies the
/// interleavings past what a preemption bound of 2 explores in minutes.
fn try_take(sub: &mut Subscriber<Arc<u64>>, got: &mut Vec<u64>, lagged: &mut u64) {
    match sub.try_recv() {
        Ok(v) => got.push(*v),
        Err(TryRecvError::Lagged(n)) => *lagged += n,
        Err(TryRecvError::Empty | TryRecvError::Closed) => {}
        Err(e) => panic!("unexpected {e}"),
    }
}

/// Drains `sub` once (at most `max`), recording what it gives.
fn drain_into(sub: &mut Subscriber<Arc<u64>>, max: usize, got: &mut Vec<u64>, lagged: &mut u64) {
    let mut out = Vec::new();
    match sub.drain(&mut out, max) {
        Ok(_) => got.extend(out.iter().map(|v| **v)),
        Err(TryRecvError::Lagged(n)) => *lagged += n,
        Err(TryRecvError::Empty | TryRecvError::Closed) => {}
        Err(e) => panic!("unexpected {e}"),
    }
}

/// Delivered values are increasing (in order, no duplicate) and, with the
/// lag, account for all `published`.
fn check_counts(got: &[u64], lagged: u64, published: u64) {
    assert!(got.windows(2).all(|w| w[0] < w[1]), "order: {got:?}");
    assert_eq!(got.len() as u64 + lagged, published, "{got:?} + {lagged}");
}

/// Receives the rest of `sub`'s stream into `got` and `lagged`, then
/// checks them against the `published` messages (numbered `1..=published`)
/// and that the newest one arrived.
fn finish_lag(
    sub: &mut Subscriber<Arc<u64>>,
    got: &mut Vec<u64>,
    lagged: &mut u64,
    published: u64,
) {
    let (rest, more) = recv_all(sub);
    got.extend(rest);
    *lagged += more;
    check_counts(got, *lagged, published);
    assert_eq!(
        got.last(),
        Some(&published),
        "the newest message is never lost"
    );
}

fn check_released(originals: &[Arc<u64>]) {
    for p in originals {
        assert_eq!(
            Arc::strong_count(p),
            1,
            "payload {p} leaked or dropped twice"
        );
    }
}

/// The last reader moves the payload out while another reader clones it.
#[test]
fn last_reader_move_races_another_reader() {
    loom::model(|| {
        let originals = payloads(1);
        let topic = topic(2, Overflow::Reject);
        let mut a = topic.subscribe().unwrap();
        let mut b = topic.subscribe().unwrap();
        topic
            .publisher()
            .publish(Arc::clone(&originals[0]))
            .unwrap();
        let reader = thread::spawn(move || {
            assert_eq!(*b.try_recv().unwrap(), 1);
        });
        assert_eq!(*a.try_recv().unwrap(), 1);
        reader.join().unwrap();
        drop((a, topic));
        check_released(&originals);
    });
}

/// A subscriber that parks on an empty topic is woken by a racing publish:
/// no lost wake-up (a lost one is a loom deadlock).
#[test]
fn edge_notify_races_a_publish() {
    loom::model(|| {
        let originals = payloads(1);
        let topic = topic(2, Overflow::Lag);
        let mut sub = topic.subscribe().unwrap();
        let publisher = topic.publisher();
        let sent = Arc::clone(&originals[0]);
        let producer = thread::spawn(move || {
            publisher.publish(sent).unwrap();
            publisher
        });
        assert_eq!(*block_on(sub.recv()).unwrap(), 1);
        drop(producer.join().unwrap());
        assert_eq!(block_on(sub.recv()), Err(RecvError::Closed));
        drop((sub, topic));
        check_released(&originals);
    });
}

/// `Reject` at capacity: a publish racing the read that frees the slot is
/// either published (and delivered) or handed back, never lost.
#[test]
fn reject_at_capacity() {
    loom::model(|| {
        let originals = payloads(2);
        let topic = topic(1, Overflow::Reject);
        let mut sub = topic.subscribe().unwrap();
        let publisher = topic.publisher();
        publisher.publish(Arc::clone(&originals[0])).unwrap();
        let second = Arc::clone(&originals[1]);
        let producer = thread::spawn(move || match publisher.publish(second) {
            Ok(()) => true,
            Err(PublishError::Full(back)) => {
                assert_eq!(*back, 2);
                false
            }
            Err(e) => panic!("unexpected {e}"),
        });
        assert_eq!(*sub.try_recv().unwrap(), 1);
        let published = producer.join().unwrap();
        match sub.try_recv() {
            Ok(v) => assert!(published && *v == 2),
            Err(TryRecvError::Closed) => assert!(!published),
            Err(e) => panic!("unexpected {e}"),
        }
        drop((sub, topic));
        check_released(&originals);
    });
}

/// `Wait` at capacity: `publish_wait` parks until the read frees the slot
/// (a lost room wake-up is a loom deadlock), then publishes in order.
#[test]
fn wait_at_capacity() {
    loom::model(|| {
        let originals = payloads(2);
        let topic = topic(1, Overflow::Wait);
        let mut sub = topic.subscribe().unwrap();
        let publisher = topic.publisher();
        publisher.publish(Arc::clone(&originals[0])).unwrap();
        let second = Arc::clone(&originals[1]);
        let producer = thread::spawn(move || block_on(publisher.publish_wait(second)).unwrap());
        let (got, lagged) = recv_all(&mut sub);
        assert_eq!((got, lagged), (vec![1, 2], 0));
        producer.join().unwrap();
        drop((sub, topic));
        check_released(&originals);
    });
}

/// `Wait` at capacity, freed by a `drain`: the drain frees both slots and
/// then asks once whether publishers wait (one `SeqCst` fence for the
/// batch, `Soa::room_wanted`). A parked `publish_wait` must still be woken
/// (a lost room wake-up is a loom deadlock), and nothing is lost.
#[test]
fn wait_freed_by_one_drain() {
    loom::model(|| {
        let originals = payloads(3);
        let topic = topic(2, Overflow::Wait);
        let mut sub = topic.subscribe().unwrap();
        let publisher = topic.publisher();
        publisher.publish(Arc::clone(&originals[0])).unwrap();
        publisher.publish(Arc::clone(&originals[1])).unwrap();
        let third = Arc::clone(&originals[2]);
        let producer = thread::spawn(move || block_on(publisher.publish_wait(third)).unwrap());
        let mut out = Vec::new();
        assert_eq!(sub.drain(&mut out, 2).unwrap(), 2);
        let mut got: Vec<u64> = out.drain(..).map(|v| *v).collect();
        let (rest, lagged) = recv_all(&mut sub);
        got.extend(rest);
        assert_eq!((got, lagged), (vec![1, 2, 3], 0));
        producer.join().unwrap();
        drop((sub, topic));
        check_released(&originals);
    });
}

/// A subscribe racing a publish: the new subscriber may or may not get the
/// message, but a claim it never reads is never left in the ring (the
/// payload is released once the first subscriber has read it).
#[test]
fn subscribe_races_a_publish() {
    loom::model(|| {
        let originals = payloads(1);
        let topic = topic(2, Overflow::Reject);
        let mut first = topic.subscribe().unwrap();
        let publisher = topic.publisher();
        let sent = Arc::clone(&originals[0]);
        let producer = thread::spawn(move || publisher.publish(sent).unwrap());
        let mut late = topic.subscribe().unwrap();
        producer.join().unwrap();
        assert_eq!(*first.try_recv().unwrap(), 1);
        drop(first);
        let late_got = late.try_recv();
        assert!(matches!(late_got, Ok(_) | Err(TryRecvError::Closed)));
        drop(late_got);
        assert_eq!(
            Arc::strong_count(&originals[0]),
            1,
            "stale claim kept the payload"
        );
        drop((late, topic));
        check_released(&originals);
    });
}

/// A batch races the last subscriber leaving: every message is either
/// published (and released by the leaving subscriber) or handed back;
/// none is lost between the reservation and the mask.
#[test]
fn a_batch_racing_the_last_unsubscribe_loses_nothing() {
    loom::model(|| {
        let originals = payloads(2);
        let topic = topic(4, Overflow::Reject);
        let sub = topic.subscribe().unwrap();
        let publisher = topic.publisher();
        let leaver = thread::spawn(move || drop(sub));
        let (published, handed_back) = match publisher.publish_batch(originals.iter().cloned()) {
            Ok(n) => (n, Vec::new()),
            Err(PublishError::Batch {
                published,
                rejected,
                ..
            }) => (published, rejected),
            Err(e) => panic!("unexpected {e}"),
        };
        leaver.join().unwrap();
        assert_eq!(
            published + handed_back.len(),
            2,
            "every message is published or handed back"
        );
        drop(handed_back);
        drop(publisher);
        drop(topic);
        check_released(&originals);
    });
}

/// Publish across a wrap (capacity 2, three messages) under `Lag` while two
/// subscribers each read twice; then each reads the rest. Each gets its
/// messages in order and counts the others as lag, exactly.
#[test]
fn lag_wrap_with_two_subscribers() {
    loom::model(|| {
        let originals = payloads(3);
        let topic = topic(2, Overflow::Lag);
        let mut a = topic.subscribe().unwrap();
        let mut b = topic.subscribe().unwrap();
        let publisher = topic.publisher();
        let sent = originals.clone();
        let producer = thread::spawn(move || {
            for p in sent {
                publisher.publish(p).expect("two subscribers");
            }
        });
        let reader = thread::spawn(move || {
            let (mut got, mut lagged) = (Vec::new(), 0);
            try_take(&mut b, &mut got, &mut lagged);
            try_take(&mut b, &mut got, &mut lagged);
            (b, got, lagged)
        });
        let (mut got_a, mut lagged_a) = (Vec::new(), 0);
        try_take(&mut a, &mut got_a, &mut lagged_a);
        try_take(&mut a, &mut got_a, &mut lagged_a);
        producer.join().unwrap();
        let (mut b, mut got_b, mut lagged_b) = reader.join().unwrap();
        finish_lag(&mut a, &mut got_a, &mut lagged_a, 3);
        finish_lag(&mut b, &mut got_b, &mut lagged_b, 3);
        drop((a, b, topic));
        check_released(&originals);
    });
}

/// Two `Lag` readers (one cloning, one moving the payload out) race a
/// publish that overwrites their slot (capacity 1).
#[test]
fn lag_readers_race_an_overwrite() {
    loom::model(|| {
        let originals = payloads(2);
        let topic = topic(1, Overflow::Lag);
        let mut a = topic.subscribe().unwrap();
        let mut b = topic.subscribe().unwrap();
        let publisher = topic.publisher();
        publisher.publish(Arc::clone(&originals[0])).unwrap();
        let second = Arc::clone(&originals[1]);
        let producer = thread::spawn(move || publisher.publish(second).unwrap());
        let reader = thread::spawn(move || {
            let (mut got, mut lagged) = (Vec::new(), 0);
            try_take(&mut b, &mut got, &mut lagged);
            (b, got, lagged)
        });
        let (mut got_a, mut lagged_a) = (Vec::new(), 0);
        try_take(&mut a, &mut got_a, &mut lagged_a);
        producer.join().unwrap();
        let (mut b, mut got_b, mut lagged_b) = reader.join().unwrap();
        finish_lag(&mut a, &mut got_a, &mut lagged_a, 2);
        finish_lag(&mut b, &mut got_b, &mut lagged_b, 2);
        drop((a, b, topic));
        check_released(&originals);
    });
}

/// Two covered `Lag` drains (two subscribers, so each read that is not the
/// last claim clones without counting itself, invariant 8) race a publish
/// that overwrites the oldest message (capacity 2). Whichever way the
/// overwrite and the covers interleave, nobody reads a payload being
/// overwritten, each payload is dropped once, and the counts are exact.
#[test]
fn lag_drains_race_an_overwrite() {
    loom::model(|| {
        let originals = payloads(3);
        let topic = topic(2, Overflow::Lag);
        let mut a = topic.subscribe().unwrap();
        let mut b = topic.subscribe().unwrap();
        let publisher = topic.publisher();
        publisher.publish(Arc::clone(&originals[0])).unwrap();
        publisher.publish(Arc::clone(&originals[1])).unwrap();
        let third = Arc::clone(&originals[2]);
        let producer = thread::spawn(move || publisher.publish(third).unwrap());
        let reader = thread::spawn(move || {
            let (mut got, mut lagged) = (Vec::new(), 0);
            drain_into(&mut b, 2, &mut got, &mut lagged);
            (b, got, lagged)
        });
        let (mut got_a, mut lagged_a) = (Vec::new(), 0);
        drain_into(&mut a, 2, &mut got_a, &mut lagged_a);
        producer.join().unwrap();
        let (mut b, mut got_b, mut lagged_b) = reader.join().unwrap();
        finish_lag(&mut a, &mut got_a, &mut lagged_a, 3);
        finish_lag(&mut b, &mut got_b, &mut lagged_b, 3);
        drop((a, b, topic));
        check_released(&originals);
    });
}

/// A batch overwrites both slots (capacity 2) while one subscriber drains
/// twice and the other has not read yet, so every read of the drains is
/// covered and not the last claim: the batch's second overwrite waits on a
/// cover that starts before the message it overwrites, or the drain sees
/// the writing stamp, across two consecutive covers of the same subscriber.
#[test]
fn a_batch_overwrites_ahead_of_two_covered_drains() {
    loom::model(|| {
        let originals = payloads(4);
        let topic = topic(2, Overflow::Lag);
        let mut a = topic.subscribe().unwrap();
        let mut b = topic.subscribe().unwrap();
        let publisher = topic.publisher();
        publisher.publish(Arc::clone(&originals[0])).unwrap();
        publisher.publish(Arc::clone(&originals[1])).unwrap();
        let batch = vec![Arc::clone(&originals[2]), Arc::clone(&originals[3])];
        let producer = thread::spawn(move || {
            publisher.publish_batch(batch).unwrap();
        });
        let (mut got_b, mut lagged_b) = (Vec::new(), 0);
        drain_into(&mut b, 2, &mut got_b, &mut lagged_b);
        drain_into(&mut b, 2, &mut got_b, &mut lagged_b);
        producer.join().unwrap();
        let (mut got_a, mut lagged_a) = (Vec::new(), 0);
        finish_lag(&mut a, &mut got_a, &mut lagged_a, 4);
        finish_lag(&mut b, &mut got_b, &mut lagged_b, 4);
        drop((a, b, topic));
        check_released(&originals);
    });
}

/// A covered drain races an overwrite and the other subscriber's departure
/// (whose claims are counted ones, `unsubscribe`): the drain's reads turn
/// into last claims as the other bit goes, and every payload is dropped
/// exactly once.
#[test]
fn a_covered_drain_races_an_unsubscribe() {
    loom::model(|| {
        let originals = payloads(3);
        let topic = topic(2, Overflow::Lag);
        let a = topic.subscribe().unwrap();
        let mut b = topic.subscribe().unwrap();
        let publisher = topic.publisher();
        publisher.publish(Arc::clone(&originals[0])).unwrap();
        publisher.publish(Arc::clone(&originals[1])).unwrap();
        let third = Arc::clone(&originals[2]);
        let producer = thread::spawn(move || publisher.publish(third).unwrap());
        let leaver = thread::spawn(move || drop(a));
        let (mut got, mut lagged) = (Vec::new(), 0);
        drain_into(&mut b, 2, &mut got, &mut lagged);
        producer.join().unwrap();
        leaver.join().unwrap();
        finish_lag(&mut b, &mut got, &mut lagged, 3);
        drop((b, topic));
        check_released(&originals);
    });
}

/// `Lag` counts: a subscriber reading twice while three publishes go into
/// one slot reports exactly what it missed, and never misses the newest.
#[test]
fn lag_counts_are_exact() {
    loom::model(|| {
        let originals = payloads(3);
        let topic = topic(1, Overflow::Lag);
        let mut sub = topic.subscribe().unwrap();
        let publisher = topic.publisher();
        let sent = originals.clone();
        let producer = thread::spawn(move || {
            for p in sent {
                publisher.publish(p).unwrap();
            }
        });
        let (mut got, mut lagged) = (Vec::new(), 0);
        try_take(&mut sub, &mut got, &mut lagged);
        try_take(&mut sub, &mut got, &mut lagged);
        producer.join().unwrap();
        finish_lag(&mut sub, &mut got, &mut lagged, 3);
        drop((sub, topic));
        check_released(&originals);
    });
}

/// A subscriber dropped mid-stream releases its claims while the other
/// reads and a producer publishes; the other one still gets everything, and
/// no payload is leaked or dropped twice.
#[test]
fn subscriber_dropped_mid_stream() {
    loom::model(|| {
        let originals = payloads(2);
        let topic = topic(2, Overflow::Reject);
        let mut stays = topic.subscribe().unwrap();
        let mut leaves = topic.subscribe().unwrap();
        let publisher = topic.publisher();
        publisher.publish(Arc::clone(&originals[0])).unwrap();
        let second = Arc::clone(&originals[1]);
        let producer = thread::spawn(move || publisher.publish(second).expect("capacity 2"));
        let leaver = thread::spawn(move || {
            let _ = leaves.try_recv();
            drop(leaves);
        });
        let (mut got, mut lagged) = (Vec::new(), 0);
        try_take(&mut stays, &mut got, &mut lagged);
        producer.join().unwrap();
        leaver.join().unwrap();
        let (rest, more) = recv_all(&mut stays);
        got.extend(rest);
        assert_eq!((got, lagged + more), (vec![1, 2], 0));
        drop((stays, topic));
        check_released(&originals);
    });
}

/// The same under `Lag` with one slot: the departing subscriber's release
/// races an overwrite of the slot it still has a claim on.
#[test]
fn lag_subscriber_dropped_mid_stream() {
    loom::model(|| {
        let originals = payloads(2);
        let topic = topic(1, Overflow::Lag);
        let mut stays = topic.subscribe().unwrap();
        let mut leaves = topic.subscribe().unwrap();
        let publisher = topic.publisher();
        publisher.publish(Arc::clone(&originals[0])).unwrap();
        let second = Arc::clone(&originals[1]);
        let producer = thread::spawn(move || publisher.publish(second).unwrap());
        let leaver = thread::spawn(move || {
            let _ = leaves.try_recv();
            drop(leaves);
        });
        let (mut got, mut lagged) = (Vec::new(), 0);
        try_take(&mut stays, &mut got, &mut lagged);
        producer.join().unwrap();
        leaver.join().unwrap();
        finish_lag(&mut stays, &mut got, &mut lagged, 2);
        drop((stays, topic));
        check_released(&originals);
    });
}
