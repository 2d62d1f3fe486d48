//! `gateway serve`: an HTTP gateway on the KMS, until SIGINT or SIGTERM.
//!
//! * Public face (`--listen`, default `127.0.0.1:8080`; port 0 picks a
//!   free port, logged; `public.rs`): `GET /.well-known/jwks.json`, `GET /whoami`
//!   (behind `kms_http::BearerLayer`: 200 with the verified claims, else
//!   the RFC 6750 challenge), `GET /healthz`. Nothing that issues tokens
//!   or changes keys: any other path is 404.
//! * Admin face (`--admin-listen`, default `127.0.0.1:8081`):
//!   `POST /tokens`, `POST /keys/rotate`, `GET`/`POST /keys/policy`,
//!   `POST /keys/trim`, `POST /keys/destroy`, `GET /metrics`
//!   (`kms::http::admin_router`). Every request needs the admin secret as
//!   its bearer token: the one in `--admin-token-file` (a file not
//!   readable by every user, like the master key's; required on an address
//!   that is not loopback, else exit 1), or, without it, one generated at
//!   every start into a private temporary directory, announced as
//!   `gateway serve: admin secret in PATH` before the readiness line
//!   (`secrets.rs`). A request from a web page (`Origin`,
//!   `Sec-Fetch-Site`) or with a `Host` other than the face's own address,
//!   `localhost:PORT` or an `--admin-host` name is 403; a `POST` without a
//!   JSON body is 415.
//! * `--metrics-listen ADDR` (off by default): `GET /metrics` alone,
//!   without the secret, for Prometheus.
//! * Every face is served by `listener.rs`: `--header-timeout`,
//!   `--idle-timeout`, `--request-timeout` (503 past it) and
//!   `--max-connections` (per face); the soft open-files limit is raised to
//!   the hard one at start.
//! * Keys (`store.rs`): in memory, or with `--store DIR --master-key-file FILE` in the
//!   durable keystore (opened if it exists, created only in an absent or
//!   empty directory), or with `--etcd URL[,URL...] --master-key-file FILE`
//!   (`--etcd-prefix`, default `/kms`; a build with `--features etcd`) in
//!   a fleet's keystore shared through etcd: every node's keys follow the
//!   others' changes, and `POST /keys/rotate` on any node rotates for all.
//! * The signing key of `--key TENANT:PURPOSE` (the actor's token
//!   purpose) is the one the store's signing pointer names: made, with a
//!   new key or naming the purpose's existing one, when the store has none
//!   (`Keystore::signing_key`), so fleet nodes started at once sign with
//!   one key.
//! * `--trust-jwks FILE` (repeatable): external issuers' JWK Sets.
//!
//! SIGHUP reloads the `--trust-jwks` files, all or nothing (a file that
//! fails leaves every old set in place, and the log says why; the
//! outcome is one stderr line).
//!
//! Shutdown on SIGINT/SIGTERM (handlers installed before the listeners)
//! is graceful: both listeners stop accepting, requests in flight are
//! answered (for at most 30 s), the actor shuts down (the store is closed),
//! exit 0. Every start-up error is a message and exit 1.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use kms::actor::{KmsActor, KmsConfig};
use kms::bus::Bus;
use kms::core::Keystore;
use kms::http::{admin_router, AdminConfig, JwksConfig};
use kms::jose::{Algorithm, TrustedJwkSet, Validation};
use kms::oidc::{FetchSettings, IssuerConfig, Issuers};
use tokio::net::TcpListener;

use crate::claim_headers::{self, ClaimHeader, ClaimHeaders};
use crate::listener::{self, Limits};
use crate::proxy::{self, Proxy};
use crate::signals::{Signal, Signals};
use crate::{forward_auth, public, secrets, store, telemetry, tls};
use axum::http::uri::Authority;
use ipnet::IpNet;

/// How long the listeners may take to answer what is in flight at a stop.
const DRAIN: Duration = Duration::from_secs(30);

