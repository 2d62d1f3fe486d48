//! The key lifecycle through the keystore: policy (min_verify_version,
//! enabled, exportable, auto_rotate_after), trim and destroy, in memory and
//! durably, and the promise that a trimmed or destroyed secret is not
//! readable from the store's files afterwards.

use std::path::Path;
use std::time::{Duration, SystemTime};

use kms_core::seal::SealKey;
use kms_core::{KeyId, KeyPolicy, Keystore, KmsError, EXPORT_AAD, STORE_FILE};

fn master() -> SealKey {
    SealKey::from_bytes("master", 1, &[9u8; 32]).expect("key")
}

fn transport() -> SealKey {
    SealKey::from_bytes("transport", 1, &[3u8; 32]).expect("key")
}

fn exportable(ks: &Keystore, key: &KeyId) {
    let mut policy = ks.policy(key).expect("policy");
    policy.exportable = true;
    ks.set_policy(key, policy).expect("set policy");
}

/// The seed of `key`'s version, learnt through a sealed export.
fn seed_of(ks: &Keystore, key: &KeyId) -> [u8; 32] {
    let envelope = ks.export_sealed(key, &transport()).expect("export");
    let plaintext = transport().open(EXPORT_AAD, &envelope).expect("open");
    plaintext[..32].try_into().expect("a seed")
}

/// A key with versions 1..=3; returns their ids.
fn three_versions(ks: &Keystore) -> [KeyId; 3] {
    let v1 = ks.create_ed25519("acme", "tokens").expect("create");
    let v2 = ks.rotate(&v1).expect("rotate");
    let v3 = ks.rotate(&v1).expect("rotate");
    [v1, v2, v3]
}

fn signed_by_each(ks: &Keystore, ids: &[KeyId; 3]) -> Vec<(KeyId, [u8; 64])> {
    // Only the head signs; older versions' signatures come from before
    // each rotation, so sign with a fresh in-memory copy of the key.
    ids.iter()
        .map(|id| {
            let seed = seed_of(ks, id);
            let key = ed25519_dalek::SigningKey::from_bytes(&seed);
            use ed25519_dalek::Signer;
            (id.clone(), key.sign(b"message").to_bytes())
        })
        .collect()
}

