//! Two actors in one process record their metrics apart: every `kms_*`
//! metric carries the actor's request topic as `topic`. Its own test
//! binary: it installs a global debugging recorder (the actor looks up
//! error outcomes when they happen, outside any local recorder).

use std::collections::HashMap;

use kms_actor::{KmsActor, KmsConfig};
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
    // (topic, op, outcome) -> count, for kms_ops_total.
    let counts: HashMap<(String, String, String), u64> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| {
            let key = key.key();
            if key.name() != kms_actor::metrics::OPS_TOTAL {
                return None;
            }
            let label = |name: &str| {
                key.labels()
                    .find(|l| l.key() == name)
                    .map(|l| l.value().to_owned())
                    .unwrap_or_default()
            };
            match value {
                DebugValue::Counter(n) if n > 0 => {
                    Some(((label("topic"), label("op"), label("outcome")), n))
                }
                _ => None,
            }
        })
        .collect();
    let expected: HashMap<(String, String, String), u64> = [
        (("metrics.a", "verify", "invalid_signature"), 3),
        (("metrics.b", "attest", "unknown_key"), 1),
    ]
    .into_iter()
    .map(|((t, o, c), n)| ((t.to_owned(), o.to_owned(), c.to_owned()), n))
    .collect();
    assert_eq!(counts, expected);
}