/// `gateway serve`'s flags (a contract: add, never rename).
#[derive(Args)]
pub(crate) struct ServeArgs {
    /// A TOML file of these flags (key: the long name without --; a
    /// repeatable flag's key is an array); the command line wins.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// The public face's address (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub(crate) listen: SocketAddr,
    /// The admin face's address; not loopback only with --admin-token-file.
    #[arg(long, default_value = "127.0.0.1:8081")]
    pub(crate) admin_listen: SocketAddr,
    /// A file holding the bearer secret every admin request must carry
    /// (without it, on loopback, one is generated at every start).
    #[arg(long)]
    pub(crate) admin_token_file: Option<PathBuf>,
    /// Accept secret files readable by their group (never writable by it),
    /// as Kubernetes mounts secrets; by default only their owner may.
    #[arg(long)]
    pub(crate) allow_group_readable_secrets: bool,
    /// A name clients give the admin face in `Host` (repeatable); its own
    /// address and localhost:PORT are always accepted.
    #[arg(long, value_name = "NAME")]
    admin_host: Vec<String>,
    /// Serve `GET /metrics` alone, without the admin secret, on this
    /// address (for Prometheus); off by default.
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<SocketAddr>,
    /// Seconds a request's head may take to arrive (from accept for the
    /// first, from its first byte for later ones); then the connection is
    /// closed.
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = crate::cli::timeout)]
    header_timeout: Duration,
    /// Seconds a keep-alive connection may wait for its next request.
    #[arg(long, value_name = "SECS", default_value = "60", value_parser = crate::cli::timeout)]
    idle_timeout: Duration,
    /// Seconds the gateway's own routes may take to start answering; then
    /// 503.
    #[arg(long, value_name = "SECS", default_value = "60", value_parser = crate::cli::timeout)]
    request_timeout: Duration,
    /// The longest lifetime (seconds) of a token the admin face mints; a
    /// later `exp` is refused, not clamped.
    #[arg(long, value_name = "SECS", default_value_t = 3600,
          value_parser = clap::value_parser!(u64).range(1..))]
    mint_max_lifetime: u64,
    /// `iss` of every token the admin face mints (callers cannot set it).
    #[arg(long, value_name = "URL")]
    token_issuer: Option<String>,
    /// `aud` of every token the admin face mints (callers cannot set it);
    /// `/whoami` then accepts this audience.
    #[arg(long, value_name = "AUD")]
    token_audience: Option<String>,
    /// Seconds verifiers and proxies may cache the JWK Set
    /// (`Cache-Control: public, max-age=`); whole seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    jwks_max_age: u64,
    /// Connections open at once on each face; more wait in the backlog.
    #[arg(long, value_name = "N", default_value_t = 4096,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
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
    /// An accepted audience (repeatable): when given, every token must name
    /// one of them in `aud`. Without it a token that carries an `aud` is
    /// refused (RFC 7519 §4.1.3), unless it is --token-audience.
    #[arg(long, value_name = "AUD")]
    audience: Vec<String>,
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
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = crate::cli::timeout)]
    jwks_refetch_cooldown: Duration,
    /// Seconds a provider's last good keys stay in use after its last
    /// successful fetch while it fails; then its tokens are refused.
    #[arg(long, value_name = "SECS", default_value = "86400", value_parser = crate::cli::timeout)]
    jwks_max_stale: Duration,
    /// Seconds one fetch of a provider's document may take; also how long
    /// a token under an unknown kid waits for the refetch.
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = crate::cli::timeout)]
    jwks_fetch_timeout: Duration,
    /// The longest lifetime (`exp` − `iat`, seconds) of a token accepted;
    /// tokens must then carry both claims. Default: unset (any).
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    max_token_lifetime: Option<u64>,
    /// The durable keystore's directory (needs --master-key-file).
    #[arg(long, group = "keys_backend", requires = "master_key_file")]
    store: Option<PathBuf>,
    /// A fleet's shared keystore on etcd: its client URLs, comma-separated
    /// (needs --master-key-file, the fleet's; a build with --features etcd).
    #[arg(
        long,
        group = "keys_backend",
        requires = "master_key_file",
        value_name = "URL[,URL...]"
    )]
    pub(crate) etcd: Option<String>,
    /// The etcd key prefix of the fleet's records.
    #[arg(long, requires = "etcd", default_value = "/kms")]
    pub(crate) etcd_prefix: String,
    /// The CA certificate (PEM) etcd's members' certificates chain to:
    /// TLS to etcd (the --etcd URLs then https://).
    #[arg(long, requires = "etcd", value_name = "FILE")]
    pub(crate) etcd_ca: Option<PathBuf>,
    /// This node's client certificate for etcd (PEM; needs --etcd-key and
    /// --etcd-ca).
    #[arg(long, requires_all = ["etcd_key", "etcd_ca"], value_name = "FILE")]
    pub(crate) etcd_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM), a secret file.
    #[arg(long, requires = "etcd_cert", value_name = "FILE")]
    pub(crate) etcd_key: Option<PathBuf>,
    /// The etcd user this node authenticates as (needs
    /// --etcd-password-file).
    #[arg(long, requires_all = ["etcd", "etcd_password_file"], value_name = "NAME")]
    pub(crate) etcd_user: Option<String>,
    /// A file holding the etcd user's password, a secret file.
    #[arg(long, requires = "etcd_user", value_name = "FILE")]
    pub(crate) etcd_password_file: Option<PathBuf>,
    /// Start a store under --etcd-prefix if it holds none (the fleet's
    /// first start); without it an empty prefix is refused.
    #[arg(long, requires = "etcd")]
    pub(crate) etcd_create: bool,
    /// After a trim or destroy, compact etcd's history past the removal
    /// (cluster-wide; defragmenting the members is the operator's).
    #[arg(long, requires = "etcd")]
    pub(crate) etcd_compact: bool,
    /// The master key: 32 bytes as 64 hex characters, not world-readable.
    #[arg(long, requires = "keys_backend")]
    pub(crate) master_key_file: Option<PathBuf>,
    /// The signing key, TENANT:PURPOSE; created if the store has none.
    #[arg(long, default_value = "gateway:tokens")]
    key: String,
    /// Seconds of clock skew allowed when `exp`, `nbf` and `iat` are
    /// checked.
    #[arg(long, value_name = "SECS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(..=3600))]
    leeway: u64,
    /// Most tokens the verified-token cache holds: a token presented
    /// again is answered without verifying its signature, while the keys
    /// do not change (its claims are still checked); 0 turns it off.
    #[arg(long, value_name = "ENTRIES", default_value_t = 65_536)]
    token_cache: usize,
    /// Most bytes (estimated) the verified-token cache holds, at least
    /// --token-cache.
    #[arg(long, value_name = "BYTES", default_value_t = 64 << 20)]
    token_cache_bytes: usize,
    /// The public face's forward-auth route: this path and every path
    /// under it, any method, 200 with the --claim-header headers for a
    /// valid bearer token, else 401 [default: /auth].
    #[arg(long, value_name = "PATH", value_parser = forward_auth::path)]
    forward_auth_path: Option<String>,
    /// A verified claim passed on as a header, CLAIM=HEADER (repeatable),
    /// e.g. sub=X-Auth-Subject; a client's own copies are removed.
    #[arg(long, value_name = "CLAIM=HEADER", value_parser = claim_headers::parse)]
    claim_header: Vec<ClaimHeader>,
    /// The proxy mode: every request to a path that is not the public
    /// face's own passes the bearer layer and goes to this upstream,
    /// http://HOST or http://HOST:PORT (then forward auth is served only with
    /// --forward-auth-path).
    #[arg(long, value_name = "URL", value_parser = proxy::upstream)]
    upstream: Option<Authority>,
    /// Seconds the upstream may take to send its response headers once
    /// the request's body is sent whole; then 504.
    #[arg(long, value_name = "SECS", default_value = "30", requires = "upstream",
          value_parser = crate::cli::timeout)]
    upstream_timeout: Duration,
    /// A proxy in front of this gateway, a CIDR or an address
    /// (repeatable): its X-Forwarded-For and Forwarded are appended to,
    /// its X-Forwarded-Proto and -Host kept; any other peer's are replaced.
    #[arg(long, value_name = "CIDR", requires = "upstream", value_parser = proxy::cidr)]
    trusted_proxy: Vec<IpNet>,
    /// Do not pass the client's Authorization header upstream.
    #[arg(long, requires = "upstream")]
    strip_authorization: bool,
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
    pub(crate) admin_client_ca: Option<PathBuf>,
    /// The alg of issued tokens and of the JWKS entries.
    #[arg(long, default_value = "EdDSA", value_parser = alg)]
    alg: Algorithm,
}

