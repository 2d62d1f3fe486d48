//! Create and rotate through the actor on a durable keystore: shutdown
//! waits for writes in progress, the backlog of writes is bounded
//! (`Overloaded`), and a write whose caller has gone is skipped.
//!
//! To hold writes for as long as a test needs, the keystore's storage is
//! a [`GatedStorage`]: records in memory, whose commits wait while its
//! gate is closed. Reopening the same records after shutdown shows what
//! was written. `timeout` is only a hang detector.

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use kms_actor::{KmsActor, KmsClient, KmsConfig, KmsHandle};
use kms_bus::Bus;
use kms_core::seal::SealKey;
use kms_core::storage::{RecordWrite, Storage};
use kms_core::{KeyId, Keystore, KmsError};
use tokio::task::JoinHandle;
use tokio::time::timeout;

const HANG: Duration = Duration::from_secs(60);
/// The actor's bound on create and rotate requests accepted and not done.
const BACKLOG: usize = 3;

/// Records in memory, shared by clones; commits wait while the gate is
/// closed.
#[derive(Debug, Clone, Default)]
struct GatedStorage {
    records: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
    /// `true` while closed.
    gate: Arc<(Mutex<bool>, Condvar)>,
}

impl GatedStorage {
    fn close(&self) {
        *self.gate.0.lock().expect("gate") = true;
    }

    fn open(&self) {
        *self.gate.0.lock().expect("gate") = false;
        self.gate.1.notify_all();
    }
}

