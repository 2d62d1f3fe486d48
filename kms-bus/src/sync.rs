//! The one place this crate takes its concurrency primitives from.
//!
//! Every lock, atomic, cell and spin hint used by the bus is imported from
//! here and nowhere else, so that a loom build checks the code that ships.
//! The switch is `cfg(kms_loom)` (set with `RUSTFLAGS="--cfg kms_loom"`, see
//! `loom-tests/`), never `cfg(loom)`, which tokio reads itself and breaks.
//! The exceptions: `blocking.rs`, left out of the loom build: it holds
//! no shared state, only a calling thread's own back-off (its `Snooze`, on
//! crossbeam-utils' `Backoff` schedule) and park around the operations the
//! models check; and `soa.rs`'s `delay`, the pause after a reservation
//! lost the tail to another publisher, which waits for nothing and so is
//! the CPU's spin hint in both builds (a loom yield there would only add
//! branches to the models).
//!
//! [`Notify`] is tokio's in both builds: loom cannot model tokio's internals,
//! but its contract ("a `Notified` created before `notify_waiters` is woken by
//! it") is all the bus relies on, and loom's `block_on` drives the futures
//! with a loom-aware waker, so the models still explore every interleaving of
//! the bus's own atomics around it.

#[cfg(not(kms_loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(kms_loom))]
pub(crate) use std::sync::{Arc, Mutex, MutexGuard};

#[cfg(kms_loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(kms_loom)]
pub(crate) use loom::sync::{Arc, Mutex, MutexGuard};

pub(crate) use std::sync::PoisonError;
pub(crate) use tokio::sync::Notify;

/// Locks `mutex`, recovering the guard if a previous holder panicked.
///
/// Poisoning only records that a thread panicked while holding the lock; the
/// data is still there. Recovering it is sound exactly when every critical
/// section leaves the protected state consistent at every point where it can
/// panic. Each caller states why that holds for the state it protects (see
/// the `Ring` docs in `classic.rs`, the membership docs in `soa.rs` and the
/// registry docs in `bus.rs`).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One step of a bounded busy-wait: a CPU spin hint, and under loom a yield
/// to the other modelled threads (loom requires every spin loop to yield).
pub(crate) fn spin_loop() {
    #[cfg(not(kms_loom))]
    std::hint::spin_loop();
    #[cfg(kms_loom)]
    loom::hint::spin_loop();
}

/// Yields the thread after a busy-wait has lasted a while (the waited-for
/// thread may have been preempted).
pub(crate) fn yield_now() {
    #[cfg(not(kms_loom))]
    std::thread::yield_now();
    #[cfg(kms_loom)]
    loom::thread::yield_now();
}

/// A `SeqCst` fence in loom builds only, placed right after a `SeqCst`
/// read-modify-write whose store-load ordering an argument relies on.
///
/// In the C11 model a `SeqCst` read-modify-write followed by a `SeqCst`
/// load already takes part in the single total order, so the fence adds
/// nothing (and on x86 the locked instruction is a full barrier). Loom,
/// however, models `SeqCst` accesses as `AcqRel` (loom's README,
/// "Unsupported features"; it does model `fence(SeqCst)`), and would report
/// false lost wake-ups without it.
#[inline(always)]
pub(crate) fn seqcst_fence_for_loom() {
    #[cfg(kms_loom)]
    loom::sync::atomic::fence(Ordering::SeqCst);
}

/// Under loom, yields the modelled thread: a future that re-polls itself at
/// once (the `recv` path that waits for an in-flight publish) must let the
/// other modelled threads run, as loom requires of every spin. Outside loom
/// it does nothing; the async runtime schedules the other tasks.
pub(crate) fn yield_in_model() {
    #[cfg(kms_loom)]
    loom::thread::yield_now();
}

/// An `UnsafeCell` with loom's closure API, so loom can check every access
/// to a payload slot for data races; outside loom it is a zero-cost wrapper
/// around [`std::cell::UnsafeCell`].
#[cfg(not(kms_loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(kms_loom))]
impl<T> UnsafeCell<T> {
    /// Wraps `value`.
    pub(crate) const fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }

    /// Runs `f` with a shared pointer to the contents.
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Runs `f` with an exclusive pointer to the contents.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

#[cfg(kms_loom)]
pub(crate) use loom::cell::UnsafeCell;
