//! Requests that name a keystore key by its version's id, as a gateway's
//! tokens do (`kid`): the items of `actor/throughput/keystore_*`, and the
//! actor that verifies them.

use std::sync::Arc;

use bytes::Bytes;
use kms::actor::{KmsActor, KmsClient, KmsConfig, KmsHandle};
use kms::bus::Bus;
use kms::core::{KeyId, Keystore, KmsError};
use tokio::runtime::Runtime;

use crate::{Request, ITEMS, THREADS};

/// Keys per keystore (counts).
pub(crate) const KEYS: usize = 64;
/// Versions of each key the items are signed by (counts): versions 1 to
/// `VERSIONS`, each verifiable until the key is trimmed.
pub(crate) const VERSIONS: usize = 4;

/// One item: the id of the key version that signed it, the message and the
/// signature.
pub(crate) struct KeyedItem {
    key: KeyId,
    message: Bytes,
    signature: [u8; 64],
}

impl Request for KeyedItem {
    fn verify(
        &self,
        kms: &KmsClient,
    ) -> impl std::future::Future<Output = Result<(), KmsError>> + Send {
        kms.verify(&self.key, self.message.clone(), self.signature)
    }
}

/// A keystore with `KEYS` keys, its actor, and `ITEMS` items signed by
/// them.
pub(crate) struct Keyed {
    /// Version 1's id of each key (the fleet bench rotates them).
    #[cfg_attr(not(feature = "etcd"), allow(dead_code))]
    pub(crate) keys: Vec<KeyId>,
    /// The items, in an order that names a different key from one request
    /// to the next.
    pub(crate) items: Arc<Vec<KeyedItem>>,
    handle: KmsHandle,
}

impl Keyed {
    /// Creates `KEYS` keys in `keystore`, rotates each to `VERSIONS`
    /// versions, signs `ITEMS / (KEYS × VERSIONS)` messages with each
    /// version, and spawns an actor on `keystore` (a 2-thread pool, the
    /// defaults otherwise) on `rt`.
    pub(crate) fn new(rt: &Runtime, keystore: Keystore) -> Keyed {
        let per_version = ITEMS / (KEYS * VERSIONS);
        let mut keys = Vec::with_capacity(KEYS);
        let mut signed = Vec::with_capacity(ITEMS);
        for k in 0..KEYS {
            let first = keystore.create_ed25519("bench", "tokens").expect("create");
            let mut head = first.clone();
            for v in 0..VERSIONS {
                if v > 0 {
                    head = keystore.rotate(&head).expect("rotate");
                }
                for j in 0..per_version {
                    let message = format!("{{\"sub\":\"user-{k}-{v}-{j}\",\"scope\":\"read\"}}");
                    let (key, signature) = keystore.sign(&head, message.as_bytes()).expect("sign");
                    signed.push(KeyedItem {
                        key,
                        message: Bytes::from(message),
                        signature,
                    });
                }
            }
            keys.push(first);
        }
        // ITEMS is a power of two: multiplying the index by an odd number
        // modulo ITEMS is a permutation, and this one puts items of one key
        // far apart.
        let mut slots: Vec<Option<KeyedItem>> = signed.into_iter().map(Some).collect();
        let items = (0..ITEMS)
            .map(|i| slots[(i * 1021) % ITEMS].take().expect("a permutation"))
            .collect();
        let _guard = rt.enter();
        let handle = KmsActor::spawn(
            KmsConfig::default().with_threads(THREADS),
            keystore,
            &Bus::new(),
        )
        .expect("spawn");
        Keyed {
            keys,
            items: Arc::new(items),
            handle,
        }
    }

    /// The actor's client.
    pub(crate) fn client(&self) -> KmsClient {
        self.handle.client()
    }

    /// Stops the actor.
    pub(crate) async fn shutdown(self) {
        self.handle.shutdown().await;
    }
}
