//! Token verification and issuance: JWTs signed by the keystore's keys
//! or by identity providers' trusted keys, checked on the verify path of
//! `crate::dispatch`.
//!
//! * `tokens.rs`: [`Tokens`](tokens::Tokens), the state this module owns
//!   (trusted keys, refetch, the verified-token cache, the `alg` and
//!   purposes of keystore tokens); the actor's clients, its handle and
//!   [`IssuerKeys`] share it.
//! * `verify.rs`: `KmsClient::verify_jwt`, the one path a token takes:
//!   admission, the signature, acceptance of its claims; from the cache or
//!   in full.
//! * `issue.rs`: `KmsClient::sign_jwt` and `KmsClient::jwks`.
//! * `cache.rs`: the verified-token cache; `trusted_keys.rs`: the trusted
//!   external keys by (issuer, `kid`); `issuer_keys.rs` and `refetch.rs`:
//!   what keeps an issuer's keys current from outside; `token_keys.rs`:
//!   which keys a caller accepts; `verified.rs`: what a verified token
//!   yields.
//!
//! This file only names the parts: each imports its siblings, never this
//! module, so no file here imports one that imports it back.

pub(crate) mod cache;
pub(crate) mod issue;
pub(crate) mod issuer_keys;
pub(crate) mod refetch;
pub(crate) mod sign;
pub(crate) mod token_keys;
pub(crate) mod tokens;
pub(crate) mod trusted_keys;
pub(crate) mod verified;
pub(crate) mod verify;

pub use issuer_keys::IssuerKeys;
pub use refetch::JwksRefetch;
pub use token_keys::TokenKeys;
pub use verified::{JwtSigner, VerifiedJwt};
