//! [`Keyring`]: the versions of one master key a durable store opens with.
//!
//! Invariant: a keyring holds at least one [`SealKey`], all with the same
//! id and distinct versions, sorted oldest first; the newest seals, and any
//! opens the envelopes its header names.

use std::fmt;

use super::{Envelope, SealError, SealKey};

/// Several versions of one sealing key: the newest seals, every one opens
/// what was sealed under it. A durable keystore opens with a keyring so
/// that a master-key rotation (seal everything under v2, then retire v1)
/// can be done without downtime and survive a crash midway
/// ([`crate::Keystore::rewrap`]).
///
/// `Debug` shows ids, versions and counters only.
pub struct Keyring {
    /// Oldest first; never empty; one id; versions strictly increasing.
    keys: Vec<SealKey>,
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.keys).finish()
    }
}

impl From<SealKey> for Keyring {
    /// A keyring of one key.
    fn from(key: SealKey) -> Keyring {
        Keyring { keys: vec![key] }
    }
}

impl Keyring {
    /// A keyring of `keys`, in any order.
    ///
    /// # Errors
    /// [`SealError::InvalidKey`] if `keys` is empty, mixes key ids, or
    /// holds one version twice (converted to
    /// [`crate::KmsError::InvalidArgument`]).
    pub fn new(keys: impl IntoIterator<Item = SealKey>) -> Result<Keyring, SealError> {
        let invalid = |reason: &str| SealError::InvalidKey {
            what: "keyring",
            reason: reason.to_owned(),
        };
        let mut keys: Vec<SealKey> = keys.into_iter().collect();
        keys.sort_by_key(SealKey::version);
        let first = keys.first().ok_or_else(|| invalid("holds no key"))?;
        if keys.iter().any(|k| k.id() != first.id()) {
            return Err(invalid("mixes key ids; one master key's versions only"));
        }
        if keys.windows(2).any(|w| w[0].version() == w[1].version()) {
            return Err(invalid("holds one version twice"));
        }
        Ok(Keyring { keys })
    }

    /// The newest version: what seals.
    pub fn newest(&self) -> &SealKey {
        // Never empty (the type's invariant).
        &self.keys[self.keys.len() - 1]
    }

    /// The key version `version`, if the keyring holds it.
    pub fn get(&self, version: u32) -> Option<&SealKey> {
        self.keys.iter().find(|k| k.version() == version)
    }

    /// The keys, oldest first.
    pub fn keys(&self) -> &[SealKey] {
        &self.keys
    }

    /// The keyring with each key's envelope counter continued past
    /// `newest_seen(version)` (see [`SealKey::with_counter`]).
    pub(crate) fn continue_counters(self, newest_seen: impl Fn(u32) -> u64) -> Keyring {
        let keys = self
            .keys
            .into_iter()
            .map(|k| {
                let counter = k.counter().max(newest_seen(k.version()));
                k.with_counter(counter)
            })
            .collect();
        Keyring { keys }
    }

    /// Opens `envelope` with the version its header names.
    ///
    /// # Errors
    /// [`SealError::WrongKey`] if the header names another key id or a
    /// version this keyring lacks; every error of [`SealKey::open`].
    pub fn open(&self, aad: &[u8], envelope: &Envelope) -> Result<super::Plaintext, SealError> {
        let header = &envelope.header;
        let newest = self.newest();
        match self.get(header.key_version) {
            Some(key) if header.key_id == key.id() => key.open(aad, envelope),
            _ => Err(SealError::WrongKey {
                envelope: format!("{}@v{}", header.key_id, header.key_version),
                key: format!(
                    "{}@{}",
                    newest.id(),
                    self.keys
                        .iter()
                        .map(|k| format!("v{}", k.version()))
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            }),
        }
    }
}
