//! The gateway's configuration, typed: what the main job ([`JobConfig`])
//! and `serve` ([`ServeConfig`]) run with, built and checked once from the
//! command line (`args/`) and handed out piece by piece: the store gets
//! [`StoreSettings`], the admin face [`AdminSettings`], and so on.
//!
//! The defaults live here, as constants: clap shows and applies them
//! (`args/`), and the main job's HTTP phase serves the public face with
//! [`ServeConfig::default`], so both programs run on one set.
//!
//! Invariant: a value of these types has passed every cross-flag check;
//! what remains to fail is what needs a file, the network or the store
//! (exit 1, `serve/`).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::time::Duration;

use axum::http::uri::Authority;
use kms::http::{ClientAddress, ResourceMetadata};
use kms::jose::{Algorithm, Validation};

use crate::serve::access_rules::RulesFile;
use crate::serve::claim_headers::ClaimHeaders;

/// The public face's address by default.
pub(crate) const LISTEN: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8080));
/// The admin face's address by default.
pub(crate) const ADMIN_LISTEN: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8081));
/// `--header-timeout`'s default.
pub(crate) const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// `--idle-timeout`'s default.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// `--request-timeout`'s default.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// `--drain-timeout`'s default.
pub(crate) const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// `--max-connections-per-ip`'s default (per face).
pub(crate) const MAX_CONNECTIONS_PER_IP: u32 = 256;
/// `--max-connections`' default (per face).
pub(crate) const MAX_CONNECTIONS: u32 = 4096;
/// `--mint-max-lifetime`'s default (seconds).
pub(crate) const MINT_MAX_LIFETIME_SECS: u64 = 3600;
/// `--jwks-max-age`'s default (seconds).
pub(crate) const JWKS_MAX_AGE_SECS: u64 = 60;
/// `--jwks-refetch-cooldown`'s default.
pub(crate) const JWKS_REFETCH_COOLDOWN: Duration = Duration::from_secs(5);
/// `--jwks-max-stale`'s default (a day).
pub(crate) const JWKS_MAX_STALE: Duration = Duration::from_secs(86_400);
/// `--jwks-fetch-timeout`'s default.
pub(crate) const JWKS_FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// `--etcd-prefix`'s default.
pub(crate) const ETCD_PREFIX: &str = "/kms";
/// `--key`'s default: TENANT:PURPOSE.
pub(crate) const KEY: &str = "gateway:tokens";
/// The `alg` of an Ed25519 key's tokens when `--alg` names none.
pub(crate) const ALG: Algorithm = Algorithm::EdDSA;
/// `--leeway`'s default (seconds).
pub(crate) const LEEWAY_SECS: u64 = 60;
/// `--token-cache`'s default (entries).
pub(crate) const TOKEN_CACHE: usize = 65_536;
/// `--token-cache-bytes`' default (64 MiB).
pub(crate) const TOKEN_CACHE_BYTES: usize = 64 << 20;
/// `--upstream-timeout`'s default.
pub(crate) const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(30);
/// `--upstream-connect-timeout`'s default.
pub(crate) const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The forward-auth path's default (without `--upstream`).
pub(crate) const FORWARD_AUTH_PATH: &str = "/auth";

/// `--clients`' default.
pub(crate) const CLIENTS: u64 = 256;
/// `--duration`'s default (seconds).
pub(crate) const DURATION_SECS: f64 = 3.0;
/// `--invalid-share`'s default.
pub(crate) const INVALID_SHARE: f64 = 0.05;
/// `--keys`' default.
pub(crate) const KEYS: u64 = 8;
/// `--metrics-addr`'s default.
pub(crate) const METRICS_ADDR: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9600));

/// Why the command line was refused, and the exit code that says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ConfigError {
    /// The flags alone are wrong (the `--config` file's keys count as
    /// flags): a usage error, exit 2.
    Usage(String),
    /// One of the three checks of the flags alone that exit 1, as
    /// docs/DESIGN.md §5c documents them: a non-loopback `--admin-listen`
    /// without `--admin-token-file` or `--admin-client-ca`, or without
    /// `--admin-tls-cert` or `--admin-insecure-http`, and a wildcard
    /// `--admin-listen` without `--admin-host`.
    Start(String),
}

