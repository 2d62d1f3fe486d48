//! [`Follower`]: applies what other nodes write to this node's keystore.
//!
//! One task on the storage's runtime watches the prefix from the revision
//! after the one this node loaded (or last saw), puts each response's
//! events in the [`crate::mirror::Mirror`] under its lock, and then, off
//! the runtime's workers, has the keystore apply them
//! ([`Keystore::refresh`]). When the watch breaks (a member died, etcd is
//! down, the member lost its leader) it starts again from the revision
//! after the last one seen, on whichever member answers, backing off from
//! 50 ms to 1 s; meanwhile the node serves from memory and
//! `kms_etcd_staleness_seconds` counts up, with a `tracing` warning every
//! 5 s. When the revision to resume from was compacted away, it reads the
//! whole prefix again and applies what differs.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use etcd_client::{EventType, WatchOptions};
use kms_core::{KeyId, Keystore, KmsError};
use tokio::sync::watch;

use crate::metrics as names;
use crate::storage::EtcdStorage;

/// Follows the store for one node's keystore until dropped.
#[derive(Debug)]
pub struct Follower {
    task: tokio::task::JoinHandle<()>,
    state: Arc<State>,
    applied: watch::Receiver<i64>,
}

#[derive(Debug)]
struct State {
    /// Since when this node has had no live watch; `None` while it has.
    stale_since: Mutex<Option<Instant>>,
    /// Times the watch was started again (counts).
    restarts: AtomicU64,
    /// Whether a watch has answered since the follower started.
    synced: AtomicBool,
}

