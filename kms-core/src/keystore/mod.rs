//! [`Keystore`]: an in-memory store of versioned Ed25519 keys (docs/DESIGN.md §3.1).
//!
//! Invariants:
//! * A key has versions `1..=head`, stored in order; versions are only ever
//!   appended, never removed: a trimmed version (below
//!   `min_available_version`, [`Keystore::trim`]) or a destroyed key's
//!   ([`Keystore::destroy`]) keeps its public part and loses its secret.
//! * A version verifies iff the key is not destroyed and the version is
//!   at least the key's `min_verify_version`
//!   (`1 <= min_available_version <= min_verify_version <= head`,
//!   `policy.rs`); only the head signs, and only while the key is enabled.
//! * `rotate`, `set_policy`, `trim` and `destroy` change a key under its
//!   write lock, so a reader sees the key before or after, never torn.
//! * Secret key material lives only in [`ed25519_dalek::SigningKey`], which
//!   zeroizes itself on drop; nothing here prints it (`Debug` shows public
//!   data only) and nothing returns it. Trimming or destroying drops the
//!   keystore's reference: the secret is wiped then, or when the last
//!   in-flight signature holding the version finishes.
//!
//! The locks and `Arc`s come from [`crate::sync`], so `loom-tests/` checks
//! the rotation invariants above on this code.
//!
//! Lock order: the key map's lock is released before a key's versions lock
//! is taken; the two never nest. The signing pointers' lock
//! ([`Keystore::signing_key`]) is taken before either. A durable store's
//! mutation lock ([`Keystore::open`]) is taken before all of them and held
//! until memory is updated, so the file and memory see mutations in the
//! same order.
//!
//! Durability ([`Keystore::create`], [`Keystore::open`]): each key
//! version is its own sealed record in a [`crate::storage::Storage`] (by
//! default a redb database file); a mutation first commits its records
//! (one version, the key's head, and for a new key the index's count: O(record),
//! not O(store)), and only then changes memory. If the commit fails, the
//! call fails and nothing changed. On open, every record is authenticated
//! under its name and sequence and the whole is checked against the sealed
//! heads and index (`durable.rs`). A durable store is held by one
//! `Keystore` (and its clones) at a time, through an exclusive file lock.
//! Buffers that hold seeds are sized once and never grow (`records.rs`).

mod directory;
mod durable;
mod generation;
mod key_pair;
mod legacy;
mod lifecycle;
mod policy;
mod records;
mod rooted;
mod transfer;

use std::collections::HashMap;
use std::fmt;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::PoisonError;
use std::time::SystemTime;

use uuid::Uuid;

use crate::ed25519;
use crate::error::KmsError;
use crate::key_id::{Alg, KeyId};
use crate::root::MasterKeyRoot;
use crate::seal::{Keyring, SealKey};
use crate::storage::Storage;
use crate::sync::{Arc, RwLock, RwLockReadGuard};
use durable::{Durable, Loaded, Opened, Sequences};
use records::{KeyState, StoredKey};

pub use crate::storage::file::STORE_FILE;
pub use durable::Rewrapped;
pub use generation::KeySetGeneration;
pub use key_pair::Signature;
use key_pair::{Public, Secret};
pub use policy::{KeyPolicy, MIN_AUTO_ROTATE};
pub use transfer::EXPORT_AAD;

/// What [`Keystore::attest`] reports about a key.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Attestation {
    /// The id of the head version.
    pub head: KeyId,
    /// The algorithm.
    pub alg: Alg,
    /// Every version, oldest first (`versions[i].version == i + 1`),
    /// trimmed ones included (their public keys are kept).
    pub versions: Vec<VersionInfo>,
    /// The key's policy.
    pub policy: KeyPolicy,
    /// Versions below it are trimmed: their secrets are destroyed, they
    /// neither verify nor export (1 when none is).
    pub min_available_version: u32,
}

/// One version of a key, as attested.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct VersionInfo {
    /// 1-based version number.
    pub version: u32,
    /// The version's public key as its algorithm encodes it
    /// ([`Alg::public_key_len`] bytes: Ed25519 32, RFC 8032 §5.1.5;
    /// ML-DSA-44/65/87 1312/1952/2592, FIPS 204 `pkEncode`); lower-case
    /// hex when serialized.
    #[cfg_attr(feature = "serde", serde(with = "crate::serde_impls::hex_bytes"))]
    pub public_key: Vec<u8>,
    /// When the version was created (wall clock).
    pub created_at: SystemTime,
    /// Where the version's secret came from.
    pub origin: Origin,
}

/// Where a version's secret came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Origin {
    /// Generated inside this keystore from the OS random source.
    Generated,
    /// Imported with [`Keystore::import_sealed`].
    Imported {
        /// The key id the exporting keystore gave it (text form).
        source: String,
        /// The sealing key the envelope was sealed under, `id@vN`.
        sealed_by: String,
    },
}

/// One version of a key: its secret and what is public about it.
struct KeyVersion {
    info: VersionInfo,
    /// `info.public_key` decoded, once, when the version was made: verifying
    /// under a keystore key, single or in the actor's batches, never decodes
    /// it again.
    public: Public,
    /// Wiped on drop (`key_pair`); `None` once trimmed or destroyed.
    secret: Option<Secret>,
}

impl KeyVersion {
    /// This version without its secret: what a trimmed version keeps.
    fn retired(&self) -> KeyVersion {
        KeyVersion {
            info: self.info.clone(),
            public: self.public.clone(),
            secret: None,
        }
    }
}

impl fmt::Debug for KeyVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyVersion")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// A key: its names, its versions and its lifecycle state.
#[derive(Debug)]
struct KeyRecord {
    /// The id of version 1; other versions differ only in the version.
    id: KeyId,
    versions: RwLock<KeyVersions>,
}

/// A key's versions and state, under one lock.
#[derive(Debug)]
struct KeyVersions {
    /// `list[i]` is version `i + 1`; never empty; append-only (a trimmed
    /// version is replaced by its [`KeyVersion::retired`] copy).
    list: Vec<Arc<KeyVersion>>,
    state: KeyState,
}

impl KeyVersions {
    /// The head version number.
    fn head(&self) -> u32 {
        u32::try_from(self.list.len()).unwrap_or(u32::MAX)
    }

    /// The version `key` names, if the key is not destroyed.
    ///
    /// # Errors
    /// [`KmsError::KeyDestroyed`], [`KmsError::UnknownVersion`].
    fn get(&self, key: &KeyId) -> Result<&Arc<KeyVersion>, KmsError> {
        if self.state.destroyed {
            return Err(KmsError::KeyDestroyed {
                key: key.to_string(),
            });
        }
        version_of(&self.list, key)
    }

    /// The version `key` names, if it may verify.
    ///
    /// # Errors
    /// As [`KeyVersions::get`]; [`KmsError::VersionDisallowed`] below the
    /// key's `min_verify_version`.
    fn verifiable(&self, key: &KeyId) -> Result<&Arc<KeyVersion>, KmsError> {
        let version = self.get(key)?;
        let min = self.state.policy.min_verify_version;
        if version.info.version < min {
            return Err(KmsError::VersionDisallowed {
                key: key.to_string(),
                version: version.info.version,
                min_verify_version: min,
            });
        }
        Ok(version)
    }
}

