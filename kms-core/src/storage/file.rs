//! [`RedbStorage`]: the embedded default [`super::Storage`], one
//! [redb](https://docs.rs/redb) database file, [`STORE_FILE`], in the
//! store's directory. redb rather than SQLite (rusqlite, bundled): pure
//! Rust (no C build in CI or in the loom build), crash-safe commits with
//! checksummed pages, and the store needs only a sorted map.
//!
//! * **Atomic and durable commits** come from redb: each commit is one
//!   write transaction with `Durability::Immediate` (fsynced before it
//!   returns; a crash leaves the previous commit or this one, checked by
//!   redb's page checksums on recovery).
//! * **One writer:** the storage holds an exclusive lock on
//!   `keystore.kms.lock` (std's `File::try_lock`: `flock` on Unix,
//!   `LockFileEx` on Windows) for its whole life, taken before the
//!   database is opened, so a second store on the same directory, in this
//!   process or another, is refused (`StoreInUse`). The operating system
//!   drops the lock when the process dies, so a crash never leaves the
//!   store locked.
//! * **New directories are durable:** the parent of each directory
//!   created, and of the store's directory, is fsynced.
//! * **A new database appears whole:** it is built as
//!   `keystore.redb.tmp` (its first commit included) and renamed to
//!   [`STORE_FILE`]; a crash while redb lays out a new file (its header is
//!   written and fsynced before its magic number) leaves only a temporary
//!   file, ignored, and removed by the next create or migration.
//! * **Removed records leave the file:** redb writes copy-on-write, so a
//!   record removed or replaced stays in the file's freed pages until they
//!   are reused. A commit that removes a record (a trimmed version, a
//!   destroyed key) therefore also marks the database "purge pending" (a
//!   second table, in the same transaction), and is followed by a purge:
//!   the live records are copied into a new database,
//!   `keystore.redb.tmp`, committed and renamed over [`STORE_FILE`] (the
//!   old database closed first), so no file of the store holds the
//!   removed record's bytes, and the new file has no mark. If the purge
//!   fails (no room for the copy, say) or the process dies before the
//!   rename, the commit still stands and the mark stays: the purge is
//!   retried after every later commit and at every open until it is done,
//!   and the gauge [`PURGE_PENDING`] is 1 meanwhile. If the database
//!   cannot be reopened after the rename, the storage refuses every later
//!   call until the store is opened again.
//! * **Hostile files:** record names are read as bytes and checked as
//!   UTF-8 here; a panic inside redb while opening or reading a damaged
//!   file is caught and reported as [`KmsError::StoreCorrupt`].

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::{PoisonError, RwLock};

use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};

use super::{RecordWrite, Storage};
use crate::error::KmsError;

/// The store's database file inside its directory.
pub const STORE_FILE: &str = "keystore.redb";
/// A database being built, renamed to [`STORE_FILE`] once whole.
pub(crate) const TMP_FILE: &str = "keystore.redb.tmp";
/// Held locked by the store's one writer; empty, never removed.
pub(crate) const LOCK_FILE: &str = "keystore.kms.lock";
/// The one table of records: record name to record bytes.
const RECORDS: TableDefinition<'static, &[u8], &[u8]> = TableDefinition::new("records");
/// Holds [`PURGE_KEY`] while removed records may still be in the file's
/// freed pages (module docs).
const PURGE: TableDefinition<'static, &str, u64> = TableDefinition::new("purge_pending");
const PURGE_KEY: &str = "pending";
/// Gauge (through the `metrics` facade), labelled `store` (the store's
/// directory): 1 while the store's removed records may still be readable
/// in its database file (a purge failed and waits for a retry, or the
/// database could not be reopened after one), else 0.
pub const PURGE_PENDING: &str = "kms_store_purge_pending";

/// A redb database in a directory, held with an exclusive lock.
pub(crate) struct RedbStorage {
    /// Declared first: closed before the lock is released. Commits take
    /// the read lock, a purge the write lock.
    db: RwLock<Open>,
    path: PathBuf,
    lock: LockedDir,
}

impl std::fmt::Debug for RedbStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbStorage")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// `dir`, locked for one writer: what [`RedbStorage::open`] starts from.
pub(crate) struct LockedDir {
    dir: PathBuf,
    /// Open, and exclusively locked, until dropped.
    _owner: File,
}

