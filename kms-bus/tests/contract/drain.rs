//! `Subscriber::drain`.

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
