//! The KMS actor end to end (bus, coalescer, pool, replies), beside what it
//! wraps, on the same signatures in the same group.
//!
//! * `actor/throughput/{end_to_end,raw_verify_batch}`: 8192 valid
//!   signatures under 8192 distinct keys. `end_to_end`: 1024 client tasks
//!   on a 2-worker tokio runtime, each verifying its share one request at a
//!   time through `KmsClient::verify_with_public_key`, against an actor
//!   with a 2-thread pool. `raw_verify_batch`: `verify_batch` of each half
//!   of the 8192 on the two threads of a rayon pool (`rayon::join`: the
//!   split the actor makes for two idle threads). Target: end to end ≥
//!   0.85 × raw.
//! * `actor/throughput/{keystore_standalone,keystore_fleet,keystore_fleet_rotating}`:
//!   the same 1024 clients and 2-thread pool, each request naming its key by
//!   version id (`KmsClient::verify`, as a gateway verifies a token's `kid`):
//!   8192 signatures by 64 keys of 4 versions each, in a different key from
//!   one request to the next. `keystore_standalone`: the keys in one
//!   in-memory keystore. `keystore_fleet` (with `--features etcd`; the `etcd`
//!   binary from Debian's etcd-server): the keys of a fleet node on a
//!   one-member etcd started by the bench, following the prefix with a live
//!   watch. `keystore_fleet_rotating`: the same while a second node rotates
//!   one of those keys every 100 ms (each rotation reaches the measured node
//!   through its watch and is applied there while it verifies). Target: fleet
//!   ≤ 1.05 × standalone's time, measured side by side after each fleet
//!   function (alternating rounds on both actors; the rotations go on during
//!   the standalone rounds too, so their CPU falls on both sides and the
//!   ratio is what the fleet node's own verification pays).
//! * `actor/idle_latency/{end_to_end,single_verify,pool_round_trip}`: one
//!   request at a time from one client task (nothing else in flight),
//!   against our single `verify` of the same signature on the calling
//!   thread. Target: the difference (added latency) ≤ 25 µs. With the
//!   default `inline_when_idle` a lone request is verified on the actor's
//!   task; `pool_round_trip` (a task hands an empty job to a rayon thread
//!   that answers on a oneshot) is the floor under the pool path.
//! * `actor/overload`: not a timing. Requests offered open-loop at twice
//!   the end-to-end rate just measured, on a `Reject` topic, for 1 s; it
//!   prints how many were accepted, refused (`Overloaded`), otherwise
//!   answered (must be 0) and unanswered (must be 0, else it panics), the
//!   p99 latency of accepted requests, and the most requests outstanding at
//!   once (bounded by the topic, the coalescer and the pool queue).
//!
//! * `actor/idle_poisson`: not a Criterion timing. One client task on the
//!   2-worker runtime sends one request at a time with an exponentially
//!   distributed pause before each (Poisson arrivals at 100/s, 1 k/s and 10
//!   k/s; the pause is a `std::thread::sleep` on the client's worker, so the
//!   other threads park as on a quiet node); the four paths below take turns
//!   request by request, so each sees the same pauses and the same drift of
//!   the machine. It prints p50 and p99 of our single `verify` on the client
//!   task (the peer) and of a verify through the actor with its defaults (the
//!   caller path and inline on), with inline only (verified on the actor's
//!   task) and with neither (pool only), and what each adds over the peer.
//!   Target: added p50 ≤ 12 µs, p99 ≤ 50 µs (the median of five
//!   invocations' p99s). 400, 2 000 and 5 000 requests per path at the
//!   three rates; `IDLE_SAMPLES=N` sends N at each.
//! * `actor/concurrency`: not a Criterion timing. For 1, 4, 16, 64, 256 and
//!   1024 client tasks on the 2-worker runtime, each verifying one request
//!   at a time (closed loop) through the actor with a 2-thread pool, beside
//!   the best two threads can do for that concurrency: each request
//!   verified alone with `verify` on `min(clients, 2)` threads, and
//!   `verify_batch` on 2 threads of batches of `clients / 2` (what that
//!   many outstanding requests allow). The actor's figure is its steady
//!   state: max(8192, 64 · clients) requests, 64 per client on average
//!   (65 536 at 1024 clients), taking the 8192 items in turn, as a node
//!   that has been busy a while; five runs side
//!   by side; it prints the median run's rates and the spread of the ratio
//!   actor / best. Beside it, the same clients sending the 8192 items once
//!   each (8 per client at 1024: the start and drain of the clients are
//!   then a large part of the run, which the comparators never pay), and
//!   that ratio's median and spread. Target: ≥ 0.85 at every
//!   concurrency.
//! * `actor/starvation`: not a Criterion timing; another task's
//!   scheduling delay while clients verify through the actor, against the
//!   same clients verifying inline (`actor/starvation.rs`).
//!
//! * `actor/scale`: not a Criterion timing; verifies/s per thread with
//!   the runtime and the pool sized 1 to 16 threads (`actor/scale.rs`).
//!
//! Run: `cargo bench --bench actor` (the fleet figures:
//! `cargo bench --features etcd --bench actor -- actor/throughput`).
//! Results: `docs/PERFORMANCE.md`.