impl ServeArgs {
    /// What `/whoami` and forward auth check of a token's claims: the
    /// defaults, the `--audience`s (else the audience of
    /// `--token-audience`: its own tokens carry it), the `--leeway` and the
    /// `--max-token-lifetime`.
    pub(crate) fn validation(&self) -> Validation {
        let mut validation = Validation::default();
        if self.audience.is_empty() {
            validation.audiences.extend(self.token_audience.clone());
        } else {
            validation.audiences.clone_from(&self.audience);
        }
        validation.leeway = Duration::from_secs(self.leeway);
        validation.max_lifetime = self.max_token_lifetime.map(Duration::from_secs);
        validation
    }

    /// Every static JWK Set: `--trust-jwks` unbound, `--trust-jwks-issuer`
    /// bound to its issuer.
    fn jwks_files(&self) -> Vec<(Option<&str>, &Path)> {
        self.trust_jwks
            .iter()
            .map(|path| (None, path.as_path()))
            .chain(
                self.trust_jwks_issuer
                    .iter()
                    .map(|(issuer, path)| (Some(issuer.as_str()), path.as_path())),
            )
            .collect()
    }

    /// What the public face serves.
    ///
    /// # Errors
    /// One header named by two `--claim-header`s.
    pub(crate) fn public(&self, topic: &str) -> Result<public::Options, String> {
        let claim_headers = Arc::new(ClaimHeaders::new(self.claim_header.clone())?);
        let proxy = self.upstream.as_ref().map(|upstream| {
            Arc::new(Proxy::new(
                proxy::Settings {
                    upstream: upstream.clone(),
                    timeout: self.upstream_timeout,
                    trusted: self.trusted_proxy.clone(),
                    strip_authorization: self.strip_authorization,
                    idle: self.idle_timeout,
                },
                Arc::clone(&claim_headers),
                self.tls_cert.is_some(),
                topic.to_owned(),
            ))
        });
        // With a proxy, the forward-auth route only when asked for.
        let forward_auth = match (&self.forward_auth_path, &proxy) {
            (Some(path), _) => Some(path.clone()),
            (None, None) => Some(forward_auth::DEFAULT_PATH.to_owned()),
            (None, Some(_)) => None,
        };
        Ok(public::Options {
            jwks: JwksConfig::default().with_max_age(Duration::from_secs(self.jwks_max_age)),
            validation: self.validation(),
            forward_auth,
            claim_headers,
            request_timeout: self.request_timeout,
            proxy,
        })
    }

