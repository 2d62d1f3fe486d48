//! The bus, ours beside tokio's `sync::broadcast` in the same groups on the
//! same payloads (`u64`).
//!
//! * `publish/no_subscriber`: one publish into a topic nobody subscribes to
//!   (ours hands the message back with `NoSubscribers`; tokio's `send`
//!   returns it in its `SendError`).
//! * `publish_try_recv/1_subscriber`: one publish and one `try_recv` on the
//!   same thread, capacity 1024. Ours on `Overflow::Lag` (tokio's only
//!   policy) and, for the record, `Soa` on `Reject`.
//! * `burst/256_to_4_async`: 256 single publishes into 4 subscriber tasks
//!   that each `recv().await` all 256, on a single-threaded tokio runtime
//!   (publisher and subscribers are tasks of one thread); the iteration
//!   ends when every subscriber has received the burst.
//!   Capacity 1024, `Lag`, so nothing is lost.
//! * `batch/256_to_4_async`: the same burst, published as one
//!   `publish_batch` (tokio, which has no batch publish, sends the 256 in a
//!   loop), and the subscribers are batch consumers: each waits with
//!   `recv().await` and then takes what is ready with `drain` (tokio: with a
//!   `try_recv` loop).
//!
//! The `threads/` groups run on plain threads, so every implementation
//! blocks through its own blocking calls: ours `Subscriber::blocking_recv`
//! and `Publisher::blocking_publish_wait` (which back off before they
//! park), tokio's `blocking_recv` and `blocking_send`, crossbeam-channel's
//! and flume's `recv` and `send`.
//!
//! * `threads/1_to_1`: a producer thread publishes 4096 messages to a
//!   consumer thread that blocks in `blocking_recv`, capacity 1024, `Lag`;
//!   the iteration ends when the consumer has accounted for all 4096
//!   (received + lagged).
//!
//! * `threads/4_to_1_drain`: the KMS request pattern. Four producer
//!   threads publish 1024 messages each into one consumer thread that
//!   blocks for the first ready message and then takes what is ready in
//!   batches of up to 256 (ours: `blocking_recv` then `drain`; tokio mpsc:
//!   `blocking_recv` then `try_recv`; crossbeam-channel and flume: `recv`
//!   then `try_recv`). Bounded at 1024 everywhere; producers wait for room
//!   (ours: an `Overflow::Wait` topic and `blocking_publish_wait`; the
//!   peers' blocking sends). The iteration ends when the consumer has all 4096.
//!
//! * `threads/4_to_1_sustained`: the same pattern sustained: 100 000
//!   messages per producer, capacity 8192 (`bus/sustained.rs`); ours
//!   beside crossbeam-channel, whose consumer keeps its ring full, where
//!   ours without its wait for a run read right behind the producers
//!   (`docs/PERFORMANCE.md`, "Bus under sustained fan-in").
//!
//! * `threads/1_to_4`: one producer thread publishes 4096 messages one by
//!   one, in bursts of 256, to four consumer threads that each block in
//!   `blocking_recv`; after each burst the
//!   producer waits until all four have received it, so nothing is lost
//!   to overflow and every message is delivered four times (capacity 1024;
//!   ours `Reject`, which never refuses here). A `Lag` stream measured as
//!   received + lagged would reward overwriting instead of delivering.
//! * `threads/batch_256_to_4_drain`: the same, each burst published with
//!   one `publish_batch` (tokio broadcast, which has no batch publish: a
//!   `send` loop), and the consumers take the first ready message with
//!   `blocking_recv` and the rest with `drain` (tokio: `try_recv`).
//!
//! * `threads/ping_pong`: latency, not throughput. A thread publishes one
//!   message and blocks for the reply, which an echo thread (blocking in
//!   `blocking_recv`, or the peers' blocking calls) publishes back on a
//!   second topic; 256 round trips per iteration, so the time per element
//!   is one round trip. Ours on two `Lag` topics; tokio broadcast and
//!   crossbeam-channel (bounded) beside it. It shows whether the consumer's
//!   adaptive back-off (`kms-bus/src/blocking.rs`), which waits longer
//!   before it looks again while a stream flows, still looks early for a
//!   lone reply.
//!
//! * `threads/cache_line`: no channel, the machine's floor. Two threads
//!   hand one atomic word back and forth, each waiting for the other's
//!   store, 1000 hand-offs per iteration, so the time per iteration in µs
//!   is one cache-line transfer between cores in ns. On this 2-vCPU VM it
//!   is about 45 ns or about 200 ns depending on where the host places the
//!   two vCPUs at the moment, and every `threads/` group moves with it
//!   (`docs/PERFORMANCE.md`); it runs before and after the other
//!   `threads/` groups, so a run whose two readings differ changed mode on
//!   the way.
//!
//! Run: `cargo bench --bench bus`. Results: `docs/PERFORMANCE.md`.

