//! The durable store's life: `Keystore::create` makes a new store and
//! refuses an existing one, `Keystore::open` opens an existing store and
//! refuses a missing one, and a store has one writer at a time (a second
//! `open` or `create` of a directory in use is refused until the first
//! keystore and its clones are dropped).

use kms_core::seal::SealKey;
use kms_core::{Keystore, KmsError, STORE_FILE};

fn master() -> SealKey {
    SealKey::from_bytes("master", 1, &[42u8; 32]).expect("master key")
}

#[test]
fn a_second_open_is_refused_until_the_first_is_dropped() {
    let dir = tempfile::tempdir().expect("temp dir");
    let first = Keystore::create(dir.path(), master()).expect("create");
    let key = first.create_ed25519("acme", "tokens").expect("create key");
    let in_use = Some(KmsError::StoreInUse {
        dir: dir.path().display().to_string(),
    });
    assert_eq!(Keystore::open(dir.path(), master()).err(), in_use);
    assert_eq!(Keystore::create(dir.path(), master()).err(), in_use);
    assert_eq!(
        in_use.as_ref().map(KmsError::code),
        Some("kms.store_in_use")
    );
    assert_eq!(in_use.as_ref().map(KmsError::is_retryable), Some(false));

    // A clone shares the store: it stays held until the last one drops.
    let clone = first.clone();
    drop(first);
    assert_eq!(Keystore::open(dir.path(), master()).err(), in_use);
    clone.rotate(&key).expect("the clone still writes");
    drop(clone);

    let second = Keystore::open(dir.path(), master()).expect("open after drop");
    assert_eq!(second.attest(&key).expect("attest").head.version(), 2);
    // A refused open (here a wrong master key) leaves nothing locked.
    drop(second);
    let wrong = SealKey::from_bytes("master", 1, &[1u8; 32]).expect("key");
    assert!(Keystore::open(dir.path(), wrong).is_err());
    Keystore::open(dir.path(), master()).expect("open after a refused open");
}

#[test]
fn open_refuses_a_missing_store_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let not_found = |path: &std::path::Path| {
        Some(KmsError::StoreNotFound {
            dir: path.display().to_string(),
        })
    };
    assert_eq!(
        Keystore::open(dir.path(), master()).err(),
        not_found(dir.path())
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("dir").count(),
        0,
        "nothing written"
    );
    let absent = dir.path().join("absent");
    assert_eq!(Keystore::open(&absent, master()).err(), not_found(&absent));
    assert!(!absent.exists(), "no directory created");
    assert_eq!(
        not_found(&absent).as_ref().map(KmsError::code),
        Some("kms.store_not_found")
    );
}

#[test]
fn create_makes_missing_directories_and_refuses_an_existing_store() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("a").join("b");
    let key = Keystore::create(&store, master())
        .expect("create")
        .create_ed25519("acme", "tokens")
        .expect("create key");
    assert!(store.join(STORE_FILE).is_file(), "the store's database");

    let exists = KmsError::StoreExists {
        dir: store.display().to_string(),
    };
    assert_eq!(
        Keystore::create(&store, master()).err(),
        Some(exists.clone())
    );
    assert_eq!(exists.code(), "kms.store_exists");
    // The existing store is untouched: its key is still there, alone at v1.
    let reopened = Keystore::open(&store, master()).expect("open");
    assert_eq!(reopened.attest(&key).expect("attest").head.version(), 1);
}

#[test]
fn an_io_failure_keeps_its_error_kind() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"not a directory").expect("write");
    let err = Keystore::create(file.join("store"), master()).err();
    match err {
        Some(KmsError::Io { kind, ref reason }) => {
            assert_eq!(kind, std::io::ErrorKind::NotADirectory, "{reason}");
            assert!(reason.contains("a-file"), "{reason}");
        }
        other => panic!("expected KmsError::Io, got {other:?}"),
    }
    let e = err.expect("an error");
    assert_eq!(e.code(), "kms.io");
    assert!(!e.is_retryable());
    // Not retryable whatever its kind: a failed commit may have landed.
    let interrupted = KmsError::Io {
        kind: std::io::ErrorKind::Interrupted,
        reason: String::new(),
    };
    assert!(!interrupted.is_retryable());
}