#[cfg(feature = "etcd")]
mod fleet;
mod keyed;
mod scale;
mod starvation;

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput};
use ed25519_dalek::{Signer, SigningKey};
use futures::stream::{FuturesUnordered, StreamExt};
use hdrhistogram::Histogram;
use kms::actor::{KmsActor, KmsClient, KmsConfig, KmsHandle};
use kms::bus::Bus;
use kms::core::ed25519::{verify, verify_batch, BatchItem};
use kms::core::{Keystore, KmsError};
use tokio::runtime::Runtime;

const ITEMS: usize = 8192;
const CLIENTS: usize = 1024;
const THREADS: usize = 2;

/// One verify request, as `end_to_end_with` sends it.
trait Request: Send + Sync + 'static {
    /// Sends this request through `kms`; its answer.
    fn verify(&self, kms: &KmsClient) -> impl Future<Output = Result<(), KmsError>> + Send;
}

impl Request for Item {
    fn verify(&self, kms: &KmsClient) -> impl Future<Output = Result<(), KmsError>> + Send {
        kms.verify_with_public_key(self.public_key, self.message.clone(), self.signature)
    }
}

/// One signed item: a distinct key, a message and its signature.
struct Item {
    public_key: [u8; 32],
    message: Bytes,
    signature: [u8; 64],
}