/// Every operation of the lifecycle on `ks`, checked step by step.
fn walk(ks: &Keystore) -> [KeyId; 3] {
    let ids = three_versions(ks);
    let [v1, v2, v3] = ids.clone();
    assert_eq!(ks.policy(&v1).expect("policy"), KeyPolicy::default());
    assert!(!KeyPolicy::default().exportable, "off by default");
    assert!(matches!(
        ks.export_sealed(&v3, &transport()),
        Err(KmsError::NotExportable { .. })
    ));
    exportable(ks, &v1);
    let signatures = signed_by_each(ks, &ids);
    for (id, signature) in &signatures {
        ks.verify(id, b"message", signature).expect("verifies");
    }

    // Exportable cannot be turned off.
    let mut policy = ks.policy(&v1).expect("policy");
    policy.exportable = false;
    assert!(matches!(
        ks.set_policy(&v1, policy),
        Err(KmsError::InvalidArgument { .. })
    ));

    // min_verify_version: refused below it, kept, still attested.
    let mut policy = ks.policy(&v1).expect("policy");
    policy.min_verify_version = 4;
    assert!(
        ks.set_policy(&v1, policy.clone()).is_err(),
        "above the head"
    );
    policy.min_verify_version = 3;
    assert_eq!(ks.set_policy(&v1, policy.clone()).expect("set"), policy);
    for (id, signature) in &signatures[..2] {
        assert_eq!(
            ks.verify(id, b"message", signature),
            Err(KmsError::VersionDisallowed {
                key: id.to_string(),
                version: id.version(),
                min_verify_version: 3
            })
        );
        assert!(matches!(
            ks.verifying_key(id),
            Err(KmsError::VersionDisallowed { .. })
        ));
    }
    ks.verify(&v3, b"message", &signatures[2].1)
        .expect("v3 verifies");
    assert_eq!(ks.attest(&v1).expect("attest").versions.len(), 3);

    // Disabled: no signing; verifying goes on.
    policy.enabled = false;
    ks.set_policy(&v1, policy.clone()).expect("disable");
    assert!(matches!(
        ks.sign(&v1, b"m"),
        Err(KmsError::KeyDisabled { .. })
    ));
    ks.verify(&v3, b"message", &signatures[2].1)
        .expect("a disabled key verifies");
    policy.enabled = true;
    ks.set_policy(&v1, policy).expect("enable");
    ks.sign(&v1, b"m").expect("signs again");

    // Trim: not past min_verify_version; the trimmed secrets are gone.
    assert!(matches!(
        ks.trim(&v1, 4),
        Err(KmsError::InvalidArgument { .. })
    ));
    assert_eq!(ks.trim(&v1, 3).expect("trim"), 3);
    assert_eq!(ks.trim(&v1, 2).expect("a lower trim changes nothing"), 3);
    for id in [&v1, &v2] {
        assert_eq!(
            ks.export_sealed(id, &transport()).map(drop),
            Err(KmsError::VersionTrimmed {
                key: id.to_string(),
                version: id.version(),
                min_available_version: 3
            })
        );
    }
    let attestation = ks.attest(&v1).expect("attest");
    assert_eq!(attestation.min_available_version, 3);
    assert_eq!(
        attestation.versions[0].public_key,
        ks.public_key(&v1).expect("pk"),
        "a trimmed version's public key is kept"
    );
    let mut policy = ks.policy(&v1).expect("policy");
    policy.min_verify_version = 2;
    assert!(
        ks.set_policy(&v1, policy).is_err(),
        "min_verify_version cannot go below a trim"
    );
    ks.export_sealed(&v3, &transport()).expect("v3 exports");
    ids
}

fn destroy_and_check(ks: &Keystore, ids: &[KeyId; 3]) {
    ks.destroy(&ids[0]).expect("destroy");
    assert_destroyed(ks, ids);
}

fn assert_destroyed(ks: &Keystore, ids: &[KeyId; 3]) {
    let destroyed = |r: Result<(), KmsError>| matches!(r, Err(KmsError::KeyDestroyed { .. }));
    for id in ids {
        assert!(destroyed(ks.sign(id, b"m").map(drop)));
        assert!(destroyed(ks.verify(id, b"m", &[0; 64])));
        assert!(destroyed(ks.attest(id).map(drop)));
        assert!(destroyed(ks.policy(id).map(drop)));
        assert!(destroyed(ks.rotate(id).map(drop)));
        assert!(destroyed(ks.trim(id, 1).map(drop)));
        assert!(destroyed(ks.destroy(id)));
        assert!(destroyed(ks.export_sealed(id, &transport()).map(drop)));
        assert!(destroyed(ks.public_key(id).map(drop)));
    }
    assert!(!ks.key_ids().iter().any(|k| k.uuid() == ids[0].uuid()));
}

#[test]
fn every_operation_in_memory() {
    let ks = Keystore::new();
    let ids = walk(&ks);
    destroy_and_check(&ks, &ids);
}