/// The main job's configuration.
#[derive(Debug, Clone)]
pub(crate) struct JobConfig {
    /// Concurrent client tasks (`--clients`, ≥ 1).
    pub(crate) clients: usize,
    /// How long tokens are sent after the vectors (`--duration`).
    pub(crate) duration: Duration,
    /// Share of forged tokens, 0..=1 (`--invalid-share`).
    pub(crate) invalid_share: f64,
    /// Signing keys, 1..=1000 (`--keys`).
    pub(crate) keys: usize,
    /// Where the Prometheus metrics are served (`--metrics-addr`).
    pub(crate) metrics_addr: SocketAddr,
}

/// `serve`'s configuration, one piece per subsystem.
#[derive(Debug, Clone, Default)]
pub(crate) struct ServeConfig {
    /// The faces' addresses and connection limits.
    pub(crate) faces: FaceSettings,
    /// The faces' certificates.
    pub(crate) tls: TlsSettings,
    /// The admin face: its secret, its names, what it mints.
    pub(crate) admin: AdminSettings,
    /// The signing key, and what tokens verify under which keys.
    pub(crate) tokens: TokenSettings,
    /// Where the keys are kept.
    pub(crate) store: StoreSettings,
    /// The proxy mode and forward auth.
    pub(crate) proxy: ProxySettings,
    /// The access log and the log lines' format.
    pub(crate) logs: LogSettings,
}

/// What the gateway writes.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LogSettings {
    /// `--access-log`: a JSON line per request on stdout.
    pub(crate) access_log: bool,
    /// `--log-format`: every other line's format.
    pub(crate) format: crate::logging::LogFormat,
}

/// The faces' addresses and limits.
#[derive(Debug, Clone)]
pub(crate) struct FaceSettings {
    /// The public face (`--listen`; port 0: any free port).
    pub(crate) listen: SocketAddr,
    /// The admin face (`--admin-listen`).
    pub(crate) admin_listen: SocketAddr,
    /// The metrics-only face (`--metrics-listen`), if any.
    pub(crate) metrics_listen: Option<SocketAddr>,
    /// Each face's connection limits.
    pub(crate) limits: Limits,
    /// How long the gateway's own routes may take to start answering
    /// (`--request-timeout`; then 503).
    pub(crate) request_timeout: Duration,
    /// How long it serves on after a stop signal, not ready
    /// (`--shutdown-delay`).
    pub(crate) shutdown_delay: Duration,
    /// How long requests in flight get once the listeners close
    /// (`--drain-timeout`).
    pub(crate) drain_timeout: Duration,
}

impl Default for FaceSettings {
    fn default() -> Self {
        FaceSettings {
            listen: LISTEN,
            admin_listen: ADMIN_LISTEN,
            metrics_listen: None,
            limits: Limits::default(),
            request_timeout: REQUEST_TIMEOUT,
            shutdown_delay: Duration::ZERO,
            drain_timeout: DRAIN_TIMEOUT,
        }
    }
}

/// A face's connection limits (the `serve` flags of the same names).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// `--header-timeout`: a request's head must arrive within it.
    pub(crate) header_timeout: Duration,
    /// `--idle-timeout`: the longest a keep-alive connection waits for its
    /// next request.
    pub(crate) idle_timeout: Duration,
    /// `--max-connections`: connections open at once on the face.
    pub(crate) max_connections: usize,
    /// `--max-connections-per-ip`: connections open at once from one
    /// client address (a trusted proxy excepted).
    pub(crate) max_connections_per_ip: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: HEADER_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
            max_connections: MAX_CONNECTIONS as usize,
            max_connections_per_ip: MAX_CONNECTIONS_PER_IP as usize,
        }
    }
}

/// A certificate chain and its private key (PEM files).
#[derive(Debug, Clone)]
pub(crate) struct CertFiles {
    /// The chain, leaf first.
    pub(crate) cert: PathBuf,
    /// The private key, a secret file.
    pub(crate) key: PathBuf,
}

