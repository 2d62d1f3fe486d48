//! `serve`'s flags, in one group per subsystem, and the [`ServeConfig`]
//! they make: [`ServeArgs::config`] holds every cross-flag check, each
//! with its exit code ([`ConfigError`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use axum::http::uri::Authority;
use clap::Args;
use ipnet::IpNet;
use kms::http::{ClientAddress, ResourceMetadata};
use kms::jose::Algorithm;

use super::etcd::EtcdArgs;
use super::root::RootArgs;
use super::seconds::{delay, timeout, Seconds};
use crate::config::{
    self, AdminSettings, CertFiles, ConfigError, FaceSettings, Limits, LogSettings, ProxySettings,
    ServeConfig, StoreSettings, TlsSettings, TokenSettings, Upstream,
};
use crate::logging::LogFormat;
use crate::serve::access_rules::{self, RulesFile};
use crate::serve::claim_headers::{self, ClaimHeader, ClaimHeaders};
use crate::serve::{forward_auth, proxy};

/// `gateway serve`'s flags (a contract: add, never rename), one group
/// per subsystem.
#[derive(Args)]
pub(crate) struct ServeArgs {
    /// A TOML file of these flags (key: the long name without --; a
    /// repeatable flag's key is an array); the command line wins.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Accept secret files readable by their group (never writable by it),
    /// as Kubernetes mounts secrets; by default only their owner may.
    #[arg(long)]
    allow_group_readable_secrets: bool,
    #[command(flatten)]
    face: FaceArgs,
    #[command(flatten)]
    tls: TlsArgs,
    #[command(flatten)]
    admin: AdminArgs,
    #[command(flatten)]
    token: TokenArgs,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    proxy: ProxyArgs,
    #[command(flatten)]
    logs: LogArgs,
}

