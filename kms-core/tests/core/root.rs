//! Stores under a root of trust (`Keystore::create_under`,
//! `Keystore::open_under`): a file root opens today's stores unchanged; a
//! wrapping root's store opens only under that root, and a refused open
//! changes nothing.

use std::sync::atomic::{AtomicU32, Ordering};

use kms_core::root::{
    FileRoot, MasterKeyBytes, MasterKeyRoot, RootKind, RootRecord, StoreId, WrappedKey, ROOT_FILE,
};
use kms_core::seal::{Envelope, SealKey};
use kms_core::{Keystore, KmsError, STORE_FILE};
use zeroize::Zeroizing;

const KEY_ID: &str = "master";

/// A wrapping root for tests: seals the master key under its own
/// `SealKey` with the store's identity as associated data, and counts its
/// unwraps.
#[derive(Debug)]
struct TestRoot {
    key: [u8; 32],
    unwraps: AtomicU32,
}

impl TestRoot {
    fn new(byte: u8) -> TestRoot {
        TestRoot {
            key: [byte; 32],
            unwraps: AtomicU32::new(0),
        }
    }

    fn seal_key(&self) -> SealKey {
        SealKey::from_bytes("test-root", 1, &self.key).expect("seal key")
    }
}

impl MasterKeyRoot for TestRoot {
    fn kind(&self) -> RootKind {
        RootKind::Pkcs11
    }

    fn describe(&self) -> String {
        format!("test root {}", self.key[0])
    }

    fn wrap(&self, store: &StoreId, key: &MasterKeyBytes) -> Result<Option<WrappedKey>, KmsError> {
        let envelope = self.seal_key().seal(store.as_bytes(), key.as_slice())?;
        Ok(Some(WrappedKey {
            mechanism: "TEST".into(),
            bytes: envelope.to_bytes(),
        }))
    }

    fn unwrap(
        &self,
        store: &StoreId,
        wrapped: Option<&WrappedKey>,
    ) -> Result<MasterKeyBytes, KmsError> {
        self.unwraps.fetch_add(1, Ordering::Relaxed);
        let failed = |reason: &str| KmsError::Root {
            root: self.describe(),
            reason: reason.into(),
        };
        let wrapped = wrapped.ok_or_else(|| failed("nothing to unwrap"))?;
        let envelope = Envelope::from_bytes(&wrapped.bytes).map_err(|_| failed("damaged"))?;
        let opened = self
            .seal_key()
            .open(store.as_bytes(), &envelope)
            .map_err(|_| failed("cannot unwrap this store's master key"))?;
        let mut key = Zeroizing::new([0u8; 32]);
        key.copy_from_slice(&opened);
        Ok(key)
    }
}

fn file_root(byte: u8) -> FileRoot {
    FileRoot::new(Zeroizing::new([byte; 32]), "test file")
}

fn record(dir: &std::path::Path) -> RootRecord {
    let text = std::fs::read(dir.join(ROOT_FILE)).expect("root record");
    RootRecord::from_text(&text, "test").expect("parses")
}

#[test]
fn a_store_made_with_a_master_key_opens_under_a_file_root_of_that_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    let master = SealKey::from_bytes(KEY_ID, 1, &[5; 32]).expect("key");
    let key = Keystore::create(dir.path(), master)
        .expect("create")
        .create_ed25519("acme", "tokens")
        .expect("key");
    assert!(!dir.path().join(ROOT_FILE).exists());
    let ks = Keystore::open_under(dir.path(), &file_root(5), KEY_ID).expect("opens");
    ks.sign(&key, b"m").expect("signs");
    drop(ks);
    assert!(matches!(
        Keystore::open_under(dir.path(), &TestRoot::new(1), KEY_ID),
        Err(KmsError::WrongRoot {
            expected: RootKind::File,
            given: RootKind::Pkcs11,
            ..
        })
    ));
}

#[test]
fn a_file_root_store_records_its_root_and_opens_with_the_key_alone() {
    let dir = tempfile::tempdir().expect("temp dir");
    let key = Keystore::create_under(dir.path(), &file_root(6), KEY_ID)
        .expect("create")
        .create_ed25519("acme", "tokens")
        .expect("key");
    let recorded = record(dir.path());
    assert_eq!(recorded.kind, RootKind::File);
    assert_eq!(recorded.wrapped, None);
    assert_ne!(recorded.store, StoreId::NONE);
    // The same key as a plain master key: nothing but the key seals.
    let master = SealKey::from_bytes(KEY_ID, 1, &[6; 32]).expect("key");
    Keystore::open(dir.path(), master)
        .expect("opens")
        .sign(&key, b"m")
        .expect("signs");
    assert!(matches!(
        Keystore::open_under(dir.path(), &file_root(7), KEY_ID),
        Err(KmsError::Seal(_))
    ));
}