    /// The connection limits of `--header-timeout`, `--idle-timeout` and
    /// `--max-connections`.
    pub(crate) fn limits(&self) -> Limits {
        Limits {
            header_timeout: self.header_timeout,
            idle_timeout: self.idle_timeout,
            max_connections: usize::try_from(self.max_connections).unwrap_or(usize::MAX),
        }
    }
}

/// `ISSUER=FILE`, split at the first `=`.
fn issuer_file(text: &str) -> Result<(String, PathBuf), String> {
    match text.split_once('=') {
        Some((issuer, file)) if !issuer.is_empty() && !file.is_empty() => {
            Ok((issuer.to_owned(), PathBuf::from(file)))
        }
        _ => Err("expected ISSUER=FILE".to_owned()),
    }
}

fn alg(text: &str) -> Result<Algorithm, String> {
    // Tokens are signed with Ed25519 only, whatever this build verifies.
    Algorithm::parse(text)
        .ok()
        .filter(|alg| alg.is_ed25519())
        .ok_or_else(|| "must be EdDSA or Ed25519".to_owned())
}

/// Runs `gateway serve` until a signal; `Err` is a start-up error.
pub(crate) async fn run(args: ServeArgs) -> Result<(), String> {
    // First: a signal sent while the store opens (etcd may take a while)
    // must find its handler, not the default action.
    let mut signals = Signals::install()?;
    // Not fatal: the faces still serve, up to the lower limit.
    match listener::raise_open_files_limit() {
        Ok(limit) => tracing::debug!(?limit, "open-files limit"),
        Err(e) => eprintln!("gateway serve: warning: {e}"),
    }
    let (tenant, purpose) = args
        .key
        .split_once(':')
        .ok_or_else(|| format!("--key {}: expected TENANT:PURPOSE", args.key))?;
    let admin_token_file = secrets::admin_token_file(&args)?;
    if args.admin_listen.ip().is_unspecified() && args.admin_host.is_empty() {
        return Err(format!(
            "--admin-listen {} listens on every address, and the admin face answers only a \
             Host that names it: give the names clients use with --admin-host",
            args.admin_listen
        ));
    }
    let trusted = trusted_sets(&args.jwks_files())?;
    for (issuer, path) in args.jwks_files() {
        if issuer.is_none() {
            eprintln!(
                "gateway serve: {} is unbound: its keys verify tokens of any iss (bind it with --trust-jwks-issuer ISSUER=FILE)",
                path.display()
            );
        }
    }
    // Held while serving: it applies the other fleet nodes' changes.
    #[cfg(feature = "etcd")]
    let mut _follower = None;
    let keystore = match (&args.store, &args.etcd, &args.master_key_file) {
        (Some(dir), _, Some(key_file)) => store::open_store(dir, || {
            secrets::master_key(key_file, args.allow_group_readable_secrets)
        })?,
        #[cfg(feature = "etcd")]
        (None, Some(_), Some(_)) => {
            let (keystore, follower) = store::open_fleet(&args).await?;
            _follower = Some(follower);
            keystore
        }
        _ => Keystore::new(),
    };
    // The key its signing pointer names: on a fleet, one for all nodes.
    let key = keystore
        .signing_key(tenant, purpose)
        .map_err(|e| format!("--key {}: {e}", args.key))?;
    // Before the actor, which takes its metric handles at spawn.
    let metrics = telemetry::install_handle()?;
    let upkeep = metrics.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            upkeep.run_upkeep();
        }
    });
    let config = KmsConfig::default()
        .with_trusted_jwks(trusted)
        .with_token_alg(args.alg)
        .with_token_purposes(vec![purpose.to_owned()])
        .with_token_cache(args.token_cache)
        .with_token_cache_bytes(args.token_cache_bytes);
    let handle = KmsActor::spawn(config, keystore, &Bus::new()).map_err(|e| e.to_string())?;
    // Held while serving: each provider's keys kept current in the
    // background (a provider that is down does not hold the start).
    let _issuers = issuers(&args, &handle)?;
    // After the store opened: a start that fails there leaves no file.
    // With client certificates, those authenticate instead.
    let admin_secret = match admin_token_file {
        Some(secret) => Some(secret),
        None if args.admin_client_ca.is_some() => None,
        None => Some(secrets::generate()?),
    };
    let public_tls = face_tls(
        args.tls_cert.as_ref().zip(args.tls_key.as_ref()),
        "--tls-cert",
        None,
        args.allow_group_readable_secrets,
    )?;
    let admin_tls = face_tls(
        args.admin_tls_cert
            .as_ref()
            .zip(args.admin_tls_key.as_ref()),
        "--admin-tls-cert",
        args.admin_client_ca.as_deref(),
        args.allow_group_readable_secrets,
    )?;
    let public_listener = bind(args.listen, "--listen").await?;
    let admin_listener = bind(args.admin_listen, "--admin-listen").await?;
    let metrics_listener = match args.metrics_listen {
        Some(addr) => Some(bind(addr, "--metrics-listen").await?),
        None => None,
    };
    let admin_addr = local(&admin_listener)?;
    let render = metrics.clone();
    // The admin face's requests are audited (target `kms::audit`) under
    // this principal.
    let admin = admin_router(
        handle.client().with_principal("gateway-admin"),
        AdminConfig {
            admin_token: admin_secret.as_ref().map(|s| Arc::clone(&s.token)),
            metrics: Some(Arc::new(move || render.render())),
            allowed_hosts: admin_hosts(admin_addr, &args.admin_host),
            max_lifetime: Duration::from_secs(args.mint_max_lifetime),
            issuer: args.token_issuer.clone(),
            audience: args.token_audience.clone(),
            ..AdminConfig::new(key.clone())
        },
    );
    if let Some(path) = admin_secret.as_ref().and_then(|s| s.generated.as_ref()) {
        eprintln!("gateway serve: admin secret in {}", path.display());
    }
    let scheme = |tls: &Option<FaceTls>| if tls.is_some() { "https" } else { "http" };
    let readiness = format!(
        "gateway serve: public face on {}://{}, admin face on {}://{admin_addr}, signing key {key}",
        scheme(&public_tls),
        local(&public_listener)?,
        scheme(&admin_tls),
    );
    // Each face's certificates follow their files (and SIGHUP).
    let certificates: Vec<Arc<tls::Certificates>> = [&public_tls, &admin_tls]
        .into_iter()
        .flatten()
        .map(|face| Arc::clone(&face.certificates))
        .collect();
    for watched in &certificates {
        tokio::spawn(tls::watch(Arc::clone(watched)));
    }
    let mut faces = vec![
        (
            "public",
            public_listener,
            public::router(&handle, &key, args.public(handle.client().topic())?),
            public_tls.map(|face| face.acceptor),
        ),
        (
            "admin",
            admin_listener,
            listener::guarded(admin, args.request_timeout),
            admin_tls.map(|face| face.acceptor),
        ),
    ];
    if let Some(listener) = metrics_listener {
        eprintln!(
            "gateway serve: metrics on http://{}/metrics",
            local(&listener)?
        );
        faces.push((
            "metrics",
            listener,
            listener::guarded(telemetry::router(metrics), args.request_timeout),
            None,
        ));
    }
    eprintln!("{readiness}");
    let limits = args.limits();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let servers: Vec<_> = faces
        .into_iter()
        .map(|(name, socket, router, tls)| {
            let server = listener::serve(socket, router, limits, tls, stop_rx.clone());
            (name, tokio::spawn(server))
        })
        .collect();
    while signals.next().await == Signal::Reload {
        reload(&handle, &args.jwks_files());
        for certificates in &certificates {
            tls::report(certificates, "SIGHUP", certificates.reload());
        }
    }
    eprintln!("gateway serve: stopping");
    let _ = stop_tx.send(true);
    // One deadline for every face together: a connection that never
    // finishes its request must not keep the store open forever.
    let drained_by = tokio::time::Instant::now() + DRAIN;
    for (name, server) in servers {
        let abort = server.abort_handle();
        match tokio::time::timeout_at(drained_by, server).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("gateway serve: the {name} face's task failed: {e}"),
            Err(_) => {
                abort.abort();
                eprintln!(
                    "gateway serve: the {name} face did not drain in {} s; closing anyway",
                    DRAIN.as_secs()
                );
            }
        }
    }
    handle.shutdown().await;
    eprintln!("gateway serve: stopped");
    Ok(())
}

