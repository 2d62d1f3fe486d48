//! `threads/4_to_1_sustained` (#38): the KMS request pattern as a new user
//! tries it, sustained rather than in bursts. Four producer threads
//! publish 100 000 `u64` each into one consumer thread, capacity 8192,
//! each side with its blocking calls: ours an `Overflow::Wait` topic with
//! `blocking_publish_wait`, and `blocking_recv` then `drain` of up to 256;
//! crossbeam-channel (bounded) `send`, and `recv` then `try_iter` of up to
//! 256. An iteration ends when the consumer has all 400 000; the ring is
//! full most of the time, so the producers' waiting for room and the
//! consumer's waking of them are what it measures.

use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use kms::bus::{Backend, Overflow};

use crate::topic;

/// Producer threads.
const PRODUCERS: usize = 4;
/// Messages each producer publishes per iteration.
const PER_PRODUCER: u64 = 100_000;
/// Ring capacity (messages).
const SUSTAINED_CAPACITY: usize = 8192;
/// Most messages the consumer takes per batch.
const DRAIN: usize = 256;

/// `iters` rounds of [`PRODUCERS`] threads running `produce`, each
/// [`PER_PRODUCER`] messages, and `consume` of them all on this thread;
/// the total time.
fn rounds(
    iters: u64,
    produce: impl Fn(u64) + Clone + Send + 'static,
    mut consume: impl FnMut(u64),
) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let start = Instant::now();
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|_| {
                let produce = produce.clone();
                std::thread::spawn(move || produce(PER_PRODUCER))
            })
            .collect();
        consume(PER_PRODUCER * PRODUCERS as u64);
        for p in producers {
            p.join().expect("producer");
        }
        total += start.elapsed();
    }
    total
}

pub(crate) fn threads_sustained(c: &mut Criterion) {
    let mut group = c.benchmark_group("threads/4_to_1_sustained");
    group.throughput(Throughput::Elements(PER_PRODUCER * PRODUCERS as u64));
    group.sample_size(10);
    for (name, backend) in [("soa", Backend::Soa), ("classic", Backend::Classic)] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let topic = topic(backend, Overflow::Wait, SUSTAINED_CAPACITY);
                let mut sub = topic.subscribe().expect("subscribe");
                let publisher = topic.publisher();
                rounds(
                    iters,
                    move |n| {
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
            })
        });
    }
    group.bench_function("crossbeam_channel", |b| {
        b.iter_custom(|iters| {
            let (tx, rx) = crossbeam_channel::bounded::<u64>(SUSTAINED_CAPACITY);
            rounds(
                iters,
                move |n| {
                    for i in 0..n {
                        tx.send(i).expect("send");
                    }
                },
                |total| {
                    let mut seen = 0u64;
                    while seen < total {
                        rx.recv().expect("recv");
                        seen += 1 + rx.try_iter().take(DRAIN).count() as u64;
                    }
                },
            )
        })
    });
    group.finish();
}