mod sustained;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use kms::bus::{Backend, Bus, Overflow, RecvError, Topic, TopicConfig};
use tokio::sync::{broadcast, Notify};

/// Messages per burst.
const BURST: usize = 256;
/// Subscribers in the fan-out groups.
const SUBSCRIBERS: usize = 4;
/// Ring capacity (messages) everywhere but `publish/`.
const CAPACITY: usize = 1024;
/// Messages per iteration of `threads/`.
const STREAM: usize = 4096;

fn topic(backend: Backend, overflow: Overflow, capacity: usize) -> Topic<u64> {
    Bus::new()
        .topic::<u64>(
            "bench",
            TopicConfig {
                capacity,
                backend,
                overflow,
            },
        )
        .expect("valid config")
}

/// A single-threaded runtime: the publisher (in `block_on`) and the
/// subscriber tasks share one thread, so the groups measure the bus, not the
/// OS's thread wake-ups (which cost microseconds each and would dominate
/// a 256-message burst on this 2-core machine).
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn publish_no_subscriber(c: &mut Criterion) {
    let mut group = c.benchmark_group("publish/no_subscriber");
    group.throughput(Throughput::Elements(1));
    for (name, backend) in [("soa", Backend::Soa), ("classic", Backend::Classic)] {
        let topic = topic(backend, Overflow::Lag, CAPACITY);
        let publisher = topic.publisher();
        group.bench_function(name, |b| {
            b.iter(|| std::hint::black_box(publisher.publish(std::hint::black_box(7)).is_err()))
        });
    }
    let (tx, rx) = broadcast::channel::<u64>(CAPACITY);
    drop(rx);
    group.bench_function("tokio_broadcast", |b| {
        b.iter(|| std::hint::black_box(tx.send(std::hint::black_box(7)).is_err()))
    });
    group.finish();
}

fn publish_try_recv(c: &mut Criterion) {
    let mut group = c.benchmark_group("publish_try_recv/1_subscriber");
    group.throughput(Throughput::Elements(1));
    for (name, backend, overflow) in [
        ("soa", Backend::Soa, Overflow::Lag),
        ("soa_reject", Backend::Soa, Overflow::Reject),
        ("classic", Backend::Classic, Overflow::Lag),
    ] {
        let topic = topic(backend, overflow, CAPACITY);
        let mut sub = topic.subscribe().expect("subscribe");
        let publisher = topic.publisher();
        group.bench_function(name, |b| {
            b.iter(|| {
                let _ = publisher.publish(std::hint::black_box(7));
                std::hint::black_box(sub.try_recv().expect("a message"))
            })
        });
    }
    let (tx, mut rx) = broadcast::channel::<u64>(CAPACITY);
    group.bench_function("tokio_broadcast", |b| {
        b.iter(|| {
            let _ = tx.send(std::hint::black_box(7));
            std::hint::black_box(rx.try_recv().expect("a message"))
        })
    });
    group.finish();
}

/// Counts subscribers that have finished the current burst; the last one
/// wakes the publisher.
struct Done {
    count: AtomicUsize,
    notify: Notify,
}