fn items(n: usize) -> Vec<Item> {
    (0..n)
        .map(|i| {
            let mut seed = [0u8; 32];
            seed[..8].copy_from_slice(&(i as u64).to_le_bytes());
            seed[31] = 0xa5;
            let key = SigningKey::from_bytes(&seed);
            let message = format!("{{\"sub\":\"user-{i}\",\"scope\":\"read\"}}").into_bytes();
            Item {
                public_key: key.verifying_key().to_bytes(),
                signature: key.sign(&message).to_bytes(),
                message: Bytes::from(message),
            }
        })
        .collect()
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn actor(rt: &Runtime) -> KmsHandle {
    let _guard = rt.enter();
    KmsActor::spawn(
        KmsConfig::default().with_threads(THREADS),
        Keystore::new(),
        &Bus::new(),
    )
    .expect("spawn")
}

/// Every item verified through the actor by `CLIENTS` concurrent tasks.
async fn end_to_end<R: Request>(kms: &KmsClient, items: &Arc<Vec<R>>) {
    end_to_end_with(kms, items, CLIENTS).await;
}

/// Every item verified through the actor by `clients` concurrent tasks,
/// each one request at a time (closed loop).
async fn end_to_end_with<R: Request>(kms: &KmsClient, items: &Arc<Vec<R>>, clients: usize) {
    end_to_end_requests(kms, items, clients, items.len()).await;
}

/// `requests` verify requests through the actor by `clients` concurrent
/// tasks, each one request at a time (closed loop); request `i` sends item
/// `i % items.len()`, so the items are taken in turn as often as needed.
async fn end_to_end_requests<R: Request>(
    kms: &KmsClient,
    items: &Arc<Vec<R>>,
    clients: usize,
    requests: usize,
) {
    let next = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let (kms, items, next) = (kms.clone(), Arc::clone(items), Arc::clone(&next));
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= requests {
                        break;
                    }
                    let item = &items[i % items.len()];
                    loop {
                        match item.verify(&kms).await {
                            Ok(()) => break,
                            Err(e) if e.is_retryable() => tokio::task::yield_now().await,
                            Err(e) => panic!("request {i}: {e:?}"),
                        }
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("client task");
    }
}

/// Items per second of `run`, which handles `n` items.
fn rate(n: usize, run: impl FnOnce()) -> f64 {
    let started = Instant::now();
    run();
    n as f64 / started.elapsed().as_secs_f64()
}

/// The best two threads can do for `clients` concurrent clients, as two
/// rates (items/s): each client's request verified alone with `verify` on
/// `min(clients, 2)` threads; and `verify_batch` on 2 threads of batches
/// as large as that concurrency allows (`clients / 2` per thread, at
/// least 1; one thread for one client).
fn comparators(items: &[Item], clients: usize) -> (f64, f64) {
    let threads = clients.min(THREADS);
    let share = items.len().div_ceil(threads);
    let single = rate(items.len(), || {
        std::thread::scope(|s| {
            for part in items.chunks(share) {
                s.spawn(move || {
                    for i in part {
                        verify(&i.public_key, &i.message, &i.signature).expect("valid");
                    }
                });
            }
        })
    });
    let batched = batched_rate(items, threads, (clients / THREADS).max(1));
    (single, batched)
}

/// Items per second of `verify_batch` on `threads` threads, each taking an
/// equal share of `items` in batches of `batch_size`.
fn batched_rate(items: &[Item], threads: usize, batch_size: usize) -> f64 {
    let share = items.len().div_ceil(threads);
    rate(items.len(), || {
        std::thread::scope(|s| {
            for part in items.chunks(share) {
                s.spawn(move || {
                    for chunk in part.chunks(batch_size) {
                        let batch: Vec<BatchItem<'_>> = chunk
                            .iter()
                            .map(|i| BatchItem::new(&i.public_key, &i.message, &i.signature))
                            .collect();
                        assert!(verify_batch(&batch).iter().all(|v| v.is_ok()));
                    }
                });
            }
        })
    })
}

/// Requests per client in `actor/concurrency`'s steady-state runs (count, on
/// average: the clients share one counter of requests): enough that starting
/// and draining the clients (the first requests find the node quiet and the
/// pool idle, the last ones leave it emptying) is a small part of the run, as
/// at a node that has been busy a while. The comparators model that steady
/// state: they verify their batches back to back, with no start or drain.
const STEADY_REQUESTS_PER_CLIENT: usize = 64;

/// Prints `actor/concurrency` (module docs).
fn concurrency(rt: &Runtime, kms: &KmsClient, items: &Arc<Vec<Item>>) {
    const RUNS: usize = 5;
    for clients in [1, 4, 16, 64, 256, 1024] {
        let steady_requests = items.len().max(clients * STEADY_REQUESTS_PER_CLIENT);
        // (steady actor, single, batched, steady / best, 8192-item actor /
        // best)
        let mut runs = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            let steady = rate(steady_requests, || {
                rt.block_on(end_to_end_requests(kms, items, clients, steady_requests))
            });
            let once = rate(items.len(), || {
                rt.block_on(end_to_end_with(kms, items, clients))
            });
            let (single, batched) = comparators(items, clients);
            let best = single.max(batched);
            runs.push((steady, single, batched, steady / best, once / best));
        }
        let mut once: Vec<f64> = runs.iter().map(|r| r.4).collect();
        once.sort_by(f64::total_cmp);
        runs.sort_by(|a, b| a.3.total_cmp(&b.3));
        let (actor, single, batched, ratio, _) = runs[RUNS / 2];
        let k = |r: f64| r / 1000.0;
        println!(
            "actor/concurrency {clients:>4} clients: actor {:.0} k/s ({steady_requests} requests), \
             single verify {:.0} k/s, verify_batch of {} per thread {:.0} k/s; actor / best \
             {ratio:.2} (median of {RUNS}; spread {:.2}-{:.2}); the {} items once each \
             (start and drain included): actor / best {:.2} ({:.2}-{:.2})",
            k(actor),
            k(single),
            (clients / THREADS).max(1),
            k(batched),
            runs[0].3,
            runs[RUNS - 1].3,
            items.len(),
            once[RUNS / 2],
            once[0],
            once[RUNS - 1],
        );
    }
}

