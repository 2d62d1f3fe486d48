//! `serve`'s keys backend: a durable keystore in a directory (`--store`)
//! or a fleet's keystore shared through etcd (`--etcd`, a build with the
//! `etcd` feature). Without either, `serve` keeps its keys in memory.

use std::path::Path;

use kms::core::seal::SealKey;
use kms::core::{Keystore, KmsError};

/// Opens the store in `dir`, or creates one in an absent or empty
/// directory; a non-empty directory without a store is an error. `master`
/// reads the master key (once per attempt: a `SealKey` is not `Clone`).
pub(crate) fn open_store(
    dir: &Path,
    master: impl Fn() -> Result<SealKey, String>,
) -> Result<Keystore, String> {
    let what = |e: &dyn std::fmt::Display| format!("--store {}: {e}", dir.display());
    match Keystore::open(dir, master()?) {
        Ok(ks) => Ok(ks),
        Err(KmsError::StoreNotFound { .. }) => {
            let empty = match std::fs::read_dir(dir) {
                Ok(mut entries) => entries.next().is_none(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
                Err(e) => return Err(what(&e)),
            };
            if !empty {
                return Err(what(
                    &"is not empty and holds no keystore; refusing to create one there",
                ));
            }
            Keystore::create(dir, master()?).map_err(|e| what(&e))
        }
        Err(e) => Err(what(&e)),
    }
}

/// Joins the fleet on the etcd cluster at `endpoints` (comma-separated),
/// records under `prefix`, with the fleet's master key (`allow_group`:
/// `--allow-group-readable-secrets`).
#[cfg(feature = "etcd")]
pub(crate) async fn open_fleet(
    endpoints: &str,
    prefix: &str,
    key_file: &Path,
    allow_group: bool,
) -> Result<(Keystore, kms::etcd::Follower), String> {
    let what = |e: &dyn std::fmt::Display| format!("--etcd {endpoints}: {e}");
    let config =
        kms::etcd::EtcdConfig::new(endpoints.split(',').map(str::trim)).with_prefix(prefix);
    let keyring =
        kms::core::seal::Keyring::from(crate::secrets::master_key(key_file, allow_group)?);
    // Blocking calls (it waits for etcd): off the runtime's workers.
    tokio::task::spawn_blocking(move || kms::etcd::open(config, keyring))
        .await
        .map_err(|e| what(&e))?
        .map_err(|e| what(&e))
}
