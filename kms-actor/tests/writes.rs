//! Create and rotate through the actor on a durable keystore: shutdown
//! waits for writes in progress, the backlog of writes is bounded
//! (`Overloaded`), and a write whose caller has gone is skipped.
//!
//! To hold writes for as long as a test needs, a [`Gate`] makes the
//! store's temporary file a FIFO: no write can finish while the gate is
//! closed (opening the FIFO blocks). When the gate opens, a write blocked
//! there fails (a FIFO cannot be fsynced), and the others use a regular
//! file again. Whether the first write had reached the FIFO when the gate
//! opened is not known, so the tests count successful answers and compare
//! them with the head on disk. Linux only: opening a FIFO read-write never
//! blocks there. `timeout` is only a hang detector.
#![cfg(target_os = "linux")]

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::Duration;

use kms_actor::{KmsActor, KmsClient, KmsConfig, KmsHandle};
use kms_bus::Bus;
use kms_core::seal::SealKey;
use kms_core::{KeyId, Keystore, KmsError};
use tokio::task::JoinHandle;
use tokio::time::timeout;

const HANG: Duration = Duration::from_secs(60);
/// The actor's bound on create and rotate requests accepted and not done.
const BACKLOG: usize = 3;

/// Holds the store's next write while closed (see the module docs).
struct Gate {
    fifo: PathBuf,
    tmp: PathBuf,
    /// The FIFO open read-write once the gate is open.
    open: Option<File>,
}

impl Gate {
    fn close(dir: &Path) -> Gate {
        let fifo = dir.join("gate.fifo");
        // Not the `mkfifo` command: a child forked while another test
        // drops its keystore would hold that store's lock until it execs.
        let owner_rw = rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR;
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, owner_rw).expect("mkfifo");
        let tmp = dir.join("keystore.kms.tmp");
        std::fs::hard_link(&fifo, &tmp).expect("link the FIFO as the temporary file");
        Gate {
            fifo,
            tmp,
            open: None,
        }
    }

    /// Lets writes go on: one blocked at the gate fails, later ones use a
    /// regular file.
    fn open(&mut self) {
        if self.open.is_none() {
            // Unlinked first: a write that starts later makes a regular
            // file. The held write already has the FIFO's inode.
            let _ = std::fs::remove_file(&self.tmp);
            let fifo = OpenOptions::new().read(true).write(true).open(&self.fifo);
            self.open = Some(fifo.expect("open the FIFO"));
        }
    }
}

impl Drop for Gate {
    /// A failing test still releases a held write.
    fn drop(&mut self) {
        self.open();
    }
}

fn master() -> SealKey {
    SealKey::from_bytes("master", 1, &[9; 32]).expect("key")
}

/// An actor over a new durable store in `dir` holding one key.
fn durable_actor(dir: &Path) -> (KmsHandle, KmsClient, KeyId) {
    let ks = Keystore::create(dir, master()).expect("create the store");
    let key = ks.create_ed25519("acme", "tokens").expect("create");
    let config = KmsConfig {
        threads: 1,
        write_backlog: BACKLOG,
        ..KmsConfig::default()
    };
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

/// The head version in the store on disk (opened after the actor is gone).
fn head_on_disk(dir: &Path, key: &KeyId) -> u32 {
    let ks = Keystore::open(dir, master())
        .unwrap_or_else(|e| panic!("the store does not open after shutdown: {e:?}"));
    ks.attest(key).expect("attest").head.version()
}

/// The answer of a rotation that may have been held at the gate: the new
/// head, or `None` if it failed there.
fn written(answer: Result<KeyId, KmsError>) -> Option<u32> {
    match answer {
        Ok(head) => Some(head.version()),
        Err(KmsError::Internal { .. }) => None,
        Err(e) => panic!("expected a rotation or a failure at the gate, got {e:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_waits_for_the_writes_in_progress() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (handle, kms, key) = durable_actor(dir.path());
    let mut gate = Gate::close(dir.path());
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
    gate.open();
    timeout(HANG, shutdown)
        .await
        .expect("shutdown finishes")
        .expect("shutdown");
    // Every write is done, and the keystore released, when it returns.
    let head = head_on_disk(dir.path(), &key);
    let held = written(held.await.expect("task"));
    let queued = written(queued.await.expect("task"));
    assert_eq!(queued, Some(head), "the queued rotation was written last");
    assert_eq!(head, 2 + u32::from(held.is_some()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_write_backlog_answers_overloaded() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (handle, kms, key) = durable_actor(dir.path());
    let mut gate = Gate::close(dir.path());
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
    gate.open();
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
    // The others were all accepted: written, or failed at the gate.
    let accepted: Vec<Option<u32>> = answers
        .into_iter()
        .filter(|a| *a != Err(KmsError::Overloaded))
        .map(written)
        .collect();
    assert_eq!(accepted.len(), BACKLOG);
    assert!(accepted.iter().filter(|a| a.is_none()).count() <= 1);
    handle.shutdown().await;
    let writes = accepted.iter().flatten().count() as u32;
    assert_eq!(head_on_disk(dir.path(), &key), 1 + writes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_caller_has_gone_is_skipped() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (handle, kms, key) = durable_actor(dir.path());
    let mut gate = Gate::close(dir.path());
    let held = rotate(&kms, &key);
    taken(&handle, 1).await;
    // Published (on its first poll), then dropped before its job starts.
    let abandoned = kms.rotate(&key);
    assert!(futures::FutureExt::now_or_never(abandoned).is_none());
    let kept = rotate(&kms, &key);
    taken(&handle, 3).await;
    gate.open();
    let held = written(timeout(HANG, held).await.expect("answered").expect("task"));
    let kept = written(timeout(HANG, kept).await.expect("answered").expect("task"));
    handle.shutdown().await;
    let head = head_on_disk(dir.path(), &key);
    assert_eq!(kept, Some(head), "the kept rotation was written last");
    assert_eq!(
        head,
        2 + u32::from(held.is_some()),
        "the abandoned rotation did not run"
    );
}
