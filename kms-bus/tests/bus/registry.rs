//! `Bus::topic`: naming, typing and configuration rules.

use kms_bus::{Backend, Bus, BusError, Overflow, TopicConfig};

/// A Classic config with the given capacity and overflow policy.
fn config(capacity: usize, overflow: Overflow) -> TopicConfig {
    TopicConfig {
        capacity,
        overflow,
        ..TopicConfig::default()
    }
}

#[test]
fn type_mismatch_on_a_name_is_an_error() {
    let bus = Bus::new();
    bus.topic::<u32>("a", TopicConfig::default()).unwrap();
    let err = bus
        .topic::<String>("a", TopicConfig::default())
        .unwrap_err();
    match &err {
        BusError::TypeMismatch {
            name,
            existing,
            requested,
        } => {
            assert_eq!(name, "a");
            assert_eq!(*existing, "u32");
            assert!(requested.contains("String"), "{requested}");
        }
        other => panic!("expected TypeMismatch, got {other:?}"),
    }
    assert_eq!(err.code(), "bus.type_mismatch");
    assert!(!err.is_retryable());
    // The original topic is untouched.
    assert!(bus.topic::<u32>("a", TopicConfig::default()).is_ok());
}

#[test]
fn same_name_same_type_returns_the_shared_topic() {
    let bus = Bus::new();
    let clone = bus.clone();
    let a = bus.topic::<u64>("shared", TopicConfig::default()).unwrap();
    let b = clone
        .topic::<u64>("shared", TopicConfig::default())
        .unwrap();
    assert_eq!(bus.topic_count(), 1);

    let mut sub = a.subscribe().unwrap();
    assert_eq!(b.subscriber_count(), 1);
    let publisher = b.publisher();
    assert_eq!(a.publisher_count(), 1);
    publisher.publish(42).unwrap();
    assert_eq!(sub.try_recv().unwrap(), 42);
}

#[test]
fn different_names_are_different_topics() {
    let bus = Bus::new();
    let a = bus.topic::<u64>("a", TopicConfig::default()).unwrap();
    let b = bus.topic::<u64>("b", TopicConfig::default()).unwrap();
    let _sub = a.subscribe().unwrap();
    assert_eq!(b.subscriber_count(), 0);
    assert!(matches!(
        b.publisher().publish(1),
        Err(kms_bus::PublishError::NoSubscribers(1))
    ));
}

#[test]
fn config_mismatch_is_an_error() {
    let bus = Bus::new();
    bus.topic::<u32>("c", config(8, Overflow::Lag)).unwrap();
    for other in [config(16, Overflow::Lag), config(8, Overflow::Reject)] {
        let err = bus.topic::<u32>("c", other).unwrap_err();
        assert_eq!(
            err,
            BusError::ConfigMismatch {
                name: "c".to_owned()
            }
        );
        assert_eq!(err.code(), "bus.config_mismatch");
    }
    let topic = bus.topic::<u32>("c", config(8, Overflow::Lag)).unwrap();
    assert_eq!(topic.config(), config(8, Overflow::Lag));
    assert_eq!(topic.name(), "c");
}

#[test]
fn capacity_zero_and_too_large_are_invalid() {
    let bus = Bus::new();
    for capacity in [0, TopicConfig::MAX_CAPACITY + 1, usize::MAX] {
        let err = bus
            .topic::<u32>("z", config(capacity, Overflow::Lag))
            .unwrap_err();
        assert!(
            matches!(err, BusError::InvalidConfig { .. }),
            "capacity {capacity}: {err:?}"
        );
        assert_eq!(err.code(), "bus.invalid_config");
    }
    // Nothing was registered by the failed attempts.
    assert_eq!(bus.topic_count(), 0);
    // The bounds themselves are accepted (checked without allocating a
    // 2^24-slot ring).
    assert!(config(TopicConfig::MAX_CAPACITY, Overflow::Lag)
        .validate()
        .is_ok());
    assert!(bus.topic::<u32>("z", config(1, Overflow::Lag)).is_ok());
}

#[test]
fn default_config_is_classic_lag_1024() {
    let config = TopicConfig::default();
    assert_eq!(config.capacity, 1024);
    assert_eq!(config.backend, Backend::Classic);
    assert_eq!(config.overflow, Overflow::Lag);
}

#[test]
fn a_soa_topic_refuses_a_subscriber_past_the_limit_until_one_leaves() {
    let topic = Bus::new()
        .topic::<u8>(
            "crowded",
            TopicConfig {
                backend: Backend::Soa,
                ..config(8, Overflow::Reject)
            },
        )
        .expect("topic");
    let mut subscribers: Vec<_> = (0..kms_bus::SOA_MAX_SUBSCRIBERS)
        .map(|_| topic.subscribe().expect("within the limit"))
        .collect();
    assert_eq!(kms_bus::SOA_MAX_SUBSCRIBERS, 56);
    match topic.subscribe() {
        Err(e @ BusError::TooManySubscribers { limit: 56, .. }) => {
            assert!(e.is_retryable());
            assert_eq!(e.code(), "bus.too_many_subscribers");
        }
        other => panic!("expected TooManySubscribers, got {:?}", other.map(|_| ())),
    }
    // Every member gets a message published now; one leaving frees a bit.
    topic.publisher().publish(7).expect("publish");
    subscribers.pop();
    let mut newcomer = topic.subscribe().expect("room again");
    topic.publisher().publish(8).expect("publish");
    assert_eq!(
        newcomer.try_recv(),
        Ok(8),
        "the newcomer starts after it joined"
    );
    for s in &mut subscribers {
        assert_eq!(s.try_recv(), Ok(7));
        assert_eq!(s.try_recv(), Ok(8));
    }
    let classic = Bus::new()
        .topic::<u8>("roomy", config(8, Overflow::Reject))
        .expect("topic");
    let many: Vec<_> = (0..100)
        .map(|_| classic.subscribe().expect("no limit"))
        .collect();
    assert_eq!(many.len(), 100);
}