/// What the gateway writes: the access log, the other lines' format.
#[derive(Args)]
#[command(next_help_heading = "Logs")]
struct LogArgs {
    /// One JSON line per request to the public and admin faces on stdout
    /// (method, path, status, duration, client, the token's iss, sub and
    /// kid; never the token), written off the request path.
    #[arg(long)]
    access_log: bool,
    /// The format of every other log line on stderr: text, or one JSON
    /// object per line.
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

/// The faces' addresses and connection limits.
#[derive(Args)]
#[command(next_help_heading = "Faces and limits")]
struct FaceArgs {
    /// The public face's address (port 0: any free port).
    #[arg(long, default_value_t = config::LISTEN)]
    listen: SocketAddr,
    /// The admin face's address; not loopback only with --admin-token-file.
    #[arg(long, default_value_t = config::ADMIN_LISTEN)]
    admin_listen: SocketAddr,
    /// Serve `GET /metrics` alone, without the admin secret, on this
    /// address (for Prometheus); off by default.
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<SocketAddr>,
    /// Seconds a request's head may take to arrive (from accept for the
    /// first, from its first byte for later ones); then the connection is
    /// closed.
    #[arg(long, value_name = "SECS", default_value_t = Seconds(config::HEADER_TIMEOUT), value_parser = timeout)]
    header_timeout: Seconds,
    /// Seconds a keep-alive connection may wait for its next request.
    #[arg(long, value_name = "SECS", default_value_t = Seconds(config::IDLE_TIMEOUT), value_parser = timeout)]
    idle_timeout: Seconds,
    /// Seconds the gateway's own routes may take to start answering; then
    /// 503.
    #[arg(long, value_name = "SECS", default_value_t = Seconds(config::REQUEST_TIMEOUT), value_parser = timeout)]
    request_timeout: Seconds,
    /// Connections open at once on each face; more wait in the backlog.
    #[arg(long, value_name = "N", default_value_t = config::MAX_CONNECTIONS,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
    /// Connections open at once on each face from one client address
    /// (a --trusted-proxy peer excepted); more are closed at once.
    #[arg(long, value_name = "N", default_value_t = config::MAX_CONNECTIONS_PER_IP,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_connections_per_ip: u32,
    /// Seconds the gateway keeps serving after SIGTERM (or a first SIGINT)
    /// with /readyz answering 503, so load balancers stop sending first;
    /// a second signal skips what is left.
    #[arg(long, value_name = "SECS", default_value_t = Seconds(Duration::ZERO), value_parser = delay)]
    shutdown_delay: Seconds,
    /// Seconds requests in flight get to finish once the listeners close;
    /// then their connections are closed.
    #[arg(long, value_name = "SECS", default_value_t = Seconds(config::DRAIN_TIMEOUT), value_parser = timeout)]
    drain_timeout: Seconds,
}

/// The faces' certificates.
#[derive(Args)]
#[command(next_help_heading = "TLS")]
struct TlsArgs {
    /// The public face's TLS certificate chain (PEM, leaf first): HTTPS
    /// (needs --tls-key); reloaded when it changes and on SIGHUP.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The public face's TLS private key (PEM), a secret file.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// The admin face's TLS certificate chain (PEM; needs
    /// --admin-tls-key).
    #[arg(long, value_name = "FILE", requires = "admin_tls_key")]
    admin_tls_cert: Option<PathBuf>,
    /// The admin face's TLS private key (PEM), a secret file.
    #[arg(long, value_name = "FILE", requires = "admin_tls_cert")]
    admin_tls_key: Option<PathBuf>,
    /// CA certificates (PEM) the admin face's clients must present a
    /// certificate from (mutual TLS; needs --admin-tls-cert); it stands in
    /// for the admin secret, which is then needed only if
    /// --admin-token-file is given.
    #[arg(long, value_name = "FILE", requires = "admin_tls_cert")]
    admin_client_ca: Option<PathBuf>,
}

/// The admin face: its secret, its names, what it mints.
#[derive(Args)]
#[command(next_help_heading = "Admin face")]
struct AdminArgs {
    /// A file holding the bearer secret every admin request must carry
    /// (without it, on loopback, one is generated at every start).
    #[arg(long)]
    admin_token_file: Option<PathBuf>,
    /// Serve the admin face over plain HTTP off loopback, with
    /// --admin-token-file: TLS ends at a proxy on this host (without it
    /// such an address needs --admin-tls-cert).
    #[arg(long)]
    admin_insecure_http: bool,
    /// A name clients give the admin face in `Host` (repeatable); its own
    /// address and localhost:PORT are always accepted.
    #[arg(long, value_name = "NAME")]
    admin_host: Vec<String>,
    /// The longest lifetime (seconds) of a token the admin face mints; a
    /// later `exp` is refused, not clamped.
    #[arg(long, value_name = "SECS", default_value_t = config::MINT_MAX_LIFETIME_SECS,
          value_parser = clap::value_parser!(u64).range(1..))]
    mint_max_lifetime: u64,
    /// `iss` of every token the admin face mints (callers cannot set it).
    #[arg(long, value_name = "URL")]
    token_issuer: Option<String>,
    /// `aud` of every token the admin face mints (callers cannot set it);
    /// `/whoami` then accepts this audience.
    #[arg(long, value_name = "AUD")]
    token_audience: Option<String>,
}

