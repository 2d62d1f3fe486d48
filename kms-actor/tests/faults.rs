//! Fault-injection tests of the whole actor: the batch verifier is replaced
//! by one that blocks until the test opens a gate, or panics on cue, so a
//! busy pool, a panicking batch and a caller that leaves mid-flight happen
//! deterministically. Everything else (bus, coalescer, pool, replies) is
//! the production code. `timeout` only detects hangs.
//! The injected verifier goes in through the crate's one test hook,
//! `kms_actor::test_hooks` (feature `test-hooks`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;
use kms_bus::Bus;
use kms_core::ed25519::verify_batch;
use kms_core::{KeyId, Keystore, KmsError};

use kms_actor::test_hooks::{spawn_with_verifier, BatchVerifier, CALLER_MAX_STREAK};
use kms_actor::{KmsConfig, KmsHandle};

const HANG: Duration = Duration::from_secs(60);

/// Holds verify batches until opened.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    fn wait(&self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        while !*open {
            open = self
                .opened
                .wait(open)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn open(&self) {
        *self.open.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.opened.notify_all();
    }
}

/// What the injected verifier saw.
#[derive(Default)]
struct Seen {
    batches: AtomicUsize,
    items: AtomicUsize,
    /// Calls made on a pool thread (named `kms-verify-<i>`).
    on_pool: AtomicUsize,
}

/// A verifier that waits for `gate`, panics on a message `b"boom"`, and
/// otherwise is `verify_batch`.
fn verifier(gate: Arc<Gate>, seen: Arc<Seen>) -> BatchVerifier {
    Arc::new(move |items| {
        seen.batches.fetch_add(1, Ordering::SeqCst);
        seen.items.fetch_add(items.len(), Ordering::SeqCst);
        if std::thread::current()
            .name()
            .is_some_and(|n| n.starts_with("kms-verify-"))
        {
            seen.on_pool.fetch_add(1, Ordering::SeqCst);
        }
        gate.wait();
        assert!(
            items.iter().all(|i| i.message() != b"boom"),
            "injected fault"
        );
        verify_batch(items)
    })
}

struct Fixture {
    handle: KmsHandle,
    key: KeyId,
    signature: [u8; 64],
    gate: Arc<Gate>,
    seen: Arc<Seen>,
}

impl Fixture {
    /// A client task verifying the valid signature on `b"m"`.
    fn spawn_verify(&self) -> tokio::task::JoinHandle<Result<(), KmsError>> {
        let (kms, key, signature) = (self.handle.client(), self.key.clone(), self.signature);
        tokio::spawn(async move { kms.verify(&key, &b"m"[..], signature).await })
    }

    /// `n` verify calls like [`Fixture::spawn_verify`]'s, each polled once
    /// on this task, so every request is on the topic when this returns.
    /// (A spawned call may first run after a later `shutdown` has begun,
    /// and is then rightly refused `ShuttingDown`.) Await the result for
    /// their verdicts, in order. The gate must be closed, so that they are
    /// not all answered at once.
    async fn publish_verifies(&self, n: usize) -> Published {
        let mut calls = Box::pin(futures::future::join_all((0..n).map(|_| {
            let (kms, key, signature) = (self.handle.client(), self.key.clone(), self.signature);
            async move { kms.verify(&key, &b"m"[..], signature).await }.boxed()
        })));
        assert!(
            futures::poll!(calls.as_mut()).is_pending(),
            "published; not all answered while the gate is closed"
        );
        calls
    }
}

/// What [`Fixture::publish_verifies`] returns: the calls, already published.
type Published = std::pin::Pin<
    Box<futures::future::JoinAll<futures::future::BoxFuture<'static, Result<(), KmsError>>>>,
>;

/// One pool thread, small batches, the injected verifier, and a key with a
/// valid signature on `b"m"`. Without inline, the caller path and combining:
/// a gated verifier on the actor's own task would hold the actor itself, and
/// on a caller's task that caller.
fn fixture(config: KmsConfig) -> Fixture {
    fixture_as_given(
        config
            .with_inline_when_idle(false)
            .with_verify_on_caller_when_idle(false)
            .with_combine_max(0),
    )
}