#[test]
fn every_operation_durably_survives_a_reopen() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("store");
    let (ids, other) = {
        let ks = Keystore::create(&store, master()).expect("create");
        let other = ks.create_ed25519("acme", "other").expect("create");
        (walk(&ks), other)
    };
    let ks = Keystore::open(&store, master()).expect("reopen");
    let attestation = ks.attest(&ids[0]).expect("attest");
    assert_eq!(attestation.min_available_version, 3);
    assert_eq!(attestation.policy.min_verify_version, 3);
    assert!(attestation.policy.exportable && attestation.policy.enabled);
    assert!(matches!(
        ks.export_sealed(&ids[1], &transport()),
        Err(KmsError::VersionTrimmed { .. })
    ));
    ks.export_sealed(&ids[2], &transport()).expect("v3 exports");
    let v4 = ks.rotate(&ids[0]).expect("rotate after a trim");
    assert_eq!(v4.version(), 4);
    destroy_and_check(&ks, &ids);
    drop(ks);
    let ks = Keystore::open(&store, master()).expect("reopen a tombstone");
    assert_destroyed(&ks, &ids);
    ks.sign(&other, b"m").expect("the other key is untouched");
    assert_eq!(ks.key_ids(), vec![other.clone()]);
}

#[test]
fn policy_changes_are_atomic_and_durable() {
    let dir = tempfile::tempdir().expect("temp dir");
    let key = {
        let ks = Keystore::create(dir.path(), master()).expect("create");
        let key = ks.create_ed25519("acme", "tokens").expect("create");
        let mut policy = ks.policy(&key).expect("policy");
        policy.enabled = false;
        policy.auto_rotate_after = Some(Duration::from_millis(1500));
        ks.set_policy(&key, policy).expect("set");
        key
    };
    let ks = Keystore::open(dir.path(), master()).expect("reopen");
    let policy = ks.policy(&key).expect("policy");
    assert!(!policy.enabled);
    assert_eq!(policy.auto_rotate_after, Some(Duration::from_millis(1500)));
    let mut short = policy.clone();
    short.auto_rotate_after = Some(Duration::from_millis(10));
    assert!(ks.set_policy(&key, short).is_err());
    assert_eq!(
        ks.policy(&key).expect("policy"),
        policy,
        "a refusal changes nothing"
    );
}

#[test]
fn rotation_falls_due_when_the_head_is_older_than_auto_rotate_after() {
    let ks = Keystore::new();
    let key = ks.create_ed25519("acme", "tokens").expect("create");
    let other = ks.create_ed25519("acme", "other").expect("create");
    let now = SystemTime::now();
    assert!(ks
        .due_for_rotation(now + Duration::from_secs(3600))
        .is_empty());
    let mut policy = ks.policy(&key).expect("policy");
    policy.auto_rotate_after = Some(Duration::from_secs(60));
    ks.set_policy(&key, policy).expect("set");
    assert!(ks.due_for_rotation(now).is_empty(), "not yet");
    let later = now + Duration::from_secs(61);
    assert_eq!(ks.due_for_rotation(later), vec![key.clone()]);
    let v2 = ks.rotate_if_due(&key, later).expect("rotate").expect("due");
    assert_eq!(v2.version(), 2);
    assert_eq!(
        ks.rotate_if_due(&key, later).expect("rotate"),
        None,
        "a check that saw the old head rotates nothing"
    );
    assert_eq!(ks.attest(&key).expect("attest").head, v2);
    assert_eq!(ks.attest(&other).expect("attest").head.version(), 1);
}

/// Every file in `dir` holding `needle`, by name.
fn files_holding(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            continue;
        }
        let bytes = std::fs::read(&path).expect("read");
        if bytes.windows(needle.len()).any(|w| w == needle) {
            found.push(path.display().to_string());
        }
    }
    found
}

/// Each record's sealed bytes, by name, read from the closed store's
/// database.
fn records(dir: &Path) -> Vec<(String, Vec<u8>)> {
    use redb::{ReadableDatabase, ReadableTable, TableDefinition};
    const RECORDS: TableDefinition<'static, &[u8], &[u8]> = TableDefinition::new("records");
    let db = redb::Database::open(dir.join(STORE_FILE)).expect("open the database");
    let tx = db.begin_read().expect("read");
    let table = tx.open_table(RECORDS).expect("table");
    table
        .iter()
        .expect("iter")
        .map(|entry| {
            let (name, value) = entry.expect("entry");
            (
                String::from_utf8(name.value().to_vec()).expect("utf-8"),
                value.value().to_vec(),
            )
        })
        .collect()
}

