//! A fleet on a real etcd (feature `etcd`): nodes of one process, each
//! with its own connection, mirror and watch, as separate processes would
//! have. Every wait is bounded; an etcd the test starts is killed when the
//! test ends.

use std::process::Command;
use std::time::{Duration, Instant};

use kms::core::seal::{Keyring, SealKey};
use kms::core::{KeyId, Keystore, KmsError};
use kms::etcd::{EtcdConfig, EtcdStorage, Follower};
use kms_testkit::etcd::EtcdCluster;

const MASTER: [u8; 32] = [7; 32];

fn keyring(bytes: &[u8; 32]) -> Keyring {
    Keyring::from(SealKey::from_bytes("fleet-master", 1, bytes).unwrap())
}

/// The fleet's configuration; nodes may start its store (the prefix is
/// empty at each test's start).
fn config(endpoints: Vec<String>) -> EtcdConfig {
    EtcdConfig::new(endpoints)
        .with_request_timeout(Duration::from_secs(2))
        .with_create(true)
}

/// A node: its keystore and follower.
fn node(cluster: &EtcdCluster) -> (Keystore, Follower) {
    kms::etcd::open(config(cluster.endpoints()), keyring(&MASTER)).unwrap()
}

/// Waits until `done` holds, at most `limit`; panics with `what` if not.
fn wait_until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "not within {limit:?}: {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Rotates `key` on `keystore`, retrying retryable errors for at most
/// `limit`; panics with `when` if it does not land.
fn rotate_within(keystore: &Keystore, key: &KeyId, limit: Duration, when: &str) -> KeyId {
    let deadline = Instant::now() + limit;
    loop {
        match keystore.rotate(key) {
            Ok(v) => return v,
            Err(e) if e.is_retryable() && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50))
            }
            Err(e) => panic!("no rotation {when}: {e}"),
        }
    }
}

fn head(keystore: &Keystore, key: &KeyId) -> Option<u32> {
    keystore.attest(key).ok().map(|a| a.head.version())
}