impl LockedDir {
    /// Creates `dir` (and missing parents) durably and locks it.
    ///
    /// # Errors
    /// [`KmsError::StoreInUse`] if another store holds `dir`;
    /// [`KmsError::Io`] for I/O errors.
    pub(crate) fn create(dir: &Path) -> Result<LockedDir, KmsError> {
        create_dir_durably(dir, &mut sync_dir)?;
        // Only its owner may list or enter a new store's directory, even
        // one that existed empty.
        private(dir, PRIVATE_DIR)?;
        Ok(LockedDir {
            dir: dir.to_owned(),
            _owner: lock(dir)?,
        })
    }

    /// Locks the existing directory `dir` (creating the empty lock file
    /// if needed).
    ///
    /// # Errors
    /// [`KmsError::StoreInUse`] if another store holds `dir`;
    /// [`KmsError::Io`] for I/O errors.
    pub(crate) fn existing(dir: &Path) -> Result<LockedDir, KmsError> {
        Ok(LockedDir {
            dir: dir.to_owned(),
            _owner: lock(dir)?,
        })
    }

    /// Whether `name` exists in the directory.
    ///
    /// # Errors
    /// [`KmsError::Io`] if that cannot be told.
    pub(crate) fn has(&self, name: &str) -> Result<bool, KmsError> {
        exists(&self.dir, name)
    }

    /// The directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The whole of the small file `name` in the directory (at most
    /// `max` bytes), or `None` if there is none.
    ///
    /// # Errors
    /// [`KmsError::Io`] for I/O errors; [`KmsError::StoreCorrupt`] for a
    /// file over `max` bytes.
    pub(crate) fn read_small(&self, name: &str, max: u64) -> Result<Option<Vec<u8>>, KmsError> {
        use std::io::Read;
        let path = self.dir.join(name);
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io("open", &path, &e)),
        };
        let mut bytes = Vec::new();
        file.take(max + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| io("read", &path, &e))?;
        if bytes.len() as u64 > max {
            return Err(KmsError::StoreCorrupt {
                store: shown(&self.dir),
                reason: format!("{name} is over {max} bytes"),
            });
        }
        Ok(Some(bytes))
    }

    /// Replaces the file `name` in the directory with `bytes`, atomically
    /// and durably: written to `<name>.tmp` (mode 0600), fsynced, renamed
    /// over `name`, and the directory fsynced. A crash leaves the old file
    /// or the new one (and perhaps a `.tmp` file, overwritten by the next
    /// call).
    ///
    /// # Errors
    /// [`KmsError::Io`] for I/O errors.
    pub(crate) fn replace_file(&self, name: &str, bytes: &[u8]) -> Result<(), KmsError> {
        use std::io::Write;
        let tmp_name = format!("{name}.tmp");
        let tmp = self.dir.join(&tmp_name);
        let mut options = OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, PRIVATE_FILE);
        let mut file = options.open(&tmp).map_err(|e| io("create", &tmp, &e))?;
        file.write_all(bytes)
            .and_then(|()| file.sync_all())
            .map_err(|e| io("write", &tmp, &e))?;
        drop(file);
        self.rename(&tmp_name, name)
    }

    /// Renames `from` to `to` in the directory (replacing `to`) and fsyncs
    /// the directory.
    ///
    /// # Errors
    /// [`KmsError::Io`] for I/O errors.
    pub(crate) fn rename(&self, from: &str, to: &str) -> Result<(), KmsError> {
        let (from, to) = (self.dir.join(from), self.dir.join(to));
        fs::rename(&from, &to).map_err(|e| io("rename over", &to, &e))?;
        sync_dir(&self.dir).map_err(|e| io("fsync the directory", &self.dir, &e))
    }
}

/// The database and what is known of its purge mark.
struct Open {
    /// Replaced by [`RedbStorage::purge`]; `None` if it could not be
    /// reopened then (every call fails until the store is reopened).
    db: Option<Database>,
    /// The file's purge mark as of the last look: read at open and after
    /// each purge, set by a commit that removes (which writes the mark).
    purge_pending: bool,
}

