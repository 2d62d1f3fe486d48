//! Payloads are released as soon as no subscriber needs them.
//!
//! `Arc` payloads: `Arc::strong_count` returning to 1 proves the bus holds no
//! copy (a payload carrying a reply handle would otherwise never be dropped).

use std::sync::Arc;

use kms_bus::{Overflow, TryRecvError};

#[test]
fn dropping_a_subscriber_releases_its_unread_payloads() {
    let topic = super::common::topic::<Arc<u32>>(8, Overflow::Reject);
    let reader = topic.subscribe().unwrap();
    let quitter = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    let payloads: Vec<Arc<u32>> = (0..5).map(Arc::new).collect();
    for p in &payloads {
        publisher.publish(Arc::clone(p)).unwrap();
    }
    assert!(payloads.iter().all(|p| Arc::strong_count(p) == 2));
    drop(quitter);
    // `reader` still holds a claim on all five.
    assert!(payloads.iter().all(|p| Arc::strong_count(p) == 2));
    drop(reader);
    assert!(payloads.iter().all(|p| Arc::strong_count(p) == 1));
    assert_eq!(topic.subscriber_count(), 0);
}

#[test]
fn the_last_claim_is_released_by_whoever_holds_it() {
    let topic = super::common::topic::<Arc<u32>>(8, Overflow::Reject);
    let mut reader = topic.subscribe().unwrap();
    let quitter = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    let payloads: Vec<Arc<u32>> = (0..4).map(Arc::new).collect();
    for p in &payloads {
        publisher.publish(Arc::clone(p)).unwrap();
    }
    // The reader takes two (as clones: the quitter still has claims).
    let first = reader.try_recv().unwrap();
    let second = reader.try_recv().unwrap();
    drop((first, second));
    // Dropping the quitter releases 0 and 1 (read by the other) and its
    // claim on 2 and 3; the reader still needs 2 and 3.
    drop(quitter);
    assert_eq!(Arc::strong_count(&payloads[0]), 1);
    assert_eq!(Arc::strong_count(&payloads[1]), 1);
    assert_eq!(Arc::strong_count(&payloads[2]), 2);
    assert_eq!(Arc::strong_count(&payloads[3]), 2);
    // The reader is now the last: it receives the ring's own copy.
    let third = reader.try_recv().unwrap();
    assert!(Arc::ptr_eq(&third, &payloads[2]));
    assert_eq!(Arc::strong_count(&payloads[2]), 2); // `third` and ours
    drop(third);
    assert_eq!(Arc::strong_count(&payloads[2]), 1);
    drop(reader);
    assert!(payloads.iter().all(|p| Arc::strong_count(p) == 1));
}

#[test]
fn read_payloads_are_not_retained_by_the_ring() {
    let topic = super::common::topic::<Arc<u32>>(4, Overflow::Lag);
    let mut a = topic.subscribe().unwrap();
    let mut b = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    let payload = Arc::new(1);
    publisher.publish(Arc::clone(&payload)).unwrap();
    drop(a.try_recv().unwrap());
    assert_eq!(Arc::strong_count(&payload), 2); // ring copy, for `b`
    drop(b.try_recv().unwrap());
    assert_eq!(Arc::strong_count(&payload), 1);
    // The topic, publisher and subscribers are all still alive.
    assert_eq!(topic.subscriber_count(), 2);
}

#[test]
fn lag_overwrite_releases_the_overwritten_payload() {
    let topic = super::common::topic::<Arc<u32>>(2, Overflow::Lag);
    let mut sub = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    let payloads: Vec<Arc<u32>> = (0..5).map(Arc::new).collect();
    for p in &payloads {
        publisher.publish(Arc::clone(p)).unwrap();
    }
    // 0, 1 and 2 were overwritten; the ring keeps 3 and 4.
    let counts: Vec<usize> = payloads.iter().map(Arc::strong_count).collect();
    assert_eq!(counts, [1, 1, 1, 2, 2]);
    assert_eq!(sub.try_recv(), Err(TryRecvError::Lagged(3)));
    drop(sub);
    assert!(payloads.iter().all(|p| Arc::strong_count(p) == 1));
}

#[test]
fn dropping_a_lagged_subscriber_releases_what_remains() {
    let topic = super::common::topic::<Arc<u32>>(3, Overflow::Lag);
    let mut fast = topic.subscribe().unwrap();
    let slow = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    let payloads: Vec<Arc<u32>> = (0..10).map(Arc::new).collect();
    for p in &payloads {
        publisher.publish(Arc::clone(p)).unwrap();
        drop(fast.try_recv().unwrap());
    }
    // Only `slow` holds claims now, on the last three.
    let counts: Vec<usize> = payloads.iter().map(Arc::strong_count).collect();
    assert_eq!(counts, [1, 1, 1, 1, 1, 1, 1, 2, 2, 2]);
    drop(slow);
    assert!(payloads.iter().all(|p| Arc::strong_count(p) == 1));
}

#[test]
fn refused_and_unsubscribed_publishes_do_not_leak() {
    let topic = super::common::topic::<Arc<u32>>(1, Overflow::Reject);
    let publisher = topic.publisher();
    let payload = Arc::new(0);
    // No subscriber: handed back.
    drop(publisher.publish(Arc::clone(&payload)).unwrap_err());
    assert_eq!(Arc::strong_count(&payload), 1);
    let _sub = topic.subscribe().unwrap();
    publisher.publish(Arc::new(1)).unwrap();
    // Full: handed back.
    drop(publisher.publish(Arc::clone(&payload)).unwrap_err());
    drop(
        publisher
            .publish_batch([Arc::clone(&payload), Arc::clone(&payload)])
            .unwrap_err(),
    );
    assert_eq!(Arc::strong_count(&payload), 1);
}
