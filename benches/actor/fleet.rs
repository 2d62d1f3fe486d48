//! A fleet node for `actor/throughput/keystore_fleet*`: a keystore on a
//! one-member etcd (started on loopback ports in a temporary directory,
//! killed on drop) that follows the prefix with a live watch, and a second
//! node on the same prefix that can rotate the measured node's keys in the
//! background.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kms::core::seal::{Keyring, SealKey};
use kms::core::{KeyId, Keystore};
use kms::etcd::{EtcdConfig, Follower};
use tokio::runtime::Runtime;

use crate::keyed::Keyed;
use kms_testkit::etcd::EtcdCluster;

/// How often the second node rotates one of the keys while
/// `keystore_fleet_rotating` runs: each key in turn.
pub(crate) const ROTATE_EVERY: Duration = Duration::from_millis(100);

/// The measured node and the one that rotates. Fields drop in order: the
/// nodes stop following before etcd is killed.
pub(crate) struct Fleet {
    /// The measured node: its keys, items and actor.
    pub(crate) node: Keyed,
    keystore: Keystore,
    _follower: Follower,
    other: Keystore,
    _other_follower: Follower,
    _cluster: EtcdCluster,
}

/// Background rotations from the second node; [`Rotating::stop`] ends them.
pub(crate) struct Rotating<'a> {
    fleet: &'a Fleet,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<u64>,
}

fn keyring() -> Keyring {
    Keyring::from(SealKey::from_bytes("bench-master", 1, &[7u8; 32]).expect("seal key"))
}

impl Fleet {
    /// Starts etcd, opens the measured node (creating its keys and items
    /// there, `Keyed::new`) and then the second node, which loads them.
    ///
    /// # Panics
    /// If etcd cannot start (no `etcd` binary: the message says how to
    /// install it) or a node cannot open.
    pub(crate) fn start(rt: &Runtime) -> Fleet {
        let cluster = EtcdCluster::start(1)
            .unwrap_or_else(|e| panic!("actor/throughput/keystore_fleet needs etcd: {e}"));
        let config = EtcdConfig::new(cluster.endpoints())
            .with_prefix("/kms-bench")
            .with_create(true);
        let (keystore, follower) = kms::etcd::open(config.clone(), keyring()).expect("open");
        let node = Keyed::new(rt, keystore.clone());
        let (other, other_follower) = kms::etcd::open(config, keyring()).expect("open");
        Fleet {
            node,
            keystore,
            _follower: follower,
            other,
            _other_follower: other_follower,
            _cluster: cluster,
        }
    }

    /// Starts rotating the measured node's keys from the second node, one
    /// key every [`ROTATE_EVERY`].
    pub(crate) fn rotating(&self) -> Rotating<'_> {
        let stop = Arc::new(AtomicBool::new(false));
        let (other, keys, flag) = (
            self.other.clone(),
            self.node.keys.clone(),
            Arc::clone(&stop),
        );
        let thread = std::thread::spawn(move || {
            let mut rotations = 0u64;
            // Relaxed: a flag read on its own; the join synchronises.
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(ROTATE_EVERY);
                let key = &keys[usize::try_from(rotations).expect("usize") % keys.len()];
                other.rotate(key).expect("rotate on the second node");
                rotations += 1;
            }
            rotations
        });
        Rotating {
            fleet: self,
            stop,
            thread,
        }
    }

    /// Each key's head version on `keystore`.
    fn heads(&self, keystore: &Keystore) -> Vec<u32> {
        self.node
            .keys
            .iter()
            .map(|k: &KeyId| keystore.attest(k).expect("attest").head.version())
            .collect()
    }
}

impl Rotating<'_> {
    /// Stops the rotations and waits (at most 10 s) until the measured node
    /// holds every one; the number of rotations.
    ///
    /// # Panics
    /// If a rotation failed or the measured node did not follow.
    pub(crate) fn stop(self) -> u64 {
        // Relaxed: see the thread's load.
        self.stop.store(true, Ordering::Relaxed);
        let rotations = self.thread.join().expect("rotating thread");
        let fleet = self.fleet;
        let deadline = Instant::now() + Duration::from_secs(10);
        while fleet.heads(&fleet.keystore) != fleet.heads(&fleet.other) {
            assert!(
                Instant::now() < deadline,
                "the measured node did not follow the rotations"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        rotations
    }
}