/// The signing key, and which tokens verify under which keys.
#[derive(Args)]
#[command(next_help_heading = "Tokens and issuers")]
struct TokenArgs {
    /// The signing key, TENANT:PURPOSE; created if the store has none.
    #[arg(long, default_value = config::KEY)]
    key: String,
    /// The alg of issued tokens and of the JWKS entries: EdDSA or Ed25519
    /// (an Ed25519 key), ML-DSA-44, ML-DSA-65 or ML-DSA-87 (a key of that
    /// parameter set). A --key the store lacks is created with it; an
    /// existing key of another algorithm is refused (exit 1). Default: the
    /// key's own (EdDSA for an Ed25519 key, and a new key is Ed25519).
    #[arg(long, value_parser = alg)]
    alg: Option<Algorithm>,
    /// Seconds verifiers and proxies may cache the JWK Set
    /// (`Cache-Control: public, max-age=`); whole seconds.
    #[arg(long, value_name = "SECS", default_value_t = config::JWKS_MAX_AGE_SECS)]
    jwks_max_age: u64,
    /// An external issuer's JWK Set whose tokens verify by kid
    /// (repeatable), whatever their `iss`: unbound (see
    /// --trust-jwks-issuer).
    #[arg(long)]
    trust_jwks: Vec<PathBuf>,
    /// A JWK Set bound to an issuer, ISSUER=FILE (repeatable; split at the
    /// first `=`): its keys verify only tokens whose `iss` is exactly
    /// ISSUER, and that issuer's tokens verify only under its keys.
    #[arg(long, value_name = "ISSUER=FILE", value_parser = issuer_file)]
    trust_jwks_issuer: Vec<(String, PathBuf)>,
    /// ISSUER=AUD (repeatable): tokens whose `iss` is ISSUER (an --issuer
    /// or --trust-jwks-issuer issuer) must name one of its AUDs in `aud`,
    /// instead of an --audience.
    #[arg(long, value_name = "ISSUER=AUD", value_parser = issuer_pair)]
    issuer_audience: Vec<(String, String)>,
    /// ISSUER=TYP, e.g. `https://idp.example.com=at+jwt`: tokens whose `iss`
    /// is ISSUER (an --issuer or --trust-jwks-issuer issuer) must carry
    /// `typ` TYP, compared as a media type (case ignored, `application/`
    /// optional), so that its ID tokens are refused where its access
    /// tokens are required (RFC 9068).
    #[arg(long, value_name = "ISSUER=TYP", value_parser = issuer_pair)]
    issuer_typ: Vec<(String, String)>,
    /// An accepted audience (repeatable): when given, every token must name
    /// one of them in `aud`. Without it a token that carries an `aud` is
    /// refused (RFC 7519 §4.1.3), unless it is --token-audience.
    #[arg(long, value_name = "AUD")]
    audience: Vec<String>,
    /// Seconds of clock skew allowed when `exp`, `nbf` and `iat` are
    /// checked.
    #[arg(long, value_name = "SECS", default_value_t = config::LEEWAY_SECS,
          value_parser = clap::value_parser!(u64).range(..=3600))]
    leeway: u64,
    /// The longest lifetime (`exp` − `iat`, seconds) of a token accepted;
    /// tokens must then carry both claims. Default: unset (any).
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    max_token_lifetime: Option<u64>,
    /// Most tokens the verified-token cache holds: a token presented
    /// again is answered without verifying its signature, while the keys
    /// do not change (its claims are still checked); 0 turns it off.
    #[arg(long, value_name = "ENTRIES", default_value_t = config::TOKEN_CACHE)]
    token_cache: usize,
    /// Most bytes (estimated) the verified-token cache holds, at least
    /// --token-cache.
    #[arg(long, value_name = "BYTES", default_value_t = config::TOKEN_CACHE_BYTES)]
    token_cache_bytes: usize,
    /// An OpenID provider (repeatable): its keys come from
    /// URL/.well-known/openid-configuration, whose `issuer` must be URL
    /// exactly, and its `jwks_uri`; tokens whose `iss` is URL verify only
    /// under them. https, or http to loopback.
    #[arg(long, value_name = "URL")]
    issuer: Vec<String>,
    /// A CA certificate (PEM) for the providers' TLS, beside the
    /// platform's roots (repeatable).
    #[arg(long, value_name = "FILE")]
    issuer_ca: Vec<PathBuf>,
    /// Seconds between two fetches of a provider's keys asked for by
    /// tokens under unknown kids (from its last fetch).
    #[arg(long, value_name = "SECS", default_value_t = Seconds(config::JWKS_REFETCH_COOLDOWN), value_parser = timeout)]
    jwks_refetch_cooldown: Seconds,
    /// Seconds a provider's last good keys stay in use after its last
    /// successful fetch while it fails; then its tokens are refused.
    #[arg(long, value_name = "SECS", default_value_t = Seconds(config::JWKS_MAX_STALE), value_parser = timeout)]
    jwks_max_stale: Seconds,
    /// Seconds one fetch of a provider's document may take; also how long
    /// a token under an unknown kid waits for the refetch.
    #[arg(long, value_name = "SECS", default_value_t = Seconds(config::JWKS_FETCH_TIMEOUT), value_parser = timeout)]
    jwks_fetch_timeout: Seconds,
}

