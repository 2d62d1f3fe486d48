//! The coalescing policy on a core several times slower than this one: the
//! batch verifier is `verify_batch` followed by a spin up to what a slow
//! core would take (100 µs for one signature, 40 µs more for each further
//! one in the batch, about five times this project's bench machine), and
//! many clients each do 150 µs of other work (an HTTP request's parsing
//! and answer, about one and a half verifications) before every verify,
//! on a runtime of two workers, as a gateway's connections do. Under that
//! steady load the policy must still form batches: no rule of it may
//! assume how long a verification takes. `timeout` only detects hangs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kms_bus::Bus;
use kms_core::ed25519::verify_batch;
use kms_core::Keystore;

use kms_actor::test_hooks::{spawn_with_verifier, BatchVerifier};
use kms_actor::KmsConfig;

const HANG: Duration = Duration::from_secs(60);

/// One signature's verification on the slow core (µs).
const SLOW_FIRST_US: u64 = 100;
/// Each further signature of a batch on the slow core (µs).
const SLOW_MORE_US: u64 = 40;
/// A client's other work per request (µs).
const OTHER_WORK_US: u64 = 150;
/// Clients.
const CLIENTS: usize = 64;
/// Verifications in all.
const TOTAL: usize = 2000;

/// Busy-waits for `us` µs from `start` (work on the core, not a sleep:
/// the task keeps its worker, as parsing a request does).
fn spin_until(start: Instant, us: u64) {
    let until = start + Duration::from_micros(us);
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// `verify_batch`, taking as long as the slow core would.
fn slow_verifier() -> BatchVerifier {
    Arc::new(|items| {
        let start = Instant::now();
        let verdicts = verify_batch(items);
        let more = items.len().saturating_sub(1) as u64;
        spin_until(start, SLOW_FIRST_US + SLOW_MORE_US * more);
        verdicts
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_steady_load_batches_form_on_a_slow_core() {
    let ks = Keystore::new();
    let key = ks.create_ed25519("acme", "tokens").expect("create");
    let (key, signature) = ks.sign(&key, b"m").expect("sign");
    let handle = spawn_with_verifier(
        KmsConfig::default().with_threads(2),
        ks,
        &Bus::new(),
        slow_verifier(),
        None,
    )
    .expect("spawn");
    let done = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (kms, key, done) = (handle.client(), key.clone(), Arc::clone(&done));
            tokio::spawn(async move {
                while done.fetch_add(1, Ordering::Relaxed) < TOTAL {
                    spin_until(Instant::now(), OTHER_WORK_US);
                    assert_eq!(kms.verify(&key, &b"m"[..], signature).await, Ok(()));
                    // The answer written and the next request read: a trip
                    // through the runtime, which lets the worker's other
                    // clients run.
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    tokio::time::timeout(HANG, futures::future::try_join_all(clients))
        .await
        .expect("no hang")
        .expect("clients");
    let stats = handle.stats();
    let verified = stats.caller_verified + stats.combined_requests + stats.batched_requests;
    let dispatches = stats.caller_verified + stats.combined_batches + stats.batches;
    assert_eq!(verified, TOTAL as u64, "{stats:?}");
    // A policy with a quiet gap fixed for a fast core verifies every one of
    // these alone (a mean of 1: each request finds the previous one done
    // long enough ago to look quiet); one that batches under this load
    // forms batches of about five.
    assert!(
        verified >= 3 * dispatches,
        "{verified} verifications in {dispatches} dispatches: {stats:?}"
    );
    handle.shutdown().await;
}
