//! The durable store's records, through a [`Storage`] in memory: what a
//! mutation writes (one version and one head: O(record)), what open
//! refuses (a record dropped, swapped, replayed, added or altered), and a
//! master-key rewrap cut short by a failed commit.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use kms_core::seal::{Keyring, SealError, SealKey};
use kms_core::storage::{RecordWrite, Storage};
use kms_core::{KeyId, Keystore, KmsError, Rewrapped};

use crate::support::memory::{apply, Records};

/// Records in memory, shared by clones. Counts the records and bytes each
/// commit writes, and fails every commit after `fail_after` of them.
#[derive(Debug, Clone, Default)]
struct MemoryStorage {
    records: Arc<Mutex<Records>>,
    commits: Arc<Mutex<Vec<(usize, usize)>>>,
    fail_after: Arc<AtomicUsize>,
}

impl MemoryStorage {
    fn new() -> MemoryStorage {
        let storage = MemoryStorage::default();
        storage.fail_after.store(usize::MAX, Ordering::Relaxed);
        storage
    }

    fn with(records: Records) -> MemoryStorage {
        let storage = MemoryStorage::new();
        *storage.records.lock().expect("records") = records;
        storage
    }

    fn snapshot(&self) -> Records {
        self.records.lock().expect("records").clone()
    }

    /// `(records, bytes)` of the last commit.
    fn last_commit(&self) -> (usize, usize) {
        *self
            .commits
            .lock()
            .expect("commits")
            .last()
            .expect("a commit")
    }
}

impl Storage for MemoryStorage {
    fn load(&self) -> Result<Vec<(String, Vec<u8>)>, KmsError> {
        Ok(self.snapshot().into_iter().collect())
    }

