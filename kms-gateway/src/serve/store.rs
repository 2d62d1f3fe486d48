//! `serve`'s keys backend: a durable keystore in a directory (`--store`)
//! or a fleet's keystore shared through etcd (`--etcd`, a build with the
//! `etcd` feature). Without either, `serve` keeps its keys in memory.

use std::path::Path;

use kms::core::root::MasterKeyRoot;
use kms::core::{Keystore, KmsError};

use crate::config::StoreSettings;
use crate::roots;

/// What keeps a fleet node's keystore following the others' changes,
/// held while serving.
#[cfg(feature = "etcd")]
pub(crate) type Follower = kms::etcd::Follower;

/// A build without the `etcd` feature has no fleet to follow.
#[cfg(not(feature = "etcd"))]
#[derive(Debug)]
pub(crate) enum Follower {}

/// Whether a fleet node has followed etcd since it started
/// (`kms::etcd::Follower::synced`).
#[cfg(feature = "etcd")]
pub(crate) fn synced(follower: &Follower) -> bool {
    follower.synced()
}

/// A build without the `etcd` feature has no follower to ask.
#[cfg(not(feature = "etcd"))]
pub(crate) fn synced(follower: &Follower) -> bool {
    match *follower {}
}

/// The keystore `settings` name, and on a fleet what follows it.
///
/// # Errors
/// The master key's file refused, the store's refusals (`open_store`,
/// `open_fleet`), as a message naming the flag.
pub(crate) async fn open(settings: &StoreSettings) -> Result<(Keystore, Option<Follower>), String> {
    match settings {
        StoreSettings::Memory => Ok((Keystore::new(), None)),
        StoreSettings::Durable {
            dir,
            root,
            allow_group,
        } => {
            // Blocking calls (the store's file, the token or the KMS): off
            // the runtime's workers, and the root dropped there.
            let (dir, root, allow_group) = (dir.clone(), root.clone(), *allow_group);
            let keystore = tokio::task::spawn_blocking(move || {
                let root = roots::master_key_root(&root, allow_group)?;
                open_store(&dir, root.as_ref())
            })
            .await
            .map_err(|e| format!("opening the store: {e}"))??;
            Ok((keystore, None))
        }
        #[cfg(feature = "etcd")]
        StoreSettings::Fleet(fleet) => {
            let (keystore, follower) = open_fleet(fleet).await?;
            Ok((keystore, Some(follower)))
        }
    }
}

/// A store's refusal in words: `what` names the store; a store under
/// another root says which flags give it; a root's failure names the
/// root.
fn refusal(e: KmsError, what: &dyn Fn(&dyn std::fmt::Display) -> String) -> String {
    match e {
        KmsError::WrongRoot { expected, .. } => {
            format!("{}; give {}", what(&e), roots::flags(expected))
        }
        e @ KmsError::Root { .. } => e.to_string(),
        e => what(&e),
    }
}

/// Opens the store in `dir` under `root`, or creates one in an absent
/// directory or one holding nothing but a crashed create's leftovers
/// (`Keystore::leftovers_only`); any other directory without a store is
/// an error.
///
/// # Errors
/// The store's refusals, as a message naming `--store` and, for a store
/// under another root, the flags that give its own; the root's failures
/// naming the root (its token and key labels; never the PIN).
fn open_store(dir: &Path, root: &dyn MasterKeyRoot) -> Result<Keystore, String> {
    let what = |e: &dyn std::fmt::Display| format!("--store {}: {e}", dir.display());
    let refused = |e: KmsError| refusal(e, &what);
    match Keystore::open_under(dir, root, roots::MASTER_KEY_ID) {
        Ok(ks) => Ok(ks),
        Err(KmsError::StoreNotFound { .. }) => {
            let leftovers_only = Keystore::leftovers_only(dir).map_err(|e| what(&e))?;
            if !leftovers_only {
                return Err(what(
                    &"is not empty and holds no keystore; refusing to create one there",
                ));
            }
            Keystore::create_under(dir, root, roots::MASTER_KEY_ID).map_err(refused)
        }
        Err(e) => Err(refused(e)),
    }
}

/// Whether an `--etcd` URL is plain HTTP (`http://`, or no scheme) to a
/// host that is not loopback (`localhost`, 127.0.0.0/8, `::1`).
#[cfg(feature = "etcd")]
fn plain_remote(endpoint: &str) -> bool {
    let rest = match endpoint.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
        Some(_) => return false,
        None => endpoint,
    };
    let authority = rest.split('/').next().unwrap_or(rest);
    let host = match authority.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or(bracketed),
        None => authority.split(':').next().unwrap_or(authority),
    };
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    !loopback
}

