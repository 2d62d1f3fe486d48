//! A shared store on etcd v3 for the embedded KMS: the nodes of a fleet
//! keep one keystore in etcd and agree on its keys.
//!
//! * [`EtcdStorage`] is a [`kms_core::storage::Storage`] whose records live
//!   under a prefix in etcd (default `/kms`), each change one transaction
//!   that compares every record it touches, so two nodes changing one key
//!   at once serialise: one lands, the other plans again on its result
//!   (bounded, then [`kms_core::KmsError::Conflict`]).
//! * Every node serves reads, signing and verification from memory; a
//!   [`Follower`] watches the prefix and applies what other nodes write
//!   ([`kms_core::Keystore::refresh`]).
//! * [`open`] does both: connects, opens the keystore (or starts it, once
//!   for the whole fleet), and starts following.
//!
//! Invariants:
//! * Private keys reach etcd only sealed under the master key every node
//!   holds (XChaCha20-Poly1305, `kms_core::seal`), bound to their record's
//!   name and per-key sequence; ordering and rollback protection come from
//!   that sequence, checked on every load and every change applied (not
//!   from envelope counters: a master key's counter is per process, and
//!   the nodes seal with random nonces).
//! * A node whose master key does not open the records refuses to start
//!   ([`kms_core::KmsError::Seal`]) and writes nothing.
//! * Each change is one etcd transaction: all of it lands or none.
//!
//! Build needs `protoc` (etcd-client compiles etcd's protocol files).

#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used)]
#![warn(missing_debug_implementations, unreachable_pub)]

mod config;
mod follow;
pub mod metrics;
mod mirror;
mod storage;

use kms_core::root::{MasterKeyRoot, RootRecord};
use kms_core::seal::Keyring;
use kms_core::{Keystore, KmsError};

pub use config::{EtcdConfig, EtcdTls, EtcdUser, DEFAULT_PREFIX, MAX_REQUEST_TIMEOUT};
pub use follow::Follower;
pub use storage::EtcdStorage;

/// Joins the fleet whose store `config` names: connects, opens the
/// keystore under `keyring` (with [`EtcdConfig::create`], starting an
/// empty one if the prefix holds none; nodes starting at once end up with
/// one), and follows it. Keep the
/// [`Follower`] as long as the keystore is used: dropping it stops
/// following (the keystore then serves what it has; each change it makes
/// still builds on etcd's newest state, learnt from the conflict it meets).
///
/// # Errors
/// [`KmsError::InvalidConfig`] for an invalid `config`, or a prefix that
/// nests with another fleet's store on the cluster (nothing is written);
/// [`KmsError::StoreNotFound`] for a prefix that holds no store without
/// [`EtcdConfig::create`] (nothing is written);
/// [`KmsError::Unavailable`] if etcd does not answer within the request
/// timeout; [`KmsError::Seal`] if the keyring does not open the store (a
/// wrong master key: nothing is written); [`KmsError::StoreCorrupt`] if
/// the records do not form one whole store.
pub fn open(config: EtcdConfig, keyring: Keyring) -> Result<(Keystore, Follower), KmsError> {
    let create = config.create;
    let storage = EtcdStorage::connect(config)?;
    let keystore = if create {
        Keystore::open_or_create_with_storage(Box::new(storage.clone()), keyring)?
    } else {
        Keystore::open_with_storage(Box::new(storage.clone()), keyring)?
    };
    let follower = Follower::start(storage, keystore.clone())?;
    Ok((keystore, follower))
}

/// Joins the fleet whose store `config` names under the root of trust
/// `root` (`kms_core::root`), as [`open`] does with a keyring: the
/// store's root record (`<prefix>/root`) names the root and holds the
/// master key wrapped by it, which `root` unwraps once (its `SealKey`
/// named `key_id`, version 1); with [`EtcdConfig::create`], the first node
/// of a new fleet writes the record (a wrapping root's key is 32 new
/// random bytes), and nodes starting at once agree on it. A store without
/// a record is under a file root.
///
/// # Errors
/// As [`open`]; [`KmsError::WrongRoot`] if the store records another kind
/// of root; [`KmsError::Root`] if `root` cannot unwrap its key (nothing is
/// written).
pub fn open_under(
    config: EtcdConfig,
    root: &dyn MasterKeyRoot,
    key_id: &str,
) -> Result<(Keystore, Follower), KmsError> {
    let create = config.create;
    let storage = EtcdStorage::connect(config)?;
    let keystore =
        Keystore::open_under_with_storage(Box::new(storage.clone()), root, key_id, create)?;
    let follower = Follower::start(storage, keystore.clone())?;
    Ok((keystore, follower))
}

/// Moves the fleet's store to another root of trust
/// (`kms_core::Keystore::move_to_root_in_storage`): the same master key,
/// unwrapped by `from` and checked against every record, wrapped anew by
/// `to`, and the root record swapped in one transaction. Running nodes
/// keep the key they hold; each picks up the new root when restarted with
/// it.
///
/// # Errors
/// As `Keystore::move_to_root_in_storage`; [`KmsError::Unavailable`] if
/// etcd does not answer.
pub fn move_to_root(
    config: EtcdConfig,
    from: &dyn MasterKeyRoot,
    to: &dyn MasterKeyRoot,
    key_id: &str,
) -> Result<RootRecord, KmsError> {
    let storage = EtcdStorage::connect(config)?;
    Keystore::move_to_root_in_storage(Box::new(storage), from, to, key_id)
}
