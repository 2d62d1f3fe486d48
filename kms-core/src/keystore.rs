//! [`Keystore`]: an in-memory store of versioned Ed25519 keys (DESIGN §3.1).
//!
//! Invariants:
//! * A key has versions `1..=head`, stored in order; versions are only ever
//!   appended, never removed, so every version handed out keeps verifying.
//! * Only the head signs. `rotate` appends the new head under the key's write
//!   lock, so a reader sees the old head or the new one, never a torn state.
//! * Secret key material lives only in [`ed25519_dalek::SigningKey`], which
//!   zeroizes itself on drop; nothing here prints it (`Debug` shows public
//!   data only) and nothing returns it.
//!
//! The locks and `Arc`s come from [`crate::sync`], so `loom-tests/` checks
//! the rotation invariants above on this code.
//!
//! Lock order: the key map's lock is released before a key's versions lock
//! is taken; the two never nest.

use std::collections::HashMap;
use std::fmt;
use std::sync::PoisonError;
use std::time::SystemTime;

use curve25519_dalek::edwards::EdwardsPoint;
use ed25519_dalek::{Signer, SigningKey};
use uuid::Uuid;

use crate::ed25519;
use crate::error::KmsError;
use crate::key_id::{Alg, KeyId};
use crate::sync::{Arc, RwLock, RwLockReadGuard};

/// What [`Keystore::attest`] reports about a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attestation {
    /// The id of the head version.
    pub head: KeyId,
    /// The algorithm.
    pub alg: Alg,
    /// Every retained version, oldest first (`versions[i].version == i + 1`).
    pub versions: Vec<VersionInfo>,
}

/// One version of a key, as attested.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionInfo {
    /// 1-based version number.
    pub version: u32,
    /// The version's public key, 32 bytes (RFC 8032 §5.1.5).
    pub public_key: [u8; 32],
    /// When the version was created (wall clock).
    pub created_at: SystemTime,
}

/// One version of a key: its secret and what is public about it.
struct KeyVersion {
    info: VersionInfo,
    /// `info.public_key` decoded, once, when the version was made: verifying
    /// under a keystore key never decodes `A` again.
    point: EdwardsPoint,
    /// Zeroized on drop by ed25519-dalek (`zeroize` feature).
    signing_key: SigningKey,
}

impl fmt::Debug for KeyVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyVersion")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// A key: its names and its versions.
#[derive(Debug)]
struct KeyRecord {
    /// The id of version 1; other versions differ only in the version.
    id: KeyId,
    /// `versions[i]` is version `i + 1`; never empty; append-only.
    versions: RwLock<Vec<Arc<KeyVersion>>>,
}

impl KeyRecord {
    /// Read access to the versions. A poisoned lock still guards a whole
    /// list: the only write is one `push`.
    fn versions(&self) -> RwLockReadGuard<'_, Vec<Arc<KeyVersion>>> {
        self.versions.read().unwrap_or_else(PoisonError::into_inner)
    }
}

/// An in-memory keystore of versioned Ed25519 keys. Cheap to clone (clones
/// share the keys); `Send + Sync`.
#[derive(Clone, Default)]
pub struct Keystore {
    /// Keys by UUID. A key id must also match the record's tenant, purpose
    /// and algorithm to name it.
    keys: Arc<RwLock<HashMap<Uuid, Arc<KeyRecord>>>>,
}

impl fmt::Debug for Keystore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = self
            .keys
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        f.debug_struct("Keystore").field("keys", &count).finish()
    }
}

impl Keystore {
    /// An empty keystore.
    pub fn new() -> Self {
        Self::default()
    }

    /// Creates an Ed25519 key for `tenant` and `purpose`; returns the id of
    /// its version 1.
    ///
    /// # Errors
    /// [`KmsError::InvalidKeyId`] if `tenant` or `purpose` is not 1–64 bytes
    /// of `[A-Za-z0-9._-]`; [`KmsError::EntropyUnavailable`] if the
    /// operating system's random source fails.
    pub fn create_ed25519(&self, tenant: &str, purpose: &str) -> Result<KeyId, KmsError> {
        let uuid = uuid::Builder::from_random_bytes(random_bytes()?).into_uuid();
        let id = KeyId::new(tenant, purpose, Alg::Ed25519, uuid, 1)?;
        let version = new_version(1)?;
        let record = Arc::new(KeyRecord {
            id: id.clone(),
            versions: RwLock::new(vec![Arc::new(version)]),
        });
        // Poisoning cannot leave the map torn: the only write is one insert.
        self.keys
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(uuid, record);
        Ok(id)
    }

