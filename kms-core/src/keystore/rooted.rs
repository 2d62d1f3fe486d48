//! A store in any [`Storage`] under a root of trust: the root record kept
//! by the storage ([`Storage::root_record`]), read before the records and
//! replaced by compare-and-swap, so nodes of a fleet that start at once
//! agree on one wrapped master key.
//!
//! * Opening: a record of another kind of root is refused
//!   ([`KmsError::WrongRoot`]) before anything is unwrapped; no record
//!   means a file root. The identity the record names must be the one the
//!   store's index seals.
//! * Creating (a storage with no store and no record): the first node to
//!   write the record (absent before) decides the master key and the
//!   identity; a node that loses the race reads the winner's and unwraps
//!   it.
//! * Moving: the key the old root unwraps must open every record before
//!   the record is swapped for the new root's.
//! * Every new wrapped key is unwrapped again and compared with the key
//!   before its record is written ([`wrap_checked`]), so no record is
//!   written that its root cannot open. A record write that fails is
//!   settled ([`settle`]): what the new root wrote (a new key file) is
//!   removed only when the write is known never to land, so no master
//!   key is left in clear by a move that surely failed, and none is lost
//!   by one that might still land.

use std::sync::Arc;

use super::durable::{Durable, Loaded, Opened};
use super::records::INDEX;
use crate::error::KmsError;
use crate::root::{
    MasterKeyBytes, MasterKeyRoot, RootKind, RootRecord, StoreId, WrappedKey, MASTER_KEY_LEN,
};
use crate::seal::{Keyring, SealKey};
use crate::storage::{RecordWrite, Storage};

/// How many times a create re-reads a record another node wrote first.
const RACES: u32 = 3;

/// The record `storage` keeps, parsed (`None`: no record), with its text.
fn read(storage: &dyn Storage, label: &str) -> Result<Option<(RootRecord, Vec<u8>)>, KmsError> {
    match storage.root_record()? {
        Some(text) => Ok(Some((RootRecord::from_text(&text, label)?, text))),
        None => Ok(None),
    }
}

/// The master key `root` unwraps from `record`, and the keyring it makes.
fn unwrapped(
    root: &dyn MasterKeyRoot,
    record: &RootRecord,
    key_id: &str,
    label: &str,
) -> Result<(MasterKeyBytes, Keyring), KmsError> {
    if record.kind != root.kind() {
        return Err(KmsError::WrongRoot {
            store: label.to_owned(),
            expected: record.kind,
            root: record.root.clone(),
            given: root.kind(),
        });
    }
    let key = root.unwrap(&record.store, record.wrapped.as_ref())?;
    let keyring = Keyring::from(SealKey::from_bytes(key_id, 1, &key)?);
    Ok((key, keyring))
}

/// `key`, the master key of the store `store`, wrapped by `root` and
/// unwrapped again to check that the record about to be written opens.
/// A file root wraps nothing: its own key is compared with `key` in
/// constant time, and a new key file is written whole and fsynced (not
/// read back).
///
/// # Errors
/// The root's own; [`KmsError::Root`] if what it wrapped does not unwrap
/// to `key` (after [`MasterKeyRoot::discard`]).
pub(crate) fn wrap_checked(
    root: &dyn MasterKeyRoot,
    store: &StoreId,
    key: &MasterKeyBytes,
) -> Result<Option<WrappedKey>, KmsError> {
    use subtle::ConstantTimeEq;
    let wrapped = root.wrap(store, key)?;
    if wrapped.is_none() && root.kind() == RootKind::File {
        return Ok(None);
    }
    let opens = match root.unwrap(store, wrapped.as_ref()) {
        Ok(back) => bool::from(back.ct_eq(key.as_slice())),
        Err(_) => false,
    };
    if !opens {
        root.discard(store);
        return Err(KmsError::Root {
            root: root.describe(),
            reason: "the master key it wrapped does not unwrap to the same key; nothing was \
                     written"
                .to_owned(),
        });
    }
    Ok(wrapped)
}

/// How far a record read back after a failed write can be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadBack {
    /// A directory under its lock: what is read is what is there, but a
    /// record that landed may not be durable (the directory's fsync
    /// failed after the rename).
    UnderLock,
    /// A shared storage (etcd): a record that landed is durable, but a
    /// write that timed out may still land after the read.
    Racy,
}

/// Settles the write of the record `moved` (text `text`) that `written`
/// answered (module docs). Whatever `to` wrote (a new key file) is
/// discarded only when the write is known never to land: a
/// compare-and-swap refused ([`KmsError::Conflict`]), or, under the lock,
/// a record read back unchanged. A shared storage's write that landed is a
/// move done; a directory's that landed but failed is an error, with the
/// key file kept (the rename may not survive a power loss); one that
/// cannot be told keeps the key file and fails.
pub(crate) fn settle(
    written: Result<(), KmsError>,
    read_back: impl FnOnce() -> Result<Option<Vec<u8>>, KmsError>,
    how: ReadBack,
    to: &dyn MasterKeyRoot,
    moved: RootRecord,
    text: &[u8],
) -> Result<RootRecord, KmsError> {
    let e = match written {
        Ok(()) => return Ok(moved),
        Err(e @ KmsError::Conflict { .. }) => {
            to.discard(&moved.store);
            return Err(e);
        }
        Err(e) => e,
    };
    match (read_back(), how) {
        (Ok(Some(now)), ReadBack::Racy) if now == text => Ok(moved),
        (Ok(now), ReadBack::UnderLock) if now.as_deref() != Some(text) => {
            to.discard(&moved.store);
            Err(e)
        }
        _ => Err(e),
    }
}

