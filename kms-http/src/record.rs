//! What the layers tell an access log: the deciding [`AccessRule`], and
//! about a request's token, asked for with [`RecordToken`] in the
//! request's extensions, a [`TokenRecord`] in the response's. Nothing of
//! the token is recorded (no string is copied) for a request that does
//! not ask.
//!
//! Invariant: a record holds the token's `iss`, `sub` and `kid` and
//! whether the verified-token cache answered: never the token, another
//! claim, or a header value.

use kms_actor::{JwtSigner, VerifiedJwt};

/// In the extensions of every request [`crate::AccessLayer`] lets in, and
/// of every answer to a request it judged: the deciding rule's index in
/// the rules file, from 0 (`None`: the default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessRule(pub Option<usize>);

/// In a request's extensions: asks [`crate::BearerLayer`] and
/// [`crate::AccessLayer`] for a [`TokenRecord`] of the token they verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordToken;

/// In the extensions of the answer to a request that carried
/// [`RecordToken`], when a token verified (whatever the answer then was:
/// a requirement it missed refuses it with 403 after it verified).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRecord {
    /// Its `iss` claim, when a string.
    pub iss: Option<String>,
    /// Its `sub` claim, when a string.
    pub sub: Option<String>,
    /// The `kid` it verified under (a keystore version's `kms:…` id, or a
    /// trusted JWK's `kid`).
    pub kid: String,
    /// Whether the verified-token cache answered.
    pub cached: bool,
}

impl TokenRecord {
    /// The record of `verified`.
    pub(crate) fn of(verified: &VerifiedJwt) -> Self {
        let text = |name: &str| {
            verified
                .claims
                .get(name)
                .and_then(|value| value.as_str())
                .map(str::to_owned)
        };
        TokenRecord {
            iss: text("iss"),
            sub: text("sub"),
            kid: match &verified.signer {
                JwtSigner::Key(id) => id.to_string(),
                JwtSigner::Trusted { kid, .. } => kid.clone(),
            },
            cached: verified.cached,
        }
    }
}
