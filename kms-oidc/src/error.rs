//! [`FetchError`]: why a fetch of an issuer's documents failed, each with a
//! stable outcome label ([`FetchError::outcome`]).

/// Why a fetch failed. The last good set stays in use (up to
/// `FetchSettings::max_stale`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// The URL does not parse, or is neither `https` nor `http` to a
    /// loopback address or `localhost`.
    #[error("URL {url:?} refused: {reason}")]
    Url {
        /// The URL, at most 256 characters of it.
        url: String,
        /// Why.
        reason: &'static str,
    },
    /// Connecting, TLS, or reading failed; or more than
    /// [`crate::MAX_REDIRECTS`] redirects, or one to a refused URL.
    #[error("fetch of {url} failed: {reason}")]
    Transport {
        /// The URL.
        url: String,
        /// What the client said.
        reason: String,
    },
    /// The fetch took longer than `FetchSettings::fetch_timeout`.
    #[error("fetch of {url} timed out")]
    Timeout {
        /// The URL.
        url: String,
    },
    /// The answer was not 200.
    #[error("fetch of {url} answered {status}")]
    Status {
        /// The URL.
        url: String,
        /// The HTTP status.
        status: u16,
    },
    /// The document is longer than `FetchSettings::max_document_bytes`.
    #[error("document at {url} is over {max} bytes")]
    TooLarge {
        /// The URL.
        url: String,
        /// The limit (bytes).
        max: usize,
    },
    /// The discovery document or JWK Set is not what it must be (not a
    /// JSON object, no string `jwks_uri`, no `keys` array, more keys than
    /// `FetchSettings::max_keys`).
    #[error("document at {url} is invalid: {reason}")]
    Invalid {
        /// The URL.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// The discovery document names another issuer (OpenID Connect
    /// Discovery 1.0 §4.3: it must equal the configured one exactly).
    #[error("discovery document names issuer {got:?}, not {expected:?}")]
    IssuerMismatch {
        /// The configured issuer.
        expected: String,
        /// The document's `issuer`, at most 256 characters of it.
        got: String,
    },
}

impl FetchError {
    /// The `outcome` label of `kms_jwks_fetches_total`: `url`,
    /// `transport`, `timeout`, `status`, `too_large`, `invalid` or
    /// `issuer_mismatch` (a success is `ok`).
    pub fn outcome(&self) -> &'static str {
        match self {
            FetchError::Url { .. } => "url",
            FetchError::Transport { .. } => "transport",
            FetchError::Timeout { .. } => "timeout",
            FetchError::Status { .. } => "status",
            FetchError::TooLarge { .. } => "too_large",
            FetchError::Invalid { .. } => "invalid",
            FetchError::IssuerMismatch { .. } => "issuer_mismatch",
        }
    }
}

/// At most 256 characters of `text`, escaped.
pub(crate) fn short(text: &str) -> String {
    text.chars()
        .take(256)
        .collect::<String>()
        .escape_debug()
        .to_string()
}