/// The etcd configuration of a fleet: `--etcd` (comma-separated URLs),
/// records under `--etcd-prefix`, over TLS with `--etcd-ca` (and a client
/// certificate with `--etcd-cert` and `--etcd-key`), as `--etcd-user` with
/// `--etcd-password-file`; starting a store only with `--etcd-create`,
/// compacting after removals with `--etcd-compact`. Every secret file is
/// read as `secrets::read_secret` reads them; plain HTTP to another host
/// is warned about.
///
/// # Errors
/// A file that cannot be read or is refused, named.
#[cfg(feature = "etcd")]
pub(crate) fn etcd_config(
    fleet: &crate::config::FleetSettings,
) -> Result<kms::etcd::EtcdConfig, String> {
    use crate::logging::warn_line;
    use crate::serve::secrets::read_secret;
    use kms::etcd::{EtcdConfig, EtcdTls, EtcdUser};
    let endpoints = fleet.endpoints.as_str();
    let allow_group = fleet.allow_group;
    for endpoint in endpoints.split(',').map(str::trim) {
        if plain_remote(endpoint) {
            warn_line!(
                "gateway: warning: --etcd {endpoint} is plain HTTP to another host: the \
                 fleet's sealed records cross the network unauthenticated (give --etcd-ca and \
                 https:// URLs)"
            );
        }
    }
    let mut config = EtcdConfig::new(endpoints.split(',').map(str::trim))
        .with_prefix(fleet.prefix.clone())
        .with_create(fleet.create)
        .with_compact(fleet.compact);
    if let Some(ca) = &fleet.ca {
        let ca_pem = crate::files::read_trusted(ca, "--etcd-ca")?;
        let client = match &fleet.client {
            Some(files) => Some((
                std::fs::read(&files.cert)
                    .map_err(|e| format!("--etcd-cert {}: {e}", files.cert.display()))?,
                read_secret(&files.key, "--etcd-key", allow_group)?,
            )),
            None => None,
        };
        config = config.with_tls(EtcdTls { ca_pem, client });
    }
    if let Some((name, file)) = &fleet.user {
        let text = read_secret(file, "--etcd-password-file", allow_group)?;
        let password = std::str::from_utf8(text.trim_ascii_end())
            .map_err(|_| format!("--etcd-password-file {}: not UTF-8", file.display()))?;
        config = config.with_user(EtcdUser {
            name: name.clone(),
            password: zeroize::Zeroizing::new(password.to_owned()),
        });
    }
    Ok(config)
}

/// Joins the fleet ([`etcd_config`]) under its root of trust.
///
/// # Errors
/// [`etcd_config`]'s; kms-etcd's errors, named (an empty prefix without
/// `--etcd-create` says to pass it; a store under another root names the
/// flags of its own).
#[cfg(feature = "etcd")]
async fn open_fleet(
    fleet: &crate::config::FleetSettings,
) -> Result<(Keystore, kms::etcd::Follower), String> {
    let endpoints = fleet.endpoints.as_str();
    let allow_group = fleet.allow_group;
    let what = |e: &dyn std::fmt::Display| format!("--etcd {endpoints}: {e}");
    let config = etcd_config(fleet)?;
    let root = fleet.root.clone();
    // Blocking calls (it waits for etcd and the token or the KMS): off the
    // runtime's workers, and the root dropped there.
    let opened = tokio::task::spawn_blocking(move || {
        let root = roots::master_key_root(&root, allow_group).map_err(Err)?;
        kms::etcd::open_under(config, root.as_ref(), roots::MASTER_KEY_ID).map_err(Ok)
    })
    .await
    .map_err(|e| what(&e))?;
    let opened = match opened {
        Ok(opened) => Ok(opened),
        Err(Err(message)) => return Err(message),
        Err(Ok(e)) => Err(e),
    };
    match opened {
        Ok(fleet) => Ok(fleet),
        Err(KmsError::StoreNotFound { .. }) => Err(what(&format!(
            "the prefix {} holds no store; pass --etcd-create to start one (the fleet's \
             first start)",
            fleet.prefix
        ))),
        Err(e) => Err(refusal(e, &what)),
    }
}

#[cfg(all(test, feature = "etcd"))]
mod tests {
    use super::plain_remote;

    #[test]
    fn plain_http_off_loopback_is_told() {
        for remote in [
            "http://10.0.0.5:2379",
            "etcd.internal:2379",
            "HTTP://[fd00::1]:2379",
            "http://0.0.0.0:2379",
        ] {
            assert!(plain_remote(remote), "{remote}");
        }
        for fine in [
            "http://127.0.0.1:2379",
            "http://localhost:2379",
            "http://[::1]:2379",
            "127.0.0.2:2379",
            "https://10.0.0.5:2379",
        ] {
            assert!(!plain_remote(fine), "{fine}");
        }
    }
}
