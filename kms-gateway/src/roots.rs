//! The master key's root of trust, from the flags: `--master-key-file`
//! (a file root), `--master-key-pkcs11` with its `--pkcs11-*` flags (a
//! PKCS#11 token's AES key), or `--master-key-aws-kms` with
//! `--aws-kms-endpoint` (an AWS KMS key), for `serve` and `rewrap`; and `rewrap`'s new
//! root, the same flags prefixed `--to-`.
//!
//! Invariant: every store the gateway makes seals its records under the
//! `SealKey` [`MASTER_KEY_ID`], version 1, whatever root holds the key.

use kms::core::root::{FileRoot, MasterKeyRoot, RootKind};
use kms::pkcs11::Pkcs11Root;

use crate::config::RootSettings;
use crate::serve::secrets;

/// The name of the master key's `SealKey` in every store the gateway
/// makes (the envelopes' headers carry it).
pub(crate) const MASTER_KEY_ID: &str = "gateway-master";

/// The root `settings` name: the master key read from its file, or a
/// PKCS#11 token's key with the PIN read from its file.
///
/// # Errors
/// The files' refusals ([`secrets::master_key`], [`secrets::pkcs11_pin`]).
pub(crate) fn master_key_root(
    settings: &RootSettings,
    allow_group: bool,
) -> Result<Box<dyn MasterKeyRoot>, String> {
    Ok(match settings {
        RootSettings::File(path) => Box::new(FileRoot::new(
            secrets::master_key(path, allow_group)?,
            format!("--master-key-file {}", path.display()),
        )),
        RootSettings::Pkcs11 { .. } => pkcs11(settings, "--pkcs11-pin-file", allow_group)?,
        RootSettings::AwsKms { key, endpoint } => aws_kms(key, endpoint.as_deref())?,
    })
}

/// `rewrap`'s new root: a new key file it writes (`--to-master-key-file`,
/// never overwritten), or a PKCS#11 token's key (`--to-master-key-pkcs11`,
/// the PIN read from `--to-pkcs11-pin-file`).
///
/// # Errors
/// The PIN file's refusals.
pub(crate) fn new_root(
    settings: &RootSettings,
    allow_group: bool,
) -> Result<Box<dyn MasterKeyRoot>, String> {
    Ok(match settings {
        RootSettings::File(path) => Box::new(FileRoot::new_file(path)),
        RootSettings::Pkcs11 { .. } => pkcs11(settings, "--to-pkcs11-pin-file", allow_group)?,
        RootSettings::AwsKms { key, endpoint } => aws_kms(key, endpoint.as_deref())?,
    })
}

/// The AWS KMS root of `key` at `endpoint` (a build with the `aws-kms`
/// feature).
///
/// # Errors
/// The SDK's runtime failing to start, as the root's message.
#[cfg(feature = "aws-kms")]
fn aws_kms(key: &str, endpoint: Option<&str>) -> Result<Box<dyn MasterKeyRoot>, String> {
    let root = kms::aws_kms::AwsKmsRoot::new(key, endpoint).map_err(|e| e.to_string())?;
    Ok(Box::new(root))
}

/// A build without the `aws-kms` feature refuses the AWS KMS flags
/// before this is reached (`args/root.rs`); the message for a caller
/// that gets here anyway.
#[cfg(not(feature = "aws-kms"))]
fn aws_kms(_key: &str, _endpoint: Option<&str>) -> Result<Box<dyn MasterKeyRoot>, String> {
    Err(AWS_KMS_NOT_BUILT.to_owned())
}

/// What `--master-key-aws-kms` answers in a build without the `aws-kms`
/// feature.
#[cfg(not(feature = "aws-kms"))]
pub(crate) const AWS_KMS_NOT_BUILT: &str = "--master-key-aws-kms needs a build with the aws-kms \
     feature: cargo install --path kms-gateway --features aws-kms";

/// The PKCS#11 root `settings` names, its PIN read from the file of
/// `pin_flag`.
fn pkcs11(
    settings: &RootSettings,
    pin_flag: &str,
    allow_group: bool,
) -> Result<Box<dyn MasterKeyRoot>, String> {
    let RootSettings::Pkcs11 {
        module,
        token,
        key,
        pin_file,
    } = settings
    else {
        return Err("not a PKCS#11 root".to_owned());
    };
    let pin = secrets::pkcs11_pin(pin_file, pin_flag, allow_group)?;
    Ok(Box::new(Pkcs11Root::new(module, token, key, pin)))
}

/// The flags that give a root of `kind`.
pub(crate) fn flags(kind: RootKind) -> &'static str {
    match kind {
        RootKind::Pkcs11 => {
            "--master-key-pkcs11 MODULE with --pkcs11-token, --pkcs11-key and --pkcs11-pin-file"
        }
        RootKind::AwsKms => "--master-key-aws-kms KEY (and --aws-kms-endpoint URL)",
        _ => "--master-key-file",
    }
}