/// The faces' TLS.
#[derive(Debug, Clone, Default)]
pub(crate) struct TlsSettings {
    /// The public face's (`--tls-cert`, `--tls-key`): HTTPS when given.
    pub(crate) public: Option<CertFiles>,
    /// The admin face's (`--admin-tls-cert`, `--admin-tls-key`).
    pub(crate) admin: Option<CertFiles>,
    /// The CAs the admin face's clients must present a certificate from
    /// (`--admin-client-ca`).
    pub(crate) admin_client_ca: Option<PathBuf>,
    /// `--allow-group-readable-secrets`, for the key files.
    pub(crate) allow_group: bool,
}

/// The admin face.
#[derive(Debug, Clone)]
pub(crate) struct AdminSettings {
    /// The bearer secret's file (`--admin-token-file`); without it, and
    /// without client certificates, one is generated at every start.
    pub(crate) token_file: Option<PathBuf>,
    /// The names clients give it in `Host` (`--admin-host`).
    pub(crate) hosts: Vec<String>,
    /// The longest lifetime of a token it mints (`--mint-max-lifetime`).
    pub(crate) mint_max_lifetime: Duration,
    /// `iss` of every token it mints (`--token-issuer`).
    pub(crate) token_issuer: Option<String>,
    /// `aud` of every token it mints (`--token-audience`).
    pub(crate) token_audience: Option<String>,
    /// `--allow-group-readable-secrets`, for the secret's file.
    pub(crate) allow_group: bool,
}

impl Default for AdminSettings {
    fn default() -> Self {
        AdminSettings {
            token_file: None,
            hosts: Vec::new(),
            mint_max_lifetime: Duration::from_secs(MINT_MAX_LIFETIME_SECS),
            token_issuer: None,
            token_audience: None,
            allow_group: false,
        }
    }
}

/// The signing key, and what verifies which tokens.
#[derive(Debug, Clone)]
pub(crate) struct TokenSettings {
    /// The signing key's tenant (`--key TENANT:PURPOSE`).
    pub(crate) tenant: String,
    /// The signing key's purpose, the actor's token purpose.
    pub(crate) purpose: String,
    /// The alg of issued tokens and of the JWKS entries (`--alg`), if
    /// given: the signing key's algorithm (EdDSA and Ed25519 for an
    /// Ed25519 key, an ML-DSA name for that parameter set's key); `None`:
    /// the key's own, EdDSA for an Ed25519 key and a new key.
    pub(crate) alg: Option<Algorithm>,
    /// How long verifiers may cache the JWK Set (`--jwks-max-age`).
    pub(crate) jwks_max_age: Duration,
    /// The static JWK Sets: `--trust-jwks` files unbound (`None`), then
    /// `--trust-jwks-issuer` files bound to their issuer.
    pub(crate) jwks_files: Vec<(Option<String>, PathBuf)>,
    /// What `/whoami` and forward auth check of a token's claims.
    pub(crate) validation: Validation,
    /// The issuers' own checks (`--issuer-audience`, `--issuer-typ`),
    /// which replace [`TokenSettings::validation`] for their tokens.
    pub(crate) issuer_policies: BTreeMap<String, Validation>,
    /// The verified-token cache's entries (`--token-cache`; 0: off).
    pub(crate) token_cache: usize,
    /// The verified-token cache's bytes (`--token-cache-bytes`).
    pub(crate) token_cache_bytes: usize,
    /// OpenID providers whose keys are fetched (`--issuer`).
    pub(crate) issuers: Vec<String>,
    /// CA certificates for the providers' TLS (`--issuer-ca`).
    pub(crate) issuer_ca: Vec<PathBuf>,
    /// `--jwks-refetch-cooldown`.
    pub(crate) refetch_cooldown: Duration,
    /// `--jwks-max-stale`.
    pub(crate) max_stale: Duration,
    /// `--jwks-fetch-timeout`.
    pub(crate) fetch_timeout: Duration,
}

impl TokenSettings {
    /// The signing key as `--key` names it, for messages.
    pub(crate) fn key_flag(&self) -> String {
        format!("--key {}:{}", self.tenant, self.purpose)
    }
}