impl Storage for GatedStorage {
    fn load(&self) -> Result<Vec<(String, Vec<u8>)>, KmsError> {
        let records = self.records.lock().expect("records");
        Ok(records
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn commit(&self, writes: &[RecordWrite<'_>]) -> Result<(), KmsError> {
        let (closed, opened) = &*self.gate;
        let closed = closed.lock().expect("gate");
        let _open = opened.wait_while(closed, |closed| *closed).expect("gate");
        let mut records = self.records.lock().expect("records");
        for w in writes {
            match w.value {
                Some(value) => records.insert(w.name.to_owned(), value.to_vec()),
                None => records.remove(w.name),
            };
        }
        Ok(())
    }
}

/// Opens the gate when dropped: a failing test still releases held writes.
struct Gate(GatedStorage);

impl Drop for Gate {
    fn drop(&mut self) {
        self.0.open();
    }
}

fn master() -> SealKey {
    SealKey::from_bytes("master", 1, &[9; 32]).expect("key")
}

/// An actor over a new durable store in `storage` holding one key.
fn durable_actor(storage: &GatedStorage) -> (KmsHandle, KmsClient, KeyId) {
    let ks = Keystore::create_with_storage(Box::new(storage.clone()), master())
        .expect("create the store");
    let key = ks.create_ed25519("acme", "tokens").expect("create");
    let config = KmsConfig::default()
        .with_threads(1)
        .with_write_backlog(BACKLOG);
    let handle = KmsActor::spawn(config, ks, &Bus::new()).expect("spawn");
    let client = handle.client();
    (handle, client, key)
}

fn rotate(kms: &KmsClient, key: &KeyId) -> JoinHandle<Result<KeyId, KmsError>> {
    let (kms, key) = (kms.clone(), key.clone());
    tokio::spawn(async move { kms.rotate(&key).await })
}

/// Waits until the actor has taken `n` requests other than verify.
async fn taken(handle: &KmsHandle, n: u64) {
    timeout(HANG, async {
        while handle.stats().other_requests < n {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("the actor takes the requests");
}

/// The head version in the store (opened after the actor is gone).
fn head_on_disk(storage: &GatedStorage, key: &KeyId) -> u32 {
    let ks = Keystore::open_with_storage(Box::new(storage.clone()), master().into())
        .unwrap_or_else(|e| panic!("the store does not open after shutdown: {e:?}"));
    ks.attest(key).expect("attest").head.version()
}

/// The new head a rotation answered.
fn written(answer: Result<KeyId, KmsError>) -> u32 {
    match answer {
        Ok(head) => head.version(),
        Err(e) => panic!("expected a rotation, got {e:?}"),
    }
}

/// A store with one key behind a closed gate, and the actor over it.
fn gated() -> (Gate, KmsHandle, KmsClient, KeyId) {
    let storage = GatedStorage::default();
    let (handle, kms, key) = durable_actor(&storage);
    storage.close();
    (Gate(storage), handle, kms, key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_waits_for_the_writes_in_progress() {
    let (gate, handle, kms, key) = gated();
    let held = rotate(&kms, &key);
    taken(&handle, 1).await;
    let queued = rotate(&kms, &key);
    taken(&handle, 2).await;

    let shutdown = tokio::spawn(handle.shutdown());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !shutdown.is_finished(),
        "shutdown returned while a write was held"
    );
    gate.0.open();
    timeout(HANG, shutdown)
        .await
        .expect("shutdown finishes")
        .expect("shutdown");
    // Every write is done, and the keystore released, when it returns.
    let head = head_on_disk(&gate.0, &key);
    let held = written(held.await.expect("task"));
    let queued = written(queued.await.expect("task"));
    assert_eq!(held, 2);
    assert_eq!(queued, 3, "the queued rotation was written last");
    assert_eq!(head, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_write_backlog_answers_overloaded() {
    let (gate, handle, kms, key) = gated();
    let extra = 2;
    let calls: Vec<_> = (0..BACKLOG + extra).map(|_| rotate(&kms, &key)).collect();
    // The refused ones are answered while the backlog is still held.
    timeout(Duration::from_secs(10), async {
        while calls.iter().filter(|c| c.is_finished()).count() < extra {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("requests beyond the backlog are refused at once");
    gate.0.open();
    let mut answers = Vec::new();
    for call in calls {
        answers.push(timeout(HANG, call).await.expect("answered").expect("task"));
    }
    let overloaded = answers
        .iter()
        .filter(|a| **a == Err(KmsError::Overloaded))
        .count();
    assert_eq!(overloaded, extra, "{answers:?}");
    assert!(KmsError::Overloaded.is_retryable());
    // The others were all accepted and written.
    let mut accepted: Vec<u32> = answers
        .into_iter()
        .filter(|a| *a != Err(KmsError::Overloaded))
        .map(written)
        .collect();
    accepted.sort_unstable();
    let expected: Vec<u32> = (2..2 + BACKLOG as u32).collect();
    assert_eq!(accepted, expected);
    handle.shutdown().await;
    assert_eq!(head_on_disk(&gate.0, &key), 1 + BACKLOG as u32);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_caller_has_gone_is_skipped() {
    let (gate, handle, kms, key) = gated();
    let held = rotate(&kms, &key);
    taken(&handle, 1).await;
    // Published (on its first poll), then dropped before its job starts.
    let abandoned = kms.rotate(&key);
    assert!(futures::FutureExt::now_or_never(abandoned).is_none());
    let kept = rotate(&kms, &key);
    taken(&handle, 3).await;
    gate.0.open();
    let held = written(timeout(HANG, held).await.expect("answered").expect("task"));
    let kept = written(timeout(HANG, kept).await.expect("answered").expect("task"));
    handle.shutdown().await;
    let head = head_on_disk(&gate.0, &key);
    assert_eq!(held, 2);
    assert_eq!(kept, head, "the kept rotation was written last");
    assert_eq!(head, 3, "the abandoned rotation did not run");
}

/// Clients may outlive the actor; the store they used must not stay locked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_shutdown_the_store_reopens_while_clients_live() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ks = Keystore::create(dir.path(), master()).expect("create");
    let key = ks.create_ed25519("acme", "tokens").expect("create key");
    let (signer, signature) = ks.sign(&key, b"m").expect("sign");
    let handle = KmsActor::spawn(KmsConfig::default(), ks, &Bus::new()).expect("spawn");
    let kms = handle.client();
    // A lone request on a quiet node: verified on this task (the caller
    // path), with the keystore the actor shares with its clients.
    kms.verify(&signer, &b"m"[..], signature)
        .await
        .expect("valid");
    assert_eq!(handle.stats().caller_verified, 1);
    handle.shutdown().await;
    let reopened = Keystore::open(dir.path(), master());
    assert!(reopened.is_ok(), "still locked: {reopened:?}");
    assert_eq!(
        kms.verify(&signer, &b"m"[..], signature).await,
        Err(KmsError::ShuttingDown),
        "a client that outlives the actor is refused, not served from a stale copy"
    );
}

/// An actor that ends without `shutdown` (its runtime dropped) must not
/// leave its store locked through the clients that outlive it.
#[test]
fn an_actor_dropped_with_its_runtime_leaves_the_store_unlocked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ks = Keystore::create(dir.path(), master()).expect("create");
    let key = ks.create_ed25519("acme", "tokens").expect("create key");
    let (signer, signature) = ks.sign(&key, b"m").expect("sign");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let (handle, kms) = runtime.block_on(async {
        let handle = KmsActor::spawn(KmsConfig::default(), ks, &Bus::new()).expect("spawn");
        let kms = handle.client();
        kms.verify(&signer, &b"m"[..], signature)
            .await
            .expect("valid");
        (handle, kms)
    });
    drop(runtime);
    let reopened = Keystore::open(dir.path(), master());
    assert!(reopened.is_ok(), "still locked: {reopened:?}");
    drop((handle, kms));
}