impl KeyRecord {
    /// Read access to the versions. A poisoned lock still guards a whole
    /// key: each write replaces whole fields.
    fn versions(&self) -> RwLockReadGuard<'_, KeyVersions> {
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
    /// Each `(tenant, purpose)`'s signing key (the id of its version 1),
    /// as its signing pointer names it ([`Keystore::signing_key`]).
    signing: Arc<RwLock<HashMap<(String, String), KeyId>>>,
    /// The on-disk store, for a keystore made by [`Keystore::create`] or
    /// [`Keystore::open`].
    durable: Option<std::sync::Arc<Durable>>,
    /// Advanced after every change to the keys in memory (a plain atomic,
    /// not loom's: it orders nothing the loom models check).
    generation: KeySetGeneration,
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
    /// An empty in-memory keystore: its keys live as long as the process.
    pub fn new() -> Self {
        Self::default()
    }

    /// Creates a new, empty durable keystore in `dir`, sealed under
    /// `master_key`, and holds it until the returned keystore and all its
    /// clones are dropped. Each later `create_ed25519`, `rotate` and
    /// `import_sealed` is on disk before it returns. Reopen it later with
    /// [`Keystore::open`].
    ///
    /// `dir` and any missing parents are created, and the parent of each
    /// directory created (and of `dir`) is fsynced. The store is a redb
    /// database, [`STORE_FILE`], of sealed records (`kms_core::seal`):
    /// secrets and metadata are sealed; record names (tenant, purpose,
    /// key UUID, version numbers) are not. Beside it, an empty lock file
    /// keeps other writers out (see [`Keystore::open`]). A root record a
    /// crashed [`Keystore::create_under`] left is renamed
    /// `keystore.root.before-<identity>`, never removed.
    ///
    /// # Errors
    /// [`KmsError::StoreExists`] if `dir` already holds a store (nothing
    /// is written); [`KmsError::StoreInUse`] if another keystore, in this
    /// process or another, holds `dir`; [`KmsError::Seal`] if sealing
    /// fails; [`KmsError::Io`] (with its `std::io::ErrorKind`) for I/O
    /// errors.
    pub fn create(dir: impl AsRef<Path>, master_key: SealKey) -> Result<Keystore, KmsError> {
        let durable = directory::create(dir.as_ref(), Keyring::from(master_key))?;
        Keystore::with_durable(durable, Loaded::default())
    }

    /// Opens the existing durable keystore in `dir` (made by
    /// [`Keystore::create`]) with one master key; see
    /// [`Keystore::open_with_keyring`], whose rules and errors it shares.
    ///
    /// # Errors
    /// As [`Keystore::open_with_keyring`].
    pub fn open(dir: impl AsRef<Path>, master_key: SealKey) -> Result<Keystore, KmsError> {
        Keystore::open_with_keyring(dir, Keyring::from(master_key))
    }

    /// Opens the existing durable keystore in `dir`, whose records are
    /// sealed under versions of one master key held in `keyring`, and
    /// loads every key and version in it. New records are sealed under the
    /// keyring's newest version; [`Keystore::rewrap`] re-seals the old
    /// ones. Each later `create_ed25519`, `rotate` and `import_sealed` is
    /// on disk before it returns.
    ///
    /// A store in format 1, one file (`keystore.kms`), is migrated into the
    /// database on open, in one commit, and the old file is then removed; a
    /// crash at any point leaves a store that opens.
    ///
    /// One writer at a time: the store is held, with an exclusive lock on
    /// a lock file in `dir`, until the returned keystore and all its
    /// clones are dropped (or the process exits); meanwhile another
    /// `open` or `create` of `dir`, in this process or another, is
    /// refused. The lock is on an open file description (`flock` on
    /// Unix): a child process forked meanwhile shares it until it execs
    /// (std's `Command` closes it then) or exits, so a reopen racing a
    /// fork can briefly see `StoreInUse`.
    ///
    /// # Errors
    /// [`KmsError::StoreNotFound`] if `dir` holds no store;
    /// [`KmsError::StoreInUse`] if another keystore holds `dir`;
    /// [`KmsError::Seal`] when the store is sealed under a key the keyring
    /// lacks (`WrongKey`) or does not authenticate (`Authentication`: a
    /// wrong master key, or a damaged index); [`KmsError::StoreCorrupt`]
    /// if a record is damaged, missing, out of sequence or left over, or
    /// the file is not a database; [`KmsError::Io`] (with
    /// its `std::io::ErrorKind`) for I/O errors;
    /// [`KmsError::AlgorithmNotBuilt`] if the store holds an ML-DSA key
    /// and this build lacks the `ml-dsa` feature. On error no record has
    /// changed and nothing stays locked.
    pub fn open_with_keyring(
        dir: impl AsRef<Path>,
        keyring: Keyring,
    ) -> Result<Keystore, KmsError> {
        let (durable, stored) = directory::open(dir.as_ref(), keyring)?;
        Keystore::with_durable(durable, stored)
    }

    /// Creates a new, empty durable keystore in `dir` under the root of
    /// trust `root` (`kms_core::root`), as [`Keystore::create`] does with
    /// a master key. Under a file root the master key is the root's own;
    /// under a wrapping root it is 32 new random bytes, wrapped by the
    /// root and bound to a new store identity. Either way the store
    /// records its root in [`crate::root::ROOT_FILE`] beside the database,
    /// and the records are sealed under the `SealKey` named `key_id`,
    /// version 1.
    ///
    /// # Errors
    /// As [`Keystore::create`]; the root's errors ([`KmsError::Root`]);
    /// [`KmsError::InvalidArgument`] for a `key_id` a `SealKey` refuses.
    pub fn create_under(
        dir: impl AsRef<Path>,
        root: &dyn MasterKeyRoot,
        key_id: &str,
    ) -> Result<Keystore, KmsError> {
        let durable = directory::create_under(dir.as_ref(), root, key_id)?;
        Keystore::with_durable(durable, Loaded::default())
    }

    /// Whether `dir` can take a new store with nothing in it lost: it is
    /// absent, or holds nothing but what a create that crashed leaves
    /// (the lock file, a database being built, a root record with no
    /// database beside it, the record's temporary file, and records set
    /// aside by an earlier create as `keystore.root.before-<identity>`).
    /// A directory holding anything else (a store, a renamed database,
    /// another program's files) answers `false`.
    ///
    /// # Errors
    /// [`KmsError::Io`] if the directory cannot be listed.
    pub fn leftovers_only(dir: impl AsRef<Path>) -> Result<bool, KmsError> {
        directory::leftovers_only(dir.as_ref())
    }