#[test]
fn a_wrapped_store_opens_only_under_its_root_and_a_refusal_changes_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = TestRoot::new(1);
    let key = {
        let ks = Keystore::create_under(dir.path(), &root, KEY_ID).expect("create");
        let key = ks.create_ed25519("acme", "tokens").expect("key");
        ks.rotate(&key).expect("rotate");
        key
    };
    let recorded = record(dir.path());
    assert_eq!(recorded.kind, RootKind::Pkcs11);
    assert_eq!(recorded.root, "test root 1");
    let wrapped = recorded.wrapped.clone().expect("wrapped");
    assert_eq!(wrapped.mechanism, "TEST");
    let before = std::fs::read(dir.path().join(STORE_FILE)).expect("db");

    // Another kind of root: named, and not even asked to unwrap.
    match Keystore::open_under(dir.path(), &file_root(1), KEY_ID) {
        Err(e @ KmsError::WrongRoot { .. }) => {
            let text = e.to_string();
            assert!(text.contains("test root 1"), "{text}");
            assert!(text.contains("PKCS#11"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    // The same kind, another key: the root cannot unwrap.
    let other = TestRoot::new(2);
    assert!(matches!(
        Keystore::open_under(dir.path(), &other, KEY_ID),
        Err(KmsError::Root { .. })
    ));
    assert_eq!(other.unwraps.load(Ordering::Relaxed), 1);
    // The record moved to another store's identity does not unwrap.
    let moved = RootRecord {
        store: StoreId::generate().expect("id"),
        ..recorded.clone()
    };
    std::fs::write(dir.path().join(ROOT_FILE), moved.to_text()).expect("write");
    assert!(matches!(
        Keystore::open_under(dir.path(), &root, KEY_ID),
        Err(KmsError::Root { .. })
    ));
    std::fs::write(dir.path().join(ROOT_FILE), recorded.to_text()).expect("write");
    assert_eq!(
        std::fs::read(dir.path().join(STORE_FILE)).expect("db"),
        before
    );

    let ks = Keystore::open_under(dir.path(), &root, KEY_ID).expect("opens under its root");
    assert_eq!(ks.attest(&key).expect("attest").head.version(), 2);
    ks.sign(&key, b"m").expect("signs");
    // The master key was never written in clear: no file holds it.
    let master = root
        .unwrap(&recorded.store, Some(&wrapped))
        .expect("unwraps");
    for entry in std::fs::read_dir(dir.path()).expect("list") {
        let bytes = std::fs::read(entry.expect("entry").path()).expect("read");
        assert!(
            !bytes.windows(32).any(|w| w == master.as_slice()),
            "a file holds the master key"
        );
    }
}

#[test]
fn a_create_that_left_only_its_record_is_created_again() {
    let dir = tempfile::tempdir().expect("temp dir");
    let stale = RootRecord {
        store: StoreId::generate().expect("id"),
        kind: RootKind::Pkcs11,
        root: "stale".into(),
        wrapped: Some(WrappedKey {
            mechanism: "TEST".into(),
            bytes: vec![0; 8],
        }),
    };
    std::fs::write(dir.path().join(ROOT_FILE), stale.to_text()).expect("write");
    assert!(matches!(
        Keystore::open_under(dir.path(), &TestRoot::new(1), KEY_ID),
        Err(KmsError::StoreNotFound { .. })
    ));
    Keystore::create_under(dir.path(), &TestRoot::new(1), KEY_ID).expect("create");
    assert_ne!(record(dir.path()).store, stale.store);
    Keystore::open_under(dir.path(), &TestRoot::new(1), KEY_ID).expect("opens");
    assert!(matches!(
        Keystore::create_under(dir.path(), &TestRoot::new(1), KEY_ID),
        Err(KmsError::StoreExists { .. })
    ));
}

#[test]
fn a_damaged_record_is_a_corrupt_store() {
    let dir = tempfile::tempdir().expect("temp dir");
    Keystore::create_under(dir.path(), &TestRoot::new(1), KEY_ID).expect("create");
    std::fs::write(dir.path().join(ROOT_FILE), "kms-store-root 1\nstore zz\n").expect("write");
    assert!(matches!(
        Keystore::open_under(dir.path(), &TestRoot::new(1), KEY_ID),
        Err(KmsError::StoreCorrupt { .. })
    ));
}