fn throughput(c: &mut Criterion, rt: &Runtime, kms: &KmsClient, items: &Arc<Vec<Item>>) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(THREADS)
        .build()
        .expect("pool");
    let batch: Vec<BatchItem<'_>> = items
        .iter()
        .map(|i| BatchItem::new(&i.public_key, &i.message, &i.signature))
        .collect();
    let mut group = c.benchmark_group("actor/throughput");
    group.throughput(Throughput::Elements(ITEMS as u64));
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(8));
    group.bench_function("end_to_end", |b| {
        b.iter(|| rt.block_on(end_to_end(kms, items)))
    });
    group.bench_function("raw_verify_batch", |b| {
        b.iter(|| {
            let (first, second) = batch.split_at(batch.len() / 2);
            let (a, b) =
                pool.install(|| rayon::join(|| verify_batch(first), || verify_batch(second)));
            assert!(a.iter().chain(&b).all(|v| v.is_ok()));
        })
    });
    keystores(&mut group, rt);
    group.finish();
}

/// `actor/throughput/keystore_*` (module docs): a standalone keystore's
/// actor, then a fleet node's (with `--features etcd`), each a Criterion
/// function, and each fleet function followed by [`side_by_side`] against
/// the standalone actor, which stays up.
fn keystores(group: &mut BenchmarkGroup<'_, WallTime>, rt: &Runtime) {
    const STANDALONE: &str = "actor/throughput/keystore_standalone";
    const FLEET: [&str; 2] = [
        "actor/throughput/keystore_fleet",
        "actor/throughput/keystore_fleet_rotating",
    ];
    // The setup (keys, signatures, etcd) only for what the filter selects.
    let fleet = cfg!(feature = "etcd") && FLEET.iter().any(|name| selected(name));
    if !fleet && !selected(STANDALONE) {
        return;
    }
    let standalone = keyed::Keyed::new(rt, Keystore::new());
    let alone = standalone.client();
    rt.block_on(end_to_end(&alone, &standalone.items));
    group.bench_function("keystore_standalone", |b| {
        b.iter(|| rt.block_on(end_to_end(&alone, &standalone.items)))
    });
    #[cfg(feature = "etcd")]
    if fleet {
        let fleet = fleet::Fleet::start(rt);
        let kms = fleet.node.client();
        rt.block_on(end_to_end(&kms, &fleet.node.items));
        let pair = ((&alone, &standalone.items), (&kms, &fleet.node.items));
        group.bench_function("keystore_fleet", |b| {
            b.iter(|| rt.block_on(end_to_end(&kms, &fleet.node.items)))
        });
        side_by_side(rt, "actor/throughput/keystore_fleet", pair.0, pair.1);
        let rotating = fleet.rotating();
        group.bench_function("keystore_fleet_rotating", |b| {
            b.iter(|| rt.block_on(end_to_end(&kms, &fleet.node.items)))
        });
        side_by_side(
            rt,
            "actor/throughput/keystore_fleet_rotating",
            pair.0,
            pair.1,
        );
        let rotations = rotating.stop();
        println!(
            "actor/throughput/keystore_fleet_rotating: {rotations} rotations from the second \
             node, every one applied on the measured node"
        );
        let fleet::Fleet { node, .. } = fleet;
        rt.block_on(node.shutdown());
    }
    rt.block_on(standalone.shutdown());
}

/// One actor and the items it verifies.
#[cfg(feature = "etcd")]
type Side<'a> = (&'a KmsClient, &'a Arc<Vec<keyed::KeyedItem>>);