impl RedbStorage {
    /// Opens the database `name` in the locked directory, creating it if
    /// there is none, and fsyncs the directory so a new file's entry is
    /// durable.
    ///
    /// # Errors
    /// [`KmsError::Io`] if the database cannot be opened or created;
    /// [`KmsError::StoreCorrupt`] if the file is not a redb database or
    /// redb panics on it; [`KmsError::Internal`] for redb's other errors.
    pub(crate) fn open(lock: LockedDir, name: &str) -> Result<RedbStorage, KmsError> {
        let path = lock.dir.join(name);
        private_file(&path)?;
        let db = guarded(&path, || Database::create(&path))?
            .map_err(|e| db_error("open", &path, e.into()))?;
        sync_dir(&lock.dir).map_err(|e| io("fsync the directory", &lock.dir, &e))?;
        let purge_pending = purge_pending(&db, &path)?;
        let storage = RedbStorage {
            db: RwLock::new(Open {
                db: Some(db),
                purge_pending,
            }),
            path,
            lock,
        };
        // A purge a crash or an error left undone (module docs). If it
        // fails again the store still opens; the next commit retries.
        let _ = storage.purge_now(purge_pending);
        Ok(storage)
    }

    /// Runs `f` on the open database (under the read lock), and says
    /// whether a purge is pending afterwards.
    ///
    /// # Errors
    /// [`KmsError::Internal`] if it could not be reopened after a purge;
    /// `f`'s.
    fn with_db<R>(
        &self,
        f: impl FnOnce(&Database) -> Result<R, KmsError>,
    ) -> Result<(R, bool), KmsError> {
        let open = self.db.read().unwrap_or_else(PoisonError::into_inner);
        let db = open.db.as_ref().ok_or_else(|| closed(&self.path))?;
        Ok((f(db)?, open.purge_pending))
    }

    /// Purges the file (module docs) if `pending`, then reads the mark
    /// back from the file and sets the [`PURGE_PENDING`] gauge from it.
    ///
    /// # Errors
    /// The purge's: [`KmsError::Io`] for I/O errors, and the errors of
    /// [`Storage::load`] and [`Storage::commit`].
    fn purge_now(&self, pending: bool) -> Result<(), KmsError> {
        let mut open = self.db.write().unwrap_or_else(PoisonError::into_inner);
        let purged = if pending {
            self.purge(&mut open.db)
        } else {
            Ok(())
        };
        // The mark is gone only with a purged file; a database that could
        // not be reopened counts as pending.
        open.purge_pending = open
            .db
            .as_ref()
            .is_none_or(|db| purge_pending(db, &self.path).unwrap_or(true));
        let store = self.lock.dir().display().to_string();
        metrics::gauge!(PURGE_PENDING, "store" => store)
            .set(f64::from(u8::from(open.purge_pending)));
        purged
    }

    /// Closes the database and gives the directory's lock back.
    pub(crate) fn close(self) -> LockedDir {
        let RedbStorage { db, lock, .. } = self;
        drop(db);
        lock
    }

    /// Copies the live records into a new database (without the purge
    /// mark) and renames it over this one, which it closes first.
    ///
    /// # Errors
    /// [`KmsError::Io`] for I/O errors; the errors of [`Storage::load`]
    /// and [`Storage::commit`]. After a failure before the rename the old
    /// database is kept (reopened); after one in reopening the new file,
    /// the storage is closed.
    /// Call with the write lock held (`db` is under it) for the whole
    /// purge: no commit may land in the old file between the copy and the
    /// rename.
    fn purge(&self, db: &mut Option<Database>) -> Result<(), KmsError> {
        let records = load(db.as_ref().ok_or_else(|| closed(&self.path))?, &self.path)?;
        let dir = self.lock.dir();
        let name = self
            .path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(STORE_FILE);
        remove_durably(dir, TMP_FILE)?;
        let tmp_path = dir.join(TMP_FILE);
        private_file(&tmp_path)?;
        {
            let tmp = guarded(&tmp_path, || Database::create(&tmp_path))?
                .map_err(|e| db_error("create", &tmp_path, e.into()))?;
            let writes: Vec<RecordWrite<'_>> = records
                .iter()
                .map(|(name, value)| RecordWrite {
                    name,
                    value: Some(value),
                })
                .collect();
            commit(&tmp, &tmp_path, &writes, false)?;
        }
        // Closed before the rename: a file may not be renamed over while
        // open on every platform.
        drop(db.take());
        let renamed = self.lock.rename(TMP_FILE, name);
        // The new file after a rename, else the old one again.
        *db = guarded(&self.path, || Database::create(&self.path))
            .ok()
            .and_then(Result::ok);
        renamed?;
        if db.is_none() {
            return Err(closed(&self.path));
        }
        Ok(())
    }
}

