//! A store of the one-file format 1 (`keystore.kms`, written by this
//! project before per-record storage; `testdata/keystore-v1/`, see
//! `testdata/PROVENANCE.md`) is migrated on open: every key, version,
//! public key and origin survives, the old file goes, and a crash between
//! the migration's commit and the old file's removal is harmless.

use std::path::{Path, PathBuf};

use kms_core::seal::{SealError, SealKey};
use kms_core::{KeyId, Keystore, KmsError, Origin, STORE_FILE};

const LEGACY_FILE: &str = "keystore.kms";

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/keystore-v1")
}

fn master() -> SealKey {
    SealKey::from_bytes("fixture-master", 1, &[0x42; 32]).expect("key")
}

/// `(key, version, public key hex, origin)` rows of `expected.tsv`.
fn expected() -> Vec<(KeyId, u32, String, String)> {
    let text = std::fs::read_to_string(fixture().join("expected.tsv")).expect("expected.tsv");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (
                f[0].parse().expect("key id"),
                f[1].parse().expect("version"),
                f[2].to_owned(),
                f[3].to_owned(),
            )
        })
        .collect()
}

fn origin_text(origin: &Origin) -> String {
    match origin {
        Origin::Generated => "generated".to_owned(),
        Origin::Imported { source, sealed_by } => {
            format!("imported from {source} sealed by {sealed_by}")
        }
        other => format!("{other:?}"),
    }
}

fn copy_fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::copy(fixture().join(LEGACY_FILE), dir.path().join(LEGACY_FILE)).expect("copy");
    dir
}

fn assert_all_there(ks: &Keystore) {
    let rows = expected();
    assert_eq!(rows.len(), 8, "three keys, eight versions");
    for (key, version, public_key, origin) in rows {
        let attestation = ks.attest(&key).expect("attest");
        let v = &attestation.versions[version as usize - 1];
        assert_eq!(v.version, version);
        assert_eq!(hex::encode(&v.public_key), public_key, "{key} v{version}");
        assert_eq!(origin_text(&v.origin), origin, "{key} v{version}");
        let (head, signature) = ks.sign(&key, b"migrated").expect("sign");
        ks.verify(&head, b"migrated", &signature).expect("verify");
    }
}

#[test]
fn a_format_1_store_migrates_on_open() {
    let dir = copy_fixture();
    let ks = Keystore::open(dir.path(), master()).expect("open and migrate");
    assert_all_there(&ks);
    assert!(
        !dir.path().join(LEGACY_FILE).exists(),
        "the old file is gone"
    );
    assert!(dir.path().join(STORE_FILE).is_file());
    let audit: KeyId = expected()[1].0.clone();
    assert_eq!(ks.rotate(&audit).expect("rotate").version(), 7);
    drop(ks);
    let ks = Keystore::open(dir.path(), master()).expect("reopen");
    assert_all_there(&ks);
    assert_eq!(ks.attest(&audit).expect("attest").head.version(), 7);
}

#[test]
fn a_wrong_master_key_leaves_a_format_1_store_as_it_was() {
    let dir = copy_fixture();
    let wrong = SealKey::from_bytes("fixture-master", 1, &[0x43; 32]).expect("key");
    assert_eq!(
        Keystore::open(dir.path(), wrong).err(),
        Some(KmsError::Seal(SealError::Authentication))
    );
    assert!(!dir.path().join(STORE_FILE).exists(), "no database made");
    assert_eq!(
        std::fs::read(dir.path().join(LEGACY_FILE)).expect("old file"),
        std::fs::read(fixture().join(LEGACY_FILE)).expect("fixture"),
    );
    assert_all_there(&Keystore::open(dir.path(), master()).expect("open"));
}

#[test]
fn an_old_file_left_by_a_crash_after_the_migration_is_removed_not_reread() {
    let dir = copy_fixture();
    let ks = Keystore::open(dir.path(), master()).expect("migrate");
    let audit: KeyId = expected()[1].0.clone();
    ks.rotate(&audit).expect("rotate");
    drop(ks);
    // As if the process died after the commit, before the removal.
    std::fs::copy(fixture().join(LEGACY_FILE), dir.path().join(LEGACY_FILE)).expect("copy");
    let ks = Keystore::open(dir.path(), master()).expect("open");
    assert_eq!(
        ks.attest(&audit).expect("attest").head.version(),
        7,
        "the database, not the old file"
    );
    assert!(!dir.path().join(LEGACY_FILE).exists());
}

#[test]
fn create_refuses_a_directory_with_a_format_1_store() {
    let dir = copy_fixture();
    assert!(matches!(
        Keystore::create(dir.path(), master()),
        Err(KmsError::StoreExists { .. })
    ));
}

/// `testdata/keystore-v2/`: a database store written before key policies
/// (its heads carry no state), by this project's code at commit e9ba31b.
const PRE_POLICY_V1: &str = "kms:acme:tokens:ed25519:d9b7b2d6-ac86-4022-a328-f9b1489707ec:v1";
const PRE_POLICY_SIGNATURE: &str = "9b4319f0e669e37313e14367d3a5d8b294b2a7b9721ae6f99e0f4c9f1c2260d03af5d6303f8bf286589c4ebda41e808c32f9adf2b2ceff480926b3022663d607";

#[test]
fn a_store_written_before_key_policies_opens_with_its_keys_as_they_behaved() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::copy(
        fixture().join("../keystore-v2").join(STORE_FILE),
        dir.path().join(STORE_FILE),
    )
    .expect("copy");
    let ks = Keystore::open(dir.path(), master()).expect("open");
    let v1: KeyId = PRE_POLICY_V1.parse().expect("key id");
    let attestation = ks.attest(&v1).expect("attest");
    assert_eq!(attestation.head.version(), 2);
    assert_eq!(attestation.min_available_version, 1);
    let policy = ks.policy(&v1).expect("policy");
    assert_eq!(policy.min_verify_version, 1);
    assert!(policy.enabled);
    assert!(
        policy.exportable,
        "keys from before policies stay exportable"
    );
    assert_eq!(policy.auto_rotate_after, None);
    let signature: [u8; 64] = hex::decode(PRE_POLICY_SIGNATURE)
        .expect("hex")
        .try_into()
        .expect("64 bytes");
    ks.verify(&attestation.head, b"before policies", &signature)
        .expect("the head's signature from then verifies");
    // A policy change writes the head in the new layout; it reopens.
    let mut policy = policy;
    policy.min_verify_version = 2;
    ks.set_policy(&v1, policy.clone()).expect("set");
    drop(ks);
    let ks = Keystore::open(dir.path(), master()).expect("reopen");
    assert_eq!(ks.policy(&v1).expect("policy"), policy);
}