/// Checks that the identity `record` names is the store's own (a store
/// that records no root has nothing to check).
///
/// # Errors
/// [`KmsError::StoreCorrupt`] if the identities differ.
pub(crate) fn check_identity(
    record: &RootRecord,
    store: StoreId,
    label: &str,
) -> Result<(), KmsError> {
    if record.store == StoreId::NONE || record.store == store {
        return Ok(());
    }
    Err(KmsError::StoreCorrupt {
        store: label.to_owned(),
        reason: format!(
            "the root record names the identity {}, the store's index {store}",
            record.store
        ),
    })
}

/// Opens the store in `storage` under `root`; with `create`, starts one
/// (and its root record) if there is none (see the module docs).
pub(crate) fn open_under(
    storage: Box<dyn Storage>,
    root: &dyn MasterKeyRoot,
    key_id: &str,
    create: bool,
) -> Result<(Durable, Loaded), KmsError> {
    let label = format!("{storage:?}");
    for _ in 0..RACES {
        let record = match read(storage.as_ref(), &label)? {
            Some((record, _)) => record,
            None => {
                // A store without a record is under a file root; only an
                // empty storage gets a new record, and only with `create`.
                let holds_store = storage.load()?.iter().any(|(name, _)| name == INDEX);
                if holds_store {
                    RootRecord::unrecorded()
                } else if !create {
                    return Err(KmsError::StoreNotFound { dir: label });
                } else {
                    let record = new_record(root)?;
                    match storage.replace_root_record(None, record.0.to_text().as_bytes()) {
                        Ok(()) => {}
                        Err(KmsError::Conflict { .. }) => continue,
                        Err(e) => return Err(e),
                    }
                    let keyring = Keyring::from(SealKey::from_bytes(key_id, 1, &record.1)?);
                    let (durable, loaded) =
                        Durable::open_or_create(storage, keyring, record.0.store, label.clone())?;
                    check_identity(&record.0, durable.store_id(), &label)?;
                    return Ok((durable, loaded));
                }
            }
        };
        let (_, keyring) = unwrapped(root, &record, key_id, &label)?;
        let (durable, loaded) = if create {
            let store = match record.store {
                StoreId::NONE => StoreId::generate()?,
                recorded => recorded,
            };
            Durable::open_or_create(storage, keyring, store, label.clone())?
        } else {
            match Durable::open(storage, keyring, label.clone())? {
                Opened::Store(durable, loaded) => (*durable, loaded),
                Opened::Empty(..) => return Err(KmsError::StoreNotFound { dir: label }),
            }
        };
        check_identity(&record, durable.store_id(), &label)?;
        return Ok((durable, loaded));
    }
    Err(KmsError::Conflict {
        record: "root".to_owned(),
        attempts: RACES,
    })
}

/// A new store's root record under `root` (a new identity), and its
/// master key: the root's own (a file root) or 32 random bytes, wrapped.
pub(crate) fn new_record(
    root: &dyn MasterKeyRoot,
) -> Result<(RootRecord, MasterKeyBytes), KmsError> {
    let store = StoreId::generate()?;
    let key = match root.kind() {
        RootKind::File => root.unwrap(&store, None)?,
        _ => {
            let mut key = zeroize::Zeroizing::new([0u8; MASTER_KEY_LEN]);
            crate::random::fill(key.as_mut_slice())?;
            key
        }
    };
    let record = RootRecord {
        store,
        kind: root.kind(),
        root: root.describe(),
        wrapped: wrap_checked(root, &store, &key)?,
    };
    Ok((record, key))
}

/// Moves the store in `storage` from `from` to `to` (see
/// [`crate::Keystore::move_to_root_in_storage`]).
pub(crate) fn move_root(
    storage: Box<dyn Storage>,
    from: &dyn MasterKeyRoot,
    to: &dyn MasterKeyRoot,
    key_id: &str,
) -> Result<RootRecord, KmsError> {
    let label = format!("{storage:?}");
    let storage: Arc<dyn Storage> = Arc::from(storage);
    let (record, previous) = match read(storage.as_ref(), &label)? {
        Some((record, text)) => (record, Some(text)),
        None => (RootRecord::unrecorded(), None),
    };
    let (key, keyring) = unwrapped(from, &record, key_id, &label)?;
    let store = match Durable::open(Box::new(Held(Arc::clone(&storage))), keyring, label.clone())? {
        Opened::Store(durable, _) => durable.store_id(),
        Opened::Empty(..) => return Err(KmsError::StoreNotFound { dir: label }),
    };
    check_identity(&record, store, &label)?;
    let moved = RootRecord {
        store,
        kind: to.kind(),
        root: to.describe(),
        wrapped: wrap_checked(to, &store, &key)?,
    };
    let text = moved.to_text();
    let written = storage.replace_root_record(previous.as_deref(), text.as_bytes());
    settle(
        written,
        || storage.root_record(),
        ReadBack::Racy,
        to,
        moved,
        text.as_bytes(),
    )
}

/// A storage shared with its caller, who uses it again once the store
/// that used it is dropped.
#[derive(Debug)]
pub(crate) struct Held<S: ?Sized>(pub(crate) Arc<S>);

impl<S: Storage + ?Sized> Storage for Held<S> {
    fn load(&self) -> Result<Vec<(String, Vec<u8>)>, KmsError> {
        self.0.load()
    }

    fn commit(&self, writes: &[RecordWrite<'_>]) -> Result<(), KmsError> {
        self.0.commit(writes)
    }

    fn is_shared(&self) -> bool {
        self.0.is_shared()
    }

    fn changes(&self) -> Result<Vec<(String, Vec<u8>)>, KmsError> {
        self.0.changes()
    }
}
