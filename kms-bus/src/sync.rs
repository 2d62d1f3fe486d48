//! The one place this crate takes its concurrency primitives from.
//!
//! Every lock, atomic and wake-up primitive used by the bus is imported from
//! here and nowhere else, so that a loom build can swap them all in one place.
//! The loom branch (switched on `cfg(kms_loom)`, never `cfg(loom)`, which
//! tokio reads itself) is added together with the SoA backend and its loom
//! models; loom is not a dependency yet, so today this module always
//! re-exports `std` and `tokio`.

pub(crate) use std::sync::atomic::{AtomicUsize, Ordering};
pub(crate) use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
pub(crate) use tokio::sync::Notify;

/// Locks `mutex`, recovering the guard if a previous holder panicked.
///
/// Poisoning only records that a thread panicked while holding the lock; the
/// data is still there. Recovering it is sound exactly when every critical
/// section leaves the protected state consistent at every point where it can
/// panic. Each caller states why that holds for the state it protects (see
/// the `Ring` docs in `classic.rs` and the registry docs in `bus.rs`).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