fn etcdctl(endpoint: &str, args: &[&str]) -> String {
    let out = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", endpoint])
        .args(args)
        .output()
        .expect("etcdctl runs (Debian: etcd-client)");
    assert!(
        out.status.success(),
        "etcdctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The store's revision and the number of keys under /kms.
fn store_state(endpoint: &str) -> (u64, u64) {
    let json = etcdctl(endpoint, &["get", "--prefix", "/kms/", "-w", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    (
        v["header"]["revision"].as_u64().unwrap(),
        v["count"].as_u64().unwrap_or(0),
    )
}

#[test]
fn changes_on_one_node_reach_the_other() {
    let cluster = EtcdCluster::start(1).unwrap();
    let (a, _fa) = node(&cluster);
    let (b, _fb) = node(&cluster);
    let key = a.create_ed25519("acme", "tokens").unwrap();
    wait_until(Duration::from_secs(5), "B sees A's key", || {
        head(&b, &key) == Some(1)
    });
    // A token signed on A verifies on B, and the other way round.
    let (signer, signature) = a.sign(&key, b"on a").unwrap();
    b.verify(&signer, b"on a", &signature).unwrap();
    let (signer, signature) = b.sign(&key, b"on b").unwrap();
    a.verify(&signer, b"on b", &signature).unwrap();
    // A rotation on A becomes B's signing head.
    let v2 = a.rotate(&key).unwrap();
    wait_until(Duration::from_secs(5), "B sees the rotation", || {
        head(&b, &key) == Some(2)
    });
    let (signer, signature) = b.sign(&key, b"after").unwrap();
    assert_eq!(signer, v2);
    a.verify(&signer, b"after", &signature).unwrap();
    // A policy change on B reaches A.
    let mut policy = b.policy(&key).unwrap();
    policy.min_verify_version = 2;
    b.set_policy(&key, policy.clone()).unwrap();
    wait_until(Duration::from_secs(5), "A sees the policy", || {
        a.policy(&key).ok() == Some(policy.clone())
    });
    assert!(matches!(
        a.verify(&key, b"on a", &[0; 64]),
        Err(KmsError::VersionDisallowed { .. })
    ));
    // A trim and a destroy on A reach B.
    assert_eq!(a.trim(&key, 2).unwrap(), 2);
    wait_until(Duration::from_secs(5), "B sees the trim", || {
        b.attest(&key).is_ok_and(|at| at.min_available_version == 2)
    });
    a.destroy(&key).unwrap();
    wait_until(Duration::from_secs(5), "B sees the destroy", || {
        matches!(b.sign(&key, b"x"), Err(KmsError::KeyDestroyed { .. }))
    });
    assert!(b.key_ids().is_empty());
}

/// An ML-DSA key travels the fleet as an Ed25519 one does: made on A,
/// rotated and trimmed there, it signs and verifies on B with its
/// algorithm.
#[cfg(feature = "ml-dsa")]
#[test]
fn an_ml_dsa_key_reaches_the_other_node_with_its_algorithm() {
    let cluster = EtcdCluster::start(1).unwrap();
    let (a, _fa) = node(&cluster);
    let (b, _fb) = node(&cluster);
    let key = a.create_key("acme", "pq", kms::core::Alg::MlDsa65).unwrap();
    let v2 = a.rotate(&key).unwrap();
    let mut policy = a.policy(&key).unwrap();
    policy.min_verify_version = 2;
    a.set_policy(&key, policy).unwrap();
    a.trim(&key, 2).unwrap();
    wait_until(
        Duration::from_secs(5),
        "B sees A's trimmed ML-DSA key",
        || {
            b.attest(&key)
                .is_ok_and(|at| at.min_available_version == 2 && at.versions.len() == 2)
        },
    );
    let attested = b.attest(&key).unwrap();
    assert_eq!(attested.alg, kms::core::Alg::MlDsa65);
    assert_eq!(attested, a.attest(&key).unwrap());
    let (signer, signature) = b.sign_message(&key, b"on b").unwrap();
    assert_eq!(signer, v2);
    a.verify_message(&signer, b"on b", signature.as_bytes())
        .unwrap();
}

#[test]
fn concurrent_rotations_make_one_linear_history() {
    let cluster = EtcdCluster::start(1).unwrap();
    let (a, _fa) = node(&cluster);
    let (b, _fb) = node(&cluster);
    let key = a.create_ed25519("acme", "race").unwrap();
    wait_until(Duration::from_secs(5), "B sees the key", || {
        head(&b, &key) == Some(1)
    });
    const EACH: u32 = 15;
    let rotate_all = |ks: Keystore, key: KeyId| {
        std::thread::spawn(move || {
            (0..EACH)
                .map(|_| ks.rotate(&key).unwrap().version())
                .collect::<Vec<u32>>()
        })
    };
    let (ta, tb) = (
        rotate_all(a.clone(), key.clone()),
        rotate_all(b.clone(), key.clone()),
    );
    let mut versions: Vec<u32> = ta.join().unwrap();
    versions.extend(tb.join().unwrap());
    versions.sort_unstable();
    // Every success added exactly one version: no fork, gap or duplicate.
    assert_eq!(versions, (2..=1 + 2 * EACH).collect::<Vec<u32>>());
    let last = 1 + 2 * EACH;
    wait_until(Duration::from_secs(5), "both see the last head", || {
        head(&a, &key) == Some(last) && head(&b, &key) == Some(last)
    });
    assert_eq!(a.attest(&key).unwrap(), b.attest(&key).unwrap());
}

#[test]
fn concurrent_starts_make_one_store_and_creates_keep_their_order() {
    let cluster = EtcdCluster::start(1).unwrap();
    let endpoints = cluster.endpoints();
    let starts: Vec<_> = (0..3)
        .map(|_| {
            let endpoints = endpoints.clone();
            std::thread::spawn(move || {
                kms::etcd::open(config(endpoints), keyring(&MASTER)).unwrap()
            })
        })
        .collect();
    let nodes: Vec<(Keystore, Follower)> = starts.into_iter().map(|t| t.join().unwrap()).collect();
    // Each creates keys at once; every node ends with all of them.
    let creates: Vec<_> = nodes
        .iter()
        .map(|(ks, _)| {
            let ks = ks.clone();
            std::thread::spawn(move || {
                (0..4)
                    .map(|_| ks.create_ed25519("acme", "many").unwrap())
                    .collect::<Vec<KeyId>>()
            })
        })
        .collect();
    let mut all: Vec<KeyId> = creates
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    all.sort_by_key(|id| id.uuid());
    for (ks, _) in &nodes {
        wait_until(Duration::from_secs(5), "every node has every key", || {
            let mut ids = ks.key_ids();
            ids.sort_by_key(|id| id.uuid());
            ids == all
        });
    }
    // A node opening afterwards loads the same store.
    let (late, _f) = node(&cluster);
    assert_eq!(late.key_ids().len(), 12);
}

#[test]
fn nodes_started_at_once_sign_with_one_key() {
    let cluster = EtcdCluster::start(1).unwrap();
    let endpoints = cluster.endpoints();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(4));
    let starts: Vec<_> = (0..4)
        .map(|_| {
            let (endpoints, barrier) = (endpoints.clone(), barrier.clone());
            std::thread::spawn(move || {
                let (ks, follower) = kms::etcd::open(config(endpoints), keyring(&MASTER)).unwrap();
                barrier.wait();
                let key = ks.signing_key("gateway", "tokens").unwrap();
                (ks, follower, key)
            })
        })
        .collect();
    let nodes: Vec<(Keystore, Follower, KeyId)> =
        starts.into_iter().map(|t| t.join().unwrap()).collect();
    let key = nodes[0].2.clone();
    for (ks, _, k) in &nodes {
        assert_eq!(*k, key, "every node signs with one key");
        wait_until(Duration::from_secs(5), "every node has the key", || {
            ks.key_ids().iter().any(|id| id.uuid() == key.uuid())
        });
        assert_eq!(ks.key_ids().len(), 1, "one key, not one per node");
    }
    // A node that starts later finds it through the pointer.
    let (late, _f) = node(&cluster);
    assert_eq!(late.signing_key("gateway", "tokens").unwrap(), key);
    assert_eq!(late.key_ids().len(), 1);
}

#[test]
fn a_node_restarts_and_resumes_following() {
    let cluster = EtcdCluster::start(1).unwrap();
    let (a, _fa) = node(&cluster);
    let key = a.create_ed25519("acme", "restart").unwrap();
    let (b, fb) = node(&cluster);
    assert_eq!(head(&b, &key), Some(1));
    drop((b, fb));
    a.rotate(&key).unwrap();
    let (b, _fb) = node(&cluster);
    assert_eq!(
        head(&b, &key),
        Some(2),
        "a restarted node loads what it missed"
    );
    a.rotate(&key).unwrap();
    wait_until(Duration::from_secs(5), "and follows again", || {
        head(&b, &key) == Some(3)
    });
}

#[test]
fn a_compacted_revision_makes_the_node_reload() {
    let cluster = EtcdCluster::start(1).unwrap();
    let (a, _fa) = node(&cluster);
    let key = a.create_ed25519("acme", "compact").unwrap();
    let storage = EtcdStorage::connect(config(cluster.endpoints())).unwrap();
    let b =
        Keystore::open_or_create_with_storage(Box::new(storage.clone()), keyring(&MASTER)).unwrap();
    // B stops following; A rotates and trims meanwhile; etcd compacts.
    let other = a.create_ed25519("acme", "other").unwrap();
    a.rotate(&key).unwrap();
    a.rotate(&key).unwrap();
    let mut policy = a.policy(&key).unwrap();
    policy.min_verify_version = 3;
    a.set_policy(&key, policy).unwrap();
    a.trim(&key, 3).unwrap();
    let (revision, _) = store_state(&cluster.endpoint(0));
    etcdctl(&cluster.endpoint(0), &["compact", &revision.to_string()]);
    // B follows again from the revision it loaded, which is gone.
    let fb = Follower::start(storage, b.clone()).unwrap();
    wait_until(Duration::from_secs(5), "B reloads", || {
        head(&b, &key) == Some(3) && head(&b, &other) == Some(1)
    });
    assert_eq!(b.attest(&key).unwrap(), a.attest(&key).unwrap());
    assert!(fb.watch_restarts() >= 1);
}

#[test]
fn a_wrong_master_key_refuses_to_start_and_writes_nothing() {
    let cluster = EtcdCluster::start(1).unwrap();
    let (a, _fa) = node(&cluster);
    a.create_ed25519("acme", "sealed").unwrap();
    let before = store_state(&cluster.endpoint(0));
    let refused = kms::etcd::open(config(cluster.endpoints()), keyring(&[8; 32]));
    assert!(matches!(refused, Err(KmsError::Seal(_))), "{refused:?}");
    assert_eq!(store_state(&cluster.endpoint(0)), before, "nothing written");
}

#[test]
fn fleets_whose_prefixes_nest_are_refused_and_write_nothing() {
    let cluster = EtcdCluster::start(1).unwrap();
    let open = |prefix: &str| {
        kms::etcd::open(
            config(cluster.endpoints()).with_prefix(prefix),
            keyring(&MASTER),
        )
    };
    let keys = |prefix: &str| {
        etcdctl(
            &cluster.endpoint(0),
            &["get", "--prefix", prefix, "--keys-only"],
        )
    };
    let (outer, _f) = open("/fleets/a").unwrap();
    outer.create_ed25519("acme", "tokens").unwrap();
    // Inside a store: refused before anything is written.
    let inner = open("/fleets/a/b");
    assert!(
        matches!(&inner, Err(KmsError::InvalidConfig { reason }) if reason.contains("/fleets/a")),
        "{inner:?}"
    );
    assert_eq!(keys("/fleets/a/b/").trim(), "", "nothing written");
    // Around a store: refused too.
    let (deep, _g) = open("/others/x/y").unwrap();
    deep.create_ed25519("acme", "tokens").unwrap();
    let before = keys("/others/");
    let around = open("/others/x");
    assert!(
        matches!(&around, Err(KmsError::InvalidConfig { reason }) if reason.contains("/others/x/y")),
        "{around:?}"
    );
    assert_eq!(keys("/others/"), before, "nothing written");
    // A sibling whose name starts the same is not nested.
    assert!(open("/fleets/ab").is_ok());
}

#[test]
fn a_master_key_rewrap_on_one_node_reaches_the_others() {
    let cluster = EtcdCluster::start(1).unwrap();
    let old = || SealKey::from_bytes("fleet-master", 1, &MASTER).unwrap();
    let new = || SealKey::from_bytes("fleet-master", 2, &[9; 32]).unwrap();
    let both = || Keyring::new([old(), new()]).unwrap();
    let open = |keyring: Keyring| kms::etcd::open(config(cluster.endpoints()), keyring);
    let key = {
        let (a, _fa) = open(Keyring::from(old())).unwrap();
        let key = a.signing_key("acme", "tokens").unwrap();
        a.rotate(&key).unwrap();
        a.create_ed25519("acme", "mail").unwrap();
        key
    };
    // Every node restarted with both versions, then one rewraps.
    let (a, _fa) = open(both()).unwrap();
    let (b, _fb) = open(both()).unwrap();
    let (signer, signature) = a.sign(&key, b"before").unwrap();
    let rewrapped = a.rewrap().unwrap();
    assert!(rewrapped.resealed > 0 && rewrapped.resealed <= rewrapped.records);
    assert_eq!(a.rewrap().unwrap().resealed, 0, "nothing left to re-seal");
    // B applies the re-sealed records and goes on: it verifies, and its
    // rotation reaches A.
    let v3 = rotate_within(&b, &key, Duration::from_secs(5), "on B after the rewrap");
    assert_eq!(v3.version(), 3);
    wait_until(Duration::from_secs(5), "A sees B's rotation", || {
        head(&a, &key) == Some(3)
    });
    b.verify(&signer, b"before", &signature).unwrap();
    assert_eq!(a.attest(&key).unwrap(), b.attest(&key).unwrap());
    // The new version alone opens the store; the old one alone no longer
    // does, and writes nothing.
    let (c, _fc) = open(Keyring::from(new())).unwrap();
    assert_eq!(c.attest(&key).unwrap(), a.attest(&key).unwrap());
    assert_eq!(c.signing_key("acme", "tokens").unwrap(), key);
    let before = store_state(&cluster.endpoint(0));
    let refused = open(Keyring::from(old()));
    assert!(matches!(refused, Err(KmsError::Seal(_))), "{refused:?}");
    assert_eq!(store_state(&cluster.endpoint(0)), before, "nothing written");
}

#[test]
fn etcd_down_and_back() {
    let mut cluster = EtcdCluster::start(1).unwrap();
    let (a, _fa) = node(&cluster);
    let (b, fb) = node(&cluster);
    let key = a.create_ed25519("acme", "outage").unwrap();
    wait_until(Duration::from_secs(5), "B sees the key", || {
        head(&b, &key) == Some(1)
    });
    cluster.kill_all();
    // Signing and verification go on from memory; a change answers a
    // retryable Unavailable within 5 s.
    let (signer, signature) = a.sign(&key, b"down").unwrap();
    b.verify(&signer, b"down", &signature).unwrap();
    let started = Instant::now();
    let refused = a.rotate(&key);
    assert!(
        matches!(&refused, Err(e @ KmsError::Unavailable { .. }) if e.is_retryable()),
        "{refused:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    wait_until(Duration::from_secs(5), "B says it is stale", || {
        fb.staleness() > Duration::ZERO
    });
    cluster.restart_stopped().unwrap();
    // Back: a change lands (the client reconnects), and B catches up.
    let v2 = rotate_within(&a, &key, Duration::from_secs(15), "after etcd came back");
    wait_until(Duration::from_secs(10), "B catches up", || {
        head(&b, &key) == Some(v2.version())
    });
    wait_until(Duration::from_secs(5), "B is not stale", || {
        fb.staleness() == Duration::ZERO
    });
}

#[test]
fn the_leader_dies_and_the_fleet_goes_on() {
    let mut cluster = EtcdCluster::start(3).unwrap();
    let (a, _fa) = node(&cluster);
    let (b, _fb) = node(&cluster);
    let key = a.create_ed25519("acme", "leader").unwrap();
    wait_until(Duration::from_secs(5), "B sees the key", || {
        head(&b, &key) == Some(1)
    });
    let leader = cluster.wait_leader().unwrap();
    cluster.kill(leader);
    let v2 = rotate_within(&a, &key, Duration::from_secs(15), "after the leader died");
    wait_until(Duration::from_secs(10), "B follows on a survivor", || {
        head(&b, &key) == Some(v2.version())
    });
    cluster.restart_stopped().unwrap();
    let v3 = b.rotate(&key).unwrap();
    wait_until(Duration::from_secs(10), "A follows", || {
        head(&a, &key) == Some(v3.version())
    });
}

/// Without `create`, a node refuses a prefix that holds no store and
/// writes nothing: one pointed at the wrong prefix, or at a cluster whose
/// records were deleted, does not start an empty store with a new key.
#[test]
fn an_empty_prefix_is_refused_without_create() {
    let cluster = EtcdCluster::start(1).unwrap();
    let refused = kms::etcd::open(
        config(cluster.endpoints()).with_create(false),
        keyring(&MASTER),
    );
    assert!(
        matches!(refused, Err(KmsError::StoreNotFound { .. })),
        "{refused:?}"
    );
    let listed = etcdctl(
        &cluster.endpoint(0),
        &["get", "/kms", "--prefix", "--keys-only"],
    );
    assert!(listed.trim().is_empty(), "nothing written: {listed}");
    // Once a store is there, a node opens it without `create`.
    let (first, _f) = node(&cluster);
    first.create_ed25519("acme", "tokens").unwrap();
    let (second, _g) = kms::etcd::open(
        config(cluster.endpoints()).with_create(false),
        keyring(&MASTER),
    )
    .unwrap();
    assert_eq!(second.key_ids(), first.key_ids());
}

/// A wrapping root for the fleet's tests: seals the master key under its
/// own `SealKey`, the store's identity as associated data.
#[derive(Debug)]
struct SealRoot(u8);

impl kms::core::root::MasterKeyRoot for SealRoot {
    fn kind(&self) -> kms::core::root::RootKind {
        kms::core::root::RootKind::Pkcs11
    }

    fn describe(&self) -> String {
        format!("seal root {}", self.0)
    }

    fn wrap(
        &self,
        store: &kms::core::root::StoreId,
        key: &kms::core::root::MasterKeyBytes,
    ) -> Result<Option<kms::core::root::WrappedKey>, KmsError> {
        let seal = SealKey::from_bytes("root", 1, &[self.0; 32])?;
        Ok(Some(kms::core::root::WrappedKey {
            mechanism: "TEST".into(),
            bytes: seal.seal(store.as_bytes(), key.as_slice())?.to_bytes(),
        }))
    }

    fn unwrap(
        &self,
        store: &kms::core::root::StoreId,
        wrapped: Option<&kms::core::root::WrappedKey>,
    ) -> Result<kms::core::root::MasterKeyBytes, KmsError> {
        let failed = || KmsError::Root {
            root: self.describe(),
            reason: "cannot unwrap".into(),
        };
        let seal = SealKey::from_bytes("root", 1, &[self.0; 32])?;
        let envelope = kms::core::seal::Envelope::from_bytes(&wrapped.ok_or_else(failed)?.bytes)
            .map_err(|_| failed())?;
        let opened = seal
            .open(store.as_bytes(), &envelope)
            .map_err(|_| failed())?;
        let mut key = zeroize::Zeroizing::new([0u8; 32]);
        key.copy_from_slice(&opened);
        Ok(key)
    }
}

#[test]
fn nodes_started_at_once_under_a_wrapping_root_share_one_wrapped_key_and_move_together() {
    let cluster = EtcdCluster::start(1).unwrap();
    let endpoints = cluster.endpoints();
    let nodes: Vec<(Keystore, Follower)> = std::thread::scope(|s| {
        let starting: Vec<_> = (0..3)
            .map(|_| {
                let endpoints = endpoints.clone();
                s.spawn(move || {
                    kms::etcd::open_under(config(endpoints), &SealRoot(1), "m").unwrap()
                })
            })
            .collect();
        starting.into_iter().map(|t| t.join().unwrap()).collect()
    });
    // One master key: a key made on one node verifies on the others.
    let key = nodes[0].0.create_ed25519("acme", "rooted").unwrap();
    let (signer, signature) = nodes[0].0.sign(&key, b"m").unwrap();
    for (other, _) in &nodes[1..] {
        wait_until(Duration::from_secs(5), "the key reaches every node", || {
            head(other, &key) == Some(1)
        });
        other.verify(&signer, b"m", &signature).unwrap();
    }
    let record = etcdctl(&endpoints[0], &["get", "/kms/root", "--print-value-only"]);
    assert!(
        record.contains("kind pkcs11") && record.contains("seal root 1"),
        "{record}"
    );
    // The record is not a keystore record: the watch and loads leave it out.
    let opened = kms::etcd::open_under(config(endpoints.clone()), &SealRoot(1), "m").unwrap();
    assert_eq!(opened.0.key_ids(), vec![key.clone()]);
    drop(opened);

    // Moved to another root while the nodes run: they keep serving; a new
    // node needs the new root; a file root is refused.
    let moved = kms::etcd::move_to_root(config(endpoints.clone()), &SealRoot(1), &SealRoot(2), "m")
        .unwrap();
    assert_eq!(moved.root, "seal root 2");
    nodes[1].0.verify(&signer, b"m", &signature).unwrap();
    assert!(matches!(
        kms::etcd::open_under(config(endpoints.clone()), &SealRoot(1), "m"),
        Err(KmsError::Root { .. })
    ));
    let file = kms::core::root::FileRoot::new(zeroize::Zeroizing::new(MASTER), "file");
    assert!(matches!(
        kms::etcd::open_under(config(endpoints.clone()), &file, "m"),
        Err(KmsError::WrongRoot { .. })
    ));
    let (joined, _f) = kms::etcd::open_under(config(endpoints), &SealRoot(2), "m").unwrap();
    joined.verify(&signer, b"m", &signature).unwrap();
}
