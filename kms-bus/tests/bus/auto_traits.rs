//! Handles can cross threads and tasks: `Send + Sync` for payloads that are
//! `Send + Sync` (the Soa backend lets several subscribers clone one payload
//! through `&T` at once, so `Bus::topic` requires `T: Sync`), and the `recv`
//! and `publish_wait` futures are `Send`, so they can live in a
//! `tokio::spawn`ed task.

use std::sync::Arc;

use kms_bus::{Bus, PublishError, Publisher, RecvError, Subscriber, Topic, TopicConfig};

fn assert_send_sync<T: Send + Sync>() {}
fn assert_send<T: Send>(_: &T) {}

#[test]
fn handles_are_send_and_sync() {
    assert_send_sync::<Bus>();
    assert_send_sync::<Topic<Arc<str>>>();
    assert_send_sync::<Publisher<Arc<str>>>();
    assert_send_sync::<Subscriber<Arc<str>>>();
    assert_send(&PublishError::Full(Arc::<str>::from("x")));
    assert_send_sync::<RecvError>();
}

#[test]
fn futures_are_send() {
    let bus = Bus::new();
    let topic = bus
        .topic::<Arc<str>>("strings", TopicConfig::default())
        .unwrap();
    let mut sub = topic.subscribe().unwrap();
    let publisher = topic.publisher();
    assert_send(&publisher.publish_wait(Arc::from("x")));
    let fut = sub.recv();
    assert_send(&fut);
}
