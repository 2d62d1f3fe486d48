//! What a verified token yields: [`VerifiedJwt`] (its claims and its
//! [`JwtSigner`]) for the caller, and [`Verified`], that plus the header's
//! `typ`, for the verified-token cache.

use kms_core::KeyId;
use kms_jose::Claims;

/// Which key signed a verified token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwtSigner {
    /// A keystore version (the token's `kid`).
    Key(KeyId),
    /// A trusted external JWK.
    Trusted {
        /// The issuer its set is bound to; `None`: an unbound set's key.
        issuer: Option<String>,
        /// Its `kid`.
        kid: String,
    },
}

/// A token that verified: its claims, validated, and who signed it.
#[derive(Debug, Clone, PartialEq)]
pub struct VerifiedJwt {
    /// The claims.
    pub claims: Claims,
    /// The key that signed it.
    pub signer: JwtSigner,
    /// Whether the verified-token cache answered (no signature was
    /// checked for this call: the same token verified before, under the
    /// same key set).
    pub cached: bool,
}

/// What a full check hands the cache: the verified token and its
/// header's `typ`.
pub(crate) struct Verified {
    pub(crate) jwt: VerifiedJwt,
    pub(crate) typ: Option<Box<str>>,
}
