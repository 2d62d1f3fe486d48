//! Splitting one batch across the rayon pool it runs on (DESIGN §3.3 and
//! §5: batches run on the actor's dedicated pool).
//!
//! Invariant: the split only decides which thread checks which items; each
//! part is checked by [`super::batch::verify_chunk`], whose verdicts do not
//! depend on what shares its part. Each part decodes and hashes its own
//! items, so those run in parallel too rather than serially before the
//! split. A batch of one item, a batch smaller than two parts of
//! [`PARALLEL_MIN_ITEMS`], and any batch verified outside a rayon pool run
//! on the calling thread with no fork-join at all.

use rayon::prelude::*;

use super::batch::{verify_chunk, Verdict};
use super::policy;
use super::{verify, BatchItem};

/// Fewest items worth giving a thread of their own: below this the fixed
/// cost of a second combination and of the fork-join outweighs the gain.
pub const PARALLEL_MIN_ITEMS: usize = 32;

/// See [`super::verify_batch`].
pub(crate) fn verify_batch(items: &[BatchItem<'_>]) -> Vec<Verdict> {
    let mut out = vec![Ok(()); items.len()];
    match items {
        [] => {}
        [one] => out[0] = verify(one.public_key, one.message, one.signature),
        _ => {
            let plan = policy::plan(items.len());
            let parts = parts(items.len(), pool_threads());
            if parts <= 1 {
                verify_chunk(items, &mut out, plan);
            } else {
                let size = items.len().div_ceil(parts);
                items
                    .par_chunks(size)
                    .zip(out.par_chunks_mut(size))
                    .for_each(|(items, out)| verify_chunk(items, out, plan));
            }
        }
    }
    out
}

/// Threads of the rayon pool the caller runs on, or 1 outside any pool (a
/// library call from an arbitrary thread does not start rayon's global
/// pool).
fn pool_threads() -> usize {
    if rayon::current_thread_index().is_some() {
        rayon::current_num_threads()
    } else {
        1
    }
}

/// How many parts to split `n` items into on `threads` threads.
fn parts(n: usize, threads: usize) -> usize {
    threads.min(n / PARALLEL_MIN_ITEMS).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_batches_and_lone_threads_are_not_split() {
        assert_eq!(parts(1, 2), 1);
        assert_eq!(parts(2 * PARALLEL_MIN_ITEMS - 1, 2), 1);
        assert_eq!(parts(2 * PARALLEL_MIN_ITEMS, 2), 2);
        assert_eq!(parts(4096, 1), 1);
        assert_eq!(parts(1024, 8), 8);
    }

    #[test]
    fn outside_a_pool_nothing_is_split() {
        assert_eq!(pool_threads(), 1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .expect("pool");
        assert_eq!(pool.install(pool_threads), 3);
    }
}
