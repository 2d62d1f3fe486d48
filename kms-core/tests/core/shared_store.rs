//! Signing pointers on a store that several keystores share
//! ([`Storage::is_shared`]), through a storage in memory that keeps the
//! shared-store contract of `kms_core::storage` and lets a test hold back
//! a group of records from a node's `changes`, as a real store's report
//! may lag: a pointer that comes before the key it names, a pointer moved
//! by another node, a pointer that goes back, and a destroy on another
//! node racing the pointer written to name the destroyed key.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use kms_core::seal::SealKey;
use kms_core::storage::{RecordWrite, Storage};
use kms_core::{KeyId, Keystore, KmsError};

/// The records all nodes share: each with the store revision that last
/// wrote it.
#[derive(Debug, Default)]
struct Store {
    records: BTreeMap<String, (u64, Vec<u8>)>,
    revision: u64,
}

/// One node's view of the [`Store`].
#[derive(Debug, Clone)]
struct Node {
    store: Arc<Mutex<Store>>,
    /// Each record's revision as this node last saw it (by `load`,
    /// `changes` or its own commits): what a commit compares.
    seen: Arc<Mutex<HashMap<String, u64>>>,
    /// Each record's revision as `changes` last reported it or this node
    /// wrote it: what the next `changes` compares.
    reported: Arc<Mutex<HashMap<String, u64>>>,
    /// Groups `changes` does not report until the next `load`, or a
    /// conflict on one of their records.
    held: Arc<Mutex<BTreeSet<String>>>,
    commits: Arc<AtomicUsize>,
    /// Run at the start of each commit: another node's write that lands
    /// just before this node's.
    before_commit: Arc<Mutex<Option<Hook>>>,
}

/// A write by another node, run by [`Node::commit`].
struct Hook(Box<dyn Fn() + Send>);

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hook")
    }
}

