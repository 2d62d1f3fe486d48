//! The actor end to end: own verdicts under concurrency, exactly one answer
//! per request under overload (`Reject`, `Lag`) and at shutdown, typed errors
//! for bad requests.
//!
//! Where a test needs requests to pile up before the actor runs, it uses a
//! current-thread runtime and `join_all` with rules C and K off
//! (`verify_on_caller_when_idle`, `combine_max`): every future then
//! publishes on its first
//! poll, before the actor task gets to run. `timeout` is used only as
//! a hang detector (a caller that never gets an answer), never to assert
//! speed.

use std::time::Duration;

use futures::future::join_all;
use kms_actor::{KmsActor, KmsConfig, KmsHandle};
use kms_bus::{Bus, Overflow};
use kms_core::ed25519::SignatureError;
use kms_core::{KeyId, Keystore, KmsError};

const HANG: Duration = Duration::from_secs(60);

/// An actor over a keystore with one key, that key's head id, and a valid
/// signature by it on `b"m"`.
fn actor_with_signature(config: KmsConfig) -> (KmsHandle, KeyId, [u8; 64]) {
    let ks = Keystore::new();
    let key = ks.create_ed25519("acme", "tokens").expect("create");
    let (signer, signature) = ks.sign(&key, b"m").expect("sign");
    let handle = KmsActor::spawn(config, ks, &Bus::new()).expect("spawn");
    (handle, signer, signature)
}