/// A face's TLS: its certificates (reloaded) and its acceptor.
struct FaceTls {
    certificates: Arc<tls::Certificates>,
    acceptor: tokio_rustls::TlsAcceptor,
}

/// The TLS of a face given its certificate and key files, if any.
///
/// # Errors
/// The files' or the CA file's refusals (`tls.rs`).
fn face_tls(
    files: Option<(&PathBuf, &PathBuf)>,
    flag: &'static str,
    client_ca: Option<&std::path::Path>,
    allow_group: bool,
) -> Result<Option<FaceTls>, String> {
    let Some((cert, key)) = files else {
        return Ok(None);
    };
    let certificates = tls::Certificates::load(cert.clone(), key.clone(), flag, allow_group)?;
    let acceptor = tls::acceptor(Arc::clone(&certificates), client_ca)?;
    Ok(Some(FaceTls {
        certificates,
        acceptor,
    }))
}

/// The `Host` values the admin face answers: its bound address, localhost
/// on its port, and each `--admin-host` name, bare and with the port.
fn admin_hosts(bound: SocketAddr, names: &[String]) -> Vec<String> {
    let port = bound.port();
    let mut hosts = vec![bound.to_string(), format!("localhost:{port}")];
    for name in names {
        // An IPv6 address is written in brackets in `Host` (RFC 3986
        // §3.2.2).
        let name = match name.parse::<std::net::Ipv6Addr>() {
            Ok(ip) => format!("[{ip}]"),
            Err(_) => name.clone(),
        };
        hosts.push(format!("{name}:{port}"));
        hosts.push(name);
    }
    hosts
}

