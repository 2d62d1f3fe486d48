//! [`AntiRollback`]: refuses envelopes older than the newest one accepted.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use super::{Envelope, Plaintext, SealError, SealKey};

/// Remembers, per sealing key id and version, the highest counter it has
/// accepted, and rejects an authentic envelope whose counter is below it: a
/// replayed older copy of a secret (an old keystore file, a previous
/// export). An envelope with the same counter as the newest (opened twice)
/// is accepted.
///
/// Keyed by id *and* version because each [`SealKey`] version numbers its
/// envelopes from 1: the first envelope of `svc@v2` is not a rollback of
/// `svc@v1`'s third.
///
/// In memory only: a process that restarts must seed it
/// ([`AntiRollback::accept_at_least`]) from what it trusts, e.g. the
/// counter stored with the data.
#[derive(Debug, Default)]
pub struct AntiRollback {
    newest: Mutex<HashMap<(String, u32), u64>>,
}

impl AntiRollback {
    /// A policy that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens `envelope` with `key` (see [`SealKey::open`]) and accepts it
    /// only if its counter is not below the newest accepted for its key id
    /// and version; then records it as the newest if it is.
    ///
    /// # Errors
    /// Every error of [`SealKey::open`] (checked first: a forged counter is
    /// never recorded), then [`SealError::Rollback`].
    pub fn open(
        &self,
        key: &SealKey,
        aad: &[u8],
        envelope: &Envelope,
    ) -> Result<Plaintext, SealError> {
        let plaintext = key.open(aad, envelope)?;
        let header = &envelope.header;
        self.accept(&header.key_id, header.key_version, header.counter)?;
        Ok(plaintext)
    }

    /// Raises the newest counter known for `key_id` version `key_version`
    /// to at least `counter`.
    pub fn accept_at_least(&self, key_id: &str, key_version: u32, counter: u64) {
        let mut newest = self.newest.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = newest.entry((key_id.to_owned(), key_version)).or_insert(0);
        *entry = (*entry).max(counter);
    }

    /// The newest counter accepted for `key_id` version `key_version` (0
    /// if none).
    pub fn newest(&self, key_id: &str, key_version: u32) -> u64 {
        let newest = self.newest.lock().unwrap_or_else(PoisonError::into_inner);
        newest
            .get(&(key_id.to_owned(), key_version))
            .copied()
            .unwrap_or(0)
    }

    fn accept(&self, key_id: &str, key_version: u32, counter: u64) -> Result<(), SealError> {
        // One lock for the check and the update, so two opens racing cannot
        // both pass against a stale newest.
        let mut newest = self.newest.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = newest.entry((key_id.to_owned(), key_version)).or_insert(0);
        if counter < *entry {
            return Err(SealError::Rollback {
                key_id: key_id.to_owned(),
                key_version,
                counter,
                newest: *entry,
            });
        }
        *entry = counter;
        Ok(())
    }
}
