//! [`IssuerKeys`]: what keeps an issuer's keys current from outside the
//! actor (an OpenID provider's `jwks_uri`, kms-oidc) holds of it: it
//! replaces one issuer's JWK Set, and it is asked to refetch when a token
//! of one of its issuers names a `kid` that issuer's set lacks
//! ([`JwksRefetch`]).
//!
//! Invariant: a replacement is whole and atomic (a `verify_jwt` sees the
//! old keys or the new, never a mix) and advances the key-set generation,
//! so the verified-token cache follows every change.

use std::sync::Arc;

use kms_core::KmsError;
use kms_jose::{TrustedJwkSet, Validation};

use crate::token::refetch::JwksRefetch;
use crate::token::tokens::Tokens;

/// Replaces issuers' keys and installs the [`JwksRefetch`] of a running
/// actor; from [`crate::KmsHandle::issuer_keys`]. Clone it freely.
#[derive(Clone)]
pub struct IssuerKeys {
    tokens: Arc<Tokens>,
}

impl std::fmt::Debug for IssuerKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuerKeys")
            .field("topic", &self.tokens.topic())
            .finish_non_exhaustive()
    }
}

impl IssuerKeys {
    pub(crate) fn new(tokens: Arc<Tokens>) -> Self {
        IssuerKeys { tokens }
    }

    /// Replaces the keys of `issuer` with `set`'s (bound to `issuer`
    /// whatever `set.issuer` says); the unbound sets and the other issuers'
    /// keys stay. An empty set leaves the issuer known with no keys: its
    /// tokens are then refused (`jose.unknown_kid`), never verified by an
    /// unbound key. Returns how many keys are trusted in all.
    ///
    /// # Errors
    /// [`KmsError::InvalidConfig`] naming a `kid` that appears twice in
    /// `set` or has the `KeyId` text form, or when `issuer` has configured
    /// sets (`KmsConfig::trusted_jwks`: one source of keys per issuer); the
    /// old keys stay.
    pub fn replace(&self, issuer: &str, set: &TrustedJwkSet) -> Result<usize, KmsError> {
        self.tokens.replace_issuer(issuer, set)
    }

    /// Sets `issuer`'s own claims policy (`None`: removes it): for a token
    /// verified under a key bound to `issuer`, `validation` replaces the
    /// `Validation` the `verify_jwt` call passed (its audiences, issuers,
    /// leeway, lifetime limit and `typ`), on a full check and from the
    /// verified-token cache alike, from the next call on. Tokens of other
    /// issuers, unbound keys and the keystore keep the call's.
    pub fn set_validation(&self, issuer: &str, validation: Option<Validation>) {
        self.tokens.set_validation(issuer, validation);
    }

    /// Installs `refetch` (replacing any before it), asked about unknown
    /// `kid`s from now on.
    pub fn set_refetch(&self, refetch: Arc<dyn JwksRefetch>) {
        self.tokens.set_refetch(refetch);
    }
}
