//! The flags that reach a fleet's store on etcd, shared by `serve` and
//! `rewrap`: `--etcd` and its prefix, TLS and user.

use std::path::PathBuf;

use clap::Args;

use crate::config;

/// What `--etcd` answers in a build without the `etcd` feature.
#[cfg(not(feature = "etcd"))]
pub(crate) const NOT_BUILT: &str = "--etcd needs a build with the etcd feature: cargo install \
     --path kms-gateway --features etcd, then kms-gateway serve --etcd URL ...";

/// A fleet's store on etcd (a contract: add, never rename).
#[derive(Args)]
pub(crate) struct EtcdArgs {
    /// A fleet's shared keystore on etcd: its client URLs, comma-separated
    /// (needs the fleet's root: --master-key-file, --master-key-pkcs11 or
    /// --master-key-aws-kms; a build with --features etcd).
    #[arg(
        long,
        group = "keys_backend",
        requires = "master_key_root",
        value_name = "URL[,URL...]"
    )]
    pub(crate) etcd: Option<String>,
    /// The etcd key prefix of the fleet's records.
    #[arg(long, requires = "etcd", default_value = config::ETCD_PREFIX)]
    pub(crate) etcd_prefix: String,
    /// The CA certificate (PEM) etcd's members' certificates chain to:
    /// TLS to etcd (the --etcd URLs then https://).
    #[arg(long, requires = "etcd", value_name = "FILE")]
    pub(crate) etcd_ca: Option<PathBuf>,
    /// This node's client certificate for etcd (PEM; needs --etcd-key and
    /// --etcd-ca).
    #[arg(long, requires_all = ["etcd_key", "etcd_ca"], value_name = "FILE")]
    pub(crate) etcd_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM), a secret file.
    #[arg(long, requires = "etcd_cert", value_name = "FILE")]
    pub(crate) etcd_key: Option<PathBuf>,
    /// The etcd user this node authenticates as (needs
    /// --etcd-password-file).
    #[arg(long, requires_all = ["etcd", "etcd_password_file"], value_name = "NAME")]
    pub(crate) etcd_user: Option<String>,
    /// A file holding the etcd user's password, a secret file.
    #[arg(long, requires = "etcd_user", value_name = "FILE")]
    pub(crate) etcd_password_file: Option<PathBuf>,
}

impl EtcdArgs {
    /// The fleet these flags reach under `root`, with `create` and
    /// `compact` (`serve`'s `--etcd-create`, `--etcd-compact`); `None`
    /// without `--etcd`.
    #[cfg(feature = "etcd")]
    pub(crate) fn fleet(
        self,
        root: config::RootSettings,
        create: bool,
        compact: bool,
        allow_group: bool,
    ) -> Option<config::FleetSettings> {
        Some(config::FleetSettings {
            endpoints: self.etcd?,
            prefix: self.etcd_prefix,
            ca: self.etcd_ca,
            client: self
                .etcd_cert
                .zip(self.etcd_key)
                .map(|(cert, key)| config::CertFiles { cert, key }),
            user: self.etcd_user.zip(self.etcd_password_file),
            create,
            compact,
            root,
            allow_group,
        })
    }
}
