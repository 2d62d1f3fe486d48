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
//! * A store under a root ([`create_under`], [`open_under`]) keeps its
//!   [`RootRecord`] in [`ROOT_FILE`], written before the database when the
//!   store is created (a create that crashed between the two leaves a
//!   record and no store; the next create, [`create`] as well, renames it
//!   to `keystore.root.before-<new identity>`, never overwriting it), and
//!   read under the lock before anything else. [`move_root`] replaces it
//!   (one rename) only after the master key it unwrapped opened every
//!   record, and the new wrapped key was unwrapped and compared.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use super::durable::{commit_all, Durable, Loaded, Opened};
use super::legacy::{self, LEGACY_FILE};
use super::records::StoredKey;
use super::rooted::{check_identity, new_record, settle, wrap_checked, Held, ReadBack};

use crate::error::KmsError;
use crate::root::{MasterKeyRoot, RootRecord, StoreId, MAX_RECORD, ROOT_FILE};
use crate::seal::{Keyring, SealKey};
use crate::storage::file::{exists, remove_durably, LockedDir, LOCK_FILE, STORE_FILE, TMP_FILE};
use crate::storage::RedbStorage;

/// Creates a new store in `dir` (see [`crate::Keystore::create`]).
pub(crate) fn create(dir: &Path, keyring: Keyring) -> Result<Durable, KmsError> {
    let locked = LockedDir::create(dir)?;
    let label = dir.display().to_string();
    if locked.has(LEGACY_FILE)? || locked.has(STORE_FILE)? {
        return Err(KmsError::StoreExists { dir: label });
    }
    let store = StoreId::generate()?;
    set_aside_record(&locked, store)?;
    create_locked(locked, keyring, store, &label)
}

/// Renames a root record that a crashed create left in `locked`'s
/// directory (there is no store beside it) to `keystore.root.before-<the
/// new store's identity>`: it may be the only copy of a wrapped key, so
/// it is never overwritten or removed.
fn set_aside_record(locked: &LockedDir, store: StoreId) -> Result<(), KmsError> {
    if !locked.has(ROOT_FILE)? {
        return Ok(());
    }
    locked.rename(ROOT_FILE, &format!("{ROOT_FILE}.{SET_ASIDE}{store}"))
}

/// What a record set aside is named after: `keystore.root.before-<id>`.
const SET_ASIDE: &str = "before-";