    fn commit(&self, writes: &[RecordWrite<'_>]) -> Result<(), KmsError> {
        let mut commits = self.commits.lock().expect("commits");
        if commits.len() >= self.fail_after.load(Ordering::Relaxed) {
            return Err(KmsError::Internal {
                reason: "the test's storage fails this commit".to_owned(),
            });
        }
        let bytes = writes
            .iter()
            .map(|w| w.name.len() + w.value.map_or(0, <[u8]>::len))
            .sum();
        commits.push((writes.len(), bytes));
        apply(&mut self.records.lock().expect("records"), writes);
        Ok(())
    }
}

fn m1() -> SealKey {
    SealKey::from_bytes("master", 1, &[1; 32]).expect("key")
}

fn m2() -> SealKey {
    SealKey::from_bytes("master", 2, &[2; 32]).expect("key")
}

fn open(records: Records) -> Result<Keystore, KmsError> {
    Keystore::open_with_storage(Box::new(MemoryStorage::with(records)), m1().into())
}

#[test]
fn a_rotate_writes_one_version_and_one_head_whatever_the_store_holds() {
    let storage = MemoryStorage::new();
    let ks = Keystore::create_with_storage(Box::new(storage.clone()), m1()).expect("create");
    let first = ks.create_ed25519("acme", "k0").expect("create");
    assert_eq!(storage.last_commit().0, 3, "version 1, head, index");
    ks.rotate(&first).expect("rotate");
    let (records, small) = storage.last_commit();
    assert_eq!(records, 2, "the new version and the key's head");
    for i in 1..200 {
        let key = ks.create_ed25519("acme", &format!("k{i}")).expect("create");
        ks.rotate(&key).expect("rotate");
    }
    ks.rotate(&first).expect("rotate");
    let (records, large) = storage.last_commit();
    assert_eq!(records, 2);
    assert_eq!(
        large, small,
        "a rotation's bytes do not grow with the store"
    );
}

/// A store of two keys: `a` at v3, `b` at v1; and the records as they
/// were before `a`'s last rotation and before `b` was created.
fn two_keys() -> (Records, Records, Records, KeyId, KeyId) {
    let storage = MemoryStorage::new();
    let ks = Keystore::create_with_storage(Box::new(storage.clone()), m1()).expect("create");
    let a = ks.create_ed25519("acme", "a").expect("create");
    let before_b = storage.snapshot();
    let b = ks.create_ed25519("acme", "b").expect("create");
    ks.rotate(&a).expect("rotate");
    let before_rotation = storage.snapshot();
    ks.rotate(&a).expect("rotate");
    (storage.snapshot(), before_rotation, before_b, a, b)
}

fn name(records: &Records, suffix: &str, key: &KeyId) -> String {
    let found: Vec<&String> = records
        .keys()
        .filter(|n| n.contains(&key.uuid().to_string()) && n.ends_with(suffix))
        .collect();
    assert_eq!(found.len(), 1, "{suffix} of {key}");
    found[0].clone()
}

fn assert_corrupt(records: Records, what: &str) {
    match open(records) {
        Err(KmsError::StoreCorrupt { reason, .. }) => {
            println!("{what}: {reason}");
        }
        other => panic!("{what}: expected StoreCorrupt, got {other:?}"),
    }
}

#[test]
fn open_refuses_records_dropped_swapped_replayed_added_or_altered() {
    let (intact, before_rotation, before_b, a, b) = two_keys();
    let ks = open(intact.clone()).expect("the intact store opens");
    assert_eq!(ks.attest(&a).expect("attest").head.version(), 3);
    assert_eq!(ks.attest(&b).expect("attest").head.version(), 1);
    assert_eq!(
        KmsError::StoreCorrupt {
            store: String::new(),
            reason: String::new()
        }
        .code(),
        "kms.store_corrupt"
    );

    let mut dropped = intact.clone();
    dropped.remove(&name(&intact, "/v2", &a));
    assert_corrupt(dropped, "a version below the head dropped");

    let mut dropped = intact.clone();
    dropped.remove(&name(&intact, "/v3", &a));
    assert_corrupt(dropped, "the head version dropped");

    let mut dropped = intact.clone();
    dropped.remove(&name(&intact, "/head", &b));
    assert_corrupt(dropped, "a key's head dropped");

    let mut dropped = intact.clone();
    dropped.retain(|n, _| !n.contains(&b.uuid().to_string()));
    assert_corrupt(dropped, "a whole key dropped (the index still lists it)");

    let mut swapped = intact.clone();
    let (v1, v2) = (name(&intact, "/v1", &a), name(&intact, "/v2", &a));
    swapped.insert(v1.clone(), intact[&v2].clone());
    swapped.insert(v2, intact[&v1].clone());
    assert_corrupt(swapped, "two versions swapped");

    let mut replayed = intact.clone();
    let head = name(&intact, "/head", &a);
    replayed.insert(head.clone(), before_rotation[&head].clone());
    assert_corrupt(replayed, "an older head replayed");

    let mut replayed = intact.clone();
    replayed.insert("index".to_owned(), before_b["index"].clone());
    assert_corrupt(replayed, "an older index replayed");

    let mut added = intact.clone();
    let head_b = name(&intact, "/head", &b);
    added.insert(
        head_b.replace("/head", "/v2"),
        intact[&name(&intact, "/v1", &b)].clone(),
    );
    assert_corrupt(added, "a version above the head added");

    let mut added = intact.clone();
    added.insert("stray".to_owned(), vec![0; 64]);
    assert_corrupt(added, "a record of no format");

    let mut altered = intact.clone();
    let v2 = name(&intact, "/v2", &a);
    let last = altered[&v2].len() - 1;
    altered.get_mut(&v2).expect("record")[last] ^= 1;
    assert_corrupt(altered, "a version's byte flipped");

    let mut altered = intact.clone();
    let last = altered["index"].len() - 1;
    altered.get_mut("index").expect("index")[last] ^= 1;
    assert_eq!(
        open(altered).err(),
        Some(KmsError::Seal(SealError::Authentication)),
        "the index's errors are the master key's"
    );
}

#[test]
fn a_key_from_another_store_under_the_same_master_key_is_refused() {
    let (a_records, _, _, a_first, _) = two_keys();
    let (b_records, _, _, b_first, _) = two_keys();
    // B's first key put in place of A's (same ordinal, same count).
    let mut mixed = a_records.clone();
    mixed.retain(|n, _| !n.contains(&a_first.uuid().to_string()));
    for (name, value) in &b_records {
        if name.contains(&b_first.uuid().to_string()) {
            mixed.insert(name.clone(), value.clone());
        }
    }
    assert_corrupt(mixed, "a key of another store under the same master key");
    // B's index in place of A's: every one of A's records is then foreign.
    let mut mixed = a_records;
    mixed.insert("index".to_owned(), b_records["index"].clone());
    assert_corrupt(mixed, "another store's index");
}

#[test]
fn rewrap_cut_short_leaves_a_store_that_opens_and_finishes_when_run_again() {
    let storage = MemoryStorage::new();
    let ks = Keystore::create_with_storage(Box::new(storage.clone()), m1()).expect("create");
    let mut keys = Vec::new();
    for i in 0..60 {
        let key = ks.create_ed25519("acme", &format!("k{i}")).expect("create");
        ks.rotate(&key).expect("rotate");
        keys.push(key);
    }
    let public_keys: Vec<[u8; 32]> = keys.iter().map(|k| ks.public_key(k).expect("pk")).collect();
    drop(ks);
    // 60 keys × (2 versions + head) + the index.
    let records = 60 * 3 + 1;

    let both = || Keyring::new([m2(), m1()]).expect("keyring");
    let ks = Keystore::open_with_storage(Box::new(storage.clone()), both()).expect("open");
    // A rotation under the keyring seals under m2 already.
    let rotated = ks.rotate(&keys[0]).expect("rotate");
    // Let one batch of 64 commit, then fail: a crash midway.
    let done = storage.commits.lock().expect("commits").len();
    storage.fail_after.store(done + 1, Ordering::Relaxed);
    assert!(matches!(ks.rewrap(), Err(KmsError::Internal { .. })));
    drop(ks);
    storage.fail_after.store(usize::MAX, Ordering::Relaxed);

    assert!(
        matches!(
            Keystore::open_with_storage(Box::new(storage.clone()), m2().into()),
            Err(KmsError::Seal(SealError::WrongKey { .. }))
        ),
        "half re-sealed: m2 alone does not open it, and says the keyring lacks a key"
    );
    let ks = Keystore::open_with_storage(Box::new(storage.clone()), both()).expect("reopen midway");
    assert_eq!(ks.public_key(&keys[7]).expect("pk"), public_keys[7]);
    let report = ks.rewrap().expect("rewrap");
    // First rotation: 2 records under m2; first batch: 64.
    assert_eq!(
        report,
        Rewrapped {
            records: records + 1,
            resealed: records + 1 - 2 - 64,
        }
    );
    assert_eq!(
        ks.rewrap().expect("again"),
        Rewrapped {
            records: records + 1,
            resealed: 0
        }
    );
    drop(ks);

    let ks = Keystore::open_with_storage(Box::new(storage.clone()), m2().into())
        .expect("m2 alone opens it");
    for (key, public_key) in keys.iter().zip(&public_keys) {
        assert_eq!(ks.public_key(key).expect("pk"), *public_key);
    }
    assert_eq!(ks.attest(&rotated).expect("attest").head, rotated);
    assert!(matches!(
        Keystore::open_with_storage(Box::new(storage), m1().into()),
        Err(KmsError::Seal(SealError::WrongKey { .. }))
    ));
}

#[test]
fn after_a_failed_commit_the_store_refuses_writes_until_reopened() {
    let storage = MemoryStorage::new();
    let ks = Keystore::create_with_storage(Box::new(storage.clone()), m1()).expect("create");
    let key = ks.create_ed25519("acme", "k").expect("create");
    let done = storage.commits.lock().expect("commits").len();
    storage.fail_after.store(done, Ordering::Relaxed);
    assert!(matches!(ks.rotate(&key), Err(KmsError::Internal { .. })));
    // The storage works again, but whether the failed commit landed is
    // unknown (a networked storage may time out after it landed).
    storage.fail_after.store(usize::MAX, Ordering::Relaxed);
    match ks.create_ed25519("acme", "other") {
        Err(KmsError::Internal { reason }) => assert!(reason.contains("reopen"), "{reason}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(
        ks.attest(&key).expect("attest").head.version(),
        1,
        "memory unchanged"
    );
    drop(ks);
    let ks = Keystore::open_with_storage(Box::new(storage), m1().into()).expect("reopen");
    assert_eq!(ks.rotate(&key).expect("rotate").version(), 2);
}

#[test]
fn a_keyring_is_one_key_id_with_distinct_versions() {
    assert!(Keyring::new([]).is_err());
    assert!(Keyring::new([
        m1(),
        SealKey::from_bytes("other", 2, &[2; 32]).expect("key")
    ])
    .is_err());
    assert!(Keyring::new([m1(), m1()]).is_err());
    let ring = Keyring::new([m2(), m1()]).expect("keyring");
    assert_eq!(ring.newest().version(), 2);
    assert_eq!(ring.keys().len(), 2);
}

#[test]
fn an_in_memory_keystore_has_nothing_to_rewrap() {
    assert_eq!(
        Keystore::new().rewrap().expect("rewrap"),
        Rewrapped {
            records: 0,
            resealed: 0
        }
    );
}

#[test]
fn a_purpose_has_one_signing_key_named_by_a_pointer_written_once() {
    let storage = MemoryStorage::new();
    let ks = Keystore::create_with_storage(Box::new(storage.clone()), m1()).expect("create");
    let key = ks.signing_key("acme", "tokens").expect("signing key");
    assert_eq!(key.version(), 1);
    assert_eq!(
        storage.last_commit().0,
        4,
        "version 1, head, index and the pointer, in one commit"
    );
    let commits = storage.commits.lock().expect("commits").len();
    ks.rotate(&key).expect("rotate");
    assert_eq!(ks.signing_key("acme", "tokens").expect("again"), key);
    assert_eq!(
        storage.commits.lock().expect("commits").len(),
        commits + 1,
        "only the rotation wrote"
    );

    // A purpose whose key has no pointer: `signing_key` adopts that key.
    let older = ks.create_ed25519("acme", "mail").expect("create");
    assert_eq!(ks.signing_key("acme", "mail").expect("adopted"), older);
    assert_eq!(
        storage.last_commit().0,
        2,
        "the pointer and the key's head (compared on a shared store)"
    );
    assert_eq!(ks.key_ids().len(), 2);
    assert!(matches!(
        ks.signing_key("acme", "no:colons"),
        Err(KmsError::InvalidKeyId(_))
    ));

    let records = storage.snapshot();
    let reopened = open(records.clone()).expect("reopen");
    assert_eq!(reopened.signing_key("acme", "tokens").expect("kept"), key);
    assert_eq!(reopened.signing_key("acme", "mail").expect("kept"), older);
    assert_eq!(reopened.key_ids().len(), 2, "no key made on reopen");

    let mut moved = records.clone();
    moved.insert(
        "signing/acme:mail".to_owned(),
        records["signing/acme:tokens"].clone(),
    );
    assert_corrupt(moved, "a pointer copied under another purpose's name");
    let mut altered = records.clone();
    if let Some(byte) = altered
        .get_mut("signing/acme:tokens")
        .and_then(|v| v.last_mut())
    {
        *byte ^= 1;
    }
    assert_corrupt(altered, "a pointer altered");
    let mut stray = records;
    stray.insert(
        "signing/acme-tokens".to_owned(),
        stray["signing/acme:tokens"].clone(),
    );
    assert_corrupt(stray, "a record in the pointers' group without a purpose");
}

#[test]
fn an_in_memory_keystore_keeps_one_signing_key_per_purpose() {
    let ks = Keystore::new();
    let keys: Vec<KeyId> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| s.spawn(|| ks.signing_key("acme", "tokens").expect("signing key")))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    });
    assert!(keys.iter().all(|k| *k == keys[0]), "{keys:?}");
    assert_eq!(ks.key_ids().len(), 1, "one key, not one per caller");
}