/// Prints the time of `name`'s actor (`measured`) over the standalone
/// one's (`standalone`), measured side by side: 60 rounds, each verifying
/// all the items once on each (in the order A B, then B A, so that drift
/// over a round falls on both); the median of the rounds' ratios, their
/// quartiles, and the ratio of the total times. Skipped as a test, or
/// when a filter on the command line does not select `name`.
#[cfg(feature = "etcd")]
fn side_by_side(rt: &Runtime, name: &str, standalone: Side<'_>, measured: Side<'_>) {
    const ROUNDS: usize = 60;
    if !measuring() || !selected(name) {
        return;
    }
    let time = |(kms, items): Side<'_>| {
        let started = Instant::now();
        rt.block_on(end_to_end(kms, items));
        started.elapsed().as_secs_f64()
    };
    let (mut ratios, mut totals) = (Vec::with_capacity(ROUNDS), (0.0, 0.0));
    for round in 0..ROUNDS {
        let (a, b) = if round % 2 == 0 {
            let a = time(standalone);
            (a, time(measured))
        } else {
            let b = time(measured);
            (time(standalone), b)
        };
        totals = (totals.0 + a, totals.1 + b);
        ratios.push(b / a);
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "{name} / keystore_standalone, side by side: median {:.3} (quartiles {:.3}-{:.3}; \
         {ROUNDS} rounds), total time {:.3}",
        ratios[ROUNDS / 2],
        ratios[ROUNDS / 4],
        ratios[3 * ROUNDS / 4],
        totals.1 / totals.0,
    );
}

fn idle_latency(c: &mut Criterion, rt: &Runtime, kms: &KmsClient, item: &Arc<Vec<Item>>) {
    let mut group = c.benchmark_group("actor/idle_latency");
    group.bench_function("end_to_end", |b| {
        b.iter_custom(|iters| {
            // The client is a task on the runtime, as the actors that embed
            // a KmsClient are, not the bench's own thread.
            let (kms, items) = (kms.clone(), Arc::clone(item));
            rt.block_on(async move {
                tokio::spawn(async move {
                    let item = &items[0];
                    let started = Instant::now();
                    for _ in 0..iters {
                        kms.verify_with_public_key(
                            item.public_key,
                            item.message.clone(),
                            item.signature,
                        )
                        .await
                        .expect("valid");
                    }
                    started.elapsed()
                })
                .await
                .expect("client task")
            })
        })
    });
    let item = &item[0];
    group.bench_function("single_verify", |b| {
        b.iter(|| verify(&item.public_key, &item.message, &item.signature).expect("valid"))
    });
    // The floor under `end_to_end`: a task hands an empty job to a rayon
    // pool thread, which answers on a oneshot (two cross-thread wake-ups).
    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(THREADS)
            .build()
            .expect("pool"),
    );
    group.bench_function("pool_round_trip", |b| {
        b.iter_custom(|iters| {
            let pool = Arc::clone(&pool);
            rt.block_on(async move {
                tokio::spawn(async move {
                    let started = Instant::now();
                    for _ in 0..iters {
                        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                        pool.spawn(move || {
                            let _ = tx.send(());
                        });
                        rx.await.expect("answer");
                    }
                    started.elapsed()
                })
                .await
                .expect("task")
            })
        })
    });
    group.finish();
}

/// Offers `rate` requests/s open-loop for `run_for` on a `Reject` topic and
/// reports what became of them.
fn overload(rt: &Runtime, kms: &KmsClient, items: &Arc<Vec<Item>>, rate: f64, run_for: Duration) {
    rt.block_on(async {
        let tick = Duration::from_millis(1);
        let per_tick = (rate * tick.as_secs_f64()).ceil() as usize;
        let mut in_flight = FuturesUnordered::new();
        let mut latency = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram");
        let (mut offered, mut accepted, mut refused, mut other, mut peak) = (0usize, 0, 0, 0, 0);
        let started = Instant::now();
        let mut next_tick = tokio::time::Instant::now();
        let mut collect = |answer: (Result<(), KmsError>, Instant),
                           accepted: &mut usize,
                           refused: &mut usize,
                           other: &mut usize| match answer.0 {
            Ok(()) => {
                *accepted += 1;
                latency.saturating_record(answer.1.elapsed().as_micros() as u64);
            }
            Err(KmsError::Overloaded) => *refused += 1,
            Err(_) => *other += 1,
        };
        while started.elapsed() < run_for {
            for _ in 0..per_tick {
                let item = &items[offered % items.len()];
                offered += 1;
                let sent = Instant::now();
                let call = kms.verify_with_public_key(
                    item.public_key,
                    item.message.clone(),
                    item.signature,
                );
                in_flight.push(async move { (call.await, sent) });
            }
            peak = peak.max(in_flight.len());
            next_tick += tick;
            // Drive the calls (each publishes on its first poll) and take
            // answers until the next tick is due.
            loop {
                tokio::select! {
                    () = tokio::time::sleep_until(next_tick) => break,
                    Some(answer) = in_flight.next() => {
                        collect(answer, &mut accepted, &mut refused, &mut other);
                    }
                }
            }
        }
        let drain = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(answer) = in_flight.next().await {
                collect(answer, &mut accepted, &mut refused, &mut other);
            }
        })
        .await;
        let unanswered = offered - accepted - refused - other;
        assert!(
            drain.is_ok() && unanswered == 0,
            "{unanswered} requests never answered"
        );
        println!(
            "actor/overload: offered {offered} at {rate:.0}/s for {run_for:?}: accepted {accepted}, \
             refused Overloaded {refused}, other answers {other}, unanswered {unanswered}; \
             accepted p50 {} µs, p99 {} µs; at most {peak} calls outstanding at once",
            latency.value_at_quantile(0.5),
            latency.value_at_quantile(0.99)
        );
    });
}

