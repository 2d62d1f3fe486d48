//! kms-oidc: identity providers' keys for the KMS actor. An issuer is
//! configured by its URL; its keys come from OpenID Connect Discovery 1.0
//! (`<issuer>/.well-known/openid-configuration`, whose `issuer` must equal
//! the configured one exactly, §4.3; RFC 8414 metadata has the same
//! members) and its `jwks_uri`, or from a `jwks_uri` given directly. They
//! are handed to the actor bound to the issuer
//! ([`kms_actor::IssuerKeys::replace`]): a token is verified against the
//! keys of the issuer its `iss` names, and a `kid` belongs to its issuer.
//!
//! Keys follow the provider:
//! * a set lives for its answer's `Cache-Control: max-age` bounded to
//!   [`MIN_MAX_AGE`] .. [`MAX_MAX_AGE`], else [`DEFAULT_MAX_AGE`], and is
//!   refreshed in the background at four fifths of that;
//! * a token of a kept issuer whose `kid` the set lacks triggers a refetch:
//!   at most one in flight per issuer (concurrent requests wait for it, up
//!   to the fetch timeout), at most one per cooldown counted from the
//!   issuer's last fetch, so a flood of made-up `kid`s cannot flood the
//!   provider;
//! * when the provider fails or answers garbage, the last good set stays in
//!   use up to the maximum stale age after its last successful fetch; a
//!   failed issuer is retried with a backoff of 1 s doubling to 60 s;
//! * a fetched set replaces the old one whole; a key that cannot or must
//!   not be used (RSA under 2048 bits, `oct`, an unknown curve, a private
//!   key, a malformed one) is skipped with a warning, the rest loads
//!   (`kms_jose::TrustedJwkSet::from_fetched_json`).
//!
//! Fetches use reqwest over rustls with the aws-lc-rs provider (the one
//! provider of every rustls build here), the platform's roots
//! (rustls-platform-verifier: the trust store operators already manage)
//! plus CAs an operator gives for internal providers, a timeout per
//! document, a size limit, at most [`MAX_REDIRECTS`] redirects, and
//! `https` only, except `http` to a loopback address or `localhost`.
//! Proxies come from the environment (`HTTPS_PROXY`, `NO_PROXY`), as
//! reqwest reads them.
//!
//! Metrics (an `issuer` label on each): see [`metrics`]. A log line
//! (target `kms_oidc`) on every set change names the `kid`s added and
//! removed, never a token.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used)]
#![warn(missing_debug_implementations, unreachable_pub)]

mod config;
mod discovery;
mod error;
mod fetch;
mod issuer;
mod issuers;
pub mod metrics;

pub use config::{
    FetchSettings, IssuerConfig, DEFAULT_FETCH_TIMEOUT, DEFAULT_MAX_AGE,
    DEFAULT_MAX_DOCUMENT_BYTES, DEFAULT_MAX_KEYS, DEFAULT_MAX_STALE, DEFAULT_REFETCH_COOLDOWN,
    MAX_MAX_AGE, MAX_REDIRECTS, MIN_MAX_AGE,
};
pub use discovery::jwks_uri_from_discovery;
pub use error::FetchError;
pub use fetch::check_url;
pub use issuer::IssuerStatus;
pub use issuers::{Issuers, StartError};
/// The URL type of [`check_url`] and [`jwks_uri_from_discovery`] (the
/// `url` crate's, as reqwest re-exports it).
pub use reqwest::Url;
