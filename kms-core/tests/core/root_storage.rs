//! Stores under a root of trust in another [`Storage`] than a directory
//! (`Keystore::open_under_with_storage`, `Keystore::move_to_root_in_storage`):
//! an empty storage is no store, and what a new root wrote (a key file)
//! is discarded only when the record's write surely never lands.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use kms_core::root::{FileRoot, RootKind, RootRecord};
use kms_core::storage::{RecordWrite, Storage};
use kms_core::{Keystore, KmsError};

use crate::support::memory::{apply, Records};
use crate::support::test_root::TestRoot;

const KEY_ID: &str = "master";

/// How the next root record write ends.
const LANDS: u8 = 0;
/// Written, but the answer is lost (etcd's reply never came).
const LANDS_UNANSWERED: u8 = 1;
/// Never written, and the storage says it is unavailable (it might
/// still land, for all the keystore knows).
const FAILS: u8 = 2;
/// Refused: another writer changed the record (compare-and-swap).
const CONFLICTS: u8 = 3;

/// Records and a root record in memory, shared by clones.
#[derive(Debug, Clone, Default)]
struct RootedMemory {
    records: Arc<Mutex<Records>>,
    root: Arc<Mutex<Option<Vec<u8>>>>,
    next_write: Arc<AtomicU8>,
}

impl RootedMemory {
    fn unavailable() -> KmsError {
        KmsError::Unavailable {
            store: "memory".to_owned(),
            reason: "the test's storage lost its answer".to_owned(),
        }
    }

    fn record(&self) -> RootRecord {
        let text = self.root.lock().expect("root").clone().expect("a record");
        RootRecord::from_text(&text, "memory").expect("parses")
    }
}

impl Storage for RootedMemory {
    fn load(&self) -> Result<Vec<(String, Vec<u8>)>, KmsError> {
        Ok(self
            .records
            .lock()
            .expect("records")
            .clone()
            .into_iter()
            .collect())
    }

    fn commit(&self, writes: &[RecordWrite<'_>]) -> Result<(), KmsError> {
        apply(&mut self.records.lock().expect("records"), writes);
        Ok(())
    }

    fn root_record(&self) -> Result<Option<Vec<u8>>, KmsError> {
        Ok(self.root.lock().expect("root").clone())
    }

    fn replace_root_record(&self, previous: Option<&[u8]>, text: &[u8]) -> Result<(), KmsError> {
        let mut root = self.root.lock().expect("root");
        if root.as_deref() != previous {
            return Err(KmsError::Conflict {
                record: "root".to_owned(),
                attempts: 1,
            });
        }
        match self.next_write.swap(LANDS, Ordering::Relaxed) {
            FAILS => Err(RootedMemory::unavailable()),
            CONFLICTS => Err(KmsError::Conflict {
                record: "root".to_owned(),
                attempts: 1,
            }),
            LANDS_UNANSWERED => {
                *root = Some(text.to_vec());
                Err(RootedMemory::unavailable())
            }
            _ => {
                *root = Some(text.to_vec());
                Ok(())
            }
        }
    }
}

#[test]
fn an_empty_storage_opened_without_create_is_no_store() {
    let storage = RootedMemory::default();
    let opened = Keystore::open_under_with_storage(
        Box::new(storage.clone()),
        &TestRoot::new(1),
        KEY_ID,
        false,
    );
    assert!(
        matches!(opened, Err(KmsError::StoreNotFound { .. })),
        "{opened:?}"
    );
    assert!(
        storage.root.lock().expect("root").is_none(),
        "nothing written"
    );
}

#[test]
fn a_new_key_file_goes_only_when_the_records_write_surely_never_lands() {
    let dir = tempfile::tempdir().expect("temp dir");
    let storage = RootedMemory::default();
    let root = TestRoot::new(1);
    let signer = Keystore::open_under_with_storage(Box::new(storage.clone()), &root, KEY_ID, true)
        .expect("create")
        .create_ed25519("acme", "tokens")
        .expect("key");
    // Refused by compare-and-swap: it never lands, so the new key file
    // goes and the record is as it was.
    let refused = dir.path().join("refused.key");
    storage.next_write.store(CONFLICTS, Ordering::Relaxed);
    let moved = Keystore::move_to_root_in_storage(
        Box::new(storage.clone()),
        &root,
        &FileRoot::new_file(&refused),
        KEY_ID,
    );
    assert!(matches!(moved, Err(KmsError::Conflict { .. })), "{moved:?}");
    assert!(!refused.exists(), "no master key left in clear");
    assert_eq!(storage.record().kind, RootKind::Pkcs11);
    // Unanswered and not there when read back: it may still land, so the
    // key file is kept (removing it could lose the only copy).
    let first = dir.path().join("first.key");
    storage.next_write.store(FAILS, Ordering::Relaxed);
    let moved = Keystore::move_to_root_in_storage(
        Box::new(storage.clone()),
        &root,
        &FileRoot::new_file(&first),
        KEY_ID,
    );
    assert!(
        matches!(moved, Err(KmsError::Unavailable { .. })),
        "{moved:?}"
    );
    assert!(first.exists(), "kept: the write might still land");
    assert_eq!(storage.record().kind, RootKind::Pkcs11);
    // Written, the answer lost: the move is done, and its key file kept.
    let second = dir.path().join("second.key");
    storage
        .next_write
        .store(LANDS_UNANSWERED, Ordering::Relaxed);
    let moved = Keystore::move_to_root_in_storage(
        Box::new(storage.clone()),
        &root,
        &FileRoot::new_file(&second),
        KEY_ID,
    )
    .expect("landed");
    assert_eq!(moved.kind, RootKind::File);
    assert_eq!(storage.record(), moved);
    let text = std::fs::read_to_string(&second).expect("key file kept");
    let mut key = zeroize::Zeroizing::new([0u8; 32]);
    hex::decode_to_slice(text.trim_end(), key.as_mut_slice()).expect("hex");
    let ks = Keystore::open_under_with_storage(
        Box::new(storage.clone()),
        &FileRoot::new(key, "second"),
        KEY_ID,
        false,
    )
    .expect("opens under the new file");
    assert!(ks.public_key(&signer).is_ok());
}
