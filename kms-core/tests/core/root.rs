//! Stores under a root of trust (`Keystore::create_under`,
//! `Keystore::open_under`): a file root opens today's stores unchanged; a
//! wrapping root's store opens only under that root, and a refused open
//! changes nothing.

use std::sync::atomic::Ordering;

use kms_core::root::{
    FileRoot, MasterKeyRoot, RootKind, RootRecord, StoreId, WrappedKey, ROOT_FILE,
};
use kms_core::seal::SealKey;
use kms_core::{Keystore, KmsError, STORE_FILE};
use zeroize::Zeroizing;

use crate::support::test_root::TestRoot;

const KEY_ID: &str = "master";

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
    let made = record(dir.path());
    assert_ne!(made.store, stale.store);
    // The record found is set aside, never overwritten: it may be the only
    // copy of a wrapped key.
    let aside = dir
        .path()
        .join(format!("{ROOT_FILE}.before-{}", made.store));
    assert_eq!(
        std::fs::read_to_string(&aside).expect("set aside"),
        stale.to_text()
    );
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

#[test]
fn a_store_moves_from_a_file_to_a_wrapping_root_and_back_with_the_same_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("store");
    let signer = Keystore::create_under(&store, &file_root(3), KEY_ID)
        .expect("create")
        .create_ed25519("acme", "tokens")
        .expect("key");
    let signed = {
        let ks = Keystore::open_under(&store, &file_root(3), KEY_ID).expect("open");
        ks.sign(&signer, b"m").expect("sign")
    };
    let attested = Keystore::open_under(&store, &file_root(3), KEY_ID)
        .expect("open")
        .attest(&signer)
        .expect("attest");
    let id = record(&store).store;

    // A file root to a wrapping root.
    let hsm = TestRoot::new(1);
    let moved = Keystore::move_to_root(&store, &file_root(3), &hsm, KEY_ID).expect("moves");
    assert_eq!(moved.kind, RootKind::Pkcs11);
    assert_eq!(record(&store), moved);
    assert_eq!(moved.store, id, "the store keeps its identity");
    assert!(matches!(
        Keystore::open_under(&store, &file_root(3), KEY_ID),
        Err(KmsError::WrongRoot { .. })
    ));
    let ks = Keystore::open_under(&store, &hsm, KEY_ID).expect("opens under the new root");
    ks.verify(&signed.0, b"m", &signed.1).expect("verifies");
    assert_eq!(
        ks.attest(&signer).expect("attest"),
        attested,
        "the same key"
    );
    // A store in use is refused.
    assert!(matches!(
        Keystore::move_to_root(&store, &hsm, &TestRoot::new(2), KEY_ID),
        Err(KmsError::StoreInUse { .. })
    ));
    drop(ks);

    // One wrapping key to another: the old one no longer opens it.
    let other = TestRoot::new(2);
    Keystore::move_to_root(&store, &hsm, &other, KEY_ID).expect("moves");
    assert!(matches!(
        Keystore::open_under(&store, &hsm, KEY_ID),
        Err(KmsError::Root { .. })
    ));

    // Refusals change nothing: the wrong kind of root, a root that
    // cannot unwrap, a file that exists.
    let taken = dir.path().join("taken.hex");
    std::fs::write(&taken, "x").expect("write");
    let before = record(&store);
    for (from, to) in [
        (
            &file_root(3) as &dyn MasterKeyRoot,
            &TestRoot::new(1) as &dyn MasterKeyRoot,
        ),
        (&hsm, &TestRoot::new(1)),
        (&other, &FileRoot::new_file(&taken)),
    ] {
        assert!(Keystore::move_to_root(&store, from, to, KEY_ID).is_err());
        assert_eq!(record(&store), before);
    }
    assert_eq!(std::fs::read_to_string(&taken).expect("read"), "x");

    // Back to a new key file, which then opens it as --master-key-file does.
    let key_file = dir.path().join("master.hex");
    let back = Keystore::move_to_root(&store, &other, &FileRoot::new_file(&key_file), KEY_ID)
        .expect("moves");
    assert_eq!((back.kind, back.wrapped), (RootKind::File, None));
    assert_eq!(
        std::fs::read_to_string(&key_file).expect("key file"),
        format!("{}\n", "03".repeat(32))
    );
    Keystore::open_under(&store, &file_root(3), KEY_ID)
        .expect("opens under the file")
        .verify(&signed.0, b"m", &signed.1)
        .expect("verifies");
}

#[test]
fn a_move_checks_the_key_and_the_identity_before_writing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let master = SealKey::from_bytes(KEY_ID, 1, &[4; 32]).expect("key");
    drop(Keystore::create(dir.path(), master).expect("create"));
    // A wrong key file: nothing written, no record made.
    assert!(matches!(
        Keystore::move_to_root(dir.path(), &file_root(5), &TestRoot::new(1), KEY_ID),
        Err(KmsError::Seal(_))
    ));
    assert!(!dir.path().join(ROOT_FILE).exists());
    // A store made before roots: it gets the identity its index holds.
    let moved = Keystore::move_to_root(dir.path(), &file_root(4), &TestRoot::new(1), KEY_ID)
        .expect("moves");
    assert_ne!(moved.store, StoreId::NONE);
    // Another store's record (its identity) is refused.
    let other = tempfile::tempdir().expect("temp dir");
    Keystore::create_under(other.path(), &TestRoot::new(1), KEY_ID).expect("create");
    let foreign = record(other.path());
    std::fs::write(dir.path().join(ROOT_FILE), foreign.to_text()).expect("write");
    assert!(Keystore::open_under(dir.path(), &TestRoot::new(1), KEY_ID).is_err());
}