/// [`fixture`] with `config` as given.
fn fixture_as_given(config: KmsConfig) -> Fixture {
    fixture_tuned(config, None)
}

/// [`fixture_as_given`] with the caller path's quiet gap set, if given.
fn fixture_tuned(config: KmsConfig, quiet_gap: Option<Duration>) -> Fixture {
    let ks = Keystore::new();
    let key = ks.create_ed25519("acme", "tokens").expect("create");
    let (key, signature) = ks.sign(&key, b"m").expect("sign");
    let (gate, seen) = (Arc::new(Gate::default()), Arc::new(Seen::default()));
    let handle = spawn_with_verifier(
        config,
        ks,
        &Bus::new(),
        verifier(Arc::clone(&gate), Arc::clone(&seen)),
        quiet_gap,
    )
    .expect("spawn");
    Fixture {
        handle,
        key,
        signature,
        gate,
        seen,
    }
}

fn small() -> KmsConfig {
    KmsConfig::default()
        .with_threads(1)
        .with_target_batch(4)
        .with_max_batch(4)
        .with_queue_capacity(8)
}

/// Waits until the actor has dispatched `n` batches (counted at dispatch,
/// before a pool thread picks the batch up).
async fn dispatched(handle: &KmsHandle, n: u64) {
    tokio::time::timeout(HANG, async {
        while handle.stats().batches < n {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("batch dispatched");
}

/// Waits (yielding) until `seen` counts `n` batches started.
async fn batches_started(seen: &Seen, n: usize) {
    tokio::time::timeout(HANG, async {
        while seen.batches.load(Ordering::SeqCst) < n {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("batch started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_batch_answers_internal_and_the_actor_keeps_serving() {
    let f = fixture(small());
    f.gate.open();
    let kms = f.handle.client();
    for _ in 0..3 {
        match kms.verify(&f.key, &b"boom"[..], f.signature).await {
            Err(KmsError::Internal { reason }) => assert!(reason.contains("panicked")),
            other => panic!("expected Internal, got {other:?}"),
        }
        // The same single pool thread, and the actor, still serve.
        assert_eq!(kms.verify(&f.key, &b"m"[..], f.signature).await, Ok(()));
    }
    f.handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_requests_are_not_stuck_behind_verify_batches() {
    let f = fixture(small());
    let kms = f.handle.client();
    // Saturate: batches blocked on the pool, the coalescer full, the
    // request topic full (the rest are refused Overloaded).
    let verifies: Vec<_> = (0..40).map(|_| f.spawn_verify()).collect();
    batches_started(&f.seen, 1).await;
    // Sign, rotate, attest and create are answered while no verify batch
    // can finish.
    let answered = tokio::time::timeout(HANG, async {
        let (signer, _) = kms.sign(&f.key, &b"x"[..]).await.expect("sign");
        let v2 = kms.rotate(&signer).await.expect("rotate");
        let attested = kms.attest(&v2).await.expect("attest");
        kms.create_key("acme", "other").await.expect("create");
        attested.versions.len()
    })
    .await
    .expect("priority lane answered while the pool is blocked");
    assert_eq!(answered, 2);
    // A verify answered so far can only have been refused: none could run.
    let answered_early: Vec<bool> = verifies.iter().map(|t| t.is_finished()).collect();
    f.gate.open();
    let mut ok = 0;
    for (t, early) in verifies.into_iter().zip(answered_early) {
        match tokio::time::timeout(HANG, t)
            .await
            .expect("no hang")
            .expect("task")
        {
            Ok(()) if !early => ok += 1,
            Err(KmsError::Overloaded) => {}
            other => panic!("unexpected answer {other:?} (before the gate opened: {early})"),
        }
    }
    assert!(ok >= 8, "at least the topic's capacity got in, got {ok}");
    f.handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_mid_flight_finishes_the_running_batch() {
    let f = fixture(small());
    let kms = f.handle.client();
    let running = f.publish_verifies(4).await;
    batches_started(&f.seen, 1).await;
    let shutdown = tokio::spawn(f.handle.shutdown());
    // Once shutdown has begun, new calls are refused at once, even though
    // a batch is still blocked on the pool.
    // (A call made before `closing` is visible is published and would wait
    // for the gate; it is polled once and dropped, so it is skipped.)
    tokio::time::timeout(HANG, async {
        while kms.verify(&f.key, &b"m"[..], f.signature).now_or_never()
            != Some(Err(KmsError::ShuttingDown))
        {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("refused after shutdown began");
    assert!(
        !shutdown.is_finished(),
        "shutdown waits for the running batch"
    );
    f.gate.open();
    tokio::time::timeout(HANG, shutdown)
        .await
        .expect("shutdown completes")
        .expect("task");
    assert_eq!(
        tokio::time::timeout(HANG, running).await.expect("no hang"),
        vec![Ok(()); 4],
        "accepted, so answered"
    );
}

/// A `Bytes` whose owner counts its drop.
struct Counted(Arc<AtomicUsize>);

impl AsRef<[u8]> for Counted {
    fn as_ref(&self) -> &[u8] {
        b"m"
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_leaves_is_skipped_and_its_request_freed() {
    let f = fixture(KmsConfig::default().with_threads(1));
    let kms = f.handle.client();
    let blocker = f.spawn_verify();
    batches_started(&f.seen, 1).await;
    let freed = Arc::new(AtomicUsize::new(0));
    for _ in 0..10 {
        let message = Bytes::from_owner(Counted(Arc::clone(&freed)));
        // Publishes on the first poll, then the caller drops the future.
        assert!(kms
            .verify(&f.key, message, f.signature)
            .now_or_never()
            .is_none());
    }
    f.gate.open();
    assert_eq!(blocker.await.expect("task"), Ok(()));
    tokio::time::timeout(HANG, async {
        while freed.load(Ordering::SeqCst) < 10 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("every abandoned request is freed");
    assert_eq!(kms.verify(&f.key, &b"m"[..], f.signature).await, Ok(()));
    assert_eq!(
        f.seen.items.load(Ordering::SeqCst),
        2,
        "only the blocker and the last request were verified"
    );
    f.handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_every_thread_busy_a_lone_request_goes_out_after_max_wait() {
    let f = fixture(
        KmsConfig::default()
            .with_threads(1)
            .with_max_wait(Duration::from_millis(20)),
    );
    let first = f.spawn_verify();
    batches_started(&f.seen, 1).await;
    // The only thread is blocked; a second request is held, then sent
    // after max_wait (queued behind the blocked batch), not held forever.
    let second = f.spawn_verify();
    dispatched(&f.handle, 2).await;
    assert_eq!(f.handle.stats().batched_requests, 2);
    f.gate.open();
    assert_eq!(first.await.expect("task"), Ok(()));
    assert_eq!(second.await.expect("task"), Ok(()));
    f.handle.shutdown().await;
}

/// The `kms_actor::coalesce` dispatch events: (topic, reason, batch size).
#[derive(Clone, Default)]
struct Dispatches(Arc<Mutex<Vec<(String, String, u64)>>>);

/// The one process-wide capture. Global, not `set_default`: a scoped
/// subscriber misses events when other tests' threads register the same
/// callsites concurrently (tracing caches callsite interest per process).
impl Dispatches {
    /// The reasons of the dispatch events recorded for `topic`, in order.
    fn reasons(&self, topic: &str) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(t, ..)| t == topic)
            .map(|(_, reason, _)| reason.clone())
            .collect()
    }
}

fn dispatches() -> &'static Dispatches {
    static CAPTURE: std::sync::OnceLock<Dispatches> = std::sync::OnceLock::new();
    CAPTURE.get_or_init(|| {
        use tracing_subscriber::layer::SubscriberExt;
        let capture = Dispatches::default();
        tracing::subscriber::set_global_default(
            tracing_subscriber::registry().with(capture.clone()),
        )
        .expect("the only global subscriber in this test binary");
        capture
    })
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Dispatches {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        #[derive(Default)]
        struct Fields {
            topic: String,
            reason: String,
            batch_size: u64,
            dispatch: bool,
        }
        impl tracing::field::Visit for Fields {
            fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                match field.name() {
                    "reason" => self.reason = value.to_owned(),
                    "topic" => self.topic = value.to_owned(),
                    _ => {}
                }
            }
            fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
                if field.name() == "batch_size" {
                    self.batch_size = value;
                }
            }
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.dispatch = format!("{value:?}") == "dispatch";
                }
            }
        }
        if event.metadata().target() != "kms_actor::coalesce" {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        if fields.dispatch {
            self.0.lock().unwrap_or_else(PoisonError::into_inner).push((
                fields.topic,
                fields.reason,
                fields.batch_size,
            ));
        }
    }
}

// Current-thread runtime: the 8 client tasks all publish before the actor
// runs again, so they are read in one drain.
#[tokio::test(flavor = "current_thread")]
async fn each_dispatch_is_a_tracing_event_and_a_full_target_batch_goes_out_at_once() {
    const TOPIC: &str = "faults.tracing";
    let capture = dispatches();
    let f = fixture(
        KmsConfig::default()
            .with_request_topic(TOPIC.to_owned())
            .with_threads(1)
            .with_target_batch(8)
            .with_max_batch(16)
            .with_max_wait(Duration::from_secs(1)),
    );
    let mut calls = vec![f.spawn_verify()];
    batches_started(&f.seen, 1).await;
    // With the only thread blocked, 8 more make a full target batch.
    calls.extend((0..8).map(|_| f.spawn_verify()));
    dispatched(&f.handle, 2).await;
    f.gate.open();
    for call in calls {
        assert_eq!(call.await.expect("task"), Ok(()));
    }
    f.handle.shutdown().await;
    let seen: Vec<(String, u64)> = capture
        .0
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter(|(topic, ..)| topic == TOPIC)
        .map(|(_, reason, size)| (reason.clone(), *size))
        .collect();
    assert_eq!(
        seen,
        vec![("idle_thread".to_owned(), 1), ("target_batch".to_owned(), 8)],
        "a lone request goes to the idle thread; 8 held requests go out by size, not after max_wait"
    );
}

// Current-thread runtime: the 128 client tasks all publish before the
// actor runs again, so they are read in one drain and dispatched at once.
#[tokio::test(flavor = "current_thread")]
async fn a_batch_for_two_idle_threads_is_verified_as_two_chunks() {
    let f = fixture(
        KmsConfig::default()
            .with_threads(2)
            .with_target_batch(256)
            .with_max_batch(256)
            .with_max_wait(Duration::from_secs(1)),
    );
    f.gate.open();
    let calls: Vec<_> = (0..128).map(|_| f.spawn_verify()).collect();
    for call in calls {
        assert_eq!(call.await.expect("task"), Ok(()));
    }
    assert_eq!(f.handle.stats().batches, 1, "one dispatch");
    assert_eq!(
        f.seen.batches.load(Ordering::SeqCst),
        2,
        "split into one verify_batch per idle thread"
    );
    assert_eq!(f.seen.items.load(Ordering::SeqCst), 128);
    assert_eq!(f.seen.on_pool.load(Ordering::SeqCst), 2, "both on the pool");
    f.handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_request_on_an_idle_pool_is_verified_inline_and_a_panic_there_is_answered() {
    const TOPIC: &str = "faults.inline";
    let capture = dispatches();
    let f = fixture_as_given(
        KmsConfig::default()
            .with_request_topic(TOPIC.to_owned())
            .with_threads(1)
            .with_verify_on_caller_when_idle(false)
            .with_combine_max(0),
    );
    f.gate.open();
    for _ in 0..3 {
        assert_eq!(f.spawn_verify().await.expect("task"), Ok(()));
    }
    // A panic in the verifier on the actor's task: answered, and the actor
    // keeps serving.
    let (kms, key, signature) = (f.handle.client(), f.key.clone(), f.signature);
    let boom = kms.verify(&key, &b"boom"[..], signature).await;
    assert!(matches!(boom, Err(KmsError::Internal { .. })), "{boom:?}");
    assert_eq!(f.spawn_verify().await.expect("task"), Ok(()));
    assert_eq!(f.seen.batches.load(Ordering::SeqCst), 5);
    assert_eq!(
        f.seen.on_pool.load(Ordering::SeqCst),
        0,
        "every one verified on the actor's task, none on the pool"
    );
    f.handle.shutdown().await;
    let reasons = capture.reasons(TOPIC);
    assert_eq!(reasons, vec!["inline"; 5], "one at a time on an idle pool");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_with_the_pool_queue_full_still_answers_the_whole_backlog() {
    let f = fixture(
        KmsConfig::default()
            .with_threads(1)
            .with_target_batch(4)
            .with_max_batch(4)
            .with_queue_capacity(16),
    );
    let calls = f.publish_verifies(12).await;
    // Two batches in flight (one running, blocked; one queued) fill the
    // pool's queue, so the actor stops reading with requests on the topic.
    dispatched(&f.handle, 2).await;
    let shutdown = tokio::spawn(f.handle.shutdown());
    tokio::time::sleep(Duration::from_millis(20)).await;
    f.gate.open();
    tokio::time::timeout(HANG, shutdown)
        .await
        .expect("shutdown completes")
        .expect("task");
    assert_eq!(
        tokio::time::timeout(HANG, calls).await.expect("no hang"),
        vec![Ok(()); 12],
        "queued before shutdown, so answered"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_quiet_node_a_caller_verifies_on_its_own_task_and_a_panic_there_is_answered() {
    const TOPIC: &str = "faults.caller";
    let capture = dispatches();
    let f = fixture_as_given(
        KmsConfig::default()
            .with_request_topic(TOPIC.to_owned())
            .with_threads(1),
    );
    f.gate.open();
    let (kms, key, signature) = (f.handle.client(), f.key.clone(), f.signature);
    // One task calling back to back, fewer calls than a run: the caller path
    // every time.
    let verdicts = tokio::spawn(async move {
        let mut verdicts = Vec::new();
        for message in [&b"m"[..], b"m", b"boom", b"m", b"forged"] {
            verdicts.push(kms.verify(&key, message, signature).await);
        }
        verdicts
    })
    .await
    .expect("task");
    assert_eq!(verdicts[..2], [Ok(()), Ok(())]);
    assert!(
        matches!(&verdicts[2], Err(KmsError::Internal { reason }) if reason.contains("panicked")),
        "{:?}",
        verdicts[2]
    );
    assert_eq!(
        verdicts[3],
        Ok(()),
        "the client keeps working after a panic"
    );
    assert!(matches!(verdicts[4], Err(KmsError::InvalidSignature(_))));
    assert_eq!(f.seen.batches.load(Ordering::SeqCst), 5);
    assert_eq!(f.seen.on_pool.load(Ordering::SeqCst), 0, "none on the pool");
    let stats = f.handle.stats();
    assert_eq!((stats.caller_verified, stats.batches), (5, 0), "{stats:?}");
    f.handle.shutdown().await;
    let reasons = capture.reasons(TOPIC);
    assert_eq!(reasons, vec!["caller"; 5], "never published");
}

#[tokio::test(flavor = "current_thread")]
async fn a_wave_of_tasks_ready_at_once_is_batched_not_verified_one_by_one_on_the_caller() {
    // A quiet gap of a minute: every call of the wave is back to back
    // whatever the machine's speed.
    let f = fixture_tuned(
        KmsConfig::default()
            .with_threads(1)
            .with_max_batch(64)
            .with_target_batch(64),
        Some(Duration::from_secs(60)),
    );
    // Open: on this one thread a closed gate on a caller's task would hold
    // the runtime itself. The 32 tasks run one after another when this
    // task first waits.
    f.gate.open();
    let calls: Vec<_> = (0..32).map(|_| f.spawn_verify()).collect();
    for call in calls {
        assert_eq!(call.await.expect("task"), Ok(()));
    }
    let stats = f.handle.stats();
    // The first CALLER_MAX_STREAK on their callers, back to back (the caller
    // path); the next ends the streak and starts a run, so it gathers
    // (combining), and so do the rest: the first to resume leads them all.
    assert_eq!(
        (stats.caller_verified, stats.combined_requests),
        (
            u64::from(CALLER_MAX_STREAK),
            32 - u64::from(CALLER_MAX_STREAK)
        ),
        "one wave: a short run on the callers, the rest batched: {stats:?}"
    );
    assert_eq!(
        (stats.combined_batches, stats.batches),
        (1, 0),
        "one batch on the leader's task, not one by one: {stats:?}"
    );
    f.handle.shutdown().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_panic_in_a_leaders_batch_is_answered_internal_to_each_request_in_it() {
    let f = fixture_tuned(
        KmsConfig::default().with_threads(1),
        Some(Duration::from_secs(60)),
    );
    f.gate.open();
    let streak = CALLER_MAX_STREAK as usize;
    // A wave as above: the run on the callers, then a leader that gathers
    // the other three, one of which panics the batch.
    let calls: Vec<_> = (0..streak + 4)
        .map(|i| {
            let (kms, key, signature) = (f.handle.client(), f.key.clone(), f.signature);
            let message: &'static [u8] = if i == streak + 2 { b"boom" } else { b"m" };
            tokio::spawn(async move { kms.verify(&key, message, signature).await })
        })
        .collect();
    let mut verdicts = Vec::new();
    for call in calls {
        verdicts.push(call.await.expect("task"));
    }
    assert_eq!(verdicts[..streak], vec![Ok(()); streak]);
    for verdict in &verdicts[streak..] {
        assert!(
            matches!(verdict, Err(KmsError::Internal { reason }) if reason.contains("panicked")),
            "{verdict:?}"
        );
    }
    let stats = f.handle.stats();
    assert_eq!((stats.combined_batches, stats.combined_requests), (1, 4));
    assert_eq!(
        f.handle
            .client()
            .verify(&f.key, &b"m"[..], f.signature)
            .await,
        Ok(()),
        "the clients keep working after a panic"
    );
    f.handle.shutdown().await;
}

/// Inline and the caller path off, combining on with leads of at most
/// `combine_max`; one thread (so more than 2 outstanding makes a caller
/// gather), and three requests over 1 KiB published (combining leaves long
/// messages to the pool) and held on the pool by the closed gate: 3
/// outstanding.
async fn gathering(combine_max: usize) -> (Fixture, Published) {
    let f = fixture_as_given(
        KmsConfig::default()
            .with_threads(1)
            .with_inline_when_idle(false)
            .with_verify_on_caller_when_idle(false)
            .with_combine_max(combine_max),
    );
    let long = Bytes::from(vec![b'x'; 2048]);
    let mut held: Published = Box::pin(futures::future::join_all((0..3).map(|_| {
        let (kms, key, signature, long) =
            (f.handle.client(), f.key.clone(), f.signature, long.clone());
        async move { kms.verify(&key, long, signature).await }.boxed()
    })));
    assert!(futures::poll!(held.as_mut()).is_pending());
    (f, held)
}

#[tokio::test(flavor = "current_thread")]
async fn a_gatherer_that_is_not_polled_again_strands_no_one() {
    let (f, held) = gathering(64).await;
    let kms = f.handle.client();
    // Both gather: queued, then yielding (neither holds a lead).
    let mut first = Box::pin(kms.verify(&f.key, &b"m"[..], f.signature));
    assert!(futures::poll!(first.as_mut()).is_pending(), "gathering");
    let mut second = Box::pin(kms.verify(&f.key, &b"m"[..], f.signature));
    assert!(futures::poll!(second.as_mut()).is_pending(), "gathering");
    // The first is not polled again for now: the second leads, and
    // verifies both.
    f.gate.open();
    let verdict = tokio::time::timeout(HANG, second).await.expect("no hang");
    assert_eq!(verdict, Ok(()));
    let stats = f.handle.stats();
    assert_eq!(
        (stats.combined_batches, stats.combined_requests),
        (1, 2),
        "{stats:?}"
    );
    assert_eq!(first.await, Ok(()), "answered while it was not polled");
    let held = tokio::time::timeout(HANG, held).await.expect("no hang");
    assert!(held
        .iter()
        .all(|v| matches!(v, Err(KmsError::InvalidSignature(_)))));
    f.handle.shutdown().await;
}

#[tokio::test(flavor = "current_thread")]
async fn the_last_leader_hands_what_it_leaves_to_the_actor() {
    // Leads of at most 2: the one who leads leaves the third behind.
    let (f, held) = gathering(2).await;
    let kms = f.handle.client();
    let mut calls: Vec<_> = (0..3)
        .map(|_| Box::pin(kms.verify(&f.key, &b"m"[..], f.signature)))
        .collect();
    for call in &mut calls {
        assert!(futures::poll!(call.as_mut()).is_pending(), "gathering");
    }
    f.gate.open();
    for call in calls {
        let verdict = tokio::time::timeout(HANG, call).await.expect("no hang");
        assert_eq!(verdict, Ok(()));
    }
    let stats = f.handle.stats();
    assert_eq!(stats.combined_requests, 2, "{stats:?}");
    let held = tokio::time::timeout(HANG, held).await.expect("no hang");
    assert!(held
        .iter()
        .all(|v| matches!(v, Err(KmsError::InvalidSignature(_)))));
    assert_eq!(
        stats.batched_requests,
        1 + 3,
        "the third on the pool, beside the three long ones: {stats:?}"
    );
    f.handle.shutdown().await;
}

#[cfg(feature = "ml-dsa")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ml_dsa_token_is_signed_on_the_pool_while_it_is_busy_and_on_the_callers_task_when_idle()
{
    let f = fixture(small());
    let kms = f.handle.client();
    let key = kms
        .create_key_of("acme", "tokens", kms_core::Alg::MlDsa65)
        .await
        .expect("create");
    let claims = serde_json::json!({"sub": "alice", "exp": 4_000_000_000_u64});
    // The one pool thread is held by a batch: the signature queues behind
    // it instead of running on this task.
    let blocker = f.spawn_verify();
    batches_started(&f.seen, 1).await;
    let mut queued = Box::pin(kms.sign_jwt(&key, &claims));
    assert!(futures::poll!(queued.as_mut()).is_pending());
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        futures::poll!(queued.as_mut()).is_pending(),
        "not signed while the pool's thread is held"
    );
    assert_eq!(f.handle.stats().caller_signed, 0);
    f.gate.open();
    let token = tokio::time::timeout(HANG, queued)
        .await
        .expect("no hang")
        .expect("signed on the pool");
    assert_eq!(blocker.await.expect("task"), Ok(()));
    assert_eq!(f.handle.stats().caller_signed, 0);
    // The pool idle again (its count falls just after the replies), the
    // next one is signed here.
    tokio::time::timeout(HANG, async {
        loop {
            kms.sign_jwt(&key, &claims).await.expect("sign");
            if f.handle.stats().caller_signed == 1 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("signed on the caller's task once the pool is idle");
    let keys = kms_actor::TokenKeys::keystore("acme", "tokens");
    kms.verify_jwt(&token, &keys, &kms_jose::Validation::default())
        .await
        .expect("the pool's token verifies");
    f.handle.shutdown().await;
}