/// Whether the closed store's database is marked "purge pending".
fn purge_marked(dir: &Path) -> bool {
    use redb::{ReadableDatabase, TableDefinition};
    const PURGE: TableDefinition<'static, &str, u64> = TableDefinition::new("purge_pending");
    let db = redb::Database::open(dir.join(STORE_FILE)).expect("open the database");
    let tx = db.begin_read().expect("read");
    match tx.open_table(PURGE) {
        Ok(table) => table.get("pending").expect("get").is_some(),
        Err(redb::TableError::TableDoesNotExist(_)) => false,
        Err(e) => panic!("{e}"),
    }
}

/// The sealed record of version `version` (its ciphertext and tag: the
/// last 48 bytes, past the envelope's header).
fn sealed_version(records: &[(String, Vec<u8>)], version: u32) -> Vec<u8> {
    let suffix = format!("/v{version}");
    let (_, value) = records
        .iter()
        .find(|(name, _)| name.ends_with(&suffix))
        .expect("the version's record");
    value[value.len() - 48..].to_vec()
}

#[test]
fn trimmed_and_destroyed_secrets_are_not_in_the_store_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("store");
    let (ids, seeds) = {
        let ks = Keystore::create(&store, master()).expect("create");
        let ids = three_versions(&ks);
        exportable(&ks, &ids[0]);
        let seeds: Vec<[u8; 32]> = ids.iter().map(|id| seed_of(&ks, id)).collect();
        (ids, seeds)
    };
    let before = records(&store);
    let sealed: Vec<Vec<u8>> = (1..=3).map(|v| sealed_version(&before, v)).collect();
    for (v, bytes) in sealed.iter().enumerate() {
        assert_eq!(
            files_holding(&store, bytes).len(),
            1,
            "the scan finds version {}'s sealed record before the trim",
            v + 1
        );
    }
    {
        let ks = Keystore::open(&store, master()).expect("open");
        let mut policy = ks.policy(&ids[0]).expect("policy");
        policy.min_verify_version = 3;
        ks.set_policy(&ids[0], policy).expect("set");
        ks.trim(&ids[0], 3).expect("trim");
    }
    for (v, bytes) in sealed.iter().enumerate().take(2) {
        assert_eq!(
            files_holding(&store, bytes),
            Vec::<String>::new(),
            "trimmed version {}'s sealed record is still in the store's files",
            v + 1
        );
    }
    assert_eq!(files_holding(&store, &sealed[2]).len(), 1, "v3 is kept");
    {
        let ks = Keystore::open(&store, master()).expect("open");
        ks.destroy(&ids[0]).expect("destroy");
    }
    assert_eq!(files_holding(&store, &sealed[2]), Vec::<String>::new());
    for seed in &seeds {
        assert_eq!(files_holding(&store, seed), Vec::<String>::new());
    }
    let after = records(&store);
    assert!(
        after.iter().all(|(name, _)| !name.contains("/v")),
        "no version record is left: {:?}",
        after.iter().map(|(n, _)| n).collect::<Vec<_>>()
    );
}

