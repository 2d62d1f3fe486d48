//! Delivery: order, fan-out, last-reader move, no-subscriber publishes.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use super::common::Counted;
use kms_bus::{Overflow, PublishError, RejectCause, TryRecvError};

#[test]
fn publish_then_try_recv_in_order() {
    let topic = super::common::topic::<u32>(16, Overflow::Lag);
    let mut sub = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    assert_eq!(sub.try_recv(), Err(TryRecvError::Empty));
    for i in 0..10 {
        publisher.publish(i).unwrap();
    }
    let got: Vec<u32> = (0..10).map(|_| sub.try_recv().unwrap()).collect();
    assert_eq!(got, (0..10).collect::<Vec<_>>());
    assert_eq!(sub.try_recv(), Err(TryRecvError::Empty));
}

#[test]
fn ring_wraps_many_times_in_order() {
    let topic = super::common::topic::<u32>(3, Overflow::Reject);
    let mut sub = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    for i in 0..100 {
        publisher.publish(i).unwrap();
        if i % 2 == 1 {
            assert_eq!(sub.try_recv().unwrap(), i - 1);
            assert_eq!(sub.try_recv().unwrap(), i);
        }
    }
    assert_eq!(sub.try_recv(), Err(TryRecvError::Empty));
}

#[test]
fn two_subscribers_each_see_every_message() {
    let topic = super::common::topic::<u32>(8, Overflow::Reject);
    let mut a = topic.subscribe().unwrap();
    let mut b = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    for i in 0..5 {
        publisher.publish(i).unwrap();
    }
    let got_a: Vec<u32> = (0..5).map(|_| a.try_recv().unwrap()).collect();
    let got_b: Vec<u32> = (0..5).map(|_| b.try_recv().unwrap()).collect();
    assert_eq!(got_a, [0, 1, 2, 3, 4]);
    assert_eq!(got_b, [0, 1, 2, 3, 4]);
    assert_eq!(a.try_recv(), Err(TryRecvError::Empty));
    assert_eq!(b.try_recv(), Err(TryRecvError::Empty));
}

#[test]
fn new_subscriber_starts_at_the_tail() {
    let topic = super::common::topic::<u32>(8, Overflow::Lag);
    let mut early = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    publisher.publish(1).unwrap();
    let mut late = topic.subscribe().unwrap();
    assert_eq!(late.try_recv(), Err(TryRecvError::Empty));
    publisher.publish(2).unwrap();
    assert_eq!(late.try_recv(), Ok(2));
    assert_eq!(early.try_recv(), Ok(1));
    assert_eq!(early.try_recv(), Ok(2));
}

#[test]
fn one_subscriber_never_clones() {
    let clones = Arc::new(AtomicUsize::new(0));
    let topic = super::common::topic::<Counted>(4, Overflow::Lag);
    let mut sub = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    for id in 0..20 {
        publisher
            .publish(Counted {
                id,
                clones: Arc::clone(&clones),
            })
            .unwrap();
        assert_eq!(sub.try_recv().unwrap().id, id);
    }
    assert_eq!(clones.load(Ordering::SeqCst), 0);
}

#[test]
fn two_subscribers_clone_once_per_message() {
    let clones = Arc::new(AtomicUsize::new(0));
    let topic = super::common::topic::<Counted>(16, Overflow::Reject);
    let mut a = topic.subscribe().unwrap();
    let mut b = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    for id in 0..10 {
        publisher
            .publish(Counted {
                id,
                clones: Arc::clone(&clones),
            })
            .unwrap();
    }
    // Interleave the readers so that each one is sometimes first and
    // sometimes last.
    for id in 0..10 {
        if id % 2 == 0 {
            assert_eq!(a.try_recv().unwrap().id, id);
            assert_eq!(b.try_recv().unwrap().id, id);
        } else {
            assert_eq!(b.try_recv().unwrap().id, id);
            assert_eq!(a.try_recv().unwrap().id, id);
        }
    }
    assert_eq!(clones.load(Ordering::SeqCst), 10);
}

#[test]
fn publish_without_subscribers_hands_the_message_back() {
    let topic = super::common::topic::<String>(4, Overflow::Lag);
    let publisher = topic.publisher();
    let err = publisher.publish("lost?".to_owned()).unwrap_err();
    assert_eq!(err.code(), "bus.no_subscribers");
    assert!(!err.is_retryable());
    assert_eq!(err.cause(), RejectCause::NoSubscribers);
    assert!(matches!(&err, PublishError::NoSubscribers(m) if m == "lost?"));
    assert_eq!(err.into_inner().as_deref(), Some("lost?"));

    // Not stored for a later subscriber either.
    let mut sub = topic.subscribe().unwrap();
    assert_eq!(sub.try_recv(), Err(TryRecvError::Empty));

    // After the last subscriber leaves, publishing fails again.
    drop(sub);
    assert!(matches!(
        publisher.publish("again".to_owned()),
        Err(PublishError::NoSubscribers(_))
    ));
}

#[test]
fn publish_error_debug_does_not_need_t_debug() {
    struct Opaque;
    let err: PublishError<Opaque> = PublishError::Full(Opaque);
    assert_eq!(format!("{err:?}"), "Full(..)");
    assert_eq!(err.to_string(), "message not published: topic is full");
    let batch: PublishError<Opaque> = PublishError::Batch {
        published: 2,
        rejected: vec![Opaque, Opaque, Opaque],
        cause: RejectCause::Full,
    };
    let debug = format!("{batch:?}");
    assert!(debug.contains("published: 2"), "{debug}");
    assert!(debug.contains("3"), "{debug}");
    assert_eq!(batch.rejected().len(), 3);
    assert_eq!(batch.published(), 2);
    assert!(batch.is_retryable());
    let _: &dyn std::error::Error = &batch;
}

/// A payload whose `Clone` panics while `PANIC` is set.
#[derive(Debug, PartialEq)]
struct Fragile(u32);

static PANIC: AtomicBool = AtomicBool::new(false);

impl Clone for Fragile {
    fn clone(&self) -> Self {
        if PANIC.load(Ordering::SeqCst) {
            panic!("clone failed");
        }
        Fragile(self.0)
    }
}

#[test]
fn a_panicking_clone_leaves_the_topic_usable() {
    // The clone runs under the topic lock, so its panic poisons the mutex.
    // The topic must keep working and the failed read must not have moved.
    let topic = super::common::topic::<Fragile>(4, Overflow::Reject);
    let mut a = topic.subscribe().unwrap();
    let mut b = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    publisher.publish(Fragile(1)).unwrap();

    PANIC.store(true, Ordering::SeqCst);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| a.try_recv()));
    PANIC.store(false, Ordering::SeqCst);
    assert!(result.is_err());

    assert_eq!(a.try_recv(), Ok(Fragile(1)));
    assert_eq!(b.try_recv(), Ok(Fragile(1)));
    publisher.publish(Fragile(2)).unwrap();
    assert_eq!(a.try_recv(), Ok(Fragile(2)));
    assert_eq!(b.try_recv(), Ok(Fragile(2)));
}
