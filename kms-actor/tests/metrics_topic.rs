//! Two actors in one process record their metrics apart: every `kms_*`
//! metric carries the actor's request topic as `topic`; and every verify
//! request is counted under exactly one dispatch path
//! (`kms_dispatch_items_total{reason}`); a failing origin's requests are
//! counted set apart (`kms_verify_set_apart_total`) and its record tracked
//! (`kms_origins_tracked`). Its own test binary: it installs a
//! global debugging recorder (the actor looks up error outcomes when they
//! happen, outside any local recorder).

use std::collections::HashMap;

use kms_actor::{KmsActor, KmsConfig, Origin};
use kms_bus::Bus;
use kms_core::{Keystore, KmsError};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_actors_in_one_process_record_apart() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder in this binary");
    let bus = Bus::new();
    let spawn = |topic: &str| {
        KmsActor::spawn(
            KmsConfig::default()
                .with_request_topic(topic.to_owned())
                .with_threads(1),
            Keystore::new(),
            &bus,
        )
        .expect("spawn")
    };
    let (a, b) = (spawn("metrics.a"), spawn("metrics.b"));
    // Every request to the pool: no caller path, no combining, no inline.
    let pooled = KmsActor::spawn(
        KmsConfig::default()
            .with_request_topic("metrics.pool".to_owned())
            .with_threads(1)
            .with_verify_on_caller_when_idle(false)
            .with_combine_max(0)
            .with_inline_when_idle(false),
        Keystore::new(),
        &bus,
    )
    .expect("spawn");
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..POOLED {
        let client = pooled.client();
        calls.spawn(async move {
            client
                .verify_with_public_key([0; 32], &b"m"[..], [0; 64])
                .await
        });
    }
    while let Some(answer) = calls.join_next().await {
        assert!(matches!(
            answer.expect("joined"),
            Err(KmsError::InvalidSignature(_))
        ));
    }
    // A forger's origin on the pooled actor: its first forgery goes in a
    // batch (no record yet), the next two are set apart.
    let forger = Origin::new("forger");
    for _ in 0..FORGED {
        assert!(matches!(
            pooled
                .client()
                .for_origin(forger)
                .verify_with_public_key([0; 32], &b"m"[..], [0; 64])
                .await,
            Err(KmsError::InvalidSignature(_))
        ));
    }
    for _ in 0..3 {
        assert!(matches!(
            a.client()
                .verify_with_public_key([0; 32], &b"m"[..], [0; 64])
                .await,
            Err(KmsError::InvalidSignature(_))
        ));
    }
    let unknown = "kms:acme:x:ed25519:5b769b61-0f38-4885-a628-8294ae7737e8:v1"
        .parse()
        .expect("key id");
    assert!(matches!(
        b.client().attest(&unknown).await,
        Err(KmsError::UnknownKey { .. })
    ));
    a.shutdown().await;
    b.shutdown().await;
    pooled.shutdown().await;
    // One snapshot: taking one resets the debugging recorder's counters.
    let snapshot = snapshotter.snapshot().into_vec();
    // [topic, op, outcome] -> count, for kms_ops_total.
    let counts = counters(
        &snapshot,
        kms_actor::metrics::OPS_TOTAL,
        &["topic", "op", "outcome"],
    );
    let expected: HashMap<Vec<String>, u64> = [
        (["metrics.a", "verify", "invalid_signature"], 3),
        (["metrics.b", "attest", "unknown_key"], 1),
    ]
    .into_iter()
    .map(|(labels, n)| (labels.map(str::to_owned).to_vec(), n))
    .collect();
    let counts: HashMap<_, _> = counts
        .into_iter()
        .filter(|(labels, _)| labels[0] != "metrics.pool")
        .collect();
    assert_eq!(counts, expected);

    // [topic, reason] -> requests, for kms_dispatch_items_total.
    let by_reason = ["topic", "reason"];
    let items = counters(
        &snapshot,
        kms_actor::metrics::DISPATCH_ITEMS_TOTAL,
        &by_reason,
    );
    let batches = counters(&snapshot, kms_actor::metrics::DISPATCH_TOTAL, &by_reason);
    // Three verifies one after another on a quiet node: the caller path,
    // one request each.
    let of = |counts: &HashMap<Vec<String>, u64>, topic: &str, reason: &str| {
        counts
            .get(&vec![topic.to_owned(), reason.to_owned()])
            .copied()
            .unwrap_or(0)
    };
    assert_eq!(of(&items, "metrics.a", "caller"), 3, "{items:?}");
    assert_eq!(of(&batches, "metrics.a", "caller"), 3);
    let total = |topic: &str| -> u64 {
        items
            .iter()
            .filter(|(labels, _)| labels[0] == topic)
            .map(|(_, n)| n)
            .sum()
    };
    assert_eq!(total("metrics.a"), 3, "{items:?}");
    assert_eq!(total("metrics.b"), 0, "no verify on b");
    // Through the pool: every request under one pool path, in batches no
    // more numerous than the requests.
    assert_eq!(total("metrics.pool"), POOLED + FORGED, "{items:?}");
    for reason in ["caller", "combined", "inline"] {
        assert_eq!(of(&items, "metrics.pool", reason), 0, "{reason}: {items:?}");
    }
    let pool_batches: u64 = batches
        .iter()
        .filter(|(labels, _)| labels[0] == "metrics.pool")
        .map(|(_, n)| n)
        .sum();
    assert!((1..=POOLED + FORGED).contains(&pool_batches), "{batches:?}");

    // The forger: one origin tracked, its last two requests set apart.
    let apart = counters(
        &snapshot,
        kms_actor::metrics::VERIFY_SET_APART_TOTAL,
        &["topic"],
    );
    let expected: HashMap<Vec<String>, u64> =
        [(vec!["metrics.pool".to_owned()], FORGED - 1)].into();
    assert_eq!(apart, expected);
    let tracked: Vec<f64> = snapshot
        .iter()
        .filter(|(key, ..)| key.key().name() == kms_actor::metrics::ORIGINS_TRACKED)
        .filter(|(key, ..)| key.key().labels().any(|l| l.value() == "metrics.pool"))
        .filter_map(|(.., value)| match value {
            DebugValue::Gauge(g) => Some(g.into_inner()),
            _ => None,
        })
        .collect();
    assert_eq!(tracked, [1.0]);
}

/// Forgeries from one origin sent one after another to the pooled actor.
const FORGED: u64 = 3;

/// One metric of a debugging recorder's snapshot.
type Entry = (
    metrics_util::CompositeKey,
    Option<metrics::Unit>,
    Option<metrics::SharedString>,
    DebugValue,
);

/// Verify requests sent at once to the actor that batches them all.
const POOLED: u64 = 64;

/// The non-zero counts of the counter `name`, by the values of its
/// `labels`, in that order (an absent label reads as empty).
fn counters(snapshot: &[Entry], name: &str, labels: &[&str]) -> HashMap<Vec<String>, u64> {
    snapshot
        .iter()
        .filter_map(|(key, _, _, value)| {
            let key = key.key();
            if key.name() != name {
                return None;
            }
            let label = |name: &&str| {
                key.labels()
                    .find(|l| l.key() == *name)
                    .map(|l| l.value().to_owned())
                    .unwrap_or_default()
            };
            match value {
                DebugValue::Counter(n) if *n > 0 => Some((labels.iter().map(label).collect(), *n)),
                _ => None,
            }
        })
        .collect()
}