/// End-to-end verifies per second on `items`, closed loop, one run.
fn sustainable_rate(rt: &Runtime, kms: &KmsClient, items: &Arc<Vec<Item>>) -> f64 {
    let started = Instant::now();
    rt.block_on(end_to_end(kms, items));
    items.len() as f64 / started.elapsed().as_secs_f64()
}

/// `n` requests per path at Poisson `rate` (per second) from one client
/// task, the paths taking turns request by request (`None`: our `verify`
/// on the task; `Some`: through that actor), so every path sees the same
/// pauses and the same drift of the machine; returns one histogram of
/// latencies (ns) per path.
fn poisson(
    rt: &Runtime,
    paths: &[Option<KmsClient>],
    items: &Arc<Vec<Item>>,
    rate: f64,
    n: usize,
) -> Vec<Histogram<u64>> {
    let (paths, items) = (paths.to_vec(), Arc::clone(items));
    rt.block_on(async move {
        tokio::spawn(async move {
            use rand::{RngExt, SeedableRng};
            let mut rng = rand::rngs::StdRng::seed_from_u64(n as u64);
            let item = &items[1];
            let mut latency: Vec<Histogram<u64>> = paths
                .iter()
                .map(|_| Histogram::new_with_bounds(1, 10_000_000_000, 3).expect("histogram"))
                .collect();
            for _ in 0..n {
                for (path, latency) in paths.iter().zip(&mut latency) {
                    let u: f64 = rng.random_range(f64::EPSILON..1.0);
                    std::thread::sleep(Duration::from_secs_f64(-u.ln() / rate));
                    let started = Instant::now();
                    match path {
                        Some(kms) => kms
                            .verify_with_public_key(
                                item.public_key,
                                item.message.clone(),
                                item.signature,
                            )
                            .await
                            .expect("valid"),
                        None => {
                            verify(&item.public_key, &item.message, &item.signature).expect("valid")
                        }
                    }
                    latency.saturating_record(started.elapsed().as_nanos() as u64);
                }
            }
            latency
        })
        .await
        .expect("client task")
    })
}