/// The usage errors clap cannot see (exit 2): `--etcd` in a build without
/// the `etcd` feature (saying how to build one), one header named by two
/// `--claim-header`s, a `--token-cache-bytes` below `--token-cache`, a
/// `--token-audience` that is not one of the `--audience`s, an `--issuer`
/// that is not https (or http to loopback) or also given to
/// `--trust-jwks-issuer`.
pub(crate) fn check_build(args: &ServeArgs) -> Result<(), String> {
    ClaimHeaders::new(args.claim_header.clone())?;
    for issuer in &args.issuer {
        kms::oidc::check_url(issuer).map_err(|e| format!("--issuer {issuer}: {e}"))?;
        if args
            .trust_jwks_issuer
            .iter()
            .any(|(bound, _)| bound == issuer)
        {
            return Err(format!(
                "--issuer {issuer} and --trust-jwks-issuer {issuer}=...: one source of keys per issuer"
            ));
        }
    }
    if let Some(own) = &args.token_audience {
        if !args.audience.is_empty() && !args.audience.contains(own) {
            return Err(format!(
                "--token-audience {own} is not one of the --audience values: the gateway's own tokens would be refused"
            ));
        }
    }
    if args.token_cache > 0 && args.token_cache_bytes < args.token_cache {
        return Err(format!(
            "--token-cache-bytes {} is below --token-cache {}: each entry takes at least a byte",
            args.token_cache_bytes, args.token_cache
        ));
    }
    if args.etcd.is_some() && !cfg!(feature = "etcd") {
        return Err(
            "--etcd needs a build with the etcd feature: cargo install --path kms-gateway --features etcd, then kms-gateway serve --etcd URL ..."
                .to_owned(),
        );
    }
    Ok(())
}

