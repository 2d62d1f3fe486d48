//! Overflow policies (Lag, Reject) and batched publish.

use std::sync::Arc;

use kms_bus::{Overflow, PublishError, RejectCause, TryRecvError};

#[test]
fn lag_reports_the_exact_count_once_then_continues_from_the_oldest() {
    let topic = super::common::topic::<u32>(4, Overflow::Lag);
    let mut sub = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    for i in 0..11 {
        publisher.publish(i).unwrap();
    }
    // 11 published into 4 slots: 0..=6 were overwritten, 7..=10 remain.
    assert_eq!(sub.try_recv(), Err(TryRecvError::Lagged(7)));
    assert_eq!(sub.try_recv(), Ok(7));
    assert_eq!(sub.try_recv(), Ok(8));
    assert_eq!(sub.try_recv(), Ok(9));
    assert_eq!(sub.try_recv(), Ok(10));
    assert_eq!(sub.try_recv(), Err(TryRecvError::Empty));
}

#[test]
fn lag_after_partial_read() {
    let topic = super::common::topic::<u32>(3, Overflow::Lag);
    let mut sub = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    for i in 0..3 {
        publisher.publish(i).unwrap();
    }
    assert_eq!(sub.try_recv(), Ok(0));
    // Ring holds 1, 2; publishing 3, 4 overwrites 1; 5 overwrites 2.
    for i in 3..6 {
        publisher.publish(i).unwrap();
    }
    assert_eq!(sub.try_recv(), Err(TryRecvError::Lagged(2)));
    assert_eq!(sub.try_recv(), Ok(3));
}

#[test]
fn lag_affects_only_the_slow_subscriber() {
    let topic = super::common::topic::<u32>(2, Overflow::Lag);
    let mut fast = topic.subscribe().unwrap();
    let mut slow = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    for i in 0..6 {
        publisher.publish(i).unwrap();
        assert_eq!(fast.try_recv(), Ok(i));
    }
    assert_eq!(slow.try_recv(), Err(TryRecvError::Lagged(4)));
    assert_eq!(slow.try_recv(), Ok(4));
    assert_eq!(slow.try_recv(), Ok(5));
}

#[test]
fn lag_never_refuses_a_publish() {
    let topic = super::common::topic::<u32>(1, Overflow::Lag);
    let _sub = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    for i in 0..100 {
        publisher.publish(i).unwrap();
    }
}

#[test]
fn reject_returns_full_with_the_same_message() {
    let topic = super::common::topic::<Arc<str>>(2, Overflow::Reject);
    let mut sub = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    publisher.publish("a".into()).unwrap();
    publisher.publish("b".into()).unwrap();
    let third: Arc<str> = "c".into();
    let err = publisher.publish(Arc::clone(&third)).unwrap_err();
    assert_eq!(err.code(), "bus.full");
    assert!(err.is_retryable());
    match err {
        PublishError::Full(back) => assert!(Arc::ptr_eq(&back, &third)),
        other => panic!("expected Full, got {other:?}"),
    }
    // The refused message did not disturb the ring, and reading makes room.
    assert_eq!(&*sub.try_recv().unwrap(), "a");
    publisher.publish(third).unwrap();
    assert_eq!(&*sub.try_recv().unwrap(), "b");
    assert_eq!(&*sub.try_recv().unwrap(), "c");
}

#[test]
fn reject_is_full_until_the_slowest_subscriber_reads() {
    let topic = super::common::topic::<u32>(1, Overflow::Reject);
    let mut a = topic.subscribe().unwrap();
    let mut b = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    publisher.publish(1).unwrap();
    assert_eq!(a.try_recv(), Ok(1));
    assert!(matches!(publisher.publish(2), Err(PublishError::Full(2))));
    assert_eq!(b.try_recv(), Ok(1));
    publisher.publish(2).unwrap();
}

#[test]
fn batch_returns_the_count_and_delivers_in_order() {
    let topic = super::common::topic::<u32>(8, Overflow::Reject);
    let mut sub = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    assert_eq!(publisher.publish_batch(0..5), Ok(5));
    assert_eq!(publisher.publish_batch(Vec::new()), Ok(0));
    let mut out = Vec::new();
    assert_eq!(sub.drain(&mut out, 100), Ok(5));
    assert_eq!(out, [0, 1, 2, 3, 4]);
}

#[test]
fn batch_partial_rejection_hands_back_the_rest_in_order() {
    let topic = super::common::topic::<u32>(4, Overflow::Reject);
    let mut sub = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    publisher.publish(100).unwrap();
    // Three slots left.
    let err = publisher.publish_batch(0..7).unwrap_err();
    assert_eq!(err.published(), 3);
    assert_eq!(err.cause(), RejectCause::Full);
    assert_eq!(err.code(), "bus.full");
    assert_eq!(err.rejected(), [3, 4, 5, 6]);
    assert_eq!(err.into_rejected(), vec![3, 4, 5, 6]);

    let mut out = Vec::new();
    assert_eq!(sub.drain(&mut out, 100), Ok(4));
    assert_eq!(out, [100, 0, 1, 2]);
}

#[test]
fn batch_into_a_full_ring_publishes_none() {
    let topic = super::common::topic::<u32>(1, Overflow::Reject);
    let _sub = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    publisher.publish(0).unwrap();
    match publisher.publish_batch([1, 2]) {
        Err(PublishError::Batch {
            published: 0,
            rejected,
            cause: RejectCause::Full,
        }) => assert_eq!(rejected, [1, 2]),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn batch_without_subscribers_hands_everything_back() {
    let topic = super::common::topic::<u32>(8, Overflow::Lag);
    let publisher = topic.publisher();
    let err = publisher.publish_batch([1, 2, 3]).unwrap_err();
    assert_eq!(err.cause(), RejectCause::NoSubscribers);
    assert_eq!(err.code(), "bus.no_subscribers");
    assert_eq!(err.published(), 0);
    assert_eq!(err.into_rejected(), [1, 2, 3]);
}

#[test]
fn batch_on_a_lag_topic_overwrites_and_reports_the_lag() {
    let topic = super::common::topic::<u32>(3, Overflow::Lag);
    let mut sub = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    assert_eq!(publisher.publish_batch(0..10), Ok(10));
    assert_eq!(sub.try_recv(), Err(TryRecvError::Lagged(7)));
    let mut out = Vec::new();
    assert_eq!(sub.drain(&mut out, 10), Ok(3));
    assert_eq!(out, [7, 8, 9]);
}
