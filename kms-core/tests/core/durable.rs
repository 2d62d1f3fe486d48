//! The durable keystore (`Keystore::create`, `Keystore::open`): reopening restores exactly the
//! same keys and versions, old signatures keep verifying, and a wrong
//! master key or a corrupt file is a typed error that changes nothing on
//! disk. (Crashes mid-write: `tests/crash.rs`.)

use kms_core::seal::{SealError, SealKey};
use kms_core::{Keystore, KmsError, STORE_FILE};

fn master() -> SealKey {
    SealKey::from_bytes("master", 1, &[42u8; 32]).expect("master key")
}

#[test]
fn reopening_restores_the_same_keys_and_versions() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (key, other, signed) = {
        let ks = Keystore::create(dir.path(), master()).expect("create");
        assert!(ks.is_durable());
        let key = ks.create_ed25519("acme", "tokens").expect("create");
        let other = ks.create_ed25519("globex", "passports").expect("create");
        let mut signed = vec![ks.sign(&key, b"v1").expect("sign")];
        for _ in 0..3 {
            ks.rotate(&key).expect("rotate");
            signed.push(ks.sign(&key, b"later").expect("sign"));
        }
        (key, other, signed)
    };
    // One keystore holds the store at a time: open, check, drop, twice.
    let mut attestations = Vec::new();
    for _ in 0..2 {
        let ks = Keystore::open(dir.path(), master()).expect("reopen");
        let attestation = ks.attest(&key).expect("attest");
        assert_eq!(attestation.head.version(), 4);
        assert_eq!(attestation.versions.len(), 4);
        assert_eq!(ks.attest(&other).expect("attest").head.version(), 1);
        for (id, signature) in &signed {
            let message: &[u8] = if id.version() == 1 { b"v1" } else { b"later" };
            ks.verify(id, message, signature)
                .expect("old signatures verify");
        }
        let (head, signature) = ks.sign(&key, b"after reopen").expect("sign");
        assert_eq!(head.version(), 4);
        ks.verify(&head, b"after reopen", &signature)
            .expect("verify");
        attestations.push(ks.attest(&key).expect("attest"));
    }
    assert_eq!(
        attestations[0], attestations[1],
        "public keys and creation times are restored exactly"
    );
    // A rotation after reopening continues the numbering and persists.
    let before = Keystore::open(dir.path(), master()).expect("reopen");
    assert_eq!(before.rotate(&key).expect("rotate").version(), 5);
    drop(before);
    let third = Keystore::open(dir.path(), master()).expect("reopen");
    assert_eq!(third.attest(&key).expect("attest").head.version(), 5);
}

#[test]
fn a_wrong_master_key_is_a_typed_error_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ks = Keystore::create(dir.path(), master()).expect("create");
    let key = ks.create_ed25519("acme", "tokens").expect("create");
    let public_key = ks.public_key(&key).expect("public key");
    drop(ks);
    let path = dir.path().join(STORE_FILE);
    let on_disk = std::fs::read(&path).expect("store file");
    assert!(
        !on_disk.windows(32).any(|w| w == public_key),
        "a version's data is sealed, its public key included"
    );

    let wrong_bytes = SealKey::from_bytes("master", 1, &[43u8; 32]).expect("key");
    assert_eq!(
        Keystore::open(dir.path(), wrong_bytes).err(),
        Some(KmsError::Seal(SealError::Authentication))
    );
    let wrong_name = SealKey::from_bytes("other", 1, &[42u8; 32]).expect("key");
    assert!(matches!(
        Keystore::open(dir.path(), wrong_name),
        Err(KmsError::Seal(SealError::WrongKey { .. }))
    ));
    // redb rewrites its own bookkeeping on open and close, so the file's
    // bytes may change; the records may not (checked by the reopen below).

    std::fs::write(&path, b"not a database").expect("garbage");
    // Not a redb file: a corrupt store, not an I/O failure.
    assert!(matches!(
        Keystore::open(dir.path(), master()),
        Err(KmsError::StoreCorrupt { .. })
    ));
    std::fs::write(&path, &on_disk).expect("restore");
    let restored = Keystore::open(dir.path(), master()).expect("reopen");
    assert_eq!(restored.attest(&key).expect("attest").head.version(), 1);
    assert_eq!(restored.public_key(&key).expect("public key"), public_key);
}

#[test]
fn a_record_name_that_is_not_utf8_is_a_typed_error_not_a_panic() {
    let dir = tempfile::tempdir().expect("temp dir");
    Keystore::create(dir.path(), master())
        .expect("create")
        .create_ed25519("acme", "tokens")
        .expect("create");
    {
        // Written with redb itself, as someone with the file could.
        let db = redb::Database::create(dir.path().join(STORE_FILE)).expect("db");
        let records: redb::TableDefinition<'_, &[u8], &[u8]> =
            redb::TableDefinition::new("records");
        let tx = db.begin_write().expect("tx");
        tx.open_table(records)
            .expect("table")
            .insert(&b"keys/\xff"[..], &b"x"[..])
            .expect("insert");
        tx.commit().expect("commit");
    }
    assert!(matches!(
        Keystore::open(dir.path(), master()),
        Err(KmsError::StoreCorrupt { .. })
    ));
}

#[test]
fn a_half_built_database_left_by_a_crash_is_removed() {
    let dir = tempfile::tempdir().expect("temp dir");
    // As left by a crash while redb laid out a new file: no store yet.
    let tmp = dir.path().join("keystore.redb.tmp");
    std::fs::write(&tmp, [0u8; 4096]).expect("tmp");
    assert!(matches!(
        Keystore::open(dir.path(), master()),
        Err(KmsError::StoreNotFound { .. })
    ));
    let key = Keystore::create(dir.path(), master())
        .expect("create over it")
        .create_ed25519("acme", "tokens")
        .expect("create");
    assert!(!tmp.exists());
    std::fs::write(&tmp, [0u8; 4096]).expect("tmp");
    let ks = Keystore::open(dir.path(), master()).expect("open beside it");
    assert_eq!(ks.attest(&key).expect("attest").head.version(), 1);
}

/// A new store is its owner's alone: the directory 0700 (also one that
/// existed, empty and open to all), every file in it 0600, whatever the
/// umask.
#[cfg(unix)]
#[test]
fn a_new_store_is_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let mode =
        |p: &std::path::Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    let tmp = tempfile::tempdir().expect("tempdir");
    let fresh = tmp.path().join("fresh");
    let existing = tmp.path().join("existing");
    std::fs::create_dir(&existing).expect("mkdir");
    std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    for dir in [&fresh, &existing] {
        let ks = Keystore::create(dir, master()).expect("create");
        let key = ks.create_ed25519("acme", "tokens").expect("key");
        ks.rotate(&key).expect("rotate");
        ks.destroy(&key)
            .expect("destroy (a purge: the file is rewritten)");
        assert_eq!(mode(dir), 0o700, "{}", dir.display());
        let mut files = 0;
        for entry in std::fs::read_dir(dir).expect("list") {
            let path = entry.expect("entry").path();
            assert_eq!(mode(&path), 0o600, "{}", path.display());
            files += 1;
        }
        assert!(files >= 2, "the database and its lock");
        assert!(dir.join(STORE_FILE).exists());
    }
}
