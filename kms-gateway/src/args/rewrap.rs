//! `rewrap`'s flags: the store (`--store`, or a fleet's `--etcd` flags),
//! its current root (as `serve` takes it) and its new root (the same
//! flags prefixed `--to-`), and the [`RewrapConfig`] they make.

use std::path::PathBuf;

use clap::{ArgGroup, Args};

use super::etcd::EtcdArgs;
use super::root::{built, root_of, RootArgs};
use crate::config::{RewrapConfig, RewrapTarget, RootSettings};

/// `gateway rewrap`'s flags (a contract: add, never rename).
#[derive(Args)]
#[command(
    group(ArgGroup::new("keys_backend").required(true).multiple(false)),
    group(
        ArgGroup::new("to_root")
            .args(["to_master_key_file", "to_master_key_pkcs11", "to_master_key_aws_kms"])
            .required(true)
    )
)]
pub(crate) struct RewrapArgs {
    /// The durable keystore's directory (not in use by a running serve).
    #[arg(
        long,
        value_name = "DIR",
        group = "keys_backend",
        requires = "master_key_root"
    )]
    store: Option<PathBuf>,
    #[command(flatten)]
    etcd: EtcdArgs,
    /// Accept secret files readable by their group (never writable by it).
    #[arg(long)]
    allow_group_readable_secrets: bool,
    #[command(flatten)]
    root: RootArgs,
    /// The new root: a new master key file, created mode 0600 (never
    /// overwritten).
    #[arg(long, value_name = "FILE")]
    to_master_key_file: Option<PathBuf>,
    /// The new root: a PKCS#11 module (needs --to-pkcs11-token,
    /// --to-pkcs11-key, --to-pkcs11-pin-file).
    #[arg(long, value_name = "MODULE", requires_all = ["to_pkcs11_token", "to_pkcs11_key", "to_pkcs11_pin_file"])]
    to_master_key_pkcs11: Option<PathBuf>,
    /// The new root's token label.
    #[arg(long, value_name = "LABEL", requires = "to_master_key_pkcs11")]
    to_pkcs11_token: Option<String>,
    /// The new root's key label: an AES-256 secret key with CKA_ENCRYPT
    /// and CKA_DECRYPT.
    #[arg(long, value_name = "LABEL", requires = "to_master_key_pkcs11")]
    to_pkcs11_key: Option<String>,
    /// A file holding the new token's user PIN, a secret file.
    #[arg(long, value_name = "FILE", requires = "to_master_key_pkcs11")]
    to_pkcs11_pin_file: Option<PathBuf>,
    /// The new root: an AWS KMS key (key id, ARN or alias).
    #[arg(long, value_name = "KEY")]
    to_master_key_aws_kms: Option<String>,
    /// The new root's AWS KMS endpoint (default: the region's).
    #[arg(long, value_name = "URL", requires = "to_master_key_aws_kms")]
    to_aws_kms_endpoint: Option<String>,
}

impl RewrapArgs {
    /// The configuration.
    ///
    /// # Errors
    /// A root or a store missing (clap's groups make it unreachable);
    /// `--etcd` in a build without the `etcd` feature; as a usage message.
    pub(crate) fn config(self) -> Result<RewrapConfig, String> {
        let allow_group = self.allow_group_readable_secrets;
        let from = self.root.settings()?.ok_or(
            "give the store's root: --master-key-file, --master-key-pkcs11 or \
                 --master-key-aws-kms",
        )?;
        let to = root_of(
            self.to_master_key_file,
            self.to_master_key_pkcs11,
            self.to_pkcs11_token,
            self.to_pkcs11_key,
            self.to_pkcs11_pin_file,
        )
        .or(self.to_master_key_aws_kms.map(|key| RootSettings::AwsKms {
            key,
            endpoint: self.to_aws_kms_endpoint,
        }))
        .ok_or(
            "give the new root: --to-master-key-file, --to-master-key-pkcs11 or \
             --to-master-key-aws-kms",
        )
        .and_then(|root| {
            built(root)
                .map_err(|_| "--to-master-key-aws-kms needs a build with the aws-kms feature")
        })?;
        let target = match (self.store, self.etcd.etcd.is_some()) {
            (Some(dir), _) => RewrapTarget::Store(dir),
            #[cfg(feature = "etcd")]
            (None, true) => RewrapTarget::Fleet(Box::new(
                self.etcd
                    .fleet(from.clone(), false, false, allow_group)
                    .ok_or("--etcd needs its URLs")?,
            )),
            #[cfg(not(feature = "etcd"))]
            (None, true) => return Err(super::etcd::NOT_BUILT.to_owned()),
            (None, false) => return Err("give --store or --etcd".to_owned()),
        };
        Ok(RewrapConfig {
            target,
            from,
            to,
            allow_group,
        })
    }
}