/// Prints `actor/idle_poisson` (module docs).
fn idle_poisson(rt: &Runtime, items: &Arc<Vec<Item>>) {
    let actor_with = |on_caller: bool, inline: bool| {
        let _guard = rt.enter();
        KmsActor::spawn(
            KmsConfig::default()
                .with_threads(THREADS)
                .with_verify_on_caller_when_idle(on_caller)
                // Combining verifies a lone request on its caller too.
                .with_combine_max(if on_caller { 64 } else { 0 })
                .with_inline_when_idle(inline),
            Keystore::new(),
            &Bus::new(),
        )
        .expect("spawn")
    };
    let actors = [
        ("actor (default)", actor_with(true, true)),
        ("actor, inline only", actor_with(false, true)),
        ("actor, pool only", actor_with(false, false)),
    ];
    let mut paths = vec![None];
    paths.extend(actors.iter().map(|(_, a)| Some(a.client())));
    // IDLE_SAMPLES=N: N requests per path at every rate (the p99 targets
    // are read from at least 4 000).
    let samples = std::env::var("IDLE_SAMPLES")
        .ok()
        .and_then(|n| n.parse::<usize>().ok());
    for (rate, n) in [(100.0, 400), (1_000.0, 2_000), (10_000.0, 5_000)] {
        let n = samples.unwrap_or(n);
        let mut line = format!("actor/idle_poisson {rate:>6}/s, {n} requests per path:");
        let histograms = poisson(rt, &paths, items, rate, n);
        let quantiles = |h: &Histogram<u64>| {
            (
                h.value_at_quantile(0.5) as i64 / 1000,
                h.value_at_quantile(0.99) as i64 / 1000,
            )
        };
        let peer = quantiles(&histograms[0]);
        line += &format!(" inline verify p50 {} µs p99 {} µs;", peer.0, peer.1);
        for ((name, _), h) in actors.iter().zip(&histograms[1..]) {
            let (p50, p99) = quantiles(h);
            line += &format!(
                " {name} p50 {p50} µs ({:+}) p99 {p99} µs ({:+});",
                p50 - peer.0,
                p99 - peer.1
            );
        }
        println!("{line}");
    }
    drop(paths);
    rt.block_on(async {
        for (_, actor) in actors {
            actor.shutdown().await;
        }
    });
}

/// Criterion's options that take a value (criterion 0.8's command line).
const OPTIONS_WITH_VALUE: [&str; 19] = [
    "-c",
    "--color",
    "-s",
    "--save-baseline",
    "-b",
    "--baseline",
    "--baseline-lenient",
    "--format",
    "--profile-time",
    "--load-baseline",
    "--sample-size",
    "--warm-up-time",
    "--measurement-time",
    "--nresamples",
    "--noise-threshold",
    "--confidence-level",
    "--significance-level",
    "--plotting-backend",
    "--output-format",
];

/// Whether the part `name` of this bench runs, as Criterion decides for
/// its own benchmarks: with no filter on the command line, or a filter
/// that matches `name` (a regex; with `--exact`, the whole name). The
/// filter is the first argument that is neither an option nor an option's
/// value; for example `cargo bench --bench actor -- actor/concurrency`
/// runs that part alone.
fn selected(name: &str) -> bool {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut rest = args.iter();
    let mut filter = None;
    while let Some(arg) = rest.next() {
        if OPTIONS_WITH_VALUE.contains(&arg.as_str()) {
            rest.next();
        } else if !arg.starts_with('-') {
            filter = Some(arg);
            break;
        }
    }
    match filter {
        None => true,
        Some(filter) if args.iter().any(|a| a == "--exact") => filter == name,
        Some(filter) => regex::Regex::new(filter).is_ok_and(|r| r.is_match(name)),
    }
}

/// Whether the bench runs for measurement (`cargo bench`), not as a test
/// (`cargo test --benches`) or a debug build: the parts that are not
/// Criterion timings run only then.
fn measuring() -> bool {
    !cfg!(debug_assertions) && std::env::args().any(|a| a == "--bench")
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let rt = runtime();
    let handle = actor(&rt);
    let kms = handle.client();
    let items = Arc::new(items(ITEMS));
    // Warm the key cache and the pool before anything is timed.
    rt.block_on(end_to_end(&kms, &items));

    throughput(&mut c, &rt, &kms, &items);
    idle_latency(&mut c, &rt, &kms, &items);
    if measuring() {
        if selected("actor/idle_poisson") {
            idle_poisson(&rt, &items);
        }
        if selected("actor/concurrency") {
            concurrency(&rt, &kms, &items);
        }
        if selected("actor/scale") {
            scale::scale();
        }
        if selected("actor/starvation") {
            starvation::starvation(&rt, &kms, &items);
        }
        if selected("actor/overload") {
            let rate = sustainable_rate(&rt, &kms, &items);
            overload(&rt, &kms, &items, 2.0 * rate, Duration::from_secs(1));
        }
    }
    rt.block_on(handle.shutdown());
    c.final_summary();
}