impl Done {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            count: AtomicUsize::new(0),
            notify: Notify::new(),
        })
    }

    fn finished_one(&self) {
        if self.count.fetch_add(1, Ordering::AcqRel) + 1 == SUBSCRIBERS {
            self.notify.notify_one();
        }
    }

    async fn wait_all(&self) {
        while self.count.load(Ordering::Acquire) < SUBSCRIBERS {
            self.notify.notified().await;
        }
        self.count.store(0, Ordering::Release);
    }
}

/// One iteration set of a fan-out group on our bus: `iters` bursts of
/// [`BURST`] into [`SUBSCRIBERS`] subscriber tasks.
async fn ours_fan_out(backend: Backend, overflow: Overflow, batch: bool, iters: u64) -> Duration {
    let topic = topic(backend, overflow, CAPACITY);
    // Before the subscribers start: with no publisher alive they see Closed.
    let publisher = topic.publisher();
    let done = Done::new();
    let mut tasks = Vec::new();
    for _ in 0..SUBSCRIBERS {
        let mut sub = topic.subscribe().expect("subscribe");
        let done = Arc::clone(&done);
        tasks.push(tokio::spawn(async move {
            let mut buf = Vec::with_capacity(BURST);
            for _ in 0..iters {
                let mut got = 0;
                while got < BURST {
                    match sub.recv().await {
                        Ok(v) => {
                            std::hint::black_box(v);
                            got += 1;
                        }
                        Err(e) => panic!("recv: {e}"),
                    }
                    if batch {
                        buf.clear();
                        if let Ok(n) = sub.drain(&mut buf, BURST - got) {
                            std::hint::black_box(&buf);
                            got += n;
                        }
                    }
                }
                done.finished_one();
            }
        }));
    }
    let start = Instant::now();
    for i in 0..iters {
        if batch {
            publisher
                .publish_batch((0..BURST as u64).map(|k| i + k))
                .expect("publish_batch");
        } else {
            for k in 0..BURST as u64 {
                publisher.publish(i + k).expect("publish");
            }
        }
        done.wait_all().await;
    }
    let elapsed = start.elapsed();
    for task in tasks {
        task.await.expect("subscriber task");
    }
    elapsed
}

/// The same on tokio's broadcast channel.
async fn tokio_fan_out(batch: bool, iters: u64) -> Duration {
    let (tx, _) = broadcast::channel::<u64>(CAPACITY);
    let done = Done::new();
    let mut tasks = Vec::new();
    for _ in 0..SUBSCRIBERS {
        let mut rx = tx.subscribe();
        let done = Arc::clone(&done);
        tasks.push(tokio::spawn(async move {
            for _ in 0..iters {
                let mut got = 0;
                while got < BURST {
                    match rx.recv().await {
                        Ok(v) => {
                            std::hint::black_box(v);
                            got += 1;
                        }
                        Err(e) => panic!("recv: {e}"),
                    }
                    if batch {
                        while got < BURST {
                            match rx.try_recv() {
                                Ok(v) => {
                                    std::hint::black_box(v);
                                    got += 1;
                                }
                                Err(broadcast::error::TryRecvError::Empty) => break,
                                Err(e) => panic!("try_recv: {e}"),
                            }
                        }
                    }
                }
                done.finished_one();
            }
        }));
    }
    let start = Instant::now();
    for i in 0..iters {
        for k in 0..BURST as u64 {
            tx.send(i + k).expect("send");
        }
        done.wait_all().await;
    }
    let elapsed = start.elapsed();
    for task in tasks {
        task.await.expect("subscriber task");
    }
    elapsed
}

