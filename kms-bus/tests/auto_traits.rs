//! Handles can cross threads and tasks: `Send + Sync` for any `T: Send`
//! (not only `T: Sync`), and the `recv` future is `Send`, so a subscriber
//! can live in a `tokio::spawn`ed task.

use std::cell::Cell;

use kms_bus::{Bus, PublishError, Publisher, RecvError, Subscriber, Topic, TopicConfig};

fn assert_send_sync<T: Send + Sync>() {}
fn assert_send<T: Send>(_: &T) {}

#[test]
fn handles_are_send_and_sync_for_send_payloads() {
    // `Cell<u32>` is `Send` but not `Sync`.
    assert_send_sync::<Bus>();
    assert_send_sync::<Topic<Cell<u32>>>();
    assert_send_sync::<Publisher<Cell<u32>>>();
    assert_send_sync::<Subscriber<Cell<u32>>>();
    assert_send(&PublishError::Full(Cell::new(0)));
    assert_send_sync::<RecvError>();
}

#[test]
fn recv_future_is_send() {
    let bus = Bus::new();
    let topic = bus
        .topic::<Cell<u32>>("cells", TopicConfig::default())
        .unwrap();
    let mut sub = topic.subscribe().unwrap();
    let fut = sub.recv();
    assert_send(&fut);
}