fn config(threads: usize) -> KmsConfig {
    KmsConfig::default().with_threads(threads)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_get_exactly_their_own_verdicts() {
    let bus = Bus::new();
    let handle = KmsActor::spawn(config(2), Keystore::new(), &bus).expect("spawn");
    let kms = handle.client();
    let key = kms.create_key("acme", "tokens").await.expect("create");
    let mut tasks = Vec::new();
    for client in 0..16u32 {
        let kms = kms.clone();
        let key = key.clone();
        tasks.push(tokio::spawn(async move {
            let mut checked = 0;
            for i in 0..64u32 {
                let message = format!("client {client} token {i}").into_bytes();
                let (signer, mut signature) = kms.sign(&key, message.clone()).await.expect("sign");
                let forged = (client + i) % 3 == 0;
                if forged {
                    signature[5] ^= 0x40;
                }
                let by_key = kms.verify(&signer, message.clone(), signature).await;
                let public_key: [u8; 32] = kms.attest(&signer).await.expect("attest").versions[0]
                    .public_key
                    .as_slice()
                    .try_into()
                    .expect("an Ed25519 key");
                let by_pk = kms
                    .verify_with_public_key(public_key, message, signature)
                    .await;
                for verdict in [by_key, by_pk] {
                    if forged {
                        assert!(
                            matches!(verdict, Err(KmsError::InvalidSignature(_))),
                            "forged token accepted or mis-answered: {verdict:?}"
                        );
                    } else {
                        assert_eq!(verdict, Ok(()));
                    }
                    checked += 1;
                }
            }
            checked
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += tokio::time::timeout(HANG, t)
            .await
            .expect("no hang")
            .expect("task");
    }
    assert_eq!(total, 16 * 64 * 2);
    let stats = handle.stats();
    assert!(stats.batches + stats.combined_batches > 0);
    assert_eq!(
        stats.batched_requests + stats.caller_verified + stats.combined_requests,
        16 * 64 * 2,
        "each verified once: in a batch on the pool, alone on its caller's \
         task, or in a batch on a leading caller's task"
    );
    handle.shutdown().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_burst_is_coalesced_into_batches() {
    // The caller path off: with it the first calls of the burst run on this
    // task (`faults.rs` tests that case with a quiet gap that does not depend
    // on the machine's speed).
    let (handle, signer, signature) = actor_with_signature(
        config(1)
            .with_verify_on_caller_when_idle(false)
            .with_combine_max(0),
    );
    let kms = handle.client();
    let calls = (0..512).map(|_| kms.verify(&signer, &b"m"[..], signature));
    let verdicts = tokio::time::timeout(HANG, join_all(calls))
        .await
        .expect("no hang");
    assert!(verdicts.iter().all(|v| v.is_ok()));
    let stats = handle.stats();
    assert_eq!(stats.batched_requests, 512);
    assert!(
        stats.batches <= 8,
        "512 queued requests should go out in batches of up to 512, got {stats:?}"
    );
    handle.shutdown().await;
}

/// An actor with one thread, batches of 8 and a 16-slot request topic with
/// the given overflow, and 100 verify requests published before it runs
/// (the caller path off, so that none is verified on its caller's task).
async fn flood(overflow: Overflow) -> (Vec<Result<(), KmsError>>, kms_actor::KmsStats) {
    let cfg = KmsConfig::default()
        .with_verify_on_caller_when_idle(false)
        .with_combine_max(0)
        .with_threads(1)
        .with_target_batch(8)
        .with_max_batch(8)
        .with_queue_capacity(16)
        .with_overflow(overflow);
    let (handle, signer, signature) = actor_with_signature(cfg);
    let kms = handle.client();
    let calls = (0..100).map(|_| kms.verify(&signer, &b"m"[..], signature));
    let verdicts = tokio::time::timeout(HANG, join_all(calls))
        .await
        .expect("no hang");
    let stats = handle.stats();
    handle.shutdown().await;
    (verdicts, stats)
}

#[tokio::test(flavor = "current_thread")]
async fn overload_on_a_reject_topic_is_a_retryable_overloaded() {
    let (verdicts, _) = flood(Overflow::Reject).await;
    let ok = verdicts.iter().filter(|v| v.is_ok()).count();
    let overloaded = verdicts
        .iter()
        .filter(|v| matches!(v, Err(e @ KmsError::Overloaded) if e.is_retryable()))
        .count();
    assert_eq!(ok, 16, "exactly the queue's capacity got in");
    assert_eq!(ok + overloaded, 100, "every request got exactly one answer");
}

#[tokio::test(flavor = "current_thread")]
async fn requests_lost_to_lag_are_answered_dropped() {
    let (verdicts, stats) = flood(Overflow::Lag).await;
    let ok = verdicts.iter().filter(|v| v.is_ok()).count();
    let dropped: Vec<usize> = verdicts
        .iter()
        .enumerate()
        .filter(|(_, v)| matches!(v, Err(e @ KmsError::Dropped) if e.is_retryable()))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(ok, 16, "the newest 16 survive");
    assert_eq!(
        dropped,
        (0..84).collect::<Vec<_>>(),
        "the oldest 84 were overwritten"
    );
    assert_eq!(stats.lagged_requests, 84);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_answers_every_request_in_flight() {
    let (handle, signer, signature) = actor_with_signature(config(2));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let kms = handle.client();
        let signer = signer.clone();
        tasks.push(tokio::spawn(async move {
            let (mut ok, mut shutting_down) = (0u32, 0u32);
            loop {
                let calls = (0..32).map(|_| kms.verify(&signer, &b"m"[..], signature));
                for verdict in join_all(calls).await {
                    match verdict {
                        Ok(()) => ok += 1,
                        Err(KmsError::ShuttingDown) => shutting_down += 1,
                        Err(e) => panic!("unexpected answer {e:?}"),
                    }
                }
                if shutting_down > 0 {
                    return (ok, shutting_down);
                }
                tokio::task::yield_now().await;
            }
        }));
    }
    // Let traffic build up, then shut down under it.
    while handle.stats().batched_requests < 2_000 {
        tokio::task::yield_now().await;
    }
    let kms = handle.client();
    tokio::time::timeout(HANG, handle.shutdown())
        .await
        .expect("shutdown completes");
    for t in tasks {
        let (ok, shutting_down) = tokio::time::timeout(HANG, t)
            .await
            .expect("no hang")
            .expect("task");
        assert!(ok > 0 && shutting_down > 0);
    }
    assert_eq!(
        kms.verify(&signer, &b"m"[..], signature).await,
        Err(KmsError::ShuttingDown)
    );
}

#[tokio::test(flavor = "current_thread")]
async fn queued_requests_are_answered_not_abandoned_at_shutdown() {
    // The caller path off: with it the first calls would be verified on the
    // caller's task, and this test needs every request on the topic at once.
    let (handle, signer, signature) = actor_with_signature(
        config(1)
            .with_verify_on_caller_when_idle(false)
            .with_combine_max(0),
    );
    let kms = handle.client();
    // Publish 300 requests (first poll), then shut down before the actor runs.
    let calls = join_all((0..300).map(|_| kms.verify(&signer, &b"m"[..], signature)));
    tokio::pin!(calls);
    assert!(futures::poll!(calls.as_mut()).is_pending());
    let shutdown = handle.shutdown();
    let (verdicts, ()) = tokio::time::timeout(HANG, futures::future::join(calls, shutdown))
        .await
        .expect("no hang");
    assert_eq!(verdicts.len(), 300);
    assert!(
        verdicts.iter().all(|v| v.is_ok()),
        "queued before shutdown, so answered: {:?}",
        verdicts.iter().filter(|v| v.is_err()).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "current_thread")]
async fn bad_requests_get_typed_errors() {
    let bus = Bus::new();
    let handle = KmsActor::spawn(config(1), Keystore::new(), &bus).expect("spawn");
    let kms = handle.client();
    let key = kms.create_key("acme", "tokens").await.expect("create");
    let stranger = Keystore::new()
        .create_ed25519("acme", "tokens")
        .expect("create");
    assert!(matches!(
        kms.verify(&stranger, &b"m"[..], [0; 64]).await,
        Err(KmsError::UnknownKey { .. })
    ));
    assert!(matches!(
        kms.sign(&stranger, &b"m"[..]).await,
        Err(KmsError::UnknownKey { .. })
    ));
    assert!(matches!(
        kms.create_key("a:b", "tokens").await,
        Err(KmsError::InvalidKeyId(_))
    ));
    let mut small_order_r = [0u8; 64];
    small_order_r[0] = 1; // R = identity
    let pk: [u8; 32] = kms.attest(&key).await.expect("attest").versions[0]
        .public_key
        .as_slice()
        .try_into()
        .expect("an Ed25519 key");
    assert_eq!(
        kms.verify_with_public_key(pk, &b"m"[..], small_order_r)
            .await,
        Err(KmsError::InvalidSignature(SignatureError::SmallOrder(
            kms_core::ed25519::Component::R
        )))
    );
    let v2 = kms.rotate(&key).await.expect("rotate");
    assert_eq!(v2.version(), 2);
    handle.shutdown().await;
}

#[tokio::test(flavor = "current_thread")]
async fn spawn_rejects_bad_config_and_taken_topic_names() {
    let bus = Bus::new();
    for cfg in [
        KmsConfig::default().with_threads(0),
        KmsConfig::default().with_max_batch(0),
        KmsConfig::default().with_target_batch(0),
        KmsConfig::default()
            .with_target_batch(128)
            .with_max_batch(64),
        KmsConfig::default()
            .with_max_batch(8192)
            .with_queue_capacity(8192),
        KmsConfig::default().with_max_wait(Duration::ZERO),
        KmsConfig::default().with_max_wait(Duration::from_secs(2)),
        KmsConfig::default().with_priority_capacity(0),
        KmsConfig::default().with_write_backlog(0),
        KmsConfig::default().with_write_backlog(usize::MAX),
        KmsConfig::default()
            .with_target_batch(64)
            .with_max_batch(64)
            .with_queue_capacity(32),
    ] {
        let described = format!("{cfg:?}");
        assert!(
            matches!(
                KmsActor::spawn(cfg, Keystore::new(), &bus),
                Err(KmsError::InvalidConfig { .. })
            ),
            "accepted {described}"
        );
    }
    assert_eq!(bus.topic_count(), 0, "a refused config creates no topic");
    bus.topic::<u64>("taken", kms_bus::TopicConfig::default())
        .expect("topic");
    let cfg = config(1).with_request_topic("taken".to_owned());
    assert!(matches!(
        KmsActor::spawn(cfg, Keystore::new(), &bus),
        Err(KmsError::InvalidConfig { .. })
    ));
}

#[test]
fn spawn_outside_a_runtime_is_an_error_not_a_panic() {
    let result = KmsActor::spawn(config(1), Keystore::new(), &Bus::new());
    assert!(matches!(result, Err(KmsError::Internal { .. })));
}

#[test]
fn spawn_on_a_runtime_without_timers_is_an_error_not_a_panic() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime without the time driver");
    let _inside = runtime.enter();
    match KmsActor::spawn(config(1), Keystore::new(), &Bus::new()) {
        Err(KmsError::Internal { reason }) => assert!(reason.contains("time driver")),
        Err(e) => panic!("expected Internal, got {e:?}"),
        Ok(_) => panic!("spawned on a runtime that cannot run max_wait"),
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_second_actor_on_the_same_topic_is_refused_until_the_first_is_gone() {
    let bus = Bus::new();
    let first = KmsActor::spawn(config(1), Keystore::new(), &bus).expect("spawn");
    match KmsActor::spawn(config(1), Keystore::new(), &bus) {
        Err(KmsError::InvalidConfig { reason }) => assert!(reason.contains("already served")),
        Err(e) => panic!("expected InvalidConfig, got {e:?}"),
        Ok(_) => panic!("a second actor was allowed on the same request topic"),
    }
    first.shutdown().await;
    let second = KmsActor::spawn(config(1), Keystore::new(), &bus).expect("spawn after shutdown");
    let key = second
        .client()
        .create_key("acme", "tokens")
        .await
        .expect("serves");
    assert_eq!(key.version(), 1);
    second.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_keystore_behind_the_actor_persists_create_and_rotate() {
    let dir = tempfile::tempdir().expect("temp dir");
    let master = || kms_core::seal::SealKey::from_bytes("master", 1, &[9; 32]).expect("key");
    let ks = Keystore::create(dir.path(), master()).expect("create");
    let handle = KmsActor::spawn(config(1), ks, &Bus::new()).expect("spawn");
    let kms = handle.client();
    let key = kms.create_key("acme", "tokens").await.expect("create");
    let v2 = kms.rotate(&key).await.expect("rotate");
    let (signer, signature) = kms.sign(&key, &b"m"[..]).await.expect("sign");
    assert_eq!(signer, v2);
    handle.shutdown().await;
    let reopened = Keystore::open(dir.path(), master()).expect("reopen");
    reopened.verify(&v2, b"m", &signature).expect("persisted");
    assert_eq!(reopened.attest(&key).expect("attest").versions.len(), 2);
}