#[test]
fn a_destroyed_signing_key_is_replaced_and_its_pointer_moves() {
    let storage = MemoryStorage::new();
    let ks = Keystore::create_with_storage(Box::new(storage.clone()), m1()).expect("create");
    let first = ks.signing_key("acme", "tokens").expect("signing key");
    ks.destroy(&first).expect("destroy");
    let second = ks.signing_key("acme", "tokens").expect("a new one");
    assert_ne!(second.uuid(), first.uuid());
    assert_eq!(
        storage.last_commit().0,
        4,
        "the new key and the moved pointer, in one commit"
    );
    let moved = storage.snapshot();
    let reopened = open(moved.clone()).expect("reopen");
    assert_eq!(
        reopened.signing_key("acme", "tokens").expect("kept"),
        second
    );
    assert_eq!(reopened.key_ids(), ks.key_ids());

    // An in-memory keystore does the same.
    let in_memory = Keystore::new();
    let a = in_memory
        .signing_key("acme", "tokens")
        .expect("signing key");
    in_memory.destroy(&a).expect("destroy");
    let b = in_memory.signing_key("acme", "tokens").expect("replaced");
    assert_ne!(a.uuid(), b.uuid());
    assert_eq!(in_memory.signing_key("acme", "tokens").expect("kept"), b);
}