    /// Opens the existing durable keystore in `dir` under the root of
    /// trust `root`: the store's recorded root must be of `root`'s kind (a
    /// store that records none is under a file root), which unwraps the
    /// master key once; the records are then opened as
    /// [`Keystore::open`] opens them with the `SealKey` `key_id`,
    /// version 1.
    ///
    /// # Errors
    /// [`KmsError::WrongRoot`] (nothing read but the record) if the store
    /// is under another kind of root; [`KmsError::Root`] if the root
    /// cannot unwrap the master key; [`KmsError::StoreCorrupt`] for a
    /// damaged root record; otherwise as [`Keystore::open_with_keyring`]
    /// (a file root holding the wrong key: [`KmsError::Seal`]).
    pub fn open_under(
        dir: impl AsRef<Path>,
        root: &dyn MasterKeyRoot,
        key_id: &str,
    ) -> Result<Keystore, KmsError> {
        let (durable, stored) = directory::open_under(dir.as_ref(), root, key_id)?;
        Keystore::with_durable(durable, stored)
    }

    /// Moves the durable store in `dir` from the root of trust `from` to
    /// the root `to`: the same master key (the `SealKey` `key_id`, version
    /// 1), unwrapped by `from`, checked by opening every record with it,
    /// and wrapped anew by `to` (a file root writes its new file). No
    /// record is re-sealed: this is not [`Keystore::rewrap`], which
    /// rotates the master key.
    ///
    /// Atomic: the store's [`crate::root::RootRecord`] is replaced in one
    /// rename, so a crash at any point leaves a store that opens under
    /// `from` or under `to`, and nothing else changed; afterwards the
    /// store holds no copy of the key wrapped by `from`. Returns the new
    /// record.
    ///
    /// # Errors
    /// [`KmsError::StoreNotFound`]; [`KmsError::StoreInUse`] if a keystore
    /// holds the store (a running server); [`KmsError::WrongRoot`] if the
    /// store is not under `from`'s kind of root; [`KmsError::Root`] if
    /// `from` cannot unwrap or `to` cannot wrap, or what `to` wrapped
    /// does not unwrap to the same key; [`KmsError::Seal`] or
    /// [`KmsError::StoreCorrupt`] if the records do not open with the key;
    /// [`KmsError::InvalidArgument`] for a format-1 store (open it once to
    /// migrate it first), or when `to` is a file root that cannot take the
    /// key (its file exists); [`KmsError::Io`]. Nothing is changed by any
    /// of them, with one exception: when the record's rename landed but
    /// the directory's fsync failed, the error is returned with the new
    /// record in place and what `to` wrote (a new key file) kept, since
    /// after a power loss the store may be under either root. A new key
    /// file is removed (and its removal fsynced) whenever the move surely
    /// failed; a process killed between writing it and the rename leaves
    /// it, beside a store still under `from`.
    pub fn move_to_root(
        dir: impl AsRef<Path>,
        from: &dyn MasterKeyRoot,
        to: &dyn MasterKeyRoot,
        key_id: &str,
    ) -> Result<crate::root::RootRecord, KmsError> {
        directory::move_root(dir.as_ref(), from, to, key_id)
    }

    /// Creates a new, empty durable keystore in `storage` (another
    /// [`Storage`] than the default file), sealed under `master_key`.
    ///
    /// # Errors
    /// [`KmsError::StoreExists`] if `storage` already holds a store;
    /// [`KmsError::Seal`] if sealing fails; the errors of the storage.
    pub fn create_with_storage(
        storage: Box<dyn Storage>,
        master_key: SealKey,
    ) -> Result<Keystore, KmsError> {
        let label = format!("{storage:?}");
        let durable = Durable::create(storage, Keyring::from(master_key), label)?;
        Keystore::with_durable(durable, Loaded::default())
    }

    /// Opens the durable keystore in `storage` under `keyring`, as
    /// [`Keystore::open_with_keyring`] does for a directory.
    ///
    /// # Errors
    /// [`KmsError::StoreNotFound`] if `storage` holds no store; the
    /// [`KmsError::Seal`], [`KmsError::StoreCorrupt`] and
    /// [`KmsError::AlgorithmNotBuilt`] errors of
    /// [`Keystore::open_with_keyring`]; the errors of the storage.
    pub fn open_with_storage(
        storage: Box<dyn Storage>,
        keyring: Keyring,
    ) -> Result<Keystore, KmsError> {
        let label = format!("{storage:?}");
        match Durable::open(storage, keyring, label.clone())? {
            Opened::Store(durable, stored) => Keystore::with_durable(*durable, stored),
            Opened::Empty(..) => Err(KmsError::StoreNotFound { dir: label }),
        }
    }

    /// Opens the durable keystore in `storage` under `keyring`, as
    /// [`Keystore::open_with_storage`]; if `storage` holds none, starts an
    /// empty one sealed under the keyring's newest key. Nodes of a fleet
    /// starting at once on one shared storage ([`Storage::is_shared`]) end
    /// up with one store: a start that loses the race opens the winner's.
    ///
    /// # Errors
    /// As [`Keystore::open_with_storage`] (but never
    /// [`KmsError::StoreNotFound`]) and [`Keystore::create_with_storage`].
    pub fn open_or_create_with_storage(
        storage: Box<dyn Storage>,
        keyring: Keyring,
    ) -> Result<Keystore, KmsError> {
        let label = format!("{storage:?}");
        let (durable, stored) =
            Durable::open_or_create(storage, keyring, crate::root::StoreId::generate()?, label)?;
        Keystore::with_durable(durable, stored)
    }

    /// Opens the durable keystore in `storage` under the root of trust
    /// `root`, as [`Keystore::open_under`] does for a directory, with the
    /// root record the storage keeps ([`Storage::root_record`]); with
    /// `create`, an empty storage gets a new store and root record (nodes
    /// of a fleet starting at once agree on the first record written),
    /// and a storage holding a store without a record opens it under a
    /// file root.
    ///
    /// # Errors
    /// [`KmsError::WrongRoot`] (before anything is unwrapped) if the
    /// record names another kind of root; [`KmsError::Root`] if the root
    /// cannot unwrap; [`KmsError::StoreNotFound`] without `create` if
    /// there is no store; [`KmsError::StoreCorrupt`] for a damaged record
    /// or one naming another store's identity; [`KmsError::Conflict`] if
    /// other nodes kept replacing the record; [`KmsError::InvalidConfig`]
    /// when `create` must write a record to a storage that keeps none
    /// (nothing is written); otherwise as [`Keystore::open_with_storage`].
    pub fn open_under_with_storage(
        storage: Box<dyn Storage>,
        root: &dyn MasterKeyRoot,
        key_id: &str,
        create: bool,
    ) -> Result<Keystore, KmsError> {
        let (durable, stored) = rooted::open_under(storage, root, key_id, create)?;
        Keystore::with_durable(durable, stored)
    }

