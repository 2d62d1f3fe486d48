//! `Subscriber::drain`.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use kms_bus::{Overflow, TryRecvError};

#[test]
fn drain_respects_max_and_appends() {
    let topic = super::common::topic::<u32>(16, Overflow::Lag);
    let mut sub = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    publisher.publish_batch(0..10).unwrap();

    let mut out = vec![99];
    assert_eq!(sub.drain(&mut out, 4), Ok(4));
    assert_eq!(out, [99, 0, 1, 2, 3]);
    assert_eq!(sub.drain(&mut out, 4), Ok(4));
    assert_eq!(sub.drain(&mut out, 4), Ok(2));
    assert_eq!(out, [99, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert_eq!(sub.drain(&mut out, 4), Err(TryRecvError::Empty));
    assert_eq!(out.len(), 11);
}

#[test]
fn drain_with_max_zero_reads_nothing() {
    let topic = super::common::topic::<u32>(4, Overflow::Lag);
    let mut sub = topic.subscribe().unwrap();
    topic.publisher().publish(1).unwrap();
    let mut out = Vec::new();
    assert_eq!(sub.drain(&mut out, 0), Ok(0));
    assert!(out.is_empty());
    assert_eq!(sub.try_recv(), Ok(1));
}

#[test]
fn drain_reports_lag_before_any_message_then_repositions() {
    let topic = super::common::topic::<u32>(4, Overflow::Lag);
    let mut sub = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    publisher.publish_batch(0..10).unwrap();

    let mut out = Vec::new();
    assert_eq!(sub.drain(&mut out, 100), Err(TryRecvError::Lagged(6)));
    assert!(out.is_empty());
    assert_eq!(sub.drain(&mut out, 100), Ok(4));
    assert_eq!(out, [6, 7, 8, 9]);
}

#[test]
fn drain_reports_closed_only_after_everything_is_read() {
    let topic = super::common::topic::<u32>(4, Overflow::Lag);
    let mut sub = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    publisher.publish_batch([1, 2, 3]).unwrap();
    drop(publisher);

    let mut out = Vec::new();
    assert_eq!(sub.drain(&mut out, 2), Ok(2));
    assert_eq!(sub.drain(&mut out, 2), Ok(1));
    assert_eq!(out, [1, 2, 3]);
    assert_eq!(sub.drain(&mut out, 2), Err(TryRecvError::Closed));
}

#[test]
fn drain_after_lag_in_a_mixed_sequence_keeps_counts_exact() {
    // delivered + lagged = published, whatever the read pattern.
    let topic = super::common::topic::<u32>(5, Overflow::Lag);
    let mut sub = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    let mut delivered = Vec::new();
    let mut lagged = 0u64;
    let mut published = 0u32;
    for round in 0..50u32 {
        let n = round % 9;
        publisher.publish_batch(published..published + n).unwrap();
        published += n;
        match sub.drain(&mut delivered, (round % 4 + 1) as usize) {
            Ok(_) | Err(TryRecvError::Empty) => {}
            Err(TryRecvError::Lagged(missed)) => lagged += missed,
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    loop {
        match sub.drain(&mut delivered, 3) {
            Ok(_) => {}
            Err(TryRecvError::Lagged(missed)) => lagged += missed,
            Err(TryRecvError::Empty) => break,
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    assert_eq!(delivered.len() as u64 + lagged, u64::from(published));
    assert!(
        delivered.windows(2).all(|w| w[0] < w[1]),
        "in order, no duplicates"
    );
}

/// A payload whose `Clone` panics while its shared flag is set.
#[derive(Debug)]
struct Brittle {
    id: u32,
    panic_on_clone: Arc<AtomicBool>,
}

impl Clone for Brittle {
    fn clone(&self) -> Self {
        if self.panic_on_clone.load(Ordering::SeqCst) {
            panic!("clone failed");
        }
        Self {
            id: self.id,
            panic_on_clone: Arc::clone(&self.panic_on_clone),
        }
    }
}

/// A `drain` whose first read frees a slot and whose second read panics in
/// `T::clone` still wakes the publisher waiting for that slot: the wake-up
/// is owed by the first read, whatever happens after it.
#[test]
fn a_drain_that_panics_after_freeing_a_slot_still_wakes_a_waiting_publisher() {
    let flag = Arc::new(AtomicBool::new(false));
    let brittle = |id| Brittle {
        id,
        panic_on_clone: Arc::clone(&flag),
    };
    let topic = super::common::topic::<Brittle>(2, Overflow::Wait);
    let mut a = topic.subscribe().unwrap();
    let mut b = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    publisher.publish(brittle(1)).unwrap();
    publisher.publish(brittle(2)).unwrap();
    // `b` reads message 1, so `a` is its last reader; message 2 still has
    // both, so `a`'s read of it clones.
    assert_eq!(b.try_recv().map(|m| m.id).ok(), Some(1));

    let (done, result) = mpsc::channel();
    let third = brittle(3);
    let waiting = std::thread::spawn(move || {
        let outcome = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(publisher.publish_wait(third))
            .is_ok();
        done.send(outcome).expect("test alive");
    });
    // Let the publisher find the ring full and park.
    std::thread::sleep(Duration::from_millis(50));

    flag.store(true, Ordering::SeqCst);
    let mut out = Vec::new();
    let drained = std::panic::catch_unwind(AssertUnwindSafe(|| a.drain(&mut out, 2)));
    flag.store(false, Ordering::SeqCst);
    assert!(drained.is_err(), "the clone of message 2 panicked");
    // The first read's message went to `out` before the panic.
    assert_eq!(out.iter().map(|m| m.id).collect::<Vec<_>>(), [1]);

    assert_eq!(
        result.recv_timeout(Duration::from_secs(30)),
        Ok(true),
        "the publisher waiting for the freed slot was woken and published"
    );
    waiting.join().expect("publisher thread");
    // Nothing was lost: `a` reads message 2 again, then 3.
    assert_eq!(a.try_recv().map(|m| m.id).ok(), Some(2));
    assert_eq!(a.try_recv().map(|m| m.id).ok(), Some(3));
}
