//! A durable store in a directory: the file storage ([`RedbStorage`]),
//! and the migration from format 1 (`legacy.rs`).
//!
//! * [`create`] refuses a directory that holds a store of either format.
//!   A database without an index (a create that crashed before its first
//!   commit) is no store: `create` reuses it, `open` reports none.
//! * [`open`] opens the database, or migrates a format-1 store: it reads
//!   and authenticates `keystore.kms` first (so a wrong master key writes
//!   nothing), commits every key to the database in one commit, then
//!   removes the old file. A crash before that commit leaves the old file
//!   to migrate again; one after it leaves both, and the next open keeps
//!   the database and removes the old file.

use std::path::Path;

use super::durable::{Durable, Opened};
use super::legacy::{self, LEGACY_FILE};
use super::records::StoredKey;
use crate::error::KmsError;
use crate::seal::Keyring;
use crate::storage::file::{remove_durably, LockedDir, STORE_FILE};
use crate::storage::RedbStorage;

/// Creates a new store in `dir` (see [`crate::Keystore::create`]).
pub(crate) fn create(dir: &Path, keyring: Keyring) -> Result<Durable, KmsError> {
    let locked = LockedDir::create(dir)?;
    let label = dir.display().to_string();
    if locked.has(LEGACY_FILE)? {
        return Err(KmsError::StoreExists { dir: label });
    }
    let storage = RedbStorage::open(locked)?;
    Durable::create(Box::new(storage), keyring, label)
}

/// Opens the store in `dir`, migrating format 1 (see
/// [`crate::Keystore::open_with_keyring`]).
pub(crate) fn open(dir: &Path, keyring: Keyring) -> Result<(Durable, Vec<StoredKey>), KmsError> {
    let label = dir.display().to_string();
    let not_found = || KmsError::StoreNotFound { dir: label.clone() };
    let present = |name: &str| std::fs::symlink_metadata(dir.join(name)).is_ok();
    // Before taking the lock, so a directory without a store is left as
    // it was (no lock file).
    if !present(STORE_FILE) && !present(LEGACY_FILE) {
        return Err(not_found());
    }
    let locked = LockedDir::existing(dir)?;
    let has_legacy = locked.has(LEGACY_FILE)?;
    // A format-1 store not migrated yet is authenticated before the
    // database file is made.
    let mut old = if has_legacy && !locked.has(STORE_FILE)? {
        Some(legacy::read(dir, &keyring)?)
    } else {
        None
    };
    let storage = RedbStorage::open(locked)?;
    let (durable, keys) = match Durable::open(Box::new(storage), keyring, label.clone())? {
        Opened::Store(durable, keys) => (durable, keys),
        Opened::Empty(storage, keyring) => {
            if !has_legacy {
                return Err(not_found());
            }
            let old = match old.take() {
                Some(old) => old,
                None => legacy::read(dir, &keyring)?,
            };
            let keyring =
                keyring.continue_counters(|v| if v == old.sealed_by { old.counter } else { 0 });
            let durable = Durable::import(storage, keyring, label, &old.keys)?;
            (durable, old.keys)
        }
    };
    if has_legacy {
        // Migrated, now or by an open that crashed before this.
        remove_durably(dir, LEGACY_FILE)?;
    }
    Ok((durable, keys))
}
