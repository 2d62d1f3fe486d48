//! The durable keystore's files: one envelope sealed under the master key,
//! holding a snapshot of every key and version (`snapshot.rs`), replaced
//! atomically on each mutation; and a lock file that keeps a second writer
//! out.
//!
//! Write protocol (each mutation is durable when it returns): write
//! `keystore.kms.tmp`, fsync it, rename it over `keystore.kms`, fsync the
//! directory. A crash leaves either the old file or the new one, never a
//! mix; a stale `.tmp` is ignored and overwritten.
//!
//! One writer: [`Durable`] holds an exclusive lock on `keystore.kms.lock`
//! (std's `File::try_lock`: `flock` on Unix, `LockFileEx` on Windows) for
//! its whole life, so a second store on the same directory, in this
//! process or another, is refused (`StoreInUse`) instead of racing on the
//! temporary file. The operating system drops the lock when the process
//! dies, so a crash never leaves the store locked.
//!
//! Creating and opening are distinct: [`Durable::create`] refuses a
//! directory that already has a store, [`Durable::open`] one that has
//! none. Opening reads and authenticates the store and never writes it,
//! so a wrong master key changes nothing (it may create the empty lock
//! file).

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::KmsError;
use crate::keystore::snapshot::{decode, encode, StoredKey};
use crate::seal::{Envelope, SealKey};

/// The store's file name inside its directory.
pub const STORE_FILE: &str = "keystore.kms";
const TMP_FILE: &str = "keystore.kms.tmp";
/// Held locked by the store's one writer; empty, never removed.
const LOCK_FILE: &str = "keystore.kms.lock";
/// Associated data of the store's envelope.
const STORE_AAD: &[u8] = b"kms.keystore.v1";

/// Where the store lives and the key it is sealed under. `lock` serialises
/// mutations: it is taken before any keystore lock and released after the
/// in-memory update, so the file and memory change in the same order.
pub(crate) struct Durable {
    dir: PathBuf,
    master: SealKey,
    pub(crate) lock: Mutex<()>,
    /// Open, and exclusively locked, until the store drops.
    _owner: File,
}

impl Durable {
    /// Creates a new, empty store in `dir`, creating `dir` (and missing
    /// parents) first; each new directory's parent, and `dir`'s, is
    /// fsynced, so the store's path survives a crash.
    ///
    /// # Errors
    /// [`KmsError::StoreInUse`] if another store holds `dir`;
    /// [`KmsError::StoreExists`] if `dir` already has a store;
    /// [`KmsError::Seal`] if sealing fails; [`KmsError::Internal`] for I/O
    /// errors.
    pub(crate) fn create(dir: &Path, master: SealKey) -> Result<Durable, KmsError> {
        create_dir_durably(dir, &mut sync_dir)?;
        let owner = lock(dir)?;
        let path = dir.join(STORE_FILE);
        // Checked under the lock: no other store can create it meanwhile.
        match fs::symlink_metadata(&path) {
            Ok(_) => return Err(KmsError::StoreExists { dir: shown(dir) }),
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(io("look for", &path, &e)),
        }
        let durable = Durable {
            dir: dir.to_owned(),
            master,
            lock: Mutex::new(()),
            _owner: owner,
        };
        durable.write(&[])?;
        Ok(durable)
    }