/// Whether `dir` is absent or holds nothing but what a create that
/// crashed leaves (see [`crate::Keystore::leftovers_only`]).
pub(crate) fn leftovers_only(dir: &Path) -> Result<bool, KmsError> {
    let io = |e: std::io::Error| KmsError::Io {
        kind: e.kind(),
        reason: format!("cannot list {}: {e}", dir.display()),
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(io(e)),
    };
    let tmp_record = format!("{ROOT_FILE}.tmp");
    let set_aside = format!("{ROOT_FILE}.{SET_ASIDE}");
    for entry in entries {
        let name = entry.map_err(io)?.file_name();
        let Some(name) = name.to_str() else {
            return Ok(false);
        };
        let leftover = [LOCK_FILE, TMP_FILE, ROOT_FILE, tmp_record.as_str()].contains(&name)
            || name
                .strip_prefix(set_aside.as_str())
                .is_some_and(|id| StoreId::from_hex(id).is_some());
        if !leftover {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Builds an empty store with identity `store` in `locked`'s directory
/// and opens it.
fn create_locked(
    locked: LockedDir,
    keyring: Keyring,
    store: StoreId,
    label: &str,
) -> Result<Durable, KmsError> {
    let storage = build(locked, &keyring, store, &[])?;
    let (durable, _) =
        Durable::open(Box::new(storage), keyring, label.to_owned())?.written(label)?;
    Ok(durable)
}

/// Creates a new store in `dir` under `root` (see
/// [`crate::Keystore::create_under`]): the root's record is written
/// (one a crashed create left set aside first) before the database,
/// which is what makes the directory a store.
pub(crate) fn create_under(
    dir: &Path,
    root: &dyn MasterKeyRoot,
    key_id: &str,
) -> Result<Durable, KmsError> {
    let locked = LockedDir::create(dir)?;
    let label = dir.display().to_string();
    if locked.has(LEGACY_FILE)? || locked.has(STORE_FILE)? {
        return Err(KmsError::StoreExists { dir: label });
    }
    let (record, key) = new_record(root)?;
    let store = record.store;
    set_aside_record(&locked, store)?;
    locked.replace_file(ROOT_FILE, record.to_text().as_bytes())?;
    let keyring = Keyring::from(SealKey::from_bytes(key_id, 1, &key)?);
    create_locked(locked, keyring, store, &label)
}

/// Opens the store in `dir` under `root` (see
/// [`crate::Keystore::open_under`]).
pub(crate) fn open_under(
    dir: &Path,
    root: &dyn MasterKeyRoot,
    key_id: &str,
) -> Result<(Durable, Loaded), KmsError> {
    let label = dir.display().to_string();
    let locked = lock_existing(dir, &label)?;
    let record = recorded_root(&locked, root, &label)?;
    let key = root.unwrap(&record.store, record.wrapped.as_ref())?;
    let keyring = Keyring::from(SealKey::from_bytes(key_id, 1, &key)?);
    let (durable, loaded) = open_locked(locked, keyring, &label)?;
    check_identity(&record, durable.store_id(), &label)?;
    Ok((durable, loaded))
}

/// The root `locked`'s store records (a store without a record: a file
/// root), which must be of `root`'s kind.
///
/// # Errors
/// [`KmsError::WrongRoot`] if it is of another kind;
/// [`KmsError::StoreCorrupt`] for a damaged record; [`KmsError::Io`].
fn recorded_root(
    locked: &LockedDir,
    root: &dyn MasterKeyRoot,
    label: &str,
) -> Result<RootRecord, KmsError> {
    let record = match locked.read_small(ROOT_FILE, MAX_RECORD)? {
        Some(text) => RootRecord::from_text(&text, label)?,
        None => RootRecord::unrecorded(),
    };
    if record.kind != root.kind() {
        return Err(KmsError::WrongRoot {
            store: label.to_owned(),
            expected: record.kind,
            root: record.root,
            given: root.kind(),
        });
    }
    Ok(record)
}

/// Moves the store in `dir` from the root `from` to the root `to` (see
/// [`crate::Keystore::move_to_root`]): under the lock, the master key is
/// unwrapped by `from` and checked by opening every record with it, then
/// wrapped by `to`, and the new record replaces the old in one rename.
pub(crate) fn move_root(
    dir: &Path,
    from: &dyn MasterKeyRoot,
    to: &dyn MasterKeyRoot,
    key_id: &str,
) -> Result<RootRecord, KmsError> {
    let label = dir.display().to_string();
    let locked = lock_existing(dir, &label)?;
    if !locked.has(STORE_FILE)? {
        return Err(KmsError::InvalidArgument {
            what: "store",
            reason: format!(
                "{label} is a format-1 store ({LEGACY_FILE}): open it once to migrate it, then \
                 move it"
            ),
        });
    }
    let record = recorded_root(&locked, from, &label)?;
    let key = from.unwrap(&record.store, record.wrapped.as_ref())?;
    let keyring = Keyring::from(SealKey::from_bytes(key_id, 1, &key)?);
    // Every record opened with the key before anything is written; the
    // storage then closes, and the lock stays held.
    let storage = Arc::new(RedbStorage::open(locked, STORE_FILE)?);
    let opened = Durable::open(Box::new(Held(Arc::clone(&storage))), keyring, label.clone())?;
    let store = match &opened {
        Opened::Store(durable, _) => durable.store_id(),
        Opened::Empty(..) => {
            return Err(KmsError::StoreCorrupt {
                store: label,
                reason: "the database holds no index".to_owned(),
            })
        }
    };
    drop(opened);
    check_identity(&record, store, &label)?;
    let locked = Arc::try_unwrap(storage)
        .map_err(|_| KmsError::Internal {
            reason: "the store checked before a move is still held".to_owned(),
        })?
        .close();
    let moved = RootRecord {
        store,
        kind: to.kind(),
        root: to.describe(),
        wrapped: wrap_checked(to, &store, &key)?,
    };
    let text = moved.to_text();
    let written = locked.replace_file(ROOT_FILE, text.as_bytes());
    settle(
        written,
        || locked.read_small(ROOT_FILE, MAX_RECORD),
        ReadBack::UnderLock,
        to,
        moved,
        text.as_bytes(),
    )
}

/// Locks `dir` if it holds a store.
///
/// # Errors
/// [`KmsError::StoreNotFound`] if it holds none (checked before taking
/// the lock, so such a directory is left as it was: no lock file);
/// the lock's errors.
fn lock_existing(dir: &Path, label: &str) -> Result<LockedDir, KmsError> {
    if !exists(dir, STORE_FILE)? && !exists(dir, LEGACY_FILE)? {
        return Err(KmsError::StoreNotFound {
            dir: label.to_owned(),
        });
    }
    LockedDir::existing(dir)
}

/// Opens the store in `dir`, migrating format 1 (see
/// [`crate::Keystore::open_with_keyring`]).
pub(crate) fn open(dir: &Path, keyring: Keyring) -> Result<(Durable, Loaded), KmsError> {
    let label = dir.display().to_string();
    let locked = lock_existing(dir, &label)?;
    open_locked(locked, keyring, &label)
}

/// Opens the store in `locked`'s directory (module docs).
fn open_locked(
    locked: LockedDir,
    keyring: Keyring,
    label: &str,
) -> Result<(Durable, Loaded), KmsError> {
    let dir = locked.dir().to_owned();
    let dir = dir.as_path();
    let label = label.to_owned();
    let not_found = || KmsError::StoreNotFound { dir: label.clone() };
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
    let storage = build(locked, &keyring, StoreId::generate()?, &old.keys)?;
    Durable::open(Box::new(storage), keyring, label.to_owned())?.written(label)
}

/// Builds a database of `keys` (see the module docs) and opens it under
/// its final name.
fn build(
    locked: LockedDir,
    keyring: &Keyring,
    store: StoreId,
    keys: &[StoredKey],
) -> Result<RedbStorage, KmsError> {
    remove_durably(locked.dir(), TMP_FILE)?;
    let records = Durable::initial_records(keyring, store, keys)?;
    let tmp = RedbStorage::open(locked, TMP_FILE)?;
    commit_all(&tmp, &records, &[])?;
    let locked = tmp.close();
    locked.rename(TMP_FILE, STORE_FILE)?;
    RedbStorage::open(locked, STORE_FILE)
}