#[test]
fn a_purge_that_fails_is_retried_at_the_next_commit_and_at_open() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("store");
    let ids = {
        let ks = Keystore::create(&store, master()).expect("create");
        three_versions(&ks)
    };
    let before = records(&store);
    let sealed: Vec<Vec<u8>> = (1..=2).map(|v| sealed_version(&before, v)).collect();
    // A directory where the purge builds its copy: the purge fails.
    let blocker = store.join("keystore.redb.tmp");
    assert!(!purge_marked(&store));
    std::fs::create_dir(&blocker).expect("block the purge");
    std::fs::write(blocker.join("x"), b"x").expect("non-empty");
    {
        let ks = Keystore::open(&store, master()).expect("open");
        let mut policy = ks.policy(&ids[0]).expect("policy");
        policy.min_verify_version = 2;
        ks.set_policy(&ids[0], policy.clone()).expect("set");
        ks.trim(&ids[0], 2)
            .expect("the trim stands though the purge failed");
        assert!(matches!(
            ks.verify(&ids[0], b"m", &[0; 64]),
            Err(KmsError::VersionDisallowed { .. })
        ));
        assert_eq!(
            ks.attest(&ids[0]).expect("attest").min_available_version,
            2,
            "applied in memory"
        );
        // Unblocked: the next commit purges.
        std::fs::remove_dir_all(&blocker).expect("unblock");
        policy.enabled = false;
        ks.set_policy(&ids[0], policy).expect("another commit");
        assert_eq!(files_holding(&store, &sealed[0]), Vec::<String>::new());
    }
    // The same at open: block, destroy, unblock, reopen.
    let kept = sealed_version(&records(&store), 3);
    std::fs::create_dir(&blocker).expect("block the purge");
    std::fs::write(blocker.join("x"), b"x").expect("non-empty");
    {
        let ks = Keystore::open(&store, master()).expect("open");
        ks.destroy(&ids[0]).expect("destroy stands");
    }
    assert!(purge_marked(&store), "the failed purge is remembered");
    std::fs::remove_dir_all(&blocker).expect("unblock");
    let ks = Keystore::open(&store, master()).expect("reopen purges");
    drop(ks);
    assert!(!purge_marked(&store), "purged at open");
    assert_eq!(files_holding(&store, &kept), Vec::<String>::new());
    let ks = Keystore::open(&store, master()).expect("reopen");
    assert!(matches!(
        ks.attest(&ids[0]),
        Err(KmsError::KeyDestroyed { .. })
    ));
}

#[test]
fn concurrent_checks_that_saw_the_same_head_rotate_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let durable = Keystore::create(dir.path().join("store"), master()).expect("create");
    for ks in [Keystore::new(), durable] {
        let key = ks.create_ed25519("acme", "tokens").expect("create");
        let mut policy = ks.policy(&key).expect("policy");
        policy.auto_rotate_after = Some(Duration::from_secs(1));
        ks.set_policy(&key, policy).expect("set");
        let later = SystemTime::now() + Duration::from_secs(5);
        let rotated: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| ks.rotate_if_due(&key, later).expect("rotate")))
                .collect();
            handles
                .into_iter()
                .map(|h| usize::from(h.join().expect("thread").is_some()))
                .sum()
        });
        assert_eq!(rotated, 1);
        assert_eq!(ks.attest(&key).expect("attest").head.version(), 2);
    }
}

/// Every change that can change a verdict or a JWK Set advances the
/// key-set generation, after it is visible; reads and signatures do not.
#[test]
fn every_key_change_advances_the_key_set_generation() {
    let ks = Keystore::new();
    let generation = ks.key_set_generation();
    let last = std::cell::Cell::new(generation.get());
    let advanced = |what: &str| {
        let now = generation.get();
        assert!(now > last.get(), "{what} did not advance the generation");
        last.set(now);
    };
    let key = ks.create_ed25519("acme", "tokens").expect("create");
    advanced("create");
    ks.sign(&key, b"m").expect("sign");
    ks.attest(&key).expect("attest");
    assert_eq!(
        generation.get(),
        last.get(),
        "sign and attest change nothing"
    );
    ks.rotate(&key).expect("rotate");
    advanced("rotate");
    let mut policy = ks.policy(&key).expect("policy");
    policy.min_verify_version = 2;
    ks.set_policy(&key, policy).expect("set_policy");
    advanced("set_policy");
    ks.trim(&key, 2).expect("trim");
    advanced("trim");
    ks.destroy(&key).expect("destroy");
    advanced("destroy");
    // Clones share the count.
    assert_eq!(ks.clone().key_set_generation().get(), last.get());
}
