//! [`KeySetGeneration`]: a count of the changes to the keys that decide
//! verdicts, for caches of what those keys decide.
//!
//! Invariant: the count is advanced after the change it counts is visible
//! (made in memory, under the key's lock), never before; so a reader that
//! loads generation `g` and then reads the keys sees at least the state
//! of `g`. A cache tags each entry with the generation it loaded before
//! computing it, and uses an entry only while [`KeySetGeneration::get`]
//! still returns that tag: an entry computed before a change is never used
//! after it, whatever the interleaving.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A shared, monotonic count of key-set changes (module docs). Cheap to
/// clone: clones share the count.
///
/// [`Keystore::key_set_generation`](crate::Keystore::key_set_generation)
/// advances with every change to a key's versions, policy or state that
/// this keystore's memory takes: a key created or imported, a rotation, a
/// policy change, a trim, a destroy, and the changes of other fleet
/// nodes applied by [`Keystore::refresh`](crate::Keystore::refresh).
/// Other owners of keys that decide verdicts (the actor's trusted JWK
/// Sets) advance the same count.
#[derive(Debug, Clone, Default)]
pub struct KeySetGeneration(Arc<AtomicU64>);

impl KeySetGeneration {
    /// The current generation.
    pub fn get(&self) -> u64 {
        // Acquire pairs with `advance`'s Release: a reader that sees the
        // new count sees the change made before it.
        self.0.load(Ordering::Acquire)
    }

    /// Counts one change, made visible before this call.
    pub fn advance(&self) {
        // Release: publishes the change made before it (see `get`).
        self.0.fetch_add(1, Ordering::Release);
    }
}
