//! The bus's counters (`kms_bus_published_total`, `kms_bus_rejected_total`,
//! `kms_bus_lagged_total`), read back through a debugging recorder.
//! `kms_bus_published_total` is the ring's sequence count, pushed every 64
//! publishes, after each batch, and when a subscriber parks; the others
//! count where their event happens.

use std::collections::HashMap;

use kms_bus::{
    Backend, Bus, Overflow, PublishError, Topic, TopicConfig, LAGGED_TOTAL, PUBLISHED_TOTAL,
    REJECTED_TOTAL,
};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

/// The counters of `topic` now, by name. A debugging snapshot resets every
/// counter to 0: an incremented counter then reads as the change since the
/// last snapshot; one set with `absolute` reads as its total again after
/// its next push.
fn counters(snapshotter: &Snapshotter, topic: &str) -> HashMap<String, u64> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| {
            let key = key.key();
            let ours = key
                .labels()
                .any(|l| l.key() == "topic" && l.value() == topic);
            match value {
                DebugValue::Counter(n) if ours => Some((key.name().to_owned(), n)),
                _ => None,
            }
        })
        .collect()
}

fn topic(
    recorder: &DebuggingRecorder,
    name: &str,
    backend: Backend,
    overflow: Overflow,
) -> Topic<u64> {
    metrics::with_local_recorder(recorder, || {
        Bus::new()
            .topic(
                name,
                TopicConfig {
                    capacity: 8,
                    backend,
                    overflow,
                },
            )
            .expect("topic")
    })
}

#[test]
fn published_rejected_and_lagged_are_counted_on_both_backends() {
    for backend in [Backend::Classic, Backend::Soa] {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let name = format!("{backend:?}");

        let reject = topic(&recorder, &name, backend, Overflow::Reject);
        let mut sub = reject.subscribe().expect("subscribe");
        let publisher = reject.publisher();
        for i in 0..8 {
            publisher.publish(i).expect("room");
        }
        assert!(matches!(publisher.publish(8), Err(PublishError::Full(8))));
        assert!(publisher.publish_batch([9, 10]).is_err());
        let now = counters(&snapshotter, &name);
        assert_eq!(now[REJECTED_TOTAL], 3);
        // Seq 0 was pushed on its own; the rest catch up at the next batch
        // or park.
        assert_eq!(now[PUBLISHED_TOTAL], 1);
        for _ in 0..8 {
            sub.try_recv().expect("message");
        }
        assert_eq!(publisher.publish_batch([11, 12]), Ok(2));
        assert_eq!(
            counters(&snapshotter, &name)[PUBLISHED_TOTAL],
            10,
            "exact after a batch"
        );
        drop((sub, publisher, reject));

        let lag_name = format!("{name}.lag");
        let lag = topic(&recorder, &lag_name, backend, Overflow::Lag);
        let mut sub = lag.subscribe().expect("subscribe");
        let publisher = lag.publisher();
        for i in 0..100 {
            publisher.publish(i).expect("lag never refuses");
        }
        assert!(sub.try_recv().is_err(), "lagged");
        let now = counters(&snapshotter, &lag_name);
        assert_eq!(
            now[PUBLISHED_TOTAL], 65,
            "pushed at every 64th sequence number"
        );
        assert_eq!(now[LAGGED_TOTAL], 92);
        // A subscriber that catches up and parks brings the count up to date.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let sub = runtime.block_on(async move {
            for _ in 0..8 {
                sub.recv().await.expect("message");
            }
            let mut sub = sub;
            let parked =
                tokio::time::timeout(std::time::Duration::from_millis(10), sub.recv()).await;
            assert!(parked.is_err(), "nothing more to read: it parked");
            sub
        });
        assert_eq!(
            counters(&snapshotter, &lag_name)[PUBLISHED_TOTAL],
            100,
            "exact at rest"
        );
        drop((sub, publisher, lag));
    }
}