    /// Opens the existing store in `dir` and returns its keys.
    ///
    /// # Errors
    /// [`KmsError::StoreNotFound`] if `dir` has no store;
    /// [`KmsError::StoreInUse`] if another store holds `dir`;
    /// [`KmsError::Seal`] if the file is not an envelope, is sealed under
    /// another key (`WrongKey`), or does not authenticate under `master`
    /// (`Authentication`: a wrong master key or a corrupt file);
    /// [`KmsError::Internal`] for I/O errors or a snapshot that does not
    /// decode.
    pub(crate) fn open(dir: &Path, master: SealKey) -> Result<(Durable, Vec<StoredKey>), KmsError> {
        let path = dir.join(STORE_FILE);
        let not_found = || KmsError::StoreNotFound { dir: shown(dir) };
        // Before taking the lock, so a directory without a store is left
        // as it was (no lock file).
        match fs::symlink_metadata(&path) {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => return Err(not_found()),
            Err(e) => return Err(io("look for", &path, &e)),
        }
        let owner = lock(dir)?;
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == ErrorKind::NotFound => return Err(not_found()),
            Err(e) => return Err(io("read the store", &path, &e)),
        };
        let envelope = Envelope::from_bytes(&bytes)?;
        let plaintext = master.open(STORE_AAD, &envelope)?;
        let keys = decode(&plaintext)?;
        // Continue the count, so each write has a newer counter.
        let counter = envelope.header.counter.max(master.counter());
        let durable = Durable {
            dir: dir.to_owned(),
            master: master.with_counter(counter),
            lock: Mutex::new(()),
            _owner: owner,
        };
        Ok((durable, keys))
    }

    /// Replaces the store with `keys`, durably (see the module docs).
    /// Call with `lock` held.
    ///
    /// # Errors
    /// [`KmsError::Internal`] for I/O errors (nothing in memory must change
    /// then); [`KmsError::Seal`] if sealing fails.
    pub(crate) fn write(&self, keys: &[StoredKey]) -> Result<(), KmsError> {
        let plaintext = encode(keys)?;
        let envelope = self.master.seal(STORE_AAD, &plaintext)?;
        let tmp = self.dir.join(TMP_FILE);
        let path = self.dir.join(STORE_FILE);
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(|e| io("create", &tmp, &e))?;
        file.write_all(&envelope.to_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| io("write and fsync", &tmp, &e))?;
        drop(file);
        fs::rename(&tmp, &path).map_err(|e| io("rename over", &path, &e))?;
        sync_dir(&self.dir).map_err(|e| io("fsync the directory", &self.dir, &e))
    }
}

/// Opens `dir`'s lock file (creating it if needed) and takes its exclusive
/// lock without waiting.
///
/// # Errors
/// [`KmsError::StoreInUse`] if another open file holds the lock;
/// [`KmsError::Internal`] if the file cannot be opened or locked.
fn lock(dir: &Path) -> Result<File, KmsError> {
    let path = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| io("open the lock file", &path, &e))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => Err(KmsError::StoreInUse { dir: shown(dir) }),
        Err(TryLockError::Error(e)) => Err(io("lock", &path, &e)),
    }
}

/// Creates `dir` and its missing parents, then `sync`s the parent of each
/// directory created and of `dir` itself: a new directory entry is durable
/// only once its parent is fsynced.
///
/// # Errors
/// [`KmsError::Internal`] if a directory cannot be created or synced.
fn create_dir_durably(
    dir: &Path,
    sync: &mut dyn FnMut(&Path) -> std::io::Result<()>,
) -> Result<(), KmsError> {
    // `dir` and its ancestors up to the first that exists, nearest first.
    let mut missing = Vec::new();
    for ancestor in dir.ancestors() {
        match fs::metadata(ancestor) {
            Ok(_) => break,
            Err(e) if e.kind() == ErrorKind::NotFound => missing.push(ancestor),
            Err(e) => return Err(io("look for", ancestor, &e)),
        }
    }
    for created in missing.iter().rev() {
        match fs::create_dir(created) {
            Ok(()) => {}
            // Created meanwhile by someone else: as good.
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io("create the directory", created, &e)),
        }
        let parent = parent_of(created);
        sync(parent).map_err(|e| io("fsync the directory", parent, &e))?;
    }
    if missing.is_empty() {
        // `dir` existed, perhaps created by a run that crashed before its
        // parent was synced.
        let parent = parent_of(dir);
        sync(parent).map_err(|e| io("fsync the directory", parent, &e))?;
    }
    Ok(())
}

/// The directory holding `path`'s entry (`.` for a bare name).
fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// fsyncs a directory, making the entries in it durable.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir).and_then(|d| d.sync_all())
}

fn shown(dir: &Path) -> String {
    dir.display().to_string()
}

fn io(what: &str, path: &Path, e: &std::io::Error) -> KmsError {
    KmsError::Internal {
        reason: format!("keystore: cannot {what} {}: {e}", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::create_dir_durably;

    fn synced_while_creating(dir: &Path) -> Vec<PathBuf> {
        let mut synced = Vec::new();
        create_dir_durably(dir, &mut |d| {
            synced.push(d.to_owned());
            Ok(())
        })
        .expect("create");
        synced
    }

    #[test]
    fn the_parent_of_every_directory_created_is_synced() {
        let root = tempfile::tempdir().expect("temp dir");
        let dir = root.path().join("a").join("b").join("store");
        assert_eq!(
            synced_while_creating(&dir),
            [
                root.path().to_owned(),
                root.path().join("a"),
                root.path().join("a").join("b"),
            ]
        );
        assert!(dir.is_dir());
        assert_eq!(
            synced_while_creating(&dir),
            [root.path().join("a").join("b")],
            "an existing directory's parent is synced too"
        );
    }
}
