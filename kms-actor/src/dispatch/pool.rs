//! The dedicated verify pool: a named `rayon::ThreadPool`, the count of
//! batches in flight on it, and joining its threads at shutdown.
//!
//! Invariant: `in_flight` counts jobs (verify batches, ML-DSA signatures)
//! handed to the pool that have not finished (incremented before `spawn`,
//! decremented by the job's guard even if the job panics), so the
//! coalescer can tell whether a thread is idle, and a caller whether it
//! may sign on its own task (`CallerSide::sign_if_idle`, a hint there).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};

use kms_core::KmsError;
use metrics::Gauge;
use tokio::sync::Notify;

/// The pool and its bookkeeping.
pub(crate) struct VerifyPool {
    pool: rayon::ThreadPool,
    threads: usize,
    load: Arc<Load>,
    /// One message per pool thread as it exits (rayon's exit handler).
    /// In a `Mutex` only to make the pool `Sync`; used once, by `join`.
    exited: Mutex<mpsc::Receiver<()>>,
}

/// Batches in flight, and a wake for the coalescer when one finishes.
pub(crate) struct Load {
    in_flight: AtomicUsize,
    finished: Notify,
    /// `kms_batches_in_flight`, moved with `in_flight`.
    gauge: Gauge,
}

/// Decrements the in-flight count when a job ends, however it ends.
struct FinishGuard(Arc<Load>);

impl Load {
    /// Batches (and ML-DSA signatures) handed to the pool and not yet
    /// finished.
    pub(crate) fn in_flight(&self) -> usize {
        // Acquire pairs with the Release decrement in `FinishGuard::drop`
        // (the coalescer's "idle"); a caller deciding where to sign reads
        // it only as a hint and relies on nothing it orders.
        self.in_flight.load(Ordering::Acquire)
    }
}

impl Drop for FinishGuard {
    fn drop(&mut self) {
        // Release pairs with the Acquire load in `Load::in_flight`, so a
        // coalescer that sees the lower count also sees the job's replies
        // sent (not needed for correctness of the replies, which carry their
        // own synchronization, but it keeps "idle" truthful).
        self.0.in_flight.fetch_sub(1, Ordering::Release);
        self.0.gauge.decrement(1.0);
        // notify_one stores a permit if nobody waits yet; `wait_below`
        // re-checks the count after registering either way.
        self.0.finished.notify_one();
    }
}

impl VerifyPool {
    /// Builds a pool of `threads` threads named `kms-verify-<i>`.
    ///
    /// # Errors
    /// [`KmsError::Internal`] if the threads cannot be started.
    pub(crate) fn new(threads: usize, in_flight_gauge: Gauge) -> Result<Self, KmsError> {
        let (exit_tx, exited) = mpsc::channel();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("kms-verify-{i}"))
            // Jobs catch their own panics (`batch::run`) and answer their
            // requests `Internal`; this handler only keeps an escaped panic
            // from aborting the process (rayon's default for `spawn`).
            .panic_handler(|_| {
                tracing::error!(
                    target: "kms_actor::pool",
                    "a panic escaped a verify job; the pool keeps running"
                );
            })
            .exit_handler(move |_| {
                // The receiver lives until `join`; a failed send means
                // nobody is joining any more.
                let _ = exit_tx.send(());
            })
            .build()
            .map_err(|e| KmsError::Internal {
                reason: format!("cannot start the verify pool: {e}"),
            })?;
        Ok(VerifyPool {
            pool,
            threads,
            load: Arc::new(Load {
                in_flight: AtomicUsize::new(0),
                finished: Notify::new(),
                gauge: in_flight_gauge,
            }),
            exited: Mutex::new(exited),
        })
    }

    /// Pool size (threads).
    pub(crate) fn threads(&self) -> usize {
        self.threads
    }

    /// Batches handed to the pool and not yet finished.
    pub(crate) fn in_flight(&self) -> usize {
        self.load.in_flight()
    }

    /// The pool's load, for those outside the actor's task that ask
    /// whether it is idle (`CallerSide`).
    pub(crate) fn load(&self) -> Arc<Load> {
        Arc::clone(&self.load)
    }

    /// Runs `job` on a pool thread, counted in flight until it returns or
    /// panics.
    pub(crate) fn spawn(&self, job: impl FnOnce() + Send + 'static) {
        self.load.in_flight.fetch_add(1, Ordering::AcqRel);
        self.load.gauge.increment(1.0);
        let guard = FinishGuard(Arc::clone(&self.load));
        self.pool.spawn(move || {
            let _guard = guard;
            job();
        });
    }

    /// Waits until fewer than `limit` batches are in flight.
    ///
    /// # Cancel safety
    /// Cancel safe: it holds nothing; dropping it loses no wake that matters,
    /// since every call re-checks the count after registering.
    pub(crate) async fn wait_below(&self, limit: usize) {
        loop {
            let finished = self.load.finished.notified();
            tokio::pin!(finished);
            // Register first, then re-check: a job that finishes between the
            // check and the await has already notified a registered waiter.
            finished.as_mut().enable();
            if self.in_flight() < limit {
                return;
            }
            finished.await;
        }
    }

    /// Drops the pool and blocks until every pool thread has exited.
    /// Call with nothing in flight (after `wait_below(1)`).
    pub(crate) fn join(self) {
        let VerifyPool {
            pool,
            threads,
            exited,
            ..
        } = self;
        drop(pool);
        let exited = exited.into_inner().unwrap_or_else(PoisonError::into_inner);
        for _ in 0..threads {
            if exited.recv().is_err() {
                break;
            }
        }
    }
}