/// Where the keys are kept: memory, a directory, or a fleet on etcd.
#[derive(Args)]
#[command(next_help_heading = "Store and fleet")]
struct StoreArgs {
    /// The durable keystore's directory (needs --master-key-file,
    /// --master-key-pkcs11 or --master-key-aws-kms).
    #[arg(long, group = "keys_backend", requires = "master_key_root")]
    store: Option<PathBuf>,
    #[command(flatten)]
    etcd: EtcdArgs,
    /// Start a store under --etcd-prefix if it holds none (the fleet's
    /// first start); without it an empty prefix is refused.
    #[arg(long, requires = "etcd")]
    etcd_create: bool,
    /// After a trim or destroy, compact etcd's history past the removal
    /// (cluster-wide; defragmenting the members is the operator's).
    #[arg(long, requires = "etcd")]
    etcd_compact: bool,
    #[command(flatten)]
    root: RootArgs,
}

/// The proxy mode and forward auth.
#[derive(Args)]
#[command(next_help_heading = "Proxy and forward auth")]
struct ProxyArgs {
    /// The proxy mode: every request to a path that is not the public
    /// face's own passes the bearer layer and goes to this upstream,
    /// http://HOST or http://HOST:PORT (then forward auth is served only with
    /// --forward-auth-path).
    #[arg(long, value_name = "URL", value_parser = proxy::upstream)]
    upstream: Option<Authority>,
    /// Seconds the upstream may take to send its response headers once
    /// the request's body is sent whole; then 504 (an upstream that takes
    /// no byte of the body for --idle-timeout is 504 too).
    #[arg(long, value_name = "SECS", default_value_t = Seconds(config::UPSTREAM_TIMEOUT), requires = "upstream",
          value_parser = timeout)]
    upstream_timeout: Seconds,
    /// Seconds a connection to the upstream may take to open; then 504.
    #[arg(long, value_name = "SECS", default_value_t = Seconds(config::UPSTREAM_CONNECT_TIMEOUT), requires = "upstream",
          value_parser = timeout)]
    upstream_connect_timeout: Seconds,
    /// A proxy in front of this gateway, a CIDR or an address
    /// (repeatable): the rightmost X-Forwarded-For entry it sends that is
    /// not itself a trusted proxy names the client (whose failing
    /// signatures are verified apart); in the proxy mode its
    /// X-Forwarded-For and Forwarded are appended to, its
    /// X-Forwarded-Proto and -Host kept, and any other peer's replaced.
    #[arg(long, value_name = "CIDR", value_parser = proxy::cidr)]
    trusted_proxy: Vec<IpNet>,
    /// Do not pass the client's Authorization header upstream.
    #[arg(long, requires = "upstream")]
    strip_authorization: bool,
    /// The public face's forward-auth route: this path and every path
    /// under it, any method, 200 with the --claim-header headers for a
    /// valid bearer token, else 401 [default: /auth].
    #[arg(long, value_name = "PATH", value_parser = forward_auth::path)]
    forward_auth_path: Option<String>,
    /// A verified claim passed on as a header, CLAIM=HEADER (repeatable),
    /// e.g. sub=X-Auth-Subject; a client's own copies are removed.
    #[arg(long, value_name = "CLAIM=HEADER", value_parser = claim_headers::parse)]
    claim_header: Vec<ClaimHeader>,
    /// A TOML file of access rules for the proxy mode and forward auth
    /// (paths, methods, scopes, claims; docs/RUNBOOK.md), reloaded on
    /// SIGHUP; without it, any valid token passes.
    #[arg(long, value_name = "FILE", value_parser = access_rules::parse)]
    access_rules: Option<RulesFile>,
    /// A cookie the bearer token may come in when a request has no
    /// Authorization header (both: 400); a cross-site unsafe request
    /// carrying it is 403. Passed upstream unless --strip-authorization.
    #[arg(long, value_name = "NAME", value_parser = cookie_name)]
    token_cookie: Option<String>,
    /// This gateway's resource identifier (an https URL): the public face
    /// serves its OAuth protected-resource metadata (RFC 9728) at the
    /// well-known URL derived from it, and every 401 challenge names
    /// that URL in `resource_metadata`.
    #[arg(long, value_name = "URL", requires = "authorization_server")]
    resource: Option<String>,
    /// An authorization server that issues tokens for --resource
    /// (repeatable).
    #[arg(long, value_name = "URL", requires = "resource")]
    authorization_server: Vec<String>,
}