fn fan_out(c: &mut Criterion) {
    let rt = runtime();
    for (group_name, batch) in [
        ("burst/256_to_4_async", false),
        ("batch/256_to_4_async", true),
    ] {
        let mut group = c.benchmark_group(group_name);
        group.throughput(Throughput::Elements((BURST * SUBSCRIBERS) as u64));
        for (name, backend, overflow) in [
            ("soa", Backend::Soa, Overflow::Lag),
            ("soa_reject", Backend::Soa, Overflow::Reject),
            ("classic", Backend::Classic, Overflow::Lag),
        ] {
            group.bench_function(name, |b| {
                b.iter_custom(|iters| rt.block_on(ours_fan_out(backend, overflow, batch, iters)))
            });
        }
        group.bench_function("tokio_broadcast", |b| {
            b.iter_custom(|iters| rt.block_on(tokio_fan_out(batch, iters)))
        });
        group.finish();
    }
}

fn threads(c: &mut Criterion) {
    let mut group = c.benchmark_group("threads/1_to_1");
    group.throughput(Throughput::Elements(STREAM as u64));
    for (name, backend) in [("soa", Backend::Soa), ("classic", Backend::Classic)] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let topic = topic(backend, Overflow::Lag, CAPACITY);
                let mut sub = topic.subscribe().expect("subscribe");
                let publisher = topic.publisher();
                let consumer = std::thread::spawn(move || {
                    let mut seen = 0u64;
                    while seen < iters * STREAM as u64 {
                        match sub.blocking_recv() {
                            Ok(_) => seen += 1,
                            Err(RecvError::Lagged(n)) => seen += n,
                            Err(e) => panic!("recv: {e}"),
                        }
                    }
                });
                let start = Instant::now();
                for i in 0..iters * STREAM as u64 {
                    publisher.publish(i).expect("publish");
                }
                consumer.join().expect("consumer");
                start.elapsed()
            })
        });
    }
    group.bench_function("tokio_broadcast", |b| {
        b.iter_custom(|iters| {
            let (tx, mut rx) = broadcast::channel::<u64>(CAPACITY);
            let consumer = std::thread::spawn(move || {
                let mut seen = 0u64;
                while seen < iters * STREAM as u64 {
                    match rx.blocking_recv() {
                        Ok(_) => seen += 1,
                        Err(broadcast::error::RecvError::Lagged(n)) => seen += n,
                        Err(e) => panic!("recv: {e}"),
                    }
                }
            });
            let start = Instant::now();
            for i in 0..iters * STREAM as u64 {
                tx.send(i).expect("send");
            }
            consumer.join().expect("consumer");
            start.elapsed()
        })
    });
    group.finish();
}

/// Hand-offs per iteration of `threads/cache_line`.
const HAND_OFFS: u64 = 1000;

/// `threads/cache_line` (module docs); `name` tells the reading before
/// the `threads/` groups from the one after them.
fn threads_cache_line(c: &mut Criterion, name: &str) {
    let mut group = c.benchmark_group("threads/cache_line");
    group.throughput(Throughput::Elements(HAND_OFFS));
    group.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let word = Arc::new(AtomicU64::new(0));
            let n = iters * HAND_OFFS;
            // This thread stores the odd values, the other the even ones,
            // each after seeing the value before it.
            let hand_back = move |word: &AtomicU64, first: u64| {
                for value in (first..n).step_by(2) {
                    while word.load(Ordering::Acquire) != value {
                        std::hint::spin_loop();
                    }
                    word.store(value + 1, Ordering::Release);
                }
            };
            let other = std::thread::spawn({
                let word = Arc::clone(&word);
                move || hand_back(&word, 1)
            });
            let start = Instant::now();
            hand_back(&word, 0);
            let elapsed = start.elapsed();
            other.join().expect("other thread");
            elapsed
        })
    });
    group.finish();
}

/// Round trips per iteration of `threads/ping_pong`.
const ROUND_TRIPS: u64 = 256;

/// Times `iters * ROUND_TRIPS` round trips: this thread runs `ask(i)`
/// (send, then block for the reply) while an echo thread runs `echo()`
/// (block for a message, send it back) as many times.
fn round_trips(
    iters: u64,
    mut echo: impl FnMut() + Send + 'static,
    mut ask: impl FnMut(u64),
) -> Duration {
    let n = iters * ROUND_TRIPS;
    let echo = std::thread::spawn(move || (0..n).for_each(|_| echo()));
    let start = Instant::now();
    (0..n).for_each(&mut ask);
    let elapsed = start.elapsed();
    echo.join().expect("echo");
    elapsed
}

