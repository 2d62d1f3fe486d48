//! Metric names (the `metrics` facade; the embedder installs a recorder).
//! Every series has an `issuer` label.

/// Counter: fetches of an issuer's keys, by `outcome` (`ok`, or
/// `FetchError::outcome`).
pub const FETCHES_TOTAL: &str = "kms_jwks_fetches_total";
/// Gauge: keys in use per issuer.
pub const KEYS: &str = "kms_jwks_keys";
/// Gauge: seconds since the issuer's last successful fetch.
pub const AGE_SECONDS: &str = "kms_jwks_age_seconds";
/// Gauge: 1 while the issuer's set in use is older than its lifetime (or
/// there is none), else 0.
pub const STALE: &str = "kms_jwks_stale";
/// Counter: refetches asked for by unknown `kid`s and refused by the
/// cooldown.
pub const REFETCH_REFUSED_TOTAL: &str = "kms_jwks_refetch_refused_total";
