//! The master key's root flags, shared by `serve` and `rewrap` (its
//! current root): `--master-key-file`, or `--master-key-pkcs11` with
//! `--pkcs11-token`, `--pkcs11-key` and `--pkcs11-pin-file`, or
//! `--master-key-aws-kms` with `--aws-kms-endpoint`. At most one root (the
//! group `master_key_root`), and each only with a store (`--store` or
//! `--etcd`, the group `keys_backend`).

use std::path::PathBuf;

use clap::{ArgGroup, Args};

use crate::config::RootSettings;

/// The master key's root (a contract: add, never rename).
#[derive(Args)]
#[command(group(
    ArgGroup::new("master_key_root")
        .args(["master_key_file", "master_key_pkcs11", "master_key_aws_kms"])
        .multiple(false)
))]
pub(crate) struct RootArgs {
    /// The master key: 32 bytes as 64 hex characters, not world-readable.
    #[arg(long, requires = "keys_backend")]
    master_key_file: Option<PathBuf>,
    /// The store's master key wrapped by an AES-256 key in a PKCS#11
    /// token, through this module (a shared library's path; needs
    /// --pkcs11-token, --pkcs11-key and --pkcs11-pin-file; with --store or
    /// --etcd).
    #[arg(
        long,
        value_name = "MODULE",
        requires_all = ["keys_backend", "pkcs11_token", "pkcs11_key", "pkcs11_pin_file"]
    )]
    master_key_pkcs11: Option<PathBuf>,
    /// The label of the PKCS#11 token holding the wrapping key.
    #[arg(long, value_name = "LABEL", requires = "master_key_pkcs11")]
    pkcs11_token: Option<String>,
    /// The label of the wrapping key: an AES-256 secret key object with
    /// CKA_ENCRYPT and CKA_DECRYPT.
    #[arg(long, value_name = "LABEL", requires = "master_key_pkcs11")]
    pkcs11_key: Option<String>,
    /// A file holding the token's user PIN, a secret file (a trailing
    /// newline is ignored).
    #[arg(long, value_name = "FILE", requires = "master_key_pkcs11")]
    pkcs11_pin_file: Option<PathBuf>,
    /// The store's master key wrapped by an AWS KMS key: its key id, key
    /// ARN, alias name (alias/...) or alias ARN; region and credentials
    /// from the AWS SDK's standard chain (a build with --features aws-kms).
    #[arg(long, value_name = "KEY", requires = "keys_backend")]
    master_key_aws_kms: Option<String>,
    /// The AWS KMS endpoint, for VPC endpoints and emulators (default: the
    /// region's).
    #[arg(long, value_name = "URL", requires = "master_key_aws_kms")]
    aws_kms_endpoint: Option<String>,
}

impl RootArgs {
    /// The root given, if any (clap has checked that at most one is, with
    /// its companions).
    ///
    /// # Errors
    /// A root this build lacks ([`built`]).
    pub(crate) fn settings(self) -> Result<Option<RootSettings>, String> {
        let root = root_of(
            self.master_key_file,
            self.master_key_pkcs11,
            self.pkcs11_token,
            self.pkcs11_key,
            self.pkcs11_pin_file,
        )
        .or(self.master_key_aws_kms.map(|key| RootSettings::AwsKms {
            key,
            endpoint: self.aws_kms_endpoint,
        }));
        root.map(built).transpose()
    }
}

/// `root`, if this build has it.
///
/// # Errors
/// An AWS KMS root in a build without the `aws-kms` feature, saying how
/// to build one (a usage error).
pub(crate) fn built(root: RootSettings) -> Result<RootSettings, String> {
    #[cfg(not(feature = "aws-kms"))]
    if matches!(root, RootSettings::AwsKms { .. }) {
        return Err(crate::roots::AWS_KMS_NOT_BUILT.to_owned());
    }
    Ok(root)
}

/// The root a file flag, or a PKCS#11 module flag and its three
/// companions, name (the file wins; clap keeps them apart); `None` for
/// neither.
pub(crate) fn root_of(
    file: Option<PathBuf>,
    module: Option<PathBuf>,
    token: Option<String>,
    key: Option<String>,
    pin_file: Option<PathBuf>,
) -> Option<RootSettings> {
    match (file, module, token, key, pin_file) {
        (Some(path), ..) => Some(RootSettings::File(path)),
        (None, Some(module), Some(token), Some(key), Some(pin_file)) => {
            Some(RootSettings::Pkcs11 {
                module,
                token,
                key,
                pin_file,
            })
        }
        _ => None,
    }
}
