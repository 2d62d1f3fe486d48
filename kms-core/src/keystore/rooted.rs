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

use std::sync::Arc;

use super::durable::{Durable, Loaded, Opened};
use super::records::INDEX;
use crate::error::KmsError;
use crate::root::{MasterKeyRoot, RootKind, RootRecord, StoreId, MASTER_KEY_LEN};
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

/// The master key `root` unwraps from `record`, as a keyring.
fn keyring(
    root: &dyn MasterKeyRoot,
    record: &RootRecord,
    key_id: &str,
    label: &str,
) -> Result<Keyring, KmsError> {
    if record.kind != root.kind() {
        return Err(KmsError::WrongRoot {
            store: label.to_owned(),
            expected: record.kind,
            root: record.root.clone(),
            given: root.kind(),
        });
    }
    let key = root.unwrap(&record.store, record.wrapped.as_ref())?;
    Ok(Keyring::from(SealKey::from_bytes(key_id, 1, &key)?))
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
            None if !create => RootRecord::unrecorded(),
            None => {
                // A store without a record is under a file root; only an
                // empty storage gets a new record.
                let holds_store = storage.load()?.iter().any(|(name, _)| name == INDEX);
                if holds_store {
                    RootRecord::unrecorded()
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
        let keyring = keyring(root, &record, key_id, &label)?;
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
) -> Result<(RootRecord, crate::root::MasterKeyBytes), KmsError> {
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
        wrapped: root.wrap(&store, &key)?,
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
    let keyring = keyring(from, &record, key_id, &label)?;
    let key = from.unwrap(&record.store, record.wrapped.as_ref())?;
    let store = match Durable::open(Box::new(Held(Arc::clone(&storage))), keyring, label.clone())? {
        Opened::Store(durable, _) => durable.store_id(),
        Opened::Empty(..) => return Err(KmsError::StoreNotFound { dir: label }),
    };
    check_identity(&record, store, &label)?;
    let moved = RootRecord {
        store,
        kind: to.kind(),
        root: to.describe(),
        wrapped: to.wrap(&store, &key)?,
    };
    storage.replace_root_record(previous.as_deref(), moved.to_text().as_bytes())?;
    Ok(moved)
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