    /// Signs `message` with the key's head version; returns the head's id
    /// and the 64-byte signature (RFC 8032 §5.1.6). The version in `key` may
    /// be any existing version; the head signs regardless.
    ///
    /// # Errors
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`].
    pub fn sign(&self, key: &KeyId, message: &[u8]) -> Result<(KeyId, [u8; 64]), KmsError> {
        let record = self.record(key)?;
        // Clone the head out so the lock is not held while signing.
        let head = {
            let versions = record.versions();
            version_of(&versions, key)?;
            versions.last().cloned()
        }
        .ok_or_else(|| KmsError::Internal {
            reason: format!("key {} has no version", record.id),
        })?;
        let signature = head.signing_key.sign(message).to_bytes();
        Ok((record.id.with_version(head.info.version), signature))
    }

    /// Verifies `signature` on `message` under the version `key` names,
    /// with the criteria of DESIGN §3.2 ([`ed25519::verify`]).
    ///
    /// # Errors
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`], or
    /// [`KmsError::InvalidSignature`] naming the rule that failed.
    pub fn verify(
        &self,
        key: &KeyId,
        message: &[u8],
        signature: &[u8; 64],
    ) -> Result<(), KmsError> {
        let record = self.record(key)?;
        let version = Arc::clone(version_of(&record.versions(), key)?);
        ed25519::verify_with_point(&version.point, &version.info.public_key, message, signature)
            .map_err(KmsError::from)
    }

    /// Adds a new head version to the key `key` names (any existing version
    /// of it); returns the new head's id. Older versions keep verifying.
    ///
    /// # Errors
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`],
    /// [`KmsError::VersionsExhausted`] at version 4294967295,
    /// [`KmsError::EntropyUnavailable`].
    pub fn rotate(&self, key: &KeyId) -> Result<KeyId, KmsError> {
        let record = self.record(key)?;
        version_of(&record.versions(), key)?;
        // Generate outside the lock; the version number is fixed under it.
        let mut fresh = new_version(0)?;
        let mut versions = record
            .versions
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let next = u32::try_from(versions.len())
            .ok()
            .and_then(|n| n.checked_add(1))
            .ok_or_else(|| KmsError::VersionsExhausted {
                key: key.to_string(),
            })?;
        fresh.info.version = next;
        versions.push(Arc::new(fresh));
        Ok(record.id.with_version(next))
    }

    /// Reports the key's algorithm, head, and every version with its public
    /// key and creation time.
    ///
    /// # Errors
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`].
    pub fn attest(&self, key: &KeyId) -> Result<Attestation, KmsError> {
        let record = self.record(key)?;
        let versions: Vec<VersionInfo> = {
            let versions = record.versions();
            version_of(&versions, key)?;
            versions.iter().map(|v| v.info.clone()).collect()
        };
        let head_version = versions.last().map_or(1, |v| v.version);
        Ok(Attestation {
            head: record.id.with_version(head_version),
            alg: record.id.alg(),
            versions,
        })
    }

    /// The 32-byte public key of the version `key` names.
    ///
    /// # Errors
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`].
    pub fn public_key(&self, key: &KeyId) -> Result<[u8; 32], KmsError> {
        let record = self.record(key)?;
        let versions = record.versions();
        version_of(&versions, key).map(|v| v.info.public_key)
    }

    fn record(&self, key: &KeyId) -> Result<Arc<KeyRecord>, KmsError> {
        let keys = self.keys.read().unwrap_or_else(PoisonError::into_inner);
        keys.get(&key.uuid())
            .filter(|r| {
                r.id.tenant() == key.tenant()
                    && r.id.purpose() == key.purpose()
                    && r.id.alg() == key.alg()
            })
            .cloned()
            .ok_or_else(|| KmsError::UnknownKey {
                key: key.to_string(),
            })
    }
}

fn version_of<'a>(
    versions: &'a [Arc<KeyVersion>],
    key: &KeyId,
) -> Result<&'a Arc<KeyVersion>, KmsError> {
    key.version()
        .checked_sub(1)
        .and_then(|index| versions.get(usize::try_from(index).ok()?))
        .ok_or_else(|| KmsError::UnknownVersion {
            key: key.to_string(),
            version: key.version(),
            head: u32::try_from(versions.len()).unwrap_or(u32::MAX),
        })
}

fn random_bytes<const N: usize>() -> Result<[u8; N], KmsError> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|_| KmsError::EntropyUnavailable)?;
    Ok(bytes)
}

fn new_version(version: u32) -> Result<KeyVersion, KmsError> {
    // The seed is wiped when `seed` drops; `SigningKey` keeps its own copy,
    // which it zeroizes on drop.
    let mut seed = zeroize::Zeroizing::new([0u8; 32]);
    getrandom::fill(&mut *seed).map_err(|_| KmsError::EntropyUnavailable)?;
    let signing_key = SigningKey::from_bytes(&seed);
    let verifying_key = signing_key.verifying_key();
    Ok(KeyVersion {
        info: VersionInfo {
            version,
            public_key: verifying_key.to_bytes(),
            created_at: SystemTime::now(),
        },
        point: verifying_key.to_edwards(),
        signing_key,
    })
}