fn threads_ping_pong(c: &mut Criterion) {
    let mut group = c.benchmark_group("threads/ping_pong");
    group.throughput(Throughput::Elements(ROUND_TRIPS));
    group.bench_function("soa", |b| {
        b.iter_custom(|iters| {
            let ping = topic(Backend::Soa, Overflow::Lag, CAPACITY);
            let pong = topic(Backend::Soa, Overflow::Lag, CAPACITY);
            let mut ping_sub = ping.subscribe().expect("subscribe");
            let mut pong_sub = pong.subscribe().expect("subscribe");
            let (ping, pong) = (ping.publisher(), pong.publisher());
            round_trips(
                iters,
                move || {
                    let msg = ping_sub.blocking_recv().expect("recv");
                    pong.publish(msg).expect("publish");
                },
                |i| {
                    ping.publish(i).expect("publish");
                    pong_sub.blocking_recv().expect("recv");
                },
            )
        })
    });
    group.bench_function("tokio_broadcast", |b| {
        b.iter_custom(|iters| {
            let (ping, mut ping_rx) = broadcast::channel::<u64>(CAPACITY);
            let (pong, mut pong_rx) = broadcast::channel::<u64>(CAPACITY);
            round_trips(
                iters,
                move || {
                    let msg = ping_rx.blocking_recv().expect("recv");
                    pong.send(msg).expect("send");
                },
                |i| {
                    ping.send(i).expect("send");
                    pong_rx.blocking_recv().expect("recv");
                },
            )
        })
    });
    group.bench_function("crossbeam_channel", |b| {
        b.iter_custom(|iters| {
            let (ping, ping_rx) = crossbeam_channel::bounded::<u64>(CAPACITY);
            let (pong, pong_rx) = crossbeam_channel::bounded::<u64>(CAPACITY);
            round_trips(
                iters,
                move || {
                    let msg = ping_rx.recv().expect("recv");
                    pong.send(msg).expect("send");
                },
                |i| {
                    ping.send(i).expect("send");
                    pong_rx.recv().expect("recv");
                },
            )
        })
    });
    group.finish();
}

/// Producer threads in `threads/4_to_1_drain`.
const PRODUCERS: usize = 4;
/// Most messages the consumer takes per batch in `threads/4_to_1_drain`.
const DRAIN: usize = 256;

/// Runs `PRODUCERS` threads of `produce(per_thread)` and, on this thread,
/// `consume(total)`, where each producer sends `per_producer` messages per
/// iteration; returns the time from the start of the producers to the end
/// of the consumer.
fn fan_in(
    iters: u64,
    per_producer: u64,
    produce: impl Fn(u64) + Send + Sync + 'static,
    consume: impl FnOnce(u64),
) -> Duration {
    let per_thread = iters * per_producer;
    let produce = Arc::new(produce);
    let start = Instant::now();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|_| {
            let produce = Arc::clone(&produce);
            std::thread::spawn(move || produce(per_thread))
        })
        .collect();
    consume(per_thread * PRODUCERS as u64);
    for p in producers {
        p.join().expect("producer");
    }
    start.elapsed()
}

/// Receives `total` messages through `next`: `next(true)` blocks for one,
/// then `next(false)` takes more without blocking, up to [`DRAIN`], until
/// it finds none; each returns whether it received one.
fn consume_all(total: u64, mut next: impl FnMut(bool) -> bool) {
    let mut seen = 0u64;
    while seen < total {
        assert!(next(true), "recv");
        seen += 1;
        let mut taken = 0;
        while taken < DRAIN && next(false) {
            taken += 1;
        }
        seen += taken as u64;
    }
}