/// The group of record `name`: `index`, every signing pointer together,
/// or the records whose names agree up to the last `/`.
fn group(name: &str) -> String {
    if name.starts_with("signing/") {
        "signing".to_owned()
    } else {
        name.rsplit_once('/')
            .map_or(name, |(group, _)| group)
            .to_owned()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().expect("lock")
}

impl Node {
    fn new(store: &Arc<Mutex<Store>>) -> Node {
        Node {
            store: Arc::clone(store),
            seen: Arc::default(),
            reported: Arc::default(),
            held: Arc::default(),
            commits: Arc::default(),
            before_commit: Arc::default(),
        }
    }

    /// Holds back the group of every record whose name contains `part`.
    fn hold(&self, part: &str) {
        let store = lock(&self.store);
        let groups = store
            .records
            .keys()
            .filter(|name| name.contains(part))
            .map(|name| group(name));
        lock(&self.held).extend(groups);
    }

    fn commits(&self) -> usize {
        self.commits.load(Ordering::SeqCst)
    }
}

impl Storage for Node {
    fn load(&self) -> Result<Vec<(String, Vec<u8>)>, KmsError> {
        let store = lock(&self.store);
        lock(&self.held).clear();
        let mut seen = lock(&self.seen);
        seen.clear();
        seen.extend(store.records.iter().map(|(n, (rev, _))| (n.clone(), *rev)));
        let mut reported = lock(&self.reported);
        if reported.is_empty() {
            // The first load is the baseline of `changes`.
            reported.clone_from(&seen);
        }
        Ok(store
            .records
            .iter()
            .map(|(n, (_, v))| (n.clone(), v.clone()))
            .collect())
    }

    fn commit(&self, writes: &[RecordWrite<'_>]) -> Result<(), KmsError> {
        if let Some(Hook(write)) = &*lock(&self.before_commit) {
            write();
        }
        let mut store = lock(&self.store);
        let mut seen = lock(&self.seen);
        for w in writes {
            let current = store.records.get(w.name).map(|(rev, _)| *rev);
            if current != seen.get(w.name).copied() {
                // The conflicted group is fetched, as a real store does.
                lock(&self.held).remove(&group(w.name));
                return Err(KmsError::Conflict {
                    record: w.name.to_owned(),
                    attempts: 1,
                });
            }
        }
        let mut reported = lock(&self.reported);
        for w in writes {
            store.revision += 1;
            let revision = store.revision;
            match w.value {
                Some(value) => {
                    store
                        .records
                        .insert(w.name.to_owned(), (revision, value.to_vec()));
                    seen.insert(w.name.to_owned(), revision);
                    reported.insert(w.name.to_owned(), revision);
                }
                None => {
                    store.records.remove(w.name);
                    seen.remove(w.name);
                    reported.remove(w.name);
                }
            }
        }
        self.commits.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn changes(&self) -> Result<Vec<(String, Vec<u8>)>, KmsError> {
        let store = lock(&self.store);
        let held = lock(&self.held);
        let mut seen = lock(&self.seen);
        let mut reported = lock(&self.reported);
        let names: BTreeSet<&String> = store.records.keys().chain(reported.keys()).collect();
        let changed: BTreeSet<String> = names
            .into_iter()
            .filter(|name| {
                store.records.get(*name).map(|(rev, _)| *rev) != reported.get(*name).copied()
            })
            .map(|name| group(name))
            .filter(|g| !held.contains(g))
            .collect();
        reported.retain(|name, _| !changed.contains(&group(name)));
        seen.retain(|name, _| !changed.contains(&group(name)));
        let mut news = Vec::new();
        for (name, (rev, value)) in &store.records {
            if changed.contains(&group(name)) {
                reported.insert(name.clone(), *rev);
                seen.insert(name.clone(), *rev);
                news.push((name.clone(), value.clone()));
            }
        }
        Ok(news)
    }
}

fn master() -> SealKey {
    SealKey::from_bytes("master", 1, &[1; 32]).expect("key")
}

/// A store made by node `a` and node `b` opened on it: the store, then
/// each node's view and keystore.
fn two_nodes() -> (Arc<Mutex<Store>>, Node, Keystore, Node, Keystore) {
    let store = Arc::default();
    let a = Node::new(&store);
    let ks_a = Keystore::create_with_storage(Box::new(a.clone()), master()).expect("create");
    let b = Node::new(&store);
    let ks_b = Keystore::open_with_storage(Box::new(b.clone()), master().into()).expect("open");
    (store, a, ks_a, b, ks_b)
}

/// A fleet update that changes a key (applied by `refresh`) advances the
/// key-set generation of the node that applies it; one that finds
/// nothing new does not.
#[test]
fn a_refresh_that_changes_a_key_advances_the_generation() {
    let (_, _, ks_a, _, ks_b) = two_nodes();
    let key = ks_a.create_ed25519("acme", "tokens").expect("create");
    let generation = ks_b.key_set_generation();
    let before = generation.get();
    ks_b.refresh().expect("refresh");
    let after_create = generation.get();
    assert!(after_create > before, "a's new key");
    ks_b.refresh().expect("refresh");
    assert_eq!(generation.get(), after_create, "nothing new");
    ks_a.rotate(&key).expect("rotate");
    ks_b.refresh().expect("refresh");
    assert!(generation.get() > after_create, "a's rotation");
}

#[test]
fn a_pointer_before_its_key_is_followed_once_the_key_arrives() {
    let (_, _, ks_a, b, ks_b) = two_nodes();
    let key = ks_a.signing_key("acme", "tokens").expect("signing key");
    // b's next report has the pointer and the index, not the key.
    b.hold(&key.uuid().to_string());
    ks_b.refresh().expect("refresh");
    assert!(
        ks_b.key_ids().is_empty(),
        "the pointer came, the key not yet"
    );
    assert_eq!(ks_b.signing_key("acme", "tokens").expect("followed"), key);
    assert_eq!(b.commits(), 0, "b wrote nothing: no second key, no pointer");
    assert_eq!(ks_b.key_ids(), ks_a.key_ids());
}

#[test]
fn a_pointer_moved_by_another_node_is_followed_and_one_that_goes_back_is_refused() {
    let (store, _, ks_a, b, ks_b) = two_nodes();
    let first = ks_a.signing_key("acme", "tokens").expect("signing key");
    assert_eq!(ks_b.signing_key("acme", "tokens").expect("followed"), first);
    let older = lock(&store).records["signing/acme:tokens"].clone();

    ks_a.destroy(&first).expect("destroy");
    let second = ks_a.signing_key("acme", "tokens").expect("a new one");
    assert_ne!(second.uuid(), first.uuid());
    ks_b.refresh().expect("refresh");
    assert_eq!(ks_b.signing_key("acme", "tokens").expect("moved"), second);
    assert_eq!(b.commits(), 0, "b followed the move without writing");

    // The store hands back the older pointer (a restored backup, a
    // replay): its sequence went back, and b refuses it.
    {
        let mut store = lock(&store);
        store.revision += 1;
        let revision = store.revision;
        store
            .records
            .insert("signing/acme:tokens".to_owned(), (revision, older.1));
    }
    match ks_b.refresh() {
        Err(KmsError::StoreCorrupt { reason, .. }) => {
            assert!(reason.contains("went back"), "{reason}");
        }
        other => panic!("expected StoreCorrupt, got {other:?}"),
    }
}

#[test]
fn a_pointer_is_not_written_over_a_key_another_node_just_destroyed() {
    let (_, _, ks_a, b, ks_b) = two_nodes();
    // A key made before pointers, which b knows.
    let older: KeyId = ks_a.create_ed25519("acme", "mail").expect("create");
    ks_b.refresh().expect("refresh");
    assert_eq!(ks_b.key_ids(), ks_a.key_ids());

    // a destroys it; b's report lags, so b plans to name it.
    ks_a.destroy(&older).expect("destroy");
    b.hold(&older.uuid().to_string());
    let key = ks_b.signing_key("acme", "mail").expect("signing key");
    assert_ne!(
        key.uuid(),
        older.uuid(),
        "the commit compared the key's head and lost; the retry made a new key"
    );
    ks_a.refresh().expect("refresh");
    assert_eq!(ks_a.signing_key("acme", "mail").expect("followed"), key);
    assert!(ks_b.sign(&key, b"hello").is_ok());
}

#[test]
fn a_change_that_loses_every_attempt_leaves_memory_at_the_state_it_lost_to() {
    let (_, a, ks_a, _, ks_b) = two_nodes();
    let key = ks_a.create_ed25519("acme", "tokens").expect("create");
    ks_b.refresh().expect("refresh");
    // Before each of a's commits, b rotates the key: every attempt of a's
    // rotation loses, the last one to b's last rotation.
    let (b_keystore, b_key) = (ks_b.clone(), key.clone());
    *lock(&a.before_commit) = Some(Hook(Box::new(move || {
        b_keystore.rotate(&b_key).expect("b rotates");
    })));
    match ks_a.rotate(&key) {
        Err(KmsError::Conflict { attempts, .. }) => {
            assert_eq!(attempts, kms_core::CONFLICT_ATTEMPTS);
        }
        other => panic!("expected Conflict, got {other:?}"),
    }
    *lock(&a.before_commit) = None;
    let head = |ks: &Keystore| ks.attest(&key).expect("attest").head;
    assert_eq!(
        head(&ks_a),
        head(&ks_b),
        "a holds b's last rotation without a refresh"
    );
    assert_eq!(head(&ks_a).version(), 1 + kms_core::CONFLICT_ATTEMPTS);
}