/// Checks a `--token-cookie` name (clap's value parser): an RFC 6265
/// §4.1.1 cookie-name, an HTTP token (RFC 9110 §5.6.2).
///
/// # Errors
/// An empty name or one with a character a token cannot hold.
fn cookie_name(text: &str) -> Result<String, String> {
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if text.is_empty() || !text.bytes().all(tchar) {
        return Err(
            "a cookie name is an HTTP token: letters, digits and !#$%&'*+-.^_`|~".to_owned(),
        );
    }
    Ok(text.to_owned())
}
impl ServeArgs {
    /// The configuration these flags make, checked.
    ///
    /// # Errors
    /// [`ConfigError::Usage`] (exit 2), the first in this order: one header
    /// named by two `--claim-header`s, an `--issuer` that is not https (or
    /// http to loopback) or also given to `--trust-jwks-issuer`, a
    /// `--token-audience` that is not one of the `--audience`s, a
    /// `--token-cache-bytes` below `--token-cache`, `--etcd` in a build
    /// without the `etcd` feature (saying how to build one), a `--key`
    /// without `:`. [`ConfigError::Start`] (exit 1): a non-loopback
    /// `--admin-listen` without `--admin-token-file` or
    /// `--admin-client-ca`, a non-loopback `--admin-listen` without
    /// `--admin-tls-cert` or `--admin-insecure-http`, a wildcard
    /// `--admin-listen` without `--admin-host`.
    pub(crate) fn config(self) -> Result<ServeConfig, ConfigError> {
        let ServeArgs {
            config: _,
            allow_group_readable_secrets: allow_group,
            face,
            tls,
            admin,
            token,
            store,
            proxy,
            logs,
        } = self;
        let proxy = proxy.settings().map_err(ConfigError::Usage)?;
        let token_audience = admin.token_audience.as_deref();
        token.check(token_audience).map_err(ConfigError::Usage)?;
        let store = store.settings(allow_group).map_err(ConfigError::Usage)?;
        let tokens = token.settings(token_audience).map_err(ConfigError::Usage)?;
        // Client certificates (mutual TLS) stand in for the secret.
        if admin.admin_token_file.is_none()
            && !face.admin_listen.ip().is_loopback()
            && tls.admin_client_ca.is_none()
        {
            return Err(ConfigError::Start(format!(
                "--admin-listen {} is not a loopback address: the admin face issues tokens and \
                 rotates keys, so it needs --admin-token-file (or client certificates: \
                 --admin-tls-cert, --admin-tls-key and --admin-client-ca) there",
                face.admin_listen
            )));
        }
        if face.admin_listen.ip().is_unspecified() && admin.admin_host.is_empty() {
            return Err(ConfigError::Start(format!(
                "--admin-listen {} listens on every address, and the admin face answers only a \
                 Host that names it: give the names clients use with --admin-host",
                face.admin_listen
            )));
        }
        if !face.admin_listen.ip().is_loopback()
            && tls.admin_tls_cert.is_none()
            && !admin.admin_insecure_http
        {
            return Err(ConfigError::Start(format!(
                "--admin-listen {} is not a loopback address: the admin secret would cross the \
                 network in clear; serve the admin face over TLS (--admin-tls-cert and \
                 --admin-tls-key), or pass --admin-insecure-http if TLS ends at a proxy on this \
                 host",
                face.admin_listen
            )));
        }
        Ok(ServeConfig {
            admin: AdminSettings {
                token_file: admin.admin_token_file,
                hosts: admin.admin_host,
                mint_max_lifetime: Duration::from_secs(admin.mint_max_lifetime),
                token_issuer: admin.token_issuer,
                token_audience: admin.token_audience,
                allow_group,
            },
            tls: TlsSettings {
                public: cert_files(tls.tls_cert, tls.tls_key),
                admin: cert_files(tls.admin_tls_cert, tls.admin_tls_key),
                admin_client_ca: tls.admin_client_ca,
                allow_group,
            },
            faces: FaceSettings {
                listen: face.listen,
                admin_listen: face.admin_listen,
                metrics_listen: face.metrics_listen,
                limits: Limits {
                    header_timeout: face.header_timeout.0,
                    idle_timeout: face.idle_timeout.0,
                    max_connections: usize::try_from(face.max_connections).unwrap_or(usize::MAX),
                    max_connections_per_ip: usize::try_from(face.max_connections_per_ip)
                        .unwrap_or(usize::MAX),
                },
                request_timeout: face.request_timeout.0,
                shutdown_delay: face.shutdown_delay.0,
                drain_timeout: face.drain_timeout.0,
            },
            tokens,
            store,
            proxy,
            logs: LogSettings {
                access_log: logs.access_log,
                format: logs.log_format,
            },
        })
    }
}

