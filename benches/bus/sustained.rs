//! `threads/4_to_1_sustained`: the KMS request pattern as a new user tries
//! it, sustained rather than in bursts. Four producer threads
//! publish 100 000 `u64` each per iteration into one consumer thread,
//! capacity 8192, each side with its blocking calls: ours an
//! `Overflow::Wait` topic with `blocking_publish_wait`, and `blocking_recv`
//! then `drain` of up to 256; crossbeam-channel (bounded) `send`, and
//! `recv` then `try_recv` of up to 256 (`threads/4_to_1_drain`'s sides,
//! `ours_fan_in` and `crossbeam_fan_in`, with more messages and room).

use criterion::{Criterion, Throughput};
use kms::bus::Backend;

use crate::{crossbeam_fan_in, ours_fan_in, PRODUCERS};

/// Messages each producer publishes per iteration.
const PER_PRODUCER: u64 = 100_000;
/// Ring capacity (messages).
const SUSTAINED_CAPACITY: usize = 8192;

pub(crate) fn threads_sustained(c: &mut Criterion) {
    let mut group = c.benchmark_group("threads/4_to_1_sustained");
    group.throughput(Throughput::Elements(PER_PRODUCER * PRODUCERS as u64));
    group.sample_size(10);
    for (name, backend) in [("soa", Backend::Soa), ("classic", Backend::Classic)] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| ours_fan_in(iters, PER_PRODUCER, backend, SUSTAINED_CAPACITY))
        });
    }
    group.bench_function("crossbeam_channel", |b| {
        b.iter_custom(|iters| crossbeam_fan_in(iters, PER_PRODUCER, SUSTAINED_CAPACITY))
    });
    group.finish();
}