/// The error of a storage whose database could not be reopened.
fn closed(path: &Path) -> KmsError {
    KmsError::Internal {
        reason: format!(
            "keystore: the database {} could not be reopened after a purge; reopen the store",
            path.display()
        ),
    }
}

/// Whether `db` is marked "purge pending".
fn purge_pending(db: &Database, path: &Path) -> Result<bool, KmsError> {
    let err = |e: redb::Error| db_error("read", path, e);
    guarded(path, || {
        let tx = db.begin_read().map_err(|e| err(e.into()))?;
        match tx.open_table(PURGE) {
            Ok(table) => Ok(table.get(PURGE_KEY).map_err(|e| err(e.into()))?.is_some()),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(false),
            Err(e) => Err(err(e.into())),
        }
    })?
}

impl Storage for RedbStorage {
    fn load(&self) -> Result<Vec<(String, Vec<u8>)>, KmsError> {
        self.with_db(|db| load(db, &self.path))
            .map(|(records, _)| records)
    }

    /// Commits `writes`; then, if this commit removed a record or an
    /// earlier purge is still pending, purges the file. A failed purge
    /// does not fail the commit, which stands: it is retried after the
    /// next commit and at open (module docs).
    fn commit(&self, writes: &[RecordWrite<'_>]) -> Result<(), KmsError> {
        let removes = writes.iter().any(|w| w.value.is_none());
        let ((), pending) = self.with_db(|db| commit(db, &self.path, writes, removes))?;
        if removes || pending {
            let _ = self.purge_now(true);
        }
        Ok(())
    }
}

/// Every record of `db` (the database file `path`).
fn load(db: &Database, path: &Path) -> Result<Vec<(String, Vec<u8>)>, KmsError> {
    let err = |e: redb::Error| db_error("read", path, e);
    guarded(path, || {
        let tx = db.begin_read().map_err(|e| err(e.into()))?;
        let table = match tx.open_table(RECORDS) {
            Ok(table) => table,
            // Never committed to: no records.
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(err(e.into())),
        };
        let len = table.len().map_err(|e| err(e.into()))?;
        let mut records = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
        for entry in table.iter().map_err(|e| err(e.into()))? {
            let (name, value) = entry.map_err(|e| err(e.into()))?;
            let name =
                String::from_utf8(name.value().to_vec()).map_err(|_| KmsError::StoreCorrupt {
                    store: path.display().to_string(),
                    reason: "a record's name is not UTF-8".to_owned(),
                })?;
            records.push((name, value.value().to_vec()));
        }
        Ok(records)
    })?
}

/// Applies `writes` to `db` (the database file `path`) in one durable
/// write transaction, marking it "purge pending" too if `mark_purge`.
fn commit(
    db: &Database,
    path: &Path,
    writes: &[RecordWrite<'_>],
    mark_purge: bool,
) -> Result<(), KmsError> {
    let err = |e: redb::Error| db_error("write", path, e);
    guarded(path, || {
        // `Durability::Immediate` is redb's default: fsynced on commit.
        let tx = db.begin_write().map_err(|e| err(e.into()))?;
        {
            let mut table = tx.open_table(RECORDS).map_err(|e| err(e.into()))?;
            for write in writes {
                match write.value {
                    Some(value) => table
                        .insert(write.name.as_bytes(), value)
                        .map(drop)
                        .map_err(|e| err(e.into()))?,
                    None => table
                        .remove(write.name.as_bytes())
                        .map(drop)
                        .map_err(|e| err(e.into()))?,
                }
            }
        }
        if mark_purge {
            let mut purge = tx.open_table(PURGE).map_err(|e| err(e.into()))?;
            purge.insert(PURGE_KEY, 1).map_err(|e| err(e.into()))?;
        }
        // Dropped uncommitted on an error above: redb aborts it.
        tx.commit().map_err(|e| err(e.into()))
    })?
}

/// Runs `f`, turning a panic inside it (redb on a damaged file) into
/// [`KmsError::StoreCorrupt`].
fn guarded<R>(path: &Path, f: impl FnOnce() -> R) -> Result<R, KmsError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|_| KmsError::StoreCorrupt {
        store: path.display().to_string(),
        reason: "the database panicked reading the file".to_owned(),
    })
}