impl TokenArgs {
    /// The checks of the token flags but `--key`'s (which
    /// [`ServeArgs::config`] makes after the store's); `token_audience` is
    /// the admin face's `--token-audience`, which `/whoami` accepts.
    fn check(&self, token_audience: Option<&str>) -> Result<(), String> {
        for issuer in &self.issuer {
            kms::oidc::check_url(issuer).map_err(|e| format!("--issuer {issuer}: {e}"))?;
            if self
                .trust_jwks_issuer
                .iter()
                .any(|(bound, _)| bound == issuer)
            {
                return Err(format!(
                    "--issuer {issuer} and --trust-jwks-issuer {issuer}=...: one source of keys per issuer"
                ));
            }
        }
        let configured = |issuer: &str| {
            self.issuer.iter().any(|i| i == issuer)
                || self.trust_jwks_issuer.iter().any(|(i, _)| i == issuer)
        };
        for (flag, pairs) in [
            ("--issuer-audience", &self.issuer_audience),
            ("--issuer-typ", &self.issuer_typ),
        ] {
            if let Some((issuer, _)) = pairs.iter().find(|(issuer, _)| !configured(issuer)) {
                return Err(format!(
                    "{flag} {issuer}=...: {issuer} is neither an --issuer nor a --trust-jwks-issuer issuer"
                ));
            }
        }
        for (i, (issuer, _)) in self.issuer_typ.iter().enumerate() {
            if self.issuer_typ[..i]
                .iter()
                .any(|(other, _)| other == issuer)
            {
                return Err(format!("--issuer-typ {issuer}=...: given twice"));
            }
        }
        if let Some(own) = token_audience {
            if !self.audience.is_empty() && !self.audience.iter().any(|a| a == own) {
                return Err(format!(
                    "--token-audience {own} is not one of the --audience values: the gateway's own tokens would be refused"
                ));
            }
        }
        if self.token_cache > 0 && self.token_cache_bytes < self.token_cache {
            return Err(format!(
                "--token-cache-bytes {} is below --token-cache {}: each entry takes at least a byte",
                self.token_cache_bytes, self.token_cache
            ));
        }
        Ok(())
    }

    /// The token settings, once [`TokenArgs::check`] passed.
    ///
    /// # Errors
    /// A `--key` without `:`.
    fn settings(self, token_audience: Option<&str>) -> Result<TokenSettings, String> {
        let (tenant, purpose) = self
            .key
            .split_once(':')
            .ok_or_else(|| format!("--key {}: expected TENANT:PURPOSE", self.key))?;
        let jwks_files = self
            .trust_jwks
            .into_iter()
            .map(|path| (None, path))
            .chain(
                self.trust_jwks_issuer
                    .into_iter()
                    .map(|(issuer, path)| (Some(issuer), path)),
            )
            .collect();
        let validation = config::validation(
            &self.audience,
            token_audience,
            self.leeway,
            self.max_token_lifetime,
        );
        Ok(TokenSettings {
            tenant: tenant.to_owned(),
            purpose: purpose.to_owned(),
            alg: self.alg,
            jwks_max_age: Duration::from_secs(self.jwks_max_age),
            jwks_files,
            issuer_policies: config::issuer_policies(
                &validation,
                &self.issuer_audience,
                &self.issuer_typ,
            ),
            validation,
            token_cache: self.token_cache,
            token_cache_bytes: self.token_cache_bytes,
            issuers: self.issuer,
            issuer_ca: self.issuer_ca,
            refetch_cooldown: self.jwks_refetch_cooldown.0,
            max_stale: self.jwks_max_stale.0,
            fetch_timeout: self.jwks_fetch_timeout.0,
        })
    }
}

