//! A bounded, process-wide cache of decompressed, validated public keys
//! (docs/DESIGN.md §3.3), so a hot key is decompressed and checked once, not once
//! per signature.
//!
//! Invariant: a point is in the cache only under the 32 bytes it was decoded
//! from, and only if those bytes passed rules 2 and 3 of docs/DESIGN.md §3.2
//! (canonical encoding, decodable, not of small order). A hit therefore
//! gives exactly the verdict and the point a fresh decode would: verdicts
//! never depend on what is cached, only the cost does.
//!
//! The map is quick_cache's `sync::Cache` (S3-FIFO eviction, sharded, one
//! read-write lock per shard): concurrent readers of different keys take
//! different shard locks and readers of the same key share a read lock, so
//! no single lock serializes verification. S3-FIFO keeps a hot key resident
//! while a flood of one-off keys (an attacker sending fresh keys) passes
//! through the small probation queue.

use std::sync::LazyLock;

use curve25519_dalek::edwards::EdwardsPoint;
use quick_cache::sync::Cache;

/// Most public keys the cache holds: 4096 keys at about 200 bytes each
/// (32-byte key, 160-byte extended point, bookkeeping), under 1 MiB.
pub const KEY_CACHE_CAPACITY: usize = 4096;

static CACHE: LazyLock<Cache<[u8; 32], EdwardsPoint>> =
    LazyLock::new(|| Cache::new(KEY_CACHE_CAPACITY));

/// The cached point for `public_key`, if it was validated before.
pub(crate) fn get(public_key: &[u8; 32]) -> Option<EdwardsPoint> {
    CACHE.get(public_key)
}

/// Records that `public_key` decodes to `point` and passed rules 2 and 3.
/// Callers must only insert keys that did (see the module invariant).
pub(crate) fn insert(public_key: [u8; 32], point: EdwardsPoint) {
    CACHE.insert(public_key, point);
}

/// Number of keys cached now (at most [`KEY_CACHE_CAPACITY`]).
#[cfg(test)]
fn cached_keys() -> usize {
    CACHE.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use curve25519_dalek::constants::ED25519_BASEPOINT_POINT;
    use curve25519_dalek::scalar::Scalar;

    #[test]
    fn stays_bounded_and_returns_what_was_inserted() {
        for i in 0..(KEY_CACHE_CAPACITY as u64 * 2) {
            let p = ED25519_BASEPOINT_POINT * Scalar::from(i + 1);
            insert(p.compress().to_bytes(), p);
        }
        assert!(cached_keys() <= KEY_CACHE_CAPACITY);
        let p = ED25519_BASEPOINT_POINT * Scalar::from(7u64);
        let bytes = p.compress().to_bytes();
        insert(bytes, p);
        assert_eq!(get(&bytes), Some(p));
    }
}