/// Whether `name` exists in `dir`.
///
/// # Errors
/// [`KmsError::Io`] if that cannot be told (e.g. no permission).
pub(crate) fn exists(dir: &Path, name: &str) -> Result<bool, KmsError> {
    let path = dir.join(name);
    match fs::symlink_metadata(&path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io("look for", &path, &e)),
    }
}

/// Removes `name` from `dir`, if it is there, and fsyncs `dir`.
///
/// # Errors
/// [`KmsError::Io`] for I/O errors.
pub(crate) fn remove_durably(dir: &Path, name: &str) -> Result<(), KmsError> {
    let path = dir.join(name);
    match fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(io("remove", &path, &e)),
    }
    sync_dir(dir).map_err(|e| io("fsync the directory", dir, &e))
}

/// An error of the database: [`KmsError::StoreCorrupt`] when the file is
/// not a readable redb database (redb's `Corrupted`, or an I/O error of
/// kind `InvalidData`, which is what a wrong magic number gives);
/// [`KmsError::Io`] with its kind for any other I/O error; else
/// [`KmsError::Internal`].
fn db_error(what: &str, path: &Path, e: redb::Error) -> KmsError {
    let reason = format!(
        "keystore: cannot {what} the database {}: {e}",
        path.display()
    );
    match e {
        redb::Error::Io(io) if io.kind() != std::io::ErrorKind::InvalidData => KmsError::Io {
            kind: io.kind(),
            reason,
        },
        redb::Error::Io(_) | redb::Error::Corrupted(_) => KmsError::StoreCorrupt {
            store: path.display().to_string(),
            reason,
        },
        _ => KmsError::Internal { reason },
    }
}

/// Opens `dir`'s lock file (creating it if needed) and takes its exclusive
/// lock without waiting.
///
/// # Errors
/// [`KmsError::StoreInUse`] if another open file holds the lock;
/// [`KmsError::Io`] if the file cannot be opened or locked.
fn lock(dir: &Path) -> Result<File, KmsError> {
    let path = dir.join(LOCK_FILE);
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, PRIVATE_FILE);
    let file = options
        .open(&path)
        .map_err(|e| io("open the lock file", &path, &e))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => Err(KmsError::StoreInUse { dir: shown(dir) }),
        Err(TryLockError::Error(e)) => Err(io("lock", &path, &e)),
    }
}

/// The mode of a new store's directory: its owner only.
const PRIVATE_DIR: u32 = 0o700;

/// The mode of every file a store creates: its owner only.
const PRIVATE_FILE: u32 = 0o600;

/// Creates the file at `path` with mode [`PRIVATE_FILE`] if there is none
/// (redb then opens it; a file that exists keeps its mode).
///
/// # Errors
/// [`KmsError::Io`] if it cannot be created.
fn private_file(path: &Path) -> Result<(), KmsError> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, PRIVATE_FILE);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(io("create", path, &e)),
    }
}

/// Sets `dir`'s permissions to `mode` (Unix; elsewhere nothing).
///
/// # Errors
/// [`KmsError::Io`] if they cannot be set.
fn private(dir: &Path, mode: u32) -> Result<(), KmsError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(dir, fs::Permissions::from_mode(mode))
            .map_err(|e| io("restrict the permissions of", dir, &e))?;
    }
    #[cfg(not(unix))]
    let _ = (dir, mode);
    Ok(())
}

/// Creates `dir` and its missing parents, then `sync`s the parent of each
/// directory created and of `dir` itself: a new directory entry is durable
/// only once its parent is fsynced.
///
/// # Errors
/// [`KmsError::Io`] if a directory cannot be created or synced.
fn create_dir_durably(
    dir: &Path,
    sync: &mut dyn FnMut(&Path) -> std::io::Result<()>,
) -> Result<(), KmsError> {
    // `dir` and its ancestors up to the first that exists, nearest first.
    let mut missing = Vec::new();
    for ancestor in dir.ancestors() {
        // A relative path's last ancestor is the empty path: the working
        // directory, which exists.
        if ancestor.as_os_str().is_empty() {
            break;
        }
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
    KmsError::Io {
        kind: e.kind(),
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