    /// Moves the store in `storage` from the root `from` to the root
    /// `to`, as [`Keystore::move_to_root`] does for a directory: the key
    /// `from` unwraps opens every record first, then the storage's root
    /// record is swapped for the new one if no other writer replaced it
    /// meanwhile. Keystores already open on the storage (a fleet's
    /// running nodes) keep the master key they hold, which is unchanged.
    ///
    /// # Errors
    /// As [`Keystore::move_to_root`] (but [`KmsError::StoreInUse`]);
    /// [`KmsError::Conflict`] if the record changed meanwhile (nothing
    /// written, a new key file removed); [`KmsError::InvalidConfig`] for a
    /// storage that keeps no root record; the storage's errors. A write
    /// whose answer was lost (etcd's [`KmsError::Unavailable`]) is read
    /// back: the new record there is a move done; otherwise the write may
    /// still land, so the error is returned and a new key file is kept
    /// (the store opens under one of the two roots: try `from` first).
    pub fn move_to_root_in_storage(
        storage: Box<dyn Storage>,
        from: &dyn MasterKeyRoot,
        to: &dyn MasterKeyRoot,
        key_id: &str,
    ) -> Result<crate::root::RootRecord, KmsError> {
        rooted::move_root(storage, from, to, key_id)
    }

    /// A keystore over `durable` holding `stored`.
    fn with_durable(durable: Durable, stored: Loaded) -> Result<Keystore, KmsError> {
        let keystore = Keystore {
            keys: Arc::new(RwLock::new(HashMap::with_capacity(stored.keys.len()))),
            signing: Arc::default(),
            durable: Some(std::sync::Arc::new(durable)),
            generation: KeySetGeneration::default(),
        };
        keystore.apply_stored(stored)?;
        Ok(keystore)
    }

