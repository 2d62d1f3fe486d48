//! `rewrap`'s flags: the store, its current root (as `serve` takes it)
//! and its new root (the same flags prefixed `--to-`), and the
//! [`RewrapConfig`] they make.

use std::path::PathBuf;

use clap::{ArgGroup, Args};

use crate::config::{RewrapConfig, RootSettings};

/// `gateway rewrap`'s flags (a contract: add, never rename).
#[derive(Args)]
#[command(
    group(ArgGroup::new("from_root").args(["master_key_file", "master_key_pkcs11"]).required(true)),
    group(
        ArgGroup::new("to_root")
            .args(["to_master_key_file", "to_master_key_pkcs11"])
            .required(true)
    )
)]
pub(crate) struct RewrapArgs {
    /// The durable keystore's directory (not in use by a running serve).
    #[arg(long, value_name = "DIR")]
    store: PathBuf,
    /// Accept secret files readable by their group (never writable by it).
    #[arg(long)]
    allow_group_readable_secrets: bool,
    /// The store's current root: its master key file.
    #[arg(long, value_name = "FILE")]
    master_key_file: Option<PathBuf>,
    /// The store's current root: a PKCS#11 module (needs --pkcs11-token,
    /// --pkcs11-key, --pkcs11-pin-file).
    #[arg(long, value_name = "MODULE", requires_all = ["pkcs11_token", "pkcs11_key", "pkcs11_pin_file"])]
    master_key_pkcs11: Option<PathBuf>,
    /// The current root's token label.
    #[arg(long, value_name = "LABEL", requires = "master_key_pkcs11")]
    pkcs11_token: Option<String>,
    /// The current root's key label.
    #[arg(long, value_name = "LABEL", requires = "master_key_pkcs11")]
    pkcs11_key: Option<String>,
    /// A file holding the current token's user PIN, a secret file.
    #[arg(long, value_name = "FILE", requires = "master_key_pkcs11")]
    pkcs11_pin_file: Option<PathBuf>,
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
}

/// The root a file flag or a PKCS#11 flag and its three companions name
/// (clap has checked that exactly one is given, with its companions).
fn root(
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

impl RewrapArgs {
    /// The configuration.
    ///
    /// # Errors
    /// A root missing (clap's groups make it unreachable), as a usage
    /// message.
    pub(crate) fn config(self) -> Result<RewrapConfig, String> {
        let from = root(
            self.master_key_file,
            self.master_key_pkcs11,
            self.pkcs11_token,
            self.pkcs11_key,
            self.pkcs11_pin_file,
        )
        .ok_or("give the store's root: --master-key-file or --master-key-pkcs11")?;
        let to = root(
            self.to_master_key_file,
            self.to_master_key_pkcs11,
            self.to_pkcs11_token,
            self.to_pkcs11_key,
            self.to_pkcs11_pin_file,
        )
        .ok_or("give the new root: --to-master-key-file or --to-master-key-pkcs11")?;
        Ok(RewrapConfig {
            dir: self.store,
            from,
            to,
            allow_group: self.allow_group_readable_secrets,
        })
    }
}