impl StoreArgs {
    /// Where the keys are kept (clap has checked that `--store` and
    /// `--etcd` exclude each other and need one root: `--master-key-file`,
    /// `--master-key-pkcs11` with its three companions, or
    /// `--master-key-aws-kms`).
    fn settings(self, allow_group: bool) -> Result<StoreSettings, String> {
        let root = self.root.settings()?;
        match (self.store, self.etcd.etcd.is_some(), root) {
            (Some(dir), _, Some(root)) => Ok(StoreSettings::Durable {
                dir,
                root,
                allow_group,
            }),
            #[cfg(feature = "etcd")]
            (None, true, Some(root)) => Ok(StoreSettings::Fleet(
                self.etcd
                    .fleet(root, self.etcd_create, self.etcd_compact, allow_group)
                    .ok_or("--etcd needs its URLs")?,
            )),
            #[cfg(not(feature = "etcd"))]
            (None, true, _) => Err(super::etcd::NOT_BUILT.to_owned()),
            #[cfg(feature = "etcd")]
            (None, true, None) => Err(
                "--etcd needs --master-key-file, --master-key-pkcs11 or --master-key-aws-kms"
                    .to_owned(),
            ),
            (Some(_), _, None) => Err(
                "--store needs --master-key-file, --master-key-pkcs11 or --master-key-aws-kms"
                    .to_owned(),
            ),
            (None, false, _) => Ok(StoreSettings::Memory),
        }
    }
}

impl ProxyArgs {
    /// The proxy mode and forward auth.
    fn settings(self) -> Result<ProxySettings, String> {
        let claim_headers = ClaimHeaders::new(self.claim_header)?;
        let upstream = self.upstream.map(|authority| Upstream {
            authority,
            timeout: self.upstream_timeout.0,
            connect_timeout: self.upstream_connect_timeout.0,
            strip_authorization: self.strip_authorization,
        });
        // With a proxy, the forward-auth route only when asked for.
        let forward_auth_path = match (self.forward_auth_path, &upstream) {
            (Some(path), _) => Some(path),
            (None, None) => Some(config::FORWARD_AUTH_PATH.to_owned()),
            (None, Some(_)) => None,
        };
        let resource_metadata = self
            .resource
            .map(|resource| {
                ResourceMetadata::new(&resource, self.authorization_server)
                    .map_err(|e| format!("--resource: {e}"))
            })
            .transpose()?;
        if let (Some(metadata), Some(path)) = (&resource_metadata, &forward_auth_path) {
            if forward_auth::overlaps(metadata.path(), path) {
                return Err(format!(
                    "--forward-auth-path {path} overlaps the metadata route {} of --resource",
                    metadata.path()
                ));
            }
        }
        Ok(ProxySettings {
            resource_metadata,
            upstream,
            forward_auth_path,
            claim_headers,
            trusted_proxies: ClientAddress::new(self.trusted_proxy),
            access_rules: self.access_rules,
            token_cookie: self.token_cookie,
        })
    }
}

/// A certificate and its key, when both are given (clap requires each
/// with the other).
fn cert_files(cert: Option<PathBuf>, key: Option<PathBuf>) -> Option<CertFiles> {
    cert.zip(key).map(|(cert, key)| CertFiles { cert, key })
}

/// `ISSUER=FILE`, split at the first `=`.
/// `ISSUER=VALUE` (split at the first `=`), both parts non-empty.
fn issuer_pair(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((issuer, value)) if !issuer.is_empty() && !value.is_empty() => {
            Ok((issuer.to_owned(), value.to_owned()))
        }
        _ => Err("expected ISSUER=VALUE".to_owned()),
    }
}

fn issuer_file(text: &str) -> Result<(String, PathBuf), String> {
    match text.split_once('=') {
        Some((issuer, file)) if !issuer.is_empty() && !file.is_empty() => {
            Ok((issuer.to_owned(), PathBuf::from(file)))
        }
        _ => Err("expected ISSUER=FILE".to_owned()),
    }
}

fn alg(text: &str) -> Result<Algorithm, String> {
    // Tokens are signed by the KMS's keys: Ed25519 and ML-DSA, whatever
    // else this build verifies.
    Algorithm::parse(text)
        .ok()
        .filter(|alg| alg.key_alg().is_some())
        .ok_or_else(|| "must be EdDSA, Ed25519, ML-DSA-44, ML-DSA-65 or ML-DSA-87".to_owned())
}