impl Default for TokenSettings {
    fn default() -> Self {
        let (tenant, purpose) = KEY.split_once(':').unwrap_or((KEY, ""));
        TokenSettings {
            tenant: tenant.to_owned(),
            purpose: purpose.to_owned(),
            alg: None,
            jwks_max_age: Duration::from_secs(JWKS_MAX_AGE_SECS),
            jwks_files: Vec::new(),
            validation: validation(&[], None, LEEWAY_SECS, None),
            issuer_policies: BTreeMap::new(),
            token_cache: TOKEN_CACHE,
            token_cache_bytes: TOKEN_CACHE_BYTES,
            issuers: Vec::new(),
            issuer_ca: Vec::new(),
            refetch_cooldown: JWKS_REFETCH_COOLDOWN,
            max_stale: JWKS_MAX_STALE,
            fetch_timeout: JWKS_FETCH_TIMEOUT,
        }
    }
}

/// What `/whoami` and forward auth check of a token's claims: the
/// defaults, the `audiences` (else `token_audience`: the gateway's own
/// tokens carry it), the leeway (seconds) and the longest lifetime
/// (seconds).
pub(crate) fn validation(
    audiences: &[String],
    token_audience: Option<&str>,
    leeway_secs: u64,
    max_lifetime_secs: Option<u64>,
) -> Validation {
    let mut validation = Validation::default();
    if audiences.is_empty() {
        validation
            .audiences
            .extend(token_audience.map(str::to_owned));
    } else {
        validation.audiences = audiences.to_vec();
    }
    validation.leeway = Duration::from_secs(leeway_secs);
    validation.max_lifetime = max_lifetime_secs.map(Duration::from_secs);
    validation
}

/// Each issuer's own checks: `validation` with the issuer's
/// `--issuer-audience` values in place of its audiences (when it has
/// any) and its `--issuer-typ` (when it has one), for every issuer named
/// by either.
pub(crate) fn issuer_policies(
    validation: &Validation,
    audiences: &[(String, String)],
    typs: &[(String, String)],
) -> BTreeMap<String, Validation> {
    let mut policies = BTreeMap::new();
    for (issuer, _) in audiences.iter().chain(typs) {
        policies.entry(issuer.clone()).or_insert_with(|| {
            let mut policy = validation.clone();
            let own: Vec<String> = audiences
                .iter()
                .filter(|(i, _)| i == issuer)
                .map(|(_, aud)| aud.clone())
                .collect();
            if !own.is_empty() {
                policy.audiences = own;
            }
            if let Some((_, typ)) = typs.iter().find(|(i, _)| i == issuer) {
                policy.typ = Some(typ.clone());
            }
            policy
        });
    }
    policies
}

/// `rewrap`: the store and its current and new roots.
#[derive(Debug, Clone)]
pub(crate) struct RewrapConfig {
    /// The store moved.
    pub(crate) target: RewrapTarget,
    /// The current root (`--master-key-file`, `--master-key-pkcs11`).
    pub(crate) from: RootSettings,
    /// The new root (`--to-master-key-file`, a new file;
    /// `--to-master-key-pkcs11`).
    pub(crate) to: RootSettings,
    /// `--allow-group-readable-secrets`.
    pub(crate) allow_group: bool,
}

/// The store `rewrap` moves.
#[derive(Debug, Clone)]
pub(crate) enum RewrapTarget {
    /// `--store`: a directory.
    Store(PathBuf),
    /// `--etcd` and its flags: a fleet's store (its `root` is the current
    /// one; boxed: many times a path's size).
    #[cfg(feature = "etcd")]
    Fleet(Box<FleetSettings>),
}

/// What holds or wraps a durable store's master key.
#[derive(Debug, Clone)]
pub(crate) enum RootSettings {
    /// `--master-key-file`: the master key itself.
    File(PathBuf),
    /// `--master-key-pkcs11 MODULE` with `--pkcs11-token`, `--pkcs11-key`
    /// and `--pkcs11-pin-file`.
    Pkcs11 {
        /// The module's path.
        module: PathBuf,
        /// The token's label.
        token: String,
        /// The wrapping key's label.
        key: String,
        /// The file holding the user PIN.
        pin_file: PathBuf,
    },
    /// `--master-key-aws-kms KEY` with `--aws-kms-endpoint URL`.
    AwsKms {
        /// The KMS key: key id, key ARN, alias name or alias ARN.
        key: String,
        /// The endpoint, if not the region's.
        endpoint: Option<String>,
    },
}

