//! [`AdminConfig`], what the admin router serves, and [`Admin`], the
//! router's state built from it once: the secret's digest and the allowed
//! hosts computed at build, and the lock that serialises policy changes.
//! Shared by the router (`admin.rs`) and its handlers (`mint.rs`,
//! `key_admin.rs`).

use std::sync::Arc;
use std::time::Duration;

use kms_actor::KmsClient;
use kms_core::KeyId;
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use crate::admin_guard::AllowedHosts;

/// What the admin router serves.
#[derive(Clone)]
pub struct AdminConfig {
    /// The signing key: tokens are signed by its head, rotation rotates it.
    pub key: KeyId,
    /// `exp` of an issued token whose claims have none: now plus this (at
    /// most `max_lifetime`). Default 15 min.
    pub token_lifetime: Duration,
    /// The longest lifetime (`exp` minus now) `POST /tokens` issues; a
    /// caller's later `exp` is refused, not clamped (`mint.rs`). Default
    /// 1 h.
    pub max_lifetime: Duration,
    /// `iss` of every issued token (RFC 7519 §4.1.1), if set; a caller
    /// never sets it. Default none.
    pub issuer: Option<String>,
    /// `aud` of every issued token (RFC 7519 §4.1.3), if set; a caller
    /// never sets it. Default none.
    pub audience: Option<String>,
    /// If set, every admin request needs `Authorization: Bearer <this>`
    /// (SHA-256 digests compared in constant time with `subtle`, so neither
    /// the secret nor its length leaks through timing), else 401 on every
    /// path. Wiped when the last reference goes.
    pub admin_token: Option<Arc<Zeroizing<Vec<u8>>>>,
    /// Renders `GET /metrics` (Prometheus text); `None`: 404.
    pub metrics: Option<Arc<dyn Fn() -> String + Send + Sync>>,
    /// The `Host` values (`host[:port]`, as a client sends them) this face
    /// answers, compared ASCII case-insensitively; a request with another
    /// `Host`, or none, is 403 `admin.forbidden_host` (DNS rebinding).
    /// Empty (the default): any `Host`, for an embedder that mounts the
    /// router behind its own front; give the face's own addresses
    /// (`127.0.0.1:8081`, `localhost:8081`) when browsers run on its host.
    pub allowed_hosts: Vec<String>,
}

impl std::fmt::Debug for AdminConfig {
    /// The admin secret and the metrics renderer are not shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminConfig")
            .field("key", &self.key)
            .field("token_lifetime", &self.token_lifetime)
            .field("max_lifetime", &self.max_lifetime)
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field(
                "admin_token",
                &self.admin_token.as_ref().map(|_| "<secret>"),
            )
            .field("metrics", &self.metrics.is_some())
            .field("allowed_hosts", &self.allowed_hosts)
            .finish()
    }
}

impl AdminConfig {
    /// Serves `key` with the defaults: 15-minute tokens, at most 1 h, no
    /// `iss` or `aud`, no admin secret, no metrics route, any `Host`.
    pub fn new(key: KeyId) -> Self {
        AdminConfig {
            key,
            token_lifetime: Duration::from_secs(15 * 60),
            max_lifetime: Duration::from_secs(60 * 60),
            issuer: None,
            audience: None,
            admin_token: None,
            metrics: None,
            allowed_hosts: Vec::new(),
        }
    }
}

/// The admin router's state.
#[derive(Clone)]
pub(crate) struct Admin {
    pub(crate) client: KmsClient,
    pub(crate) config: AdminConfig,
    /// SHA-256 of `config.admin_token`, computed once.
    pub(crate) secret_digest: Option<[u8; 32]>,
    /// `config.allowed_hosts`, lowercased once.
    pub(crate) hosts: AllowedHosts,
    /// Held across a policy change's read, change and write back, so two
    /// concurrent `POST /keys/policy` cannot lose one's fields.
    pub(crate) policy_change: Arc<tokio::sync::Mutex<()>>,
}

impl Admin {
    /// The state serving `config` through `client`.
    pub(crate) fn new(client: KmsClient, config: AdminConfig) -> Self {
        let secret_digest = config
            .admin_token
            .as_ref()
            .map(|secret| Sha256::digest(secret.as_slice()).into());
        let hosts = AllowedHosts::new(&config.allowed_hosts);
        Admin {
            client,
            config,
            secret_digest,
            hosts,
            policy_change: Arc::default(),
        }
    }
}
