//! One fleet node as a gateway embeds it: its keystore on etcd, the
//! follower that applies the other nodes' writes, the KMS actor that signs
//! and verifies tokens, and when each version of the signing key became
//! visible here.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use kms::actor::{KmsActor, KmsClient, KmsConfig, KmsHandle};
use kms::bus::Bus;
use kms::core::seal::Keyring;
use kms::core::{KeyId, Keystore, KmsError};
use kms::etcd::{EtcdConfig, Follower};

/// The signing key's tenant and purpose, the same on every node.
pub(crate) const TENANT: &str = "fleet";
pub(crate) const PURPOSE: &str = "tokens";

/// A running node.
pub(crate) struct Node {
    pub(crate) keystore: Keystore,
    pub(crate) follower: Follower,
    handle: KmsHandle,
    /// The signing key (version 1's id), found through its pointer.
    pub(crate) key: KeyId,
    /// `seen[v - 1]`: when version `v` was first seen here.
    seen: Mutex<Vec<Instant>>,
}

impl Node {
    /// Opens the fleet's keystore (creating the store if the prefix is
    /// empty) and finds the signing key through its pointer, creating it if
    /// there is none. Blocking (etcd requests).
    ///
    /// # Errors
    /// The errors of `kms_etcd::open` and `Keystore::signing_key`.
    pub(crate) fn open(config: EtcdConfig, keyring: Keyring) -> Result<Opened, KmsError> {
        let (keystore, follower) = kms::etcd::open(config, keyring)?;
        let key = keystore.signing_key(TENANT, PURPOSE)?;
        Ok(Opened {
            keystore,
            follower,
            key,
        })
    }

    /// The actor's client: sign and verify as the gateway does.
    pub(crate) fn client(&self) -> KmsClient {
        self.handle.client()
    }

    /// Whether version `version` of the signing key is here.
    pub(crate) fn has(&self, version: u32) -> bool {
        let key = &self.key;
        KeyId::new(key.tenant(), key.purpose(), key.alg(), key.uuid(), version)
            .is_ok_and(|id| self.keystore.public_key(&id).is_ok())
    }

    /// Records the versions that became visible since the last scan.
    pub(crate) fn scan(&self) {
        let now = Instant::now();
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        while let Ok(next) = u32::try_from(seen.len() + 1) {
            if !self.has(next) {
                break;
            }
            seen.push(now);
        }
    }

    /// When version `version` was first seen here.
    pub(crate) fn seen(&self, version: u32) -> Option<Instant> {
        let index = usize::try_from(version.checked_sub(1)?).ok()?;
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(index)
            .copied()
    }

    /// The signing key's head version here.
    pub(crate) fn head(&self) -> u32 {
        self.keystore
            .attest(&self.key)
            .map_or(0, |a| a.head.version())
    }

    /// Waits (at most `limit`, polling every millisecond) until version
    /// `version` is here; whether it came.
    pub(crate) async fn wait_for(&self, version: u32, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while !self.has(version) {
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        true
    }

    /// Stops the actor.
    pub(crate) async fn shutdown(self) {
        self.handle.shutdown().await;
    }
}

/// A node's keystore, opened but not yet serving.
pub(crate) struct Opened {
    keystore: Keystore,
    follower: Follower,
    key: KeyId,
}

impl Opened {
    /// Spawns the actor (on the current tokio runtime) and a task that
    /// scans for new versions each time the follower applies news.
    ///
    /// # Errors
    /// The errors of `KmsActor::spawn`.
    pub(crate) fn serve(self) -> Result<Arc<Node>, KmsError> {
        let config = KmsConfig::default().with_token_purposes(vec![PURPOSE.to_owned()]);
        let handle = KmsActor::spawn(config, self.keystore.clone(), &Bus::new())?;
        let mut applied = self.follower.applied();
        let node = Arc::new(Node {
            keystore: self.keystore,
            follower: self.follower,
            handle,
            key: self.key,
            seen: Mutex::new(Vec::new()),
        });
        node.scan();
        let watched = Arc::downgrade(&node);
        tokio::spawn(async move {
            while applied.changed().await.is_ok() {
                match watched.upgrade() {
                    Some(node) => node.scan(),
                    None => break,
                }
            }
        });
        Ok(node)
    }
}