impl State {
    fn stale_since(&self) -> Option<Instant> {
        *self
            .stale_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// How long there has been no live watch (zero while there is one).
    fn staleness(&self) -> Duration {
        self.stale_since()
            .map_or(Duration::ZERO, |since| since.elapsed())
    }

    fn set_stale(&self, stale: bool) {
        let mut since = self
            .stale_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match (stale, *since) {
            (true, None) => *since = Some(Instant::now()),
            (false, Some(_)) => *since = None,
            _ => {}
        }
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Follower {
    /// Starts following `storage` for `keystore` (loaded from it), from
    /// the revision after the one it loaded.
    ///
    /// # Errors
    /// [`KmsError::Internal`] if the storage's runtime cannot start.
    pub fn start(storage: EtcdStorage, keystore: Keystore) -> Result<Follower, KmsError> {
        let state = Arc::new(State {
            stale_since: Mutex::new(None),
            restarts: AtomicU64::new(0),
            synced: AtomicBool::new(false),
        });
        let (tx, applied) = watch::channel(storage.mirror().revision());
        let task = storage.spawn(follow(storage.clone(), keystore, state.clone(), tx))?;
        Ok(Follower {
            task,
            state,
            applied,
        })
    }

    /// How long this node has been without a live watch: zero while it
    /// follows; otherwise its keys may be that stale.
    pub fn staleness(&self) -> Duration {
        self.state.staleness()
    }

    /// Whether this node has followed etcd since it started: true once
    /// the first watch answered (the node then has every change after the
    /// revision it loaded, or is receiving them), and true from then on,
    /// through later outages ([`Follower::staleness`] tells those).
    pub fn synced(&self) -> bool {
        // Relaxed: a flag read on its own, synchronising with nothing.
        self.state.synced.load(Ordering::Relaxed)
    }

    /// Times the watch was started again (counts).
    pub fn watch_restarts(&self) -> u64 {
        // Relaxed: a count read on its own, synchronising with nothing.
        self.state.restarts.load(Ordering::Relaxed)
    }

    /// The watch's resume point (the newest etcd revision whose events all
    /// reached this node), sent after each time the keystore applied news
    /// (wait on it with [`watch::Receiver::changed`]).
    pub fn applied(&self) -> watch::Receiver<i64> {
        self.applied.clone()
    }
}

/// Backoff between watch attempts.
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// How often a stale node says so.
const STALE_WARNING: Duration = Duration::from_secs(5);

async fn follow(
    storage: EtcdStorage,
    keystore: Keystore,
    state: Arc<State>,
    applied: watch::Sender<i64>,
) {
    let mut heads: HashMap<uuid::Uuid, u32> = keystore
        .key_ids()
        .iter()
        .map(|id| (id.uuid(), id.version()))
        .collect();
    let mut backoff = BACKOFF_MIN;
    let mut warned = Instant::now();
    let timeout = storage.config().request_timeout;
    let prefix = storage.inner.prefix.clone();
    let mut first = true;
    // A compaction counts its restart when it is found.
    let mut counted = false;
    loop {
        if !first {
            if !std::mem::take(&mut counted) {
                count_restart(&state);
            }
            state.set_stale(true);
            report_stale(&state, &mut warned);
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
        first = false;
        let start = storage.mirror().revision() + 1;
        let options = WatchOptions::new()
            .with_prefix()
            .with_start_revision(start)
            .with_progress_notify();
        let mut client = storage.inner.client.clone();
        let mut stream =
            match tokio::time::timeout(timeout, client.watch(prefix.as_str(), Some(options))).await
            {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "kms-etcd: the watch does not start");
                    continue;
                }
                Err(_) => continue,
            };
        loop {
            let message = stream.message().await;
            let response = match message {
                Ok(Some(response)) => response,
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(error = %e, "kms-etcd: the watch broke");
                    break;
                }
            };
            if response.compact_revision() > 0 {
                count_restart(&state);
                counted = true;
                // The revision to resume from is gone: read everything.
                match storage.fetch_all().await {
                    Ok((records, revision)) => storage.mirror().read_all(records, revision),
                    Err(_) => break,
                }
            }
            let mut news = false;
            let mut last_event = 0;
            {
                let mut mirror = storage.mirror();
                for event in response.events() {
                    let Some(kv) = event.kv() else { continue };
                    let Some(name) = storage.name_of(kv.key()) else {
                        continue;
                    };
                    let value = match event.event_type() {
                        EventType::Put => Some(kv.value().to_vec()),
                        EventType::Delete => None,
                    };
                    news |= mirror.event(name, value, kv.mod_revision());
                    last_event = last_event.max(kv.mod_revision());
                }
                // The resume point moves with what arrived whole: the last
                // event's revision (etcd cuts responses at revision
                // boundaries), or a progress notification's header; never
                // a created response's header, which is the store's
                // current revision, ahead of the catch-up events.
                if last_event > 0 {
                    mirror.seen(last_event);
                } else if !response.created()
                    && !response.canceled()
                    && response.compact_revision() == 0
                {
                    if let Some(header) = response.header() {
                        mirror.seen(header.revision());
                    }
                }
            }
            // Relaxed: a flag read on its own (`Follower::synced`). A watch
            // canceled at its creation (a role without the prefix) does
            // not count.
            if !response.canceled() {
                state.synced.store(true, Ordering::Relaxed);
            }
            if state.stale_since().is_some() {
                state.set_stale(false);
                metrics::gauge!(names::STALENESS).set(0.0);
            }
            backoff = BACKOFF_MIN;
            if news || response.compact_revision() > 0 {
                apply(&keystore, &storage, &mut heads).await;
                applied.send_replace(storage.mirror().revision());
            }
            if response.canceled() {
                break;
            }
        }
    }
}

/// Has the keystore apply what the mirror holds, off the runtime's
/// workers; records each new head's propagation delay.
async fn apply(keystore: &Keystore, storage: &EtcdStorage, heads: &mut HashMap<uuid::Uuid, u32>) {
    let ks = keystore.clone();
    let refreshed = tokio::task::spawn_blocking(move || ks.refresh()).await;
    let changed: Vec<KeyId> = match refreshed {
        Ok(Ok(changed)) => changed,
        Ok(Err(e)) => {
            tracing::warn!(store = ?storage, error = %e, "kms-etcd: a change from etcd does not apply; this node stops writing until restarted");
            return;
        }
        Err(e) => {
            tracing::warn!(store = ?storage, error = %e, "kms-etcd: applying a change from etcd panicked");
            return;
        }
    };
    let now = SystemTime::now();
    for id in changed {
        let newer = heads.get(&id.uuid()).is_none_or(|&h| h < id.version());
        heads.insert(id.uuid(), id.version());
        if !newer {
            continue;
        }
        let created = keystore
            .attest(&id)
            .ok()
            .and_then(|a| a.versions.last().map(|v| v.created_at));
        if let Some(delay) = created.and_then(|c| now.duration_since(c).ok()) {
            metrics::histogram!(names::PROPAGATION).record(delay.as_secs_f64());
        }
    }
}

fn count_restart(state: &State) {
    // Relaxed: a count, read on its own.
    state.restarts.fetch_add(1, Ordering::Relaxed);
    metrics::counter!(names::WATCH_RESTARTS).increment(1);
}

/// Sets the staleness gauge, and warns every [`STALE_WARNING`].
fn report_stale(state: &State, warned: &mut Instant) {
    let stale = state.staleness();
    metrics::gauge!(names::STALENESS).set(stale.as_secs_f64());
    if warned.elapsed() >= STALE_WARNING {
        *warned = Instant::now();
        tracing::warn!(
            stale_s = stale.as_secs_f64(),
            "kms-etcd: no live watch on etcd; this node's keys may be this stale (changes still go to etcd, and answer Unavailable if it does not answer)"
        );
    }
}