    /// Puts `stored` keys and signing pointers in memory, as loaded from
    /// the store: a key not yet here is added, one here takes the stored
    /// versions and state (each version kept as it is when the store
    /// agrees with it, so its secret is not derived again). Returns the
    /// head id of each key.
    ///
    /// # Errors
    /// [`KmsError::StoreCorrupt`], with nothing applied, if a pointer names
    /// a key (stored here or in memory) under another tenant, purpose or
    /// algorithm: a key's names never change, so no later state mends it;
    /// the errors of deriving a version's key from its seed.
    fn apply_stored(&self, stored: Loaded) -> Result<Vec<KeyId>, KmsError> {
        self.check_pointers(&stored)?;
        let mut heads = Vec::with_capacity(stored.keys.len());
        for key in stored.keys {
            let existing = self
                .keys
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&key.id.uuid())
                .cloned();
            match existing {
                Some(record) => {
                    // Built under the read lock (new versions derive their
                    // keys from seeds), so verifications of this key wait
                    // only for the swap. No other write comes between:
                    // every caller holds the mutation lock, or is the
                    // keystore's construction.
                    let list = stored_versions(&key, &record.versions().list)?;
                    let mut versions = record
                        .versions
                        .write()
                        .unwrap_or_else(PoisonError::into_inner);
                    *versions = KeyVersions {
                        list,
                        state: key.state,
                    };
                    heads.push(record.id.with_version(versions.head()));
                }
                None => {
                    let versions = KeyVersions {
                        list: stored_versions(&key, &[])?,
                        state: key.state,
                    };
                    heads.push(key.id.with_version(versions.head()));
                    let record = Arc::new(KeyRecord {
                        id: key.id.with_version(1),
                        versions: RwLock::new(versions),
                    });
                    self.keys
                        .write()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(key.id.uuid(), record);
                }
            }
        }
        if !stored.signing.is_empty() {
            let mut signing = self.signing.write().unwrap_or_else(PoisonError::into_inner);
            for id in stored.signing {
                signing.insert((id.tenant().to_owned(), id.purpose().to_owned()), id);
            }
        }
        if !heads.is_empty() {
            self.generation.advance();
        }
        Ok(heads)
    }

    /// Applies what other keystores sharing this one's store (fleet nodes
    /// on one etcd, [`Storage::is_shared`]) changed since the last call:
    /// new keys, rotations, policy changes, trims and destroys, each key
    /// whole, checked as on open. Returns the head id of each key changed
    /// (empty for a store with one writer, or an in-memory keystore).
    /// Every mutation does this first, under the mutation lock, so it
    /// builds on the newest state this keystore has seen; the storage's
    /// owner calls it when the store reports a change.
    ///
    /// # Errors
    /// [`KmsError::StoreCorrupt`] if a changed record does not open,
    /// decode or check, a key or the index went back (its sequence
    /// is lower than one already seen), or a signing pointer names a key
    /// held under other names; [`KmsError::Seal`] as on open;
    /// [`KmsError::AlgorithmNotBuilt`] for another node's ML-DSA key in a
    /// build without the `ml-dsa` feature;
    /// the errors of the storage. After such an error the keystore's
    /// memory stays as it was, and it refuses writes until reopened.
    pub fn refresh(&self) -> Result<Vec<KeyId>, KmsError> {
        let Some(durable) = self.durable.as_deref() else {
            return Ok(Vec::new());
        };
        let mut sequences = durable.begin();
        let changed = durable.refresh(&mut sequences)?;
        self.apply_stored(changed)
            .inspect_err(|_| Durable::stop_writes(&mut sequences))
    }

    /// Re-seals every record of a durable store that is not sealed under
    /// the keyring's newest master key (see
    /// [`Keystore::open_with_keyring`]), 64 records per commit, and returns
    /// how many records the store has and how many it re-sealed. Resumable:
    /// a crash midway leaves a store that opens with the same keyring, and
    /// running `rewrap` again finishes the job (after reopening, if it
    /// failed on a write: the store then refuses writes until reopened).
    /// Once it returns `Ok`, the store opens with the newest key alone. Mutations wait meanwhile; reads,
    /// signing and verification go on (they use memory). An in-memory
    /// keystore has nothing to re-seal (`Rewrapped` of zeros).
    ///
    /// # Errors
    /// [`KmsError::StoreCorrupt`] if a record does not open under the
    /// keyring; [`KmsError::Seal`] if sealing fails;
    /// [`KmsError::Io`] for I/O errors (after which writes wait for a
    /// reopen). On a shared store ([`Storage::is_shared`]) a batch may
    /// also answer [`KmsError::Conflict`] (another writer changed one of
    /// its records; not retried) or [`KmsError::Unavailable`], and writes
    /// go on: run `rewrap` again. Records re-sealed before an error stay
    /// re-sealed.
    pub fn rewrap(&self) -> Result<Rewrapped, KmsError> {
        match self.begin_mutation()? {
            Some((durable, mut sequences)) => durable.rewrap(&mut sequences),
            None => Ok(Rewrapped {
                records: 0,
                resealed: 0,
            }),
        }
    }

    /// Whether this keystore writes its mutations to disk.
    pub fn is_durable(&self) -> bool {
        self.durable.is_some()
    }

    /// For a durable store: the store and its mutation lock (the records'
    /// sequences), held until the returned guard drops (mutations are
    /// serialised; storage and memory change in the same order). `None`
    /// for an in-memory keystore.
    ///
    /// On a shared store, it first applies what other writers changed
    /// ([`Keystore::refresh`]), under the lock.
    ///
    /// # Errors
    /// The errors of [`Keystore::refresh`].
    fn begin_mutation(
        &self,
    ) -> Result<Option<(&Durable, std::sync::MutexGuard<'_, Sequences>)>, KmsError> {
        let Some(durable) = self.durable.as_deref() else {
            return Ok(None);
        };
        let mut sequences = durable.begin();
        if durable.is_shared() {
            let changed = durable.refresh(&mut sequences)?;
            self.apply_stored(changed)
                .inspect_err(|_| Durable::stop_writes(&mut sequences))?;
        }
        Ok(Some((durable, sequences)))
    }

    /// Runs `mutation` until it does not lose a race with another writer
    /// of a shared store ([`KmsError::Conflict`]), at most
    /// [`CONFLICT_ATTEMPTS`] times, with a random pause before each retry
    /// (up to 2, 4, …, 64 ms): each attempt plans again on what the other
    /// wrote, which the conflicted storage reports. When the last attempt
    /// loses too, memory takes that report before the answer, so reads
    /// after a `Conflict` show the state the change lost to.
    ///
    /// # Errors
    /// Those of `mutation`; [`KmsError::Conflict`] with the attempts made
    /// when every attempt lost.
    fn retrying<T>(
        &self,
        mut mutation: impl FnMut() -> Result<T, KmsError>,
    ) -> Result<T, KmsError> {
        let mut attempt = 1;
        loop {
            match mutation() {
                Err(KmsError::Conflict { record, .. }) => {
                    if attempt >= CONFLICT_ATTEMPTS {
                        // Memory takes what the last conflict brought, so
                        // that reads after the answer show the state this
                        // change lost to. If that report does not apply
                        // (the keystore then refuses writes), its error is
                        // the answer: it says more than the conflict.
                        drop(self.begin_mutation()?);
                        return Err(KmsError::Conflict {
                            record,
                            attempts: attempt,
                        });
                    }
                    // Two nodes that lost to each other must not meet
                    // again in step: a random pause, up to 2^attempt ms
                    // (at most 64 ms), before planning again.
                    let cap_ms = 1u64 << attempt.min(6);
                    let mut jitter = [0u8; 8];
                    crate::random::fill(&mut jitter)?;
                    let pause_us = u64::from_le_bytes(jitter) % (cap_ms * 1000);
                    std::thread::sleep(std::time::Duration::from_micros(pause_us));
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// Creates an Ed25519 key for `tenant` and `purpose`; returns the id of
    /// its version 1.
    ///
    /// # Errors
    /// [`KmsError::InvalidKeyId`] if `tenant` or `purpose` is not 1–64 bytes
    /// of `[A-Za-z0-9._-]`; [`KmsError::EntropyUnavailable`] if the
    /// operating system's random source fails; on a durable store,
    /// [`KmsError::Seal`] if sealing fails and [`KmsError::Internal`] if
    /// the write fails, or an earlier one did (reopen the store: whether
    /// it landed is read back then); on a shared store
    /// ([`Storage::is_shared`]), [`KmsError::Conflict`] when another
    /// writer won every attempt, [`KmsError::Unavailable`] when the store
    /// does not answer in time (retryable both), and the errors of
    /// [`Keystore::refresh`].
    pub fn create_ed25519(&self, tenant: &str, purpose: &str) -> Result<KeyId, KmsError> {
        self.create_key(tenant, purpose, Alg::Ed25519)
    }

    /// Creates a key of algorithm `alg` for `tenant` and `purpose`; every
    /// later version keeps `alg`. Returns the id of its version 1.
    ///
    /// # Errors
    /// As [`Keystore::create_ed25519`]; [`KmsError::AlgorithmNotBuilt`] for
    /// ML-DSA in a build without the `ml-dsa` feature.
    pub fn create_key(&self, tenant: &str, purpose: &str, alg: Alg) -> Result<KeyId, KmsError> {
        let uuid = uuid::Builder::from_random_bytes(random_bytes()?).into_uuid();
        let id = KeyId::new(tenant, purpose, alg, uuid, 1)?;
        self.insert_new_key(id, new_version(alg, 1)?)
    }

    /// Adds a key whose only version is `version`: on disk first for a
    /// durable store, then in memory. Returns its id.
    fn insert_new_key(&self, id: KeyId, version: KeyVersion) -> Result<KeyId, KmsError> {
        // The lock stays held until memory has the key.
        let _mutation = self.retrying(|| {
            let mut mutation = self.begin_mutation()?;
            if let Some((durable, sequences)) = &mut mutation {
                durable.add_key(sequences, &id, &version, false)?;
            }
            Ok(mutation)
        })?;
        self.insert_key(id, version)
    }

    /// The id (version 1) of the key that signs for `tenant`'s `purpose`:
    /// the key its signing pointer names. Where there is no pointer, or it
    /// names a destroyed key, the pointer is written: naming the purpose's
    /// first live key of [`Keystore::key_ids`] if there is one (the key a
    /// store made before pointers signed with), else a new key, created
    /// with the pointer in one commit. On a store shared by a fleet
    /// ([`Storage::is_shared`]) the pointer is written only over the one
    /// this keystore last saw: nodes that start at once end up with one
    /// signing key, whichever node's commit lands first, not one each. A
    /// pointer to an existing key is written with that key's head, so it
    /// does not land if another node destroyed the key meanwhile.
    ///
    /// # Errors
    /// [`KmsError::InvalidKeyId`] if `tenant` or `purpose` is not 1–64
    /// bytes of `[A-Za-z0-9._-]`; where the pointer is written, the errors
    /// of [`Keystore::create_ed25519`] (among them those of
    /// [`Keystore::refresh`]).
    pub fn signing_key(&self, tenant: &str, purpose: &str) -> Result<KeyId, KmsError> {
        self.signing_key_with(tenant, purpose, Alg::Ed25519)
    }

    /// [`Keystore::signing_key`], where a key it creates is of algorithm
    /// `alg`. An existing key is answered whatever its algorithm: the
    /// caller compares [`KeyId::alg`] with what it wants.
    ///
    /// # Errors
    /// As [`Keystore::signing_key`]; [`KmsError::AlgorithmNotBuilt`] for
    /// ML-DSA in a build without the `ml-dsa` feature, when a key is made.
    pub fn signing_key_with(
        &self,
        tenant: &str,
        purpose: &str,
        alg: Alg,
    ) -> Result<KeyId, KmsError> {
        let names = (tenant.to_owned(), purpose.to_owned());
        let signing_map = || self.signing.read().unwrap_or_else(PoisonError::into_inner);
        let pointed = |map: &HashMap<(String, String), KeyId>| {
            map.get(&names).filter(|key| self.is_live(key)).cloned()
        };
        if let Some(key) = pointed(&signing_map()) {
            return Ok(key);
        }
        // The key made if the purpose has none (its names checked here).
        let uuid = uuid::Builder::from_random_bytes(random_bytes()?).into_uuid();
        let id = KeyId::new(tenant, purpose, alg, uuid, 1)?;
        let version = new_version(alg, 1)?;
        // Memory takes the key and pointer under the mutation lock (an
        // in-memory keystore: under the pointers' lock), after the commit.
        let planned = self.retrying(|| {
            let mut mutation = self.begin_mutation()?;
            // The refresh may have brought another writer's pointer, even
            // before the key it names (a conflict's fetch reads only the
            // groups the commit wrote): then read the store whole, so its
            // next report has the key, and plan again as after a lost race.
            let pointer = signing_map().get(&names).cloned();
            if let Some(key) = pointer {
                if self.is_live(&key) {
                    return Ok(ControlFlow::Break(key));
                }
                if self.record(&key).is_err() {
                    if let Some((durable, _)) = &mutation {
                        durable.resync()?;
                    }
                    return Err(KmsError::Conflict {
                        record: records::signing_name(&key),
                        attempts: 1,
                    });
                }
            }
            let existing = self
                .key_ids()
                .into_iter()
                .find(|k| k.tenant() == tenant && k.purpose() == purpose)
                .map(|k| k.with_version(1));
            if let Some((durable, sequences)) = &mut mutation {
                match &existing {
                    Some(key) => {
                        // The key's head is written with the pointer, so
                        // the commit fails if another node changed it.
                        let (head, state) = {
                            let record = self.record(key)?;
                            let versions = record.versions();
                            (versions.head(), versions.state.clone())
                        };
                        durable.add_signing(sequences, key, head, &state)?;
                    }
                    None => durable.add_key(sequences, &id, &version, true)?,
                }
            }
            Ok(ControlFlow::Continue((mutation, existing)))
        })?;
        let (mutation, existing) = match planned {
            ControlFlow::Break(key) => return Ok(key),
            ControlFlow::Continue(planned) => planned,
        };
        let mut signing = self.signing.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(key) = pointed(&signing) {
            // An in-memory keystore's other caller was first.
            return Ok(key);
        }
        let key = match existing {
            // A durable keystore's destroy waits for the mutation lock
            // held here; an in-memory one's may have come since the key
            // was chosen, and then a new key signs.
            Some(key) if mutation.is_some() || self.is_live(&key) => key,
            _ => self.insert_key(id, version)?,
        };
        signing.insert(names, key.clone());
        Ok(key)
    }

    /// Refuses `stored` if one of its signing pointers names a key held
    /// (in `stored` or in memory) under other names.
    ///
    /// # Errors
    /// [`KmsError::StoreCorrupt`] naming the pointer.
    fn check_pointers(&self, stored: &Loaded) -> Result<(), KmsError> {
        let Some(durable) = self.durable.as_deref() else {
            return Ok(());
        };
        let keys = self.keys.read().unwrap_or_else(PoisonError::into_inner);
        for pointer in &stored.signing {
            let held = stored
                .keys
                .iter()
                .map(|k| &k.id)
                .find(|id| id.uuid() == pointer.uuid())
                .or_else(|| keys.get(&pointer.uuid()).map(|r| &r.id));
            let same_names = |id: &KeyId| {
                (id.tenant(), id.purpose(), id.alg())
                    == (pointer.tenant(), pointer.purpose(), pointer.alg())
            };
            if held.is_some_and(|id| !same_names(id)) {
                return Err(durable.corrupt(format!(
                    "record {} names key {pointer}, which the store holds under other names",
                    records::signing_name(pointer)
                )));
            }
        }
        Ok(())
    }

    /// The count of changes to this keystore's keys (and, through its
    /// clones, to every owner's that shares it): advanced after each key
    /// created or imported, rotation, policy change, trim, destroy and
    /// fleet update this keystore's memory takes ([`KeySetGeneration`]).
    /// Clones of the keystore share it.
    pub fn key_set_generation(&self) -> KeySetGeneration {
        self.generation.clone()
    }

    /// Whether `key` is held and not destroyed.
    fn is_live(&self, key: &KeyId) -> bool {
        self.record(key)
            .is_ok_and(|record| !record.versions().state.destroyed)
    }

    /// Puts a new key whose only version is `version` in memory; returns
    /// its id.
    fn insert_key(&self, id: KeyId, version: KeyVersion) -> Result<KeyId, KmsError> {
        let record = Arc::new(KeyRecord {
            id: id.clone(),
            versions: RwLock::new(KeyVersions {
                list: vec![Arc::new(version)],
                state: KeyState::new(),
            }),
        });
        // Poisoning cannot leave the map torn: the only write is one insert.
        self.keys
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.uuid(), record);
        self.generation.advance();
        Ok(id)
    }

    /// Signs `message` with the Ed25519 key's head version; returns the
    /// head's id and the 64-byte signature (RFC 8032 §5.1.6), with no
    /// allocation. The version in `key` may be any existing version; the
    /// head signs regardless. A key of any algorithm signs through
    /// [`Keystore::sign_message`].
    ///
    /// # Errors
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`],
    /// [`KmsError::KeyDisabled`], [`KmsError::KeyDestroyed`];
    /// [`KmsError::WrongAlgorithm`] for a key that is not Ed25519.
    pub fn sign(&self, key: &KeyId, message: &[u8]) -> Result<(KeyId, [u8; 64]), KmsError> {
        let (id, signing_key) = self.head(key)?;
        let signature = signing_key.sign_ed25519(&id, message)?;
        Ok((id, signature))
    }

    /// Signs `message` with the key's head version, whatever its
    /// algorithm: Ed25519 (RFC 8032 §5.1.6), or ML-DSA hedged with the
    /// empty context (FIPS 204 Algorithm 2; hundreds of µs). Returns the
    /// head's id and the signature.
    ///
    /// # Errors
    /// As [`Keystore::sign`], without [`KmsError::WrongAlgorithm`];
    /// [`KmsError::Internal`] if aws-lc fails to sign.
    pub fn sign_message(
        &self,
        key: &KeyId,
        message: &[u8],
    ) -> Result<(KeyId, Signature), KmsError> {
        let (id, signing_key) = self.head(key)?;
        Ok((id, signing_key.sign(message)?))
    }

    /// The head version of `key`'s key, if it may sign, and its id, cloned
    /// out so no lock is held while it signs.
    fn head(&self, key: &KeyId) -> Result<(KeyId, HeadSigner), KmsError> {
        let record = self.record(key)?;
        let head = {
            let versions = record.versions();
            versions.get(key)?;
            if !versions.state.policy.enabled {
                return Err(KmsError::KeyDisabled {
                    key: key.to_string(),
                });
            }
            versions.list.last().cloned()
        }
        .ok_or_else(|| KmsError::Internal {
            reason: format!("key {} has no version", record.id),
        })?;
        Ok((record.id.with_version(head.info.version), HeadSigner(head)))
    }

    /// Signs a message that names its signer: `message` is built from the
    /// head version's id, and that same head signs it, whatever rotation
    /// happens meanwhile (a JWS whose `kid` is the signing version).
    /// Returns the head's id, the message and the 64-byte signature.
    ///
    /// # Errors
    /// As [`Keystore::sign`].
    pub fn sign_naming_head(
        &self,
        key: &KeyId,
        message: impl FnOnce(&KeyId) -> Vec<u8>,
    ) -> Result<(KeyId, Vec<u8>, [u8; 64]), KmsError> {
        let (id, signing_key) = self.head(key)?;
        let message = message(&id);
        let signature = signing_key.sign_ed25519(&id, &message)?;
        Ok((id, message, signature))
    }

    /// [`Keystore::sign_naming_head`] for a key of any algorithm: the
    /// message is built from the head's id, and that head signs it
    /// ([`Keystore::sign_message`]).
    ///
    /// # Errors
    /// As [`Keystore::sign_message`].
    pub fn sign_message_naming_head(
        &self,
        key: &KeyId,
        message: impl FnOnce(&KeyId) -> Vec<u8>,
    ) -> Result<(KeyId, Vec<u8>, Signature), KmsError> {
        let (id, signing_key) = self.head(key)?;
        let message = message(&id);
        let signature = signing_key.sign(&message)?;
        Ok((id, message, signature))
    }

    /// Verifies `signature` on `message` under the version `key` names,
    /// with the criteria of docs/DESIGN.md §3.2 ([`ed25519::verify`]).
    ///
    /// # Errors
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`],
    /// [`KmsError::KeyDestroyed`], [`KmsError::VersionDisallowed`] below
    /// the key's `min_verify_version`, or [`KmsError::InvalidSignature`]
    /// naming the rule that failed; [`KmsError::WrongAlgorithm`] for a key
    /// that is not Ed25519 ([`Keystore::verify_message`] takes any).
    pub fn verify(
        &self,
        key: &KeyId,
        message: &[u8],
        signature: &[u8; 64],
    ) -> Result<(), KmsError> {
        self.verifying_key(key)?
            .verify(message, signature)
            .map_err(KmsError::from)
    }

    /// Verifies `signature` on `message` under the version `key` names,
    /// whatever its algorithm: Ed25519 as [`Keystore::verify`], ML-DSA
    /// under FIPS 204 Algorithm 3 with the empty context. The signature's
    /// length is the algorithm's ([`Alg::signature_len`]).
    ///
    /// # Errors
    /// As [`Keystore::verify`]; [`KmsError::InvalidArgument`] for an
    /// Ed25519 signature of another length than 64 bytes;
    /// [`KmsError::InvalidMlDsaSignature`].
    pub fn verify_message(
        &self,
        key: &KeyId,
        message: &[u8],
        signature: &[u8],
    ) -> Result<(), KmsError> {
        // The version held (a reference count), not its key copied: an
        // ML-DSA public key is 1312–2592 bytes; verified outside the lock.
        let version = {
            let record = self.record(key)?;
            let versions = record.versions();
            Arc::clone(versions.verifiable(key)?)
        };
        version.public.verify(message, signature)
    }

    /// Adds a new head version to the key `key` names (any existing version
    /// of it); returns the new head's id. Older versions keep verifying.
    ///
    /// # Errors
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`],
    /// [`KmsError::VersionsExhausted`] at version 4294967295,
    /// [`KmsError::KeyDestroyed`], [`KmsError::EntropyUnavailable`]; on a
    /// durable store the write errors of [`Keystore::create_ed25519`].
    pub fn rotate(&self, key: &KeyId) -> Result<KeyId, KmsError> {
        self.rotate_from(key, None)?
            .ok_or_else(|| KmsError::Internal {
                reason: "keystore: a rotation without a condition did not rotate".to_owned(),
            })
    }

    /// [`Keystore::rotate`], if `expected_head` is `None` or still the
    /// head under the locks that order writes; `Ok(None)` if it is not.
    /// Planned again after losing a race on a shared store
    /// ([`Keystore::retrying`]).
    fn rotate_from(
        &self,
        key: &KeyId,
        expected_head: Option<u32>,
    ) -> Result<Option<KeyId>, KmsError> {
        self.retrying(|| self.rotate_once(key, expected_head))
    }

    /// One attempt of [`Keystore::rotate_from`].
    fn rotate_once(
        &self,
        key: &KeyId,
        expected_head: Option<u32>,
    ) -> Result<Option<KeyId>, KmsError> {
        let moved_on = |versions: &KeyVersions| expected_head.is_some_and(|h| versions.head() != h);
        let record = self.record(key)?;
        record.versions().get(key)?;
        // Generate outside the locks; the version number is fixed under them.
        let mut fresh = new_version(record.id.alg(), 0)?;
        let next_after = |len: usize| {
            u32::try_from(len)
                .ok()
                .and_then(|n| n.checked_add(1))
                .ok_or_else(|| KmsError::VersionsExhausted {
                    key: key.to_string(),
                })
        };
        let mut mutation = self.begin_mutation()?;
        if let Some((durable, sequences)) = &mut mutation {
            // Mutations are serialised by the store's lock, so what is
            // read here is still so under the write lock below.
            let versions = record.versions();
            versions.get(key)?;
            if moved_on(&versions) {
                return Ok(None);
            }
            fresh.info.version = next_after(versions.list.len())?;
            durable.add_version(sequences, &record.id, &fresh, &versions.state)?;
        }
        let mut versions = record
            .versions
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        // Destroyed meanwhile (in memory; a durable store was checked
        // under its lock above).
        versions.get(key)?;
        if moved_on(&versions) {
            return Ok(None);
        }
        let next = next_after(versions.list.len())?;
        fresh.info.version = next;
        versions.list.push(Arc::new(fresh));
        self.generation.advance();
        Ok(Some(record.id.with_version(next)))
    }

    /// Reports the key's algorithm, head, policy, and every version with
    /// its public key and creation time.
    ///
    /// # Errors
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`],
    /// [`KmsError::KeyDestroyed`].
    pub fn attest(&self, key: &KeyId) -> Result<Attestation, KmsError> {
        let record = self.record(key)?;
        let (infos, state) = {
            let versions = record.versions();
            versions.get(key)?;
            let infos: Vec<VersionInfo> = versions.list.iter().map(|v| v.info.clone()).collect();
            (infos, versions.state.clone())
        };
        let head_version = infos.last().map_or(1, |v| v.version);
        Ok(Attestation {
            head: record.id.with_version(head_version),
            alg: record.id.alg(),
            versions: infos,
            policy: state.policy,
            min_available_version: state.min_available_version,
        })
    }

    /// The 32-byte public key of the Ed25519 version `key` names (any
    /// version, trimmed or below `min_verify_version` included: it is
    /// public). Every algorithm's public keys are in
    /// [`Keystore::attest`].
    ///
    /// # Errors
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`],
    /// [`KmsError::KeyDestroyed`]; [`KmsError::WrongAlgorithm`] for a key
    /// that is not Ed25519.
    pub fn public_key(&self, key: &KeyId) -> Result<[u8; 32], KmsError> {
        let record = self.record(key)?;
        let versions = record.versions();
        let version = versions.get(key)?;
        version
            .info
            .public_key
            .as_slice()
            .try_into()
            .map_err(|_| wrong_algorithm(key, Alg::Ed25519))
    }

    /// The decoded public key of the version `key` names, if signatures
    /// under it may verify: what the KMS actor's batches verify under, so
    /// `A` is never decoded again.
    ///
    /// # Errors
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`],
    /// [`KmsError::KeyDestroyed`], [`KmsError::VersionDisallowed`] below
    /// the key's `min_verify_version`; [`KmsError::WrongAlgorithm`] for a
    /// key that is not Ed25519.
    pub fn verifying_key(&self, key: &KeyId) -> Result<ed25519::VerifyingKey, KmsError> {
        let record = self.record(key)?;
        let versions = record.versions();
        versions
            .verifiable(key)?
            .public
            .ed25519()
            .ok_or_else(|| wrong_algorithm(key, Alg::Ed25519))
    }

    /// The head version's id of every key not destroyed, sorted by
    /// tenant, purpose and UUID (a stable order to find a key by its
    /// names).
    pub fn key_ids(&self) -> Vec<KeyId> {
        let records: Vec<Arc<KeyRecord>> = self
            .keys
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        let mut ids: Vec<KeyId> = records
            .iter()
            .filter_map(|r| {
                let versions = r.versions();
                if versions.state.destroyed {
                    return None;
                }
                let head = versions.list.last().map(|v| v.info.version)?;
                Some(r.id.with_version(head))
            })
            .collect();
        ids.sort_by(|a, b| {
            (a.tenant(), a.purpose(), a.uuid()).cmp(&(b.tenant(), b.purpose(), b.uuid()))
        });
        ids
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

/// Mutations retried after losing a race on a shared store
/// ([`KmsError::Conflict`]) before the conflict is answered (counts).
pub const CONFLICT_ATTEMPTS: u32 = 8;

/// A stored key's versions, oldest first: trimmed ones from their public
/// parts, the others from their seeds. A version of `existing` (the key as
/// in memory) that the store agrees with (same public key, and a secret
/// iff the store keeps one) is kept as it is.
///
/// # Errors
/// [`KmsError::Internal`] for a key without versions, more than 2^32 - 1,
/// or a stored public key that does not decode.
fn stored_versions(
    key: &StoredKey,
    existing: &[Arc<KeyVersion>],
) -> Result<Vec<Arc<KeyVersion>>, KmsError> {
    let too_many = || KmsError::Internal {
        reason: "keystore: too many versions".to_owned(),
    };
    // Sized once, never grown.
    let mut list = Vec::with_capacity(key.retired.len() + key.versions.len());
    let kept = |version: u32, same: &dyn Fn(&KeyVersion) -> bool| {
        let index = usize::try_from(version.checked_sub(1)?).ok()?;
        existing.get(index).filter(|v| same(v)).cloned()
    };
    for (version, v) in (1u32..).zip(&key.retired) {
        let same = |k: &KeyVersion| k.secret.is_none() && k.info.public_key == v.public_key;
        list.push(match kept(version, &same) {
            Some(kept) => kept,
            None => Arc::new(lifecycle::retired_version(&key.id, version, v)?),
        });
    }
    let first = u32::try_from(list.len() + 1).map_err(|_| too_many())?;
    for (version, v) in (first..).zip(&key.versions) {
        // Compared in place: no copy of either seed.
        let same = |k: &KeyVersion| k.secret.as_ref().is_some_and(|s| s.seed_is(&v.seed));
        list.push(match kept(version, &same) {
            Some(kept) => kept,
            None => Arc::new(version_from_seed(
                key.id.alg(),
                version,
                &v.seed,
                v.created_at,
                v.origin.clone(),
            )?),
        });
    }
    if list.is_empty() {
        return Err(KmsError::Internal {
            reason: format!("keystore: key {} has no version", key.id),
        });
    }
    Ok(list)
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
    crate::random::fill(&mut bytes)?;
    Ok(bytes)
}

fn new_version(alg: Alg, version: u32) -> Result<KeyVersion, KmsError> {
    // The seed is wiped when `seed` drops; the key keeps its own copy,
    // wiped on drop.
    let mut seed = zeroize::Zeroizing::new([0u8; records::SEED_LEN]);
    crate::random::fill(&mut *seed)?;
    version_from_seed(alg, version, &seed, SystemTime::now(), Origin::Generated)
}

/// A version of algorithm `alg` from its 32-byte seed (RFC 8032 §5.1.5;
/// FIPS 204 Algorithm 6).
///
/// # Errors
/// [`KmsError::AlgorithmNotBuilt`]; aws-lc's refusals.
fn version_from_seed(
    alg: Alg,
    version: u32,
    seed: &[u8; records::SEED_LEN],
    created_at: SystemTime,
    origin: Origin,
) -> Result<KeyVersion, KmsError> {
    let (secret, public, public_key) = key_pair::from_seed(alg, seed)?;
    Ok(KeyVersion {
        info: VersionInfo {
            version,
            public_key,
            created_at,
            origin,
        },
        public,
        secret: Some(secret),
    })
}

/// [`KmsError::WrongAlgorithm`]: `key` is not of `wanted`.
fn wrong_algorithm(key: &KeyId, wanted: Alg) -> KmsError {
    KmsError::WrongAlgorithm {
        key: key.to_string(),
        alg: key.alg(),
        wanted,
    }
}

/// The head's secret, cloned out of the keystore to sign with: holds the
/// version (and so its secret) only while it signs.
struct HeadSigner(Arc<KeyVersion>);

impl HeadSigner {
    /// The head's secret.
    ///
    /// # Errors
    /// [`KmsError::Internal`] if the head has no secret, which the module
    /// invariants rule out (`min_available_version <= head`, and a
    /// destroyed key gives no signer).
    fn secret(&self) -> Result<&Secret, KmsError> {
        self.0.secret.as_ref().ok_or_else(|| KmsError::Internal {
            reason: format!("keystore: head v{} has no secret", self.0.info.version),
        })
    }

    /// Signs `message` with the head, whatever its algorithm.
    ///
    /// # Errors
    /// As [`HeadSigner::secret`]; aws-lc's failure to sign.
    fn sign(&self, message: &[u8]) -> Result<Signature, KmsError> {
        self.secret()?.sign(message)
    }

    /// Signs `message` with an Ed25519 head (RFC 8032 §5.1.6); `id` names
    /// it.
    ///
    /// # Errors
    /// As [`HeadSigner::secret`]; [`KmsError::WrongAlgorithm`] for another
    /// algorithm's head.
    fn sign_ed25519(&self, id: &KeyId, message: &[u8]) -> Result<[u8; 64], KmsError> {
        if id.alg() != Alg::Ed25519 {
            return Err(wrong_algorithm(id, Alg::Ed25519));
        }
        match self.secret()? {
            Secret::Ed25519(key) => {
                use ed25519_dalek::Signer as _;
                Ok(key.sign(message).to_bytes())
            }
            #[cfg(feature = "ml-dsa")]
            Secret::MlDsa(_) => Err(KmsError::Internal {
                reason: format!("keystore: Ed25519 key {id} holds an ML-DSA secret"),
            }),
        }
    }
}