#[test]
fn a_plain_create_sets_aside_a_record_a_crashed_create_left() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (other, store) = (dir.path().join("other"), dir.path().join("store"));
    drop(Keystore::create_under(&other, &TestRoot::new(1), KEY_ID).expect("create"));
    // A crashed `create_under` left its record and no database.
    std::fs::create_dir(&store).expect("mkdir");
    std::fs::copy(other.join(ROOT_FILE), store.join(ROOT_FILE)).expect("copy");
    let stale = std::fs::read(store.join(ROOT_FILE)).expect("stale record");
    let master = SealKey::from_bytes(KEY_ID, 1, &[4; 32]).expect("key");
    drop(Keystore::create(&store, master).expect("create"));
    assert!(!store.join(ROOT_FILE).exists());
    let aside: Vec<_> = std::fs::read_dir(&store)
        .expect("list")
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("keystore.root.before-")
        })
        .collect();
    assert_eq!(aside.len(), 1, "set aside, not removed");
    assert_eq!(std::fs::read(aside[0].path()).expect("read"), stale);
    // The store opens under the file root of its key, not the stale
    // record's token.
    Keystore::open_under(&store, &file_root(4), KEY_ID).expect("opens");
}

#[test]
fn only_a_crashed_creates_leftovers_may_be_created_over() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("store");
    assert!(Keystore::leftovers_only(&store).expect("absent"));
    std::fs::create_dir(&store).expect("mkdir");
    assert!(Keystore::leftovers_only(&store).expect("empty"));
    let id = StoreId::generate().expect("id");
    for name in [
        "keystore.kms.lock".to_owned(),
        "keystore.redb.tmp".to_owned(),
        ROOT_FILE.to_owned(),
        format!("{ROOT_FILE}.tmp"),
        format!("{ROOT_FILE}.before-{id}"),
    ] {
        std::fs::write(store.join(name), b"").expect("write");
    }
    assert!(Keystore::leftovers_only(&store).expect("leftovers"));
    for other in [
        "keystore.redb.bak",
        "keystore.jks",
        "keystore.root.before-x",
        STORE_FILE,
    ] {
        std::fs::write(store.join(other), b"").expect("write");
        assert!(!Keystore::leftovers_only(&store).expect("list"), "{other}");
        std::fs::remove_file(store.join(other)).expect("remove");
    }
}

#[test]
fn a_root_whose_wrapped_key_does_not_unwrap_to_it_writes_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("store");
    assert!(matches!(
        Keystore::create_under(&store, &TestRoot::lying(1), KEY_ID),
        Err(KmsError::Root { .. })
    ));
    assert!(!store.join(ROOT_FILE).exists());
    assert!(!store.join(STORE_FILE).exists());
    drop(Keystore::create_under(&store, &file_root(3), KEY_ID).expect("create"));
    let before = record(&store);
    assert!(matches!(
        Keystore::move_to_root(&store, &file_root(3), &TestRoot::lying(1), KEY_ID),
        Err(KmsError::Root { .. })
    ));
    assert_eq!(record(&store), before);
    Keystore::open_under(&store, &file_root(3), KEY_ID).expect("opens as before");
}

#[test]
fn a_failed_move_to_a_new_key_file_leaves_no_key_in_clear() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("store");
    let key_file = dir.path().join("master.key");
    drop(Keystore::create_under(&store, &TestRoot::new(1), KEY_ID).expect("create"));
    // The record's temporary file cannot be written: a directory holds
    // its name.
    std::fs::create_dir(store.join(format!("{ROOT_FILE}.tmp"))).expect("mkdir");
    let moved = Keystore::move_to_root(
        &store,
        &TestRoot::new(1),
        &FileRoot::new_file(&key_file),
        KEY_ID,
    );
    assert!(matches!(moved, Err(KmsError::Io { .. })), "{moved:?}");
    assert!(!key_file.exists(), "the new key file is removed");
    Keystore::open_under(&store, &TestRoot::new(1), KEY_ID).expect("opens as before");
    std::fs::remove_dir(store.join(format!("{ROOT_FILE}.tmp"))).expect("rmdir");
    Keystore::move_to_root(
        &store,
        &TestRoot::new(1),
        &FileRoot::new_file(&key_file),
        KEY_ID,
    )
    .expect("moves");
    assert!(key_file.exists());
}

#[test]
fn a_record_naming_another_identity_is_a_corrupt_store() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = TestRoot::new(1);
    drop(Keystore::create_under(dir.path(), &root, KEY_ID).expect("create"));
    let own = record(dir.path());
    // This store's own master key, wrapped for another identity: the root
    // unwraps it, and only the identity sealed in the index tells.
    let key = root
        .unwrap(&own.store, own.wrapped.as_ref())
        .expect("unwraps");
    let other = StoreId::generate().expect("id");
    let forged = RootRecord {
        store: other,
        wrapped: root.wrap(&other, &key).expect("wraps"),
        ..own
    };
    std::fs::write(dir.path().join(ROOT_FILE), forged.to_text()).expect("write");
    let opened = Keystore::open_under(dir.path(), &root, KEY_ID);
    assert!(
        matches!(opened, Err(KmsError::StoreCorrupt { ref reason, .. }) if reason.contains("identity")),
        "{opened:?}"
    );
}
