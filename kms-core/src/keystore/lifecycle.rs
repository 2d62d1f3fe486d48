//! The key lifecycle (docs/DESIGN.md §3.1, "Lifecycle"): a key's policy
//! ([`Keystore::policy`], [`Keystore::set_policy`]), trimming old versions
//! ([`Keystore::trim`]), destroying a key ([`Keystore::destroy`]) and
//! scheduled rotation ([`Keystore::due_for_rotation`]).
//!
//! Every change follows `rotate`'s order: under a durable store's mutation
//! lock it is planned from the key as it is (read lock), committed, then
//! applied in memory under the key's write lock by the same plan, so the
//! store and memory agree and readers wait for no fsync. An in-memory
//! keystore plans and applies under the write lock alone.

use std::time::SystemTime;

use super::policy::{check_change, KeyPolicy};
use super::records::{KeyState, RetiredVersion};
use super::{KeyRecord, KeyVersion, KeyVersions, Keystore};
use crate::error::KmsError;
use crate::key_id::KeyId;
use crate::sync::{Arc, RwLockWriteGuard};

impl Keystore {
    /// The policy of `key`'s key (any version of it names it).
    ///
    /// # Errors
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`],
    /// [`KmsError::KeyDestroyed`].
    pub fn policy(&self, key: &KeyId) -> Result<KeyPolicy, KmsError> {
        let record = self.record(key)?;
        let versions = record.versions();
        versions.get(key)?;
        Ok(versions.state.policy.clone())
    }

    /// Replaces the policy of `key`'s key with `policy`, durably and
    /// atomically, and returns it. Read the policy, change a field, write
    /// it back.
    ///
    /// # Errors
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`],
    /// [`KmsError::KeyDestroyed`]; [`KmsError::InvalidArgument`] if
    /// `min_verify_version` is below the lowest version not trimmed or
    /// above the head, `exportable` would be turned off, or
    /// `auto_rotate_after` is under [`super::MIN_AUTO_ROTATE`]; on a
    /// durable store the write errors of [`Keystore::create_ed25519`].
    pub fn set_policy(&self, key: &KeyId, policy: KeyPolicy) -> Result<KeyPolicy, KmsError> {
        let plan = |versions: &KeyVersions| -> Result<KeyState, KmsError> {
            versions.get(key)?;
            let state = &versions.state;
            check_change(
                &state.policy,
                &policy,
                versions.head(),
                state.min_available_version,
            )?;
            Ok(KeyState {
                policy: policy.clone(),
                ..state.clone()
            })
        };
        self.change(
            key,
            plan,
            |durable, sequences, record, versions, state| {
                durable.write_state(sequences, &record.id, versions.head(), state)
            },
            |versions, state| versions.state = state,
        )?;
        Ok(policy)
    }

    /// Destroys the secrets of versions below `below` of `key`'s key: they
    /// are wiped in memory (when the last signature in flight with one
    /// finishes) and their records removed from the store, and no longer
    /// readable from its files. Their public keys stay, for
    /// [`Keystore::attest`]; signatures under them were already refused
    /// (they are below `min_verify_version`). A `below` at or under the
    /// versions already trimmed changes nothing. Returns the key's
    /// `min_available_version` afterwards: its lowest version that keeps
    /// its secret.
    ///
    /// # Errors
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`],
    /// [`KmsError::KeyDestroyed`]; [`KmsError::InvalidArgument`] if `below`
    /// exceeds the key's `min_verify_version` (raise that first) or its
    /// head; on a durable store the write errors of
    /// [`Keystore::create_ed25519`].
    pub fn trim(&self, key: &KeyId, below: u32) -> Result<u32, KmsError> {
        let plan = |versions: &KeyVersions| -> Result<Option<KeyState>, KmsError> {
            versions.get(key)?;
            let state = &versions.state;
            if below <= state.min_available_version {
                return Ok(None);
            }
            let min = state.policy.min_verify_version;
            if below > min || below > versions.head() {
                return Err(KmsError::InvalidArgument {
                    what: "trim",
                    reason: format!(
                        "below {below} exceeds the key's min_verify_version {min} or its head v{}",
                        versions.head()
                    ),
                });
            }
            Ok(Some(KeyState {
                min_available_version: below,
                ..state.clone()
            }))
        };
        self.change(
            key,
            plan,
            |durable, sequences, record, versions, state| match state {
                None => Ok(()),
                Some(state) => durable.retire(
                    sequences,
                    &record.id,
                    versions.head(),
                    state,
                    versions.state.min_available_version..=below - 1,
                    &retired(&versions.list[..index(below)]),
                ),
            },
            |versions, state| {
                if let Some(state) = state {
                    let from = index(versions.state.min_available_version);
                    retire(&mut versions.list[from..index(state.min_available_version)]);
                    versions.state = state;
                }
                versions.state.min_available_version
            },
        )
    }

    /// Destroys `key`'s key: every version's secret is wiped in memory
    /// (when the last signature in flight with one finishes) and removed
    /// from the store, and no longer readable from its files. A durable
    /// tombstone stays (with the versions' public keys), so the key id is
    /// never reused and every later operation on it answers
    /// [`KmsError::KeyDestroyed`]; [`Keystore::key_ids`] no longer lists it.
    ///
    /// # Errors
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`],
    /// [`KmsError::KeyDestroyed`] if it already was; on a durable store the
    /// write errors of [`Keystore::create_ed25519`].
    pub fn destroy(&self, key: &KeyId) -> Result<(), KmsError> {
        let plan = |versions: &KeyVersions| -> Result<KeyState, KmsError> {
            versions.get(key)?;
            Ok(KeyState {
                destroyed: true,
                ..versions.state.clone()
            })
        };
        self.change(
            key,
            plan,
            |durable, sequences, record, versions, state| {
                durable.retire(
                    sequences,
                    &record.id,
                    versions.head(),
                    state,
                    versions.state.min_available_version..=versions.head(),
                    &retired(&versions.list),
                )
            },
            |versions, state| {
                retire(&mut versions.list);
                versions.state = state;
            },
        )
    }

    /// The head id of every key whose policy's `auto_rotate_after` has
    /// passed since its head was made, at `now` (keys not destroyed; a
    /// head made "in the future", by a clock set back, is not due).
    pub fn due_for_rotation(&self, now: SystemTime) -> Vec<KeyId> {
        self.key_ids()
            .into_iter()
            .filter(|id| self.is_due(id, now))
            .collect()
    }

    /// Rotates `key`'s key if it is due at `now`
    /// ([`Keystore::due_for_rotation`]) and its head is still the version
    /// `key` names when the rotation takes the locks that order writes, so
    /// two checks that saw the same head rotate it once, whichever threads
    /// run them. Returns the new head's id, or `None` if there was nothing
    /// to do.
    ///
    /// # Errors
    /// As [`Keystore::rotate`].
    pub fn rotate_if_due(&self, key: &KeyId, now: SystemTime) -> Result<Option<KeyId>, KmsError> {
        if !self.is_due(key, now) {
            return Ok(None);
        }
        self.rotate_from(key, Some(key.version()))
    }

    /// Whether `key`'s key is due for rotation at `now`.
    fn is_due(&self, key: &KeyId, now: SystemTime) -> bool {
        let Ok(record) = self.record(key) else {
            return false;
        };
        let versions = record.versions();
        let (Some(after), Some(head)) = (
            versions.state.policy.auto_rotate_after,
            versions.list.last(),
        ) else {
            return false;
        };
        !versions.state.destroyed
            && now
                .duration_since(head.info.created_at)
                .is_ok_and(|age| age >= after)
    }

    /// Runs one change to `key`'s key (module docs): `plan` decides it from
    /// the key as it is, `write` commits it to a durable store, `apply`
    /// makes it in memory and returns what the call answers.
    fn change<P, R>(
        &self,
        key: &KeyId,
        plan: impl Fn(&KeyVersions) -> Result<P, KmsError>,
        write: impl Fn(
            &super::Durable,
            &mut super::Sequences,
            &KeyRecord,
            &KeyVersions,
            &P,
        ) -> Result<(), KmsError>,
        apply: impl FnOnce(&mut RwLockWriteGuard<'_, KeyVersions>, P) -> R,
    ) -> Result<R, KmsError> {
        let record = self.record(key)?;
        // Planned and committed until no other writer of a shared store
        // changed the key first; the lock stays held until memory has it.
        let _mutation = self.retrying(|| {
            let mut mutation = self.begin_mutation()?;
            if let Some((durable, sequences)) = &mut mutation {
                // Mutations are serialised by the store's lock, so the
                // plan made here is the plan made again under the write
                // lock below.
                let versions = record.versions();
                let planned = plan(&versions)?;
                write(durable, sequences, &record, &versions, &planned)?;
            }
            Ok(mutation)
        })?;
        let mut versions = record
            .versions
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let planned = plan(&versions)?;
        let applied = apply(&mut versions, planned);
        self.generation.advance();
        Ok(applied)
    }
}

