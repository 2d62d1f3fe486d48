//! [`KmsStats`]: counters an embedding program can read while the actor runs.
//!
//! All counters are monotonic and updated with `Relaxed` ordering: each is
//! an independent tally, read for reporting only, and never used to order
//! other memory operations.

use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters of one actor.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) batches: AtomicU64,
    pub(crate) batched_requests: AtomicU64,
    pub(crate) caller_verified: AtomicU64,
    pub(crate) caller_signed: AtomicU64,
    pub(crate) combined_batches: AtomicU64,
    pub(crate) combined_requests: AtomicU64,
    pub(crate) token_cache_hits: AtomicU64,
    pub(crate) token_cache_misses: AtomicU64,
    pub(crate) other_requests: AtomicU64,
    pub(crate) lagged_requests: AtomicU64,
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> KmsStats {
        KmsStats {
            batches: self.batches.load(Ordering::Relaxed),
            batched_requests: self.batched_requests.load(Ordering::Relaxed),
            caller_verified: self.caller_verified.load(Ordering::Relaxed),
            caller_signed: self.caller_signed.load(Ordering::Relaxed),
            combined_batches: self.combined_batches.load(Ordering::Relaxed),
            combined_requests: self.combined_requests.load(Ordering::Relaxed),
            token_cache_hits: self.token_cache_hits.load(Ordering::Relaxed),
            token_cache_misses: self.token_cache_misses.load(Ordering::Relaxed),
            other_requests: self.other_requests.load(Ordering::Relaxed),
            lagged_requests: self.lagged_requests.load(Ordering::Relaxed),
        }
    }
}

/// A snapshot of the actor's counters (counts since spawn).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct KmsStats {
    /// Verify batches dispatched to the pool.
    pub batches: u64,
    /// Verify requests dispatched in those batches.
    pub batched_requests: u64,
    /// Verify requests verified on their caller's task because the node
    /// was quiet (`KmsConfig::verify_on_caller_when_idle`); never published,
    /// so in no batch.
    pub caller_verified: u64,
    /// ML-DSA `sign_jwt` calls answered on their caller's task because the
    /// verify pool was idle (`KmsConfig::sign_on_caller_when_idle`),
    /// refusals such as `KeyDisabled` included; never published, so not in
    /// `other_requests`.
    pub caller_signed: u64,
    /// Batches verified on a leading caller's task under load, from the
    /// combining queue (`KmsConfig::combine_max`); never published, so
    /// not in `batches`.
    pub combined_batches: u64,
    /// Verify requests verified in those batches.
    pub combined_requests: u64,
    /// `verify_jwt` calls answered from the verified-token cache
    /// (`KmsConfig::token_cache`), no signature verified.
    pub token_cache_hits: u64,
    /// `verify_jwt` calls the cache, on, could not answer (the token was
    /// absent, or verified before the key set last changed).
    pub token_cache_misses: u64,
    /// Sign, create, rotate and attest requests served.
    pub other_requests: u64,
    /// Requests lost to a lagging request topic before the actor read them
    /// (their callers got [`kms_core::KmsError::Dropped`]).
    pub lagged_requests: u64,
}

impl KmsStats {
    /// What happened between `earlier` and this snapshot (each counter's
    /// difference; 0 if `earlier` is not older).
    pub fn since(&self, earlier: &KmsStats) -> KmsStats {
        KmsStats {
            batches: self.batches.saturating_sub(earlier.batches),
            batched_requests: self
                .batched_requests
                .saturating_sub(earlier.batched_requests),
            caller_verified: self.caller_verified.saturating_sub(earlier.caller_verified),
            caller_signed: self.caller_signed.saturating_sub(earlier.caller_signed),
            combined_batches: self
                .combined_batches
                .saturating_sub(earlier.combined_batches),
            combined_requests: self
                .combined_requests
                .saturating_sub(earlier.combined_requests),
            token_cache_hits: self
                .token_cache_hits
                .saturating_sub(earlier.token_cache_hits),
            token_cache_misses: self
                .token_cache_misses
                .saturating_sub(earlier.token_cache_misses),
            other_requests: self.other_requests.saturating_sub(earlier.other_requests),
            lagged_requests: self.lagged_requests.saturating_sub(earlier.lagged_requests),
        }
    }

    /// Mean verify requests per batch (0.0 before the first batch).
    pub fn mean_batch_size(&self) -> f64 {
        if self.batches == 0 {
            0.0
        } else {
            self.batched_requests as f64 / self.batches as f64
        }
    }
}
