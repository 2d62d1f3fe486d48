//! A durable store in a directory: the file storage ([`RedbStorage`]),
//! and the migration from format 1 (`legacy.rs`).
//!
//! * A new database is built whole before it takes the store's name: its
//!   first commit (an empty store, or every migrated key) goes into
//!   `keystore.redb.tmp`, which is then renamed to `keystore.redb` and the
//!   directory fsynced. So `keystore.redb` always holds a whole store; a
//!   crash before the rename leaves only the temporary file, which is
//!   ignored, and removed by the next `create` or migration.
//! * [`create`] refuses a directory that holds a store of either format.
//! * [`open`] opens the database, or migrates a format-1 store: it reads,
//!   authenticates and checks `keystore.kms` first (so a wrong master key
//!   writes nothing), builds the database from it, opens and checks that,
//!   and only then removes the old file (if that fails, the store still
//!   opens, and the next open tries again). A crash before the rename leaves
//!   the old file to migrate again; one after it leaves both, and the next
//!   open keeps the database and removes the old file.

use std::collections::HashSet;
use std::path::Path;

use super::durable::{commit_all, Durable, Loaded};
use super::legacy::{self, LEGACY_FILE};
use super::records::StoredKey;
use crate::error::KmsError;
use crate::seal::Keyring;
use crate::storage::file::{exists, remove_durably, LockedDir, STORE_FILE, TMP_FILE};
use crate::storage::RedbStorage;

/// Creates a new store in `dir` (see [`crate::Keystore::create`]).
pub(crate) fn create(dir: &Path, keyring: Keyring) -> Result<Durable, KmsError> {
    let locked = LockedDir::create(dir)?;
    let label = dir.display().to_string();
    if locked.has(LEGACY_FILE)? || locked.has(STORE_FILE)? {
        return Err(KmsError::StoreExists { dir: label });
    }
    let storage = build(locked, &keyring, &[])?;
    let (durable, _) = Durable::open(Box::new(storage), keyring, label.clone())?.written(&label)?;
    Ok(durable)
}

/// Opens the store in `dir`, migrating format 1 (see
/// [`crate::Keystore::open_with_keyring`]).
pub(crate) fn open(dir: &Path, keyring: Keyring) -> Result<(Durable, Loaded), KmsError> {
    let label = dir.display().to_string();
    let not_found = || KmsError::StoreNotFound { dir: label.clone() };
    // Before taking the lock, so a directory without a store is left as
    // it was (no lock file).
    if !exists(dir, STORE_FILE)? && !exists(dir, LEGACY_FILE)? {
        return Err(not_found());
    }
    let locked = LockedDir::existing(dir)?;
    let has_legacy = locked.has(LEGACY_FILE)?;
    let opened = if locked.has(STORE_FILE)? {
        let storage = RedbStorage::open(locked, STORE_FILE)?;
        // Every database this code names `keystore.redb` holds a store.
        Durable::open(Box::new(storage), keyring, label.clone())?.written(&label)?
    } else if has_legacy {
        migrate(locked, keyring, &label)?
    } else {
        return Err(not_found());
    };
    if has_legacy {
        // Migrated, now or by an open that crashed before this. If the old
        // file cannot be removed (a read-only mount, permissions), the
        // store is still whole: it opens, and a later open tries again
        // (the RUNBOOK says to check that the file is gone).
        let _ = remove_durably(dir, LEGACY_FILE);
    }
    Ok(opened)
}

/// Builds the database from the format-1 store in `locked`'s directory,
/// and opens it.
fn migrate(
    locked: LockedDir,
    keyring: Keyring,
    label: &str,
) -> Result<(Durable, Loaded), KmsError> {
    let old = legacy::read(locked.dir(), &keyring, label)?;
    let corrupt = |reason: String| KmsError::StoreCorrupt {
        store: label.to_owned(),
        reason,
    };
    let mut seen = HashSet::with_capacity(old.keys.len());
    for key in &old.keys {
        if key.versions.is_empty() {
            return Err(corrupt(format!(
                "the old store's key {} has no version",
                key.id
            )));
        }
        if !seen.insert(key.id.uuid()) {
            return Err(corrupt(format!("the old store holds key {} twice", key.id)));
        }
    }
    let keyring = keyring.continue_counters(|v| if v == old.sealed_by { old.counter } else { 0 });
    let storage = build(locked, &keyring, &old.keys)?;
    Durable::open(Box::new(storage), keyring, label.to_owned())?.written(label)
}

/// Builds a database of `keys` (see the module docs) and opens it under
/// its final name.
fn build(
    locked: LockedDir,
    keyring: &Keyring,
    keys: &[StoredKey],
) -> Result<RedbStorage, KmsError> {
    remove_durably(locked.dir(), TMP_FILE)?;
    let records = Durable::initial_records(keyring, keys)?;
    let tmp = RedbStorage::open(locked, TMP_FILE)?;
    commit_all(&tmp, &records, &[])?;
    let locked = tmp.close();
    locked.rename(TMP_FILE, STORE_FILE)?;
    RedbStorage::open(locked, STORE_FILE)
}