/// The index of version `version` in a key's list.
fn index(version: u32) -> usize {
    usize::try_from(version.saturating_sub(1)).unwrap_or(usize::MAX)
}

/// The public parts of `versions`, as the retired record keeps them.
fn retired(versions: &[Arc<KeyVersion>]) -> Vec<RetiredVersion> {
    versions
        .iter()
        .map(|v| RetiredVersion {
            public_key: v.info.public_key.clone(),
            created_at: v.info.created_at,
            origin: v.info.origin.clone(),
        })
        .collect()
}

/// Replaces each of `versions` by its copy without a secret; the secret is
/// wiped when the last holder of the old version drops it.
fn retire(versions: &mut [Arc<KeyVersion>]) {
    for version in versions {
        if version.secret.is_some() {
            *version = Arc::new(version.retired());
        }
    }
}

/// A trimmed version as loaded from a store: its public part, decoded.
///
/// # Errors
/// [`KmsError::Internal`] if the stored public key does not decode (an
/// authentic record always does: it was a key of this keystore);
/// [`KmsError::AlgorithmNotBuilt`] for an ML-DSA key in a build without
/// the `ml-dsa` feature.
pub(super) fn retired_version(
    id: &KeyId,
    version: u32,
    stored: &RetiredVersion,
) -> Result<KeyVersion, KmsError> {
    let public =
        super::key_pair::public_from_bytes(id.alg(), &stored.public_key).map_err(|e| match e {
            e @ KmsError::AlgorithmNotBuilt { .. } => e,
            e => KmsError::Internal {
                reason: format!("keystore: trimmed version {version} of key {id}: {e}"),
            },
        })?;
    Ok(KeyVersion {
        info: super::VersionInfo {
            version,
            public_key: stored.public_key.clone(),
            created_at: stored.created_at,
            origin: stored.origin.clone(),
        },
        public,
        secret: None,
    })
}
