//! [`RootKind`]: the kinds of root of trust a store can record.

use std::fmt;

/// The kind of root a store is under, as its [`super::RootRecord`] names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RootKind {
    /// The master key is held outside the store by the embedder (a file).
    File,
    /// Wrapped by an AES-256 key in a PKCS#11 token (`CKM_AES_GCM`).
    Pkcs11,
    /// Wrapped by an AWS KMS key (`Encrypt` / `Decrypt`, the store's
    /// identity as encryption context).
    AwsKms,
}

impl RootKind {
    /// The name a [`super::RootRecord`] writes: `file`, `pkcs11`, `aws-kms`.
    pub fn as_str(self) -> &'static str {
        match self {
            RootKind::File => "file",
            RootKind::Pkcs11 => "pkcs11",
            RootKind::AwsKms => "aws-kms",
        }
    }

    /// The kind named `name` (as [`RootKind::as_str`] writes it).
    pub fn from_name(name: &str) -> Option<RootKind> {
        [RootKind::File, RootKind::Pkcs11, RootKind::AwsKms]
            .into_iter()
            .find(|kind| kind.as_str() == name)
    }
}

impl fmt::Display for RootKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RootKind::File => "a master key file",
            RootKind::Pkcs11 => "a PKCS#11 token's key",
            RootKind::AwsKms => "an AWS KMS key",
        })
    }
}