/// [`fan_in`] through one of our topics of `capacity` (`Overflow::Wait`):
/// the producers' `blocking_publish_wait`, the consumer's `blocking_recv`
/// then `drain` of up to [`DRAIN`].
fn ours_fan_in(iters: u64, per_producer: u64, backend: Backend, capacity: usize) -> Duration {
    let topic = topic(backend, Overflow::Wait, capacity);
    let mut sub = topic.subscribe().expect("subscribe");
    let publisher = topic.publisher();
    fan_in(
        iters,
        per_producer,
        move |n| {
            let publisher = publisher.clone();
            for i in 0..n {
                publisher.blocking_publish_wait(i).expect("publish");
            }
        },
        |total| {
            let mut out = Vec::with_capacity(DRAIN);
            let mut seen = 0u64;
            while seen < total {
                sub.blocking_recv().expect("recv");
                seen += 1;
                if let Ok(n) = sub.drain(&mut out, DRAIN) {
                    seen += n as u64;
                }
                out.clear();
            }
        },
    )
}

/// [`fan_in`] through a bounded crossbeam-channel of `capacity`: `send`,
/// and `recv` then `try_recv` of up to [`DRAIN`].
fn crossbeam_fan_in(iters: u64, per_producer: u64, capacity: usize) -> Duration {
    let (tx, rx) = crossbeam_channel::bounded::<u64>(capacity);
    fan_in(
        iters,
        per_producer,
        move |n| {
            for i in 0..n {
                tx.send(i).expect("send");
            }
        },
        |total| {
            consume_all(total, |block| {
                if block {
                    rx.recv().is_ok()
                } else {
                    rx.try_recv().is_ok()
                }
            })
        },
    )
}

fn threads_fan_in(c: &mut Criterion) {
    let mut group = c.benchmark_group("threads/4_to_1_drain");
    group.throughput(Throughput::Elements(STREAM as u64));
    let per_producer = (STREAM / PRODUCERS) as u64;
    for (name, backend) in [("soa", Backend::Soa), ("classic", Backend::Classic)] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| ours_fan_in(iters, per_producer, backend, CAPACITY))
        });
    }
    group.bench_function("tokio_mpsc", |b| {
        b.iter_custom(|iters| {
            let (tx, mut rx) = tokio::sync::mpsc::channel::<u64>(CAPACITY);
            fan_in(
                iters,
                per_producer,
                move |n| {
                    for i in 0..n {
                        tx.blocking_send(i).expect("send");
                    }
                },
                |total| {
                    consume_all(total, |block| {
                        if block {
                            rx.blocking_recv().is_some()
                        } else {
                            rx.try_recv().is_ok()
                        }
                    })
                },
            )
        })
    });
    group.bench_function("crossbeam_channel", |b| {
        b.iter_custom(|iters| crossbeam_fan_in(iters, per_producer, CAPACITY))
    });
    group.bench_function("flume", |b| {
        b.iter_custom(|iters| {
            let (tx, rx) = flume::bounded::<u64>(CAPACITY);
            fan_in(
                iters,
                per_producer,
                move |n| {
                    for i in 0..n {
                        tx.send(i).expect("send");
                    }
                },
                |total| {
                    consume_all(total, |block| {
                        if block {
                            rx.recv().is_ok()
                        } else {
                            rx.try_recv().is_ok()
                        }
                    })
                },
            )
        })
    });
    group.finish();
}

/// Messages received so far by all consumers of a `threads/` fan-out run.
type Received = Arc<std::sync::atomic::AtomicU64>;

/// Publishes `total` messages as bursts of `BURST` through `publish_burst`,
/// waiting after each until the `SUBSCRIBERS` consumers have counted every
/// message of it in `received` (so no ring ever overflows and nothing is
/// lost to lag: every message is delivered to every consumer).
fn paced_bursts(total: u64, received: &Received, mut publish_burst: impl FnMut(u64)) {
    for burst in 0..total / BURST as u64 {
        publish_burst(burst * BURST as u64);
        let target = (burst + 1) * (BURST * SUBSCRIBERS) as u64;
        while received.load(Ordering::Acquire) < target {
            std::thread::yield_now();
        }
    }
}

