//! [`IssuerConfig`] and [`FetchSettings`]: which issuers, and the bounds of
//! every fetch of their documents.

use std::time::Duration;

/// Longest a fetch (one document) may take: 5 s.
pub const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Shortest time between two fetches of one issuer's keys asked for by
/// unknown `kid`s: 5 s, counted from that issuer's last fetch.
pub const DEFAULT_REFETCH_COOLDOWN: Duration = Duration::from_secs(5);
/// Longest the last good set is used after its last successful fetch while
/// the provider fails: 24 h.
pub const DEFAULT_MAX_STALE: Duration = Duration::from_secs(24 * 3600);
/// A set's lifetime when the response has no `Cache-Control: max-age`: 10
/// minutes (Envoy `jwt_authn`'s default `cache_duration`).
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(600);
/// The shortest lifetime a `max-age` may give a set (a lower one, or
/// `no-cache`, is raised to it): 60 s.
pub const MIN_MAX_AGE: Duration = Duration::from_secs(60);
/// The longest lifetime a `max-age` may give a set: 24 h.
pub const MAX_MAX_AGE: Duration = Duration::from_secs(24 * 3600);
/// Largest discovery document or JWK Set read (bytes): 512 KiB.
pub const DEFAULT_MAX_DOCUMENT_BYTES: usize = 512 * 1024;
/// Most keys a fetched set may hold: 64 (providers publish a handful).
pub const DEFAULT_MAX_KEYS: usize = 64;
/// Most redirects one fetch follows.
pub const MAX_REDIRECTS: usize = 3;

/// An issuer whose keys are fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerConfig {
    /// The issuer identifier, exactly as tokens carry it in `iss` (RFC
    /// 7519 §4.1.1) and the discovery document names it (OpenID Connect
    /// Discovery 1.0 §4.3): compared byte for byte, a trailing `/`
    /// included.
    pub issuer: String,
    /// The JWK Set's URL, if given: discovery is then skipped. `None`: from
    /// `<issuer>/.well-known/openid-configuration`.
    pub jwks_uri: Option<String>,
    /// This issuer's own claims policy (its audiences, leeway, lifetime
    /// limit, required `typ` such as RFC 9068's `at+jwt`), which replaces
    /// the `Validation` a `verify_jwt` call passes for this issuer's
    /// tokens (`kms_actor::IssuerKeys::set_validation`). `None`: the
    /// call's.
    pub validation: Option<kms_jose::Validation>,
}

impl IssuerConfig {
    /// An OpenID provider found by discovery.
    pub fn discovered(issuer: impl Into<String>) -> Self {
        IssuerConfig {
            issuer: issuer.into(),
            jwks_uri: None,
            validation: None,
        }
    }

    /// An issuer whose JWK Set is at `jwks_uri` (no discovery).
    pub fn with_jwks_uri(issuer: impl Into<String>, jwks_uri: impl Into<String>) -> Self {
        IssuerConfig {
            issuer: issuer.into(),
            jwks_uri: Some(jwks_uri.into()),
            validation: None,
        }
    }

    /// This issuer with its own claims policy.
    #[must_use]
    pub fn with_validation(mut self, validation: kms_jose::Validation) -> Self {
        self.validation = Some(validation);
        self
    }

    /// The discovery document's URL (OpenID Connect Discovery 1.0 §4: the
    /// issuer with any trailing `/` removed, then
    /// `/.well-known/openid-configuration`).
    pub fn discovery_url(&self) -> String {
        format!(
            "{}/.well-known/openid-configuration",
            self.issuer.trim_end_matches('/')
        )
    }
}

/// The bounds of every fetch (defaults: the `DEFAULT_*` constants).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FetchSettings {
    /// Longest one document's fetch may take (connect, redirects and body
    /// included); also how long a token naming an unknown `kid` waits for
    /// the refetch it triggered.
    pub fetch_timeout: Duration,
    /// Shortest time between fetches asked for by unknown `kid`s, per
    /// issuer, from its last fetch.
    pub refetch_cooldown: Duration,
    /// Longest the last good set stays in use, counted from its last
    /// successful fetch, while fetches fail; then the issuer has no keys
    /// until one succeeds.
    pub max_stale: Duration,
    /// A set's lifetime when its response has no `Cache-Control: max-age`.
    pub default_max_age: Duration,
    /// Largest document read (bytes); a longer one fails the fetch.
    pub max_document_bytes: usize,
    /// Most keys a set may hold; a set with more fails the fetch.
    pub max_keys: usize,
    /// Extra CA certificates (PEM) for providers' TLS, beside the
    /// platform's roots (an operator's internal CA).
    pub ca_pem: Vec<Vec<u8>>,
}

impl Default for FetchSettings {
    fn default() -> Self {
        FetchSettings {
            fetch_timeout: DEFAULT_FETCH_TIMEOUT,
            refetch_cooldown: DEFAULT_REFETCH_COOLDOWN,
            max_stale: DEFAULT_MAX_STALE,
            default_max_age: DEFAULT_MAX_AGE,
            max_document_bytes: DEFAULT_MAX_DOCUMENT_BYTES,
            max_keys: DEFAULT_MAX_KEYS,
            ca_pem: Vec::new(),
        }
    }
}

impl FetchSettings {
    /// These settings with `fetch_timeout`.
    #[must_use]
    pub fn with_fetch_timeout(mut self, fetch_timeout: Duration) -> Self {
        self.fetch_timeout = fetch_timeout;
        self
    }

    /// These settings with `refetch_cooldown`.
    #[must_use]
    pub fn with_refetch_cooldown(mut self, refetch_cooldown: Duration) -> Self {
        self.refetch_cooldown = refetch_cooldown;
        self
    }

    /// These settings with `max_stale`.
    #[must_use]
    pub fn with_max_stale(mut self, max_stale: Duration) -> Self {
        self.max_stale = max_stale;
        self
    }

    /// These settings with `max_document_bytes`.
    #[must_use]
    pub fn with_max_document_bytes(mut self, max_document_bytes: usize) -> Self {
        self.max_document_bytes = max_document_bytes;
        self
    }

    /// These settings with `max_keys`.
    #[must_use]
    pub fn with_max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// These settings with one more CA certificate (PEM).
    #[must_use]
    pub fn with_ca_pem(mut self, pem: Vec<u8>) -> Self {
        self.ca_pem.push(pem);
        self
    }
}
