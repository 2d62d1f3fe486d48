//! `actor/scale`: how verification through the actor scales with the
//! threads given to it. Not a Criterion timing.
//!
//! For 1, 2, 4, 8 and 16 threads (those this machine has cores for), a
//! tokio runtime of that many workers and an actor whose pool has that
//! many threads verify `SCALE_ITEMS` signatures (distinct keys, held as
//! bytes) sent by 1024 client tasks, one request at a time each, three
//! ways: with the defaults (combining on: under load callers verify batches
//! on their own tasks), with combining off (every request under load through
//! the one actor task to the pool), and, as the peer, `verify_batch` of
//! `SCALE_ITEMS / threads` per thread on that many threads. It prints
//! verifies/s in all and per thread (best of three runs each). If the
//! pool-only figure per thread falls as threads are added while the peer's
//! holds, the single actor task is the bottleneck.

use std::sync::Arc;

use kms::actor::{KmsActor, KmsConfig};
use kms::bus::Bus;
use kms::core::Keystore;

use crate::{batched_rate, end_to_end_with, items, rate, Item, CLIENTS};

/// Signatures verified per run (count).
const SCALE_ITEMS: usize = 32_768;

/// Thread counts measured, those above the machine's cores skipped.
const SIZES: [usize; 5] = [1, 2, 4, 8, 16];

/// Best-of-three verifies/s of `SCALE_ITEMS` through an actor of `threads`
/// pool threads on a runtime of `threads` workers, with `combine_max`.
fn through_actor(items: &Arc<Vec<Item>>, threads: usize, combine_max: usize) -> Run {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let handle = {
        let _guard = rt.enter();
        KmsActor::spawn(
            KmsConfig::default()
                .with_threads(threads)
                .with_combine_max(combine_max),
            Keystore::new(),
            &Bus::new(),
        )
        .expect("spawn")
    };
    let kms = handle.client();
    // Warm the key cache and the pool.
    rt.block_on(end_to_end_with(&kms, items, CLIENTS));
    let before = handle.stats();
    let best = (0..3)
        .map(|_| {
            rate(items.len(), || {
                rt.block_on(end_to_end_with(&kms, items, CLIENTS))
            })
        })
        .fold(0.0, f64::max);
    let stats = handle.stats().since(&before);
    rt.block_on(handle.shutdown());
    Run {
        rate: best,
        pool_batch: stats.mean_batch_size(),
        combined: stats.combined_requests as f64 / (3 * items.len()) as f64,
    }
}

/// What [`through_actor`] measured.
struct Run {
    /// Verifies/s, best of three.
    rate: f64,
    /// Mean requests per pool batch.
    pool_batch: f64,
    /// Share of the requests verified by leading callers (combining).
    combined: f64,
}

/// Best-of-three verifies/s of `verify_batch` of an equal share of the
/// items, as one batch, on each of `threads` threads.
fn peer(items: &[Item], threads: usize) -> f64 {
    let share = items.len().div_ceil(threads);
    (0..3)
        .map(|_| batched_rate(items, threads, share))
        .fold(0.0, f64::max)
}

/// Prints `actor/scale` (module docs).
pub(crate) fn scale() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let items = Arc::new(items(SCALE_ITEMS));
    for threads in SIZES.into_iter().filter(|&t| t <= cores) {
        let combined = through_actor(&items, threads, KmsConfig::default().combine_max);
        let pool_only = through_actor(&items, threads, 0);
        let peer = peer(&items, threads);
        let k = |r: f64| r / 1000.0;
        let t = threads as f64;
        println!(
            "actor/scale {threads:>2} threads: defaults {:.0} k/s ({:.1} k/s per thread; {:.0} % \
             by leaders, pool batches of {:.0}), combining off {:.0} k/s ({:.1} per thread; pool \
             batches of {:.0}), verify_batch peer {:.0} k/s ({:.1} per thread); defaults / peer \
             {:.2}, combining off / peer {:.2}",
            k(combined.rate),
            k(combined.rate) / t,
            100.0 * combined.combined,
            combined.pool_batch,
            k(pool_only.rate),
            k(pool_only.rate) / t,
            pool_only.pool_batch,
            k(peer),
            k(peer) / t,
            combined.rate / peer,
            pool_only.rate / peer,
        );
    }
}