/// One iteration set of `threads/1_to_4` (`batch == false`) or
/// `threads/batch_256_to_4_drain` on our bus.
fn ours_fan_out_threads(backend: Backend, batch: bool, iters: u64) -> Duration {
    let total = iters * STREAM as u64;
    let topic = topic(backend, Overflow::Reject, CAPACITY);
    // Before the consumers start: with no publisher alive they see `Closed`.
    let publisher = topic.publisher();
    let received = Received::default();
    let consumers: Vec<_> = (0..SUBSCRIBERS)
        .map(|_| {
            let mut sub = topic.subscribe().expect("subscribe");
            let received = Arc::clone(&received);
            std::thread::spawn(move || {
                let mut out = Vec::with_capacity(BURST);
                let mut seen = 0u64;
                while seen < total {
                    sub.blocking_recv().expect("recv");
                    let mut n = 1;
                    if batch {
                        n += sub.drain(&mut out, BURST).unwrap_or(0) as u64;
                        out.clear();
                    }
                    seen += n;
                    received.fetch_add(n, Ordering::Release);
                }
            })
        })
        .collect();
    let start = Instant::now();
    paced_bursts(total, &received, |first| {
        let burst = first..first + BURST as u64;
        if batch {
            publisher.publish_batch(burst).expect("publish_batch");
        } else {
            for i in burst {
                publisher.publish(i).expect("publish");
            }
        }
    });
    for c in consumers {
        c.join().expect("consumer");
    }
    start.elapsed()
}

/// The same on tokio's broadcast channel (no batch publish: a `send` loop;
/// batch consumers take the rest with `try_recv`).
fn tokio_fan_out_threads(batch: bool, iters: u64) -> Duration {
    let total = iters * STREAM as u64;
    let (tx, _) = broadcast::channel::<u64>(CAPACITY);
    let received = Received::default();
    let consumers: Vec<_> = (0..SUBSCRIBERS)
        .map(|_| {
            let mut rx = tx.subscribe();
            let received = Arc::clone(&received);
            std::thread::spawn(move || {
                let mut seen = 0u64;
                while seen < total {
                    rx.blocking_recv().expect("recv");
                    let mut n = 1;
                    if batch {
                        while n <= BURST as u64 && rx.try_recv().is_ok() {
                            n += 1;
                        }
                    }
                    seen += n;
                    received.fetch_add(n, Ordering::Release);
                }
            })
        })
        .collect();
    let start = Instant::now();
    paced_bursts(total, &received, |first| {
        for i in first..first + BURST as u64 {
            tx.send(i).expect("send");
        }
    });
    for c in consumers {
        c.join().expect("consumer");
    }
    start.elapsed()
}

fn threads_fan_out(c: &mut Criterion) {
    for (group_name, batch) in [
        ("threads/1_to_4", false),
        ("threads/batch_256_to_4_drain", true),
    ] {
        let mut group = c.benchmark_group(group_name);
        group.throughput(Throughput::Elements((STREAM * SUBSCRIBERS) as u64));
        for (name, backend) in [("soa", Backend::Soa), ("classic", Backend::Classic)] {
            group.bench_function(name, |b| {
                b.iter_custom(|iters| ours_fan_out_threads(backend, batch, iters))
            });
        }
        group.bench_function("tokio_broadcast", |b| {
            b.iter_custom(|iters| tokio_fan_out_threads(batch, iters))
        });
        group.finish();
    }
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30)
}

fn main() {
    let mut c = config().configure_from_args();
    publish_no_subscriber(&mut c);
    publish_try_recv(&mut c);
    fan_out(&mut c);
    threads_cache_line(&mut c, "before");
    threads(&mut c);
    threads_fan_in(&mut c);
    sustained::threads_sustained(&mut c);
    threads_fan_out(&mut c);
    threads_ping_pong(&mut c);
    threads_cache_line(&mut c, "after");
    c.final_summary();
}