/// Where the keys are kept.
#[derive(Debug, Clone, Default)]
pub(crate) enum StoreSettings {
    /// In memory, for this process only.
    #[default]
    Memory,
    /// The durable keystore in a directory (`--store`).
    Durable {
        /// The store's directory.
        dir: PathBuf,
        /// What holds or wraps its master key.
        root: RootSettings,
        /// `--allow-group-readable-secrets`.
        allow_group: bool,
    },
    /// A fleet's keystore on etcd (`--etcd`).
    #[cfg(feature = "etcd")]
    Fleet(FleetSettings),
}

/// A fleet's keystore on etcd.
#[cfg(feature = "etcd")]
#[derive(Debug, Clone)]
pub(crate) struct FleetSettings {
    /// The cluster's client URLs, as `--etcd` gives them (comma-separated).
    pub(crate) endpoints: String,
    /// The key prefix of the fleet's records (`--etcd-prefix`).
    pub(crate) prefix: String,
    /// The CA etcd's certificates chain to (`--etcd-ca`): TLS when given.
    pub(crate) ca: Option<PathBuf>,
    /// This node's client certificate and its key (`--etcd-cert`,
    /// `--etcd-key`).
    pub(crate) client: Option<CertFiles>,
    /// The etcd user and the file of its password (`--etcd-user`,
    /// `--etcd-password-file`).
    pub(crate) user: Option<(String, PathBuf)>,
    /// `--etcd-create`.
    pub(crate) create: bool,
    /// `--etcd-compact`.
    pub(crate) compact: bool,
    /// What holds or wraps the fleet's master key.
    pub(crate) root: RootSettings,
    /// `--allow-group-readable-secrets`.
    pub(crate) allow_group: bool,
}

/// The proxy mode and forward auth.
#[derive(Debug, Clone)]
pub(crate) struct ProxySettings {
    /// The upstream of the proxy mode (`--upstream`), if any.
    pub(crate) upstream: Option<Upstream>,
    /// The forward-auth route's path, if it is served: `--forward-auth-path`,
    /// else [`FORWARD_AUTH_PATH`] without an upstream.
    pub(crate) forward_auth_path: Option<String>,
    /// The claims passed on as headers (`--claim-header`).
    pub(crate) claim_headers: ClaimHeaders,
    /// The proxies in front (`--trusted-proxy`): whose `X-Forwarded-For`
    /// names the client (the origin of its verify requests) and, in the
    /// proxy mode, whose forwarding headers are appended to.
    pub(crate) trusted_proxies: ClientAddress,
    /// `--access-rules`: the proxy mode's and forward auth's rules, if
    /// any.
    pub(crate) access_rules: Option<RulesFile>,
    /// `--token-cookie`: the cookie a token may come in.
    pub(crate) token_cookie: Option<String>,
    /// `--resource` and `--authorization-server`: the protected-resource
    /// metadata (RFC 9728), if served.
    pub(crate) resource_metadata: Option<ResourceMetadata>,
}

impl Default for ProxySettings {
    /// Forward auth at its default path, no upstream, no claim headers.
    fn default() -> Self {
        ProxySettings {
            upstream: None,
            forward_auth_path: Some(FORWARD_AUTH_PATH.to_owned()),
            claim_headers: ClaimHeaders::default(),
            trusted_proxies: ClientAddress::default(),
            access_rules: None,
            token_cookie: None,
            resource_metadata: None,
        }
    }
}

/// The proxy mode's upstream.
#[derive(Debug, Clone)]
pub(crate) struct Upstream {
    /// `--upstream`'s host and port.
    pub(crate) authority: Authority,
    /// `--upstream-timeout`.
    pub(crate) timeout: Duration,
    /// `--upstream-connect-timeout`.
    pub(crate) connect_timeout: Duration,
    /// `--strip-authorization`.
    pub(crate) strip_authorization: bool,
}
