//! Closed, and waking `recv().await`.
//!
//! The `timeout`s below only turn a lost wake-up into a failure instead of a
//! hung test; no test asserts how long anything takes.

use std::time::Duration;

use kms_bus::{Overflow, RecvError, TryRecvError};
use tokio::time::timeout;

/// Generous bound for "this future must complete".
const HANG: Duration = Duration::from_secs(30);

#[test]
fn closed_after_all_publishers_drop_and_everything_is_read() {
    let topic = super::common::topic::<u32>(8, Overflow::Lag);
    let mut sub = topic.subscribe().unwrap();
    let p1 = topic.publisher();
    let p2 = p1.clone();
    assert_eq!(topic.publisher_count(), 2);
    p1.publish(1).unwrap();
    p2.publish(2).unwrap();
    drop(p1);
    assert_eq!(topic.publisher_count(), 1);
    assert_eq!(sub.try_recv(), Ok(1));
    assert_eq!(sub.try_recv(), Ok(2));
    // One publisher is still alive: empty, not closed.
    assert_eq!(sub.try_recv(), Err(TryRecvError::Empty));
    p2.publish(3).unwrap();
    drop(p2);
    assert_eq!(topic.publisher_count(), 0);
    // The remaining message comes first, then Closed, and Closed stays.
    assert_eq!(sub.try_recv(), Ok(3));
    assert_eq!(sub.try_recv(), Err(TryRecvError::Closed));
    assert_eq!(sub.try_recv(), Err(TryRecvError::Closed));
}

#[test]
fn lag_is_reported_before_closed() {
    let topic = super::common::topic::<u32>(2, Overflow::Lag);
    let mut sub = topic.subscribe().unwrap();
    topic.publisher().publish_batch(0..5).unwrap(); // publisher dropped
    assert_eq!(sub.try_recv(), Err(TryRecvError::Lagged(3)));
    assert_eq!(sub.try_recv(), Ok(3));
    assert_eq!(sub.try_recv(), Ok(4));
    assert_eq!(sub.try_recv(), Err(TryRecvError::Closed));
}

#[test]
fn a_new_publisher_reopens_the_topic() {
    let topic = super::common::topic::<u32>(4, Overflow::Lag);
    let mut sub = topic.subscribe().unwrap();
    assert_eq!(sub.try_recv(), Err(TryRecvError::Closed));
    let publisher = topic.publisher();
    assert_eq!(sub.try_recv(), Err(TryRecvError::Empty));
    publisher.publish(5).unwrap();
    assert_eq!(sub.try_recv(), Ok(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recv_wakes_on_publish_from_another_task() {
    let topic = super::common::topic::<u32>(4, Overflow::Reject);
    let mut sub = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    let producer = tokio::spawn(async move {
        let mut i = 0;
        while i < 1_000 {
            match publisher.publish(i) {
                Ok(()) => i += 1,
                Err(e) if e.is_retryable() => tokio::task::yield_now().await,
                Err(e) => panic!("unexpected {e:?}"),
            }
        }
    });
    for expected in 0..1_000 {
        let got = timeout(HANG, sub.recv()).await.expect("recv hung");
        assert_eq!(got, Ok(expected));
    }
    producer.await.unwrap();
    assert_eq!(sub.recv().await, Err(RecvError::Closed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recv_wakes_on_publish_from_a_plain_thread() {
    let topic = super::common::topic::<u64>(64, Overflow::Reject);
    let mut sub = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    let producer = std::thread::spawn(move || {
        let mut sent = 0u64;
        while sent < 10_000 {
            match publisher.publish(sent) {
                Ok(()) => sent += 1,
                Err(e) if e.is_retryable() => std::thread::yield_now(),
                Err(e) => panic!("unexpected {e:?}"),
            }
        }
        // `publisher` drops here: the receiver then sees Closed.
    });
    let mut expected = 0u64;
    loop {
        match timeout(HANG, sub.recv()).await.expect("recv hung") {
            Ok(n) => {
                assert_eq!(n, expected);
                expected += 1;
            }
            Err(RecvError::Closed) => break,
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    assert_eq!(expected, 10_000);
    producer.join().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parked_recv_wakes_when_the_last_publisher_drops() {
    let topic = super::common::topic::<u32>(4, Overflow::Lag);
    let mut sub = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    let (parked_tx, parked_rx) = tokio::sync::oneshot::channel();
    let receiver = tokio::spawn(async move {
        let _ = parked_tx.send(());
        sub.recv().await
    });
    parked_rx.await.unwrap();
    drop(publisher);
    let result = timeout(HANG, receiver).await.expect("recv hung").unwrap();
    assert_eq!(result, Err(RecvError::Closed));
}

#[tokio::test(flavor = "current_thread")]
async fn recv_is_cancel_safe() {
    let topic = super::common::topic::<u32>(8, Overflow::Lag);
    let mut sub = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    // Poll recv once on an empty topic, then drop the future.
    tokio::select! {
        biased;
        r = sub.recv() => panic!("nothing was published, got {r:?}"),
        () = std::future::ready(()) => {}
    }
    publisher.publish(1).unwrap();
    // Cancel a recv that could have completed: the message is not lost,
    // because it is taken only in the poll that returns it.
    {
        let fut = sub.recv();
        drop(fut);
    }
    assert_eq!(timeout(HANG, sub.recv()).await.unwrap(), Ok(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_parked_subscribers_all_wake() {
    let topic = super::common::topic::<u32>(4, Overflow::Lag);
    let publisher = topic.publisher();
    let mut tasks = Vec::new();
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel(8);
    for _ in 0..8 {
        let mut sub = topic.subscribe().unwrap();
        let ready_tx = ready_tx.clone();
        tasks.push(tokio::spawn(async move {
            ready_tx.send(()).await.unwrap();
            sub.recv().await
        }));
    }
    for _ in 0..8 {
        ready_rx.recv().await.unwrap();
    }
    publisher.publish(7).unwrap();
    for task in tasks {
        assert_eq!(
            timeout(HANG, task).await.expect("recv hung").unwrap(),
            Ok(7)
        );
    }
}