async fn bind(addr: SocketAddr, flag: &str) -> Result<TcpListener, String> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| format!("{flag} {addr}: {e}"))
}

fn local(listener: &TcpListener) -> Result<SocketAddr, String> {
    listener.local_addr().map_err(|e| e.to_string())
}

/// The `--issuer`s, kept current for `handle`'s actor.
///
/// # Errors
/// A CA file that cannot be read, or what `Issuers::start` refuses.
fn issuers(args: &ServeArgs, handle: &kms::actor::KmsHandle) -> Result<Option<Issuers>, String> {
    if args.issuer.is_empty() {
        return Ok(None);
    }
    let mut settings = FetchSettings::default()
        .with_fetch_timeout(args.jwks_fetch_timeout)
        .with_refetch_cooldown(args.jwks_refetch_cooldown)
        .with_max_stale(args.jwks_max_stale);
    for path in &args.issuer_ca {
        let pem =
            std::fs::read(path).map_err(|e| format!("--issuer-ca {}: {e}", path.display()))?;
        settings = settings.with_ca_pem(pem);
    }
    let configs = args.issuer.iter().map(IssuerConfig::discovered).collect();
    let issuers = Issuers::start(&handle.issuer_keys(), configs, settings)
        .map_err(|e| format!("--issuer: {e}"))?;
    for issuer in issuers.issuers() {
        eprintln!("gateway serve: keys of issuer {issuer} from its discovery document");
    }
    Ok(Some(issuers))
}

/// Every `--trust-jwks` and `--trust-jwks-issuer` file, loaded (the
/// latter bound to their issuers).
///
/// # Errors
/// The first file that cannot be read or is not a usable JWK Set, named.
fn trusted_sets(files: &[(Option<&str>, &Path)]) -> Result<Vec<TrustedJwkSet>, String> {
    files
        .iter()
        .map(|(issuer, path)| {
            let flag = match issuer {
                Some(issuer) => format!("--trust-jwks-issuer {issuer}="),
                None => "--trust-jwks ".to_owned(),
            };
            let text = std::fs::read(path).map_err(|e| format!("{flag}{}: {e}", path.display()))?;
            let set = TrustedJwkSet::from_json(&text)
                .map_err(|e| format!("{flag}{}: {e}", path.display()))?;
            Ok(match issuer {
                Some(issuer) => set.bound_to(*issuer),
                None => set,
            })
        })
        .collect()
}

/// SIGHUP: reloads every `--trust-jwks` and `--trust-jwks-issuer` file,
/// all or nothing. If any file fails to load, or the sets together are
/// refused (a `kid` twice), every old set stays and the log says why.
fn reload(handle: &kms::actor::KmsHandle, files: &[(Option<&str>, &Path)]) {
    match trusted_sets(files).and_then(|sets| {
        handle
            .reload_trusted_jwks(&sets)
            .map_err(|e| format!("--trust-jwks: {e}"))
    }) {
        Ok(keys) => eprintln!(
            "gateway serve: reloaded the trusted JWK Sets: {keys} keys from {} files",
            files.len()
        ),
        Err(e) => eprintln!("gateway serve: reload refused, the old trusted keys stay: {e}"),
    }
}
