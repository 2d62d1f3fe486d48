//! `serve` built, then run. [`App::build`] opens the store, spawns the
//! actor, starts the issuers, loads the certificates and binds the faces:
//! every error there is a start-up error (a message, exit 1), and the
//! faces listen only once the signing key is loaded. [`App::run`] serves
//! until SIGINT or SIGTERM, reloading the trusted JWK Sets and the
//! certificates on SIGHUP, then drains (module docs of `serve`).

use crate::logging::{info_line, warn_line};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kms::actor::{KmsActor, KmsConfig, KmsHandle};
use kms::bus::Bus;
use kms::http::{admin_router, AccessLayer, AdminConfig, ClientAddress};
use kms::oidc::Issuers;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::access_log::{self, AccessLog};
use super::listener::Handler;
use super::readiness::Readiness;
use super::secrets::{self, AdminSecret};
use super::signals::{Signal, Signals};
use super::signer::signing_key;
use super::{access_rules, listener, public, store, tls, trust};
use crate::config::{CertFiles, Limits, ServeConfig};
use crate::telemetry;

/// How often the metrics recorder's upkeep runs (histogram rotation).
const METRICS_UPKEEP: Duration = Duration::from_secs(5);

/// The gateway, built and bound, not yet serving.
pub(crate) struct App {
    handle: KmsHandle,
    faces: Vec<Face>,
    limits: Limits,
    /// Each face's certificates, reloaded on SIGHUP.
    certificates: Vec<Arc<tls::Certificates>>,
    /// The static JWK Set files, reloaded on SIGHUP.
    jwks_files: Vec<(Option<String>, PathBuf)>,
    /// The access rules' file and the layer whose rules SIGHUP replaces.
    access_rules: Option<(PathBuf, AccessLayer)>,
    /// The line that says the gateway serves.
    serving_line: String,
    /// What `/readyz` reads; the first stop signal turns it 503.
    readiness: Arc<Readiness>,
    /// `--trusted-proxy`: peers without a per-address connection limit.
    trusted_proxies: ClientAddress,
    /// `--access-log`: finished (its last lines written) at the stop.
    access_log: Option<(AccessLog, access_log::Writer)>,
    /// `--shutdown-delay` and `--drain-timeout`.
    shutdown_delay: Duration,
    drain_timeout: Duration,
    /// Each provider's keys kept current in the background (SIGHUP asks
    /// for them again).
    issuers: Option<Arc<Issuers>>,
    /// Held while serving: a generated secret's directory goes with it.
    _admin_secret: Option<AdminSecret>,
    /// Held while serving: it applies the other fleet nodes' changes.
    _follower: Option<Arc<store::Follower>>,
}

/// One face: its socket, its routes (and access log) and its TLS.
struct Face {
    name: &'static str,
    socket: TcpListener,
    handler: Handler,
    tls: Option<TlsAcceptor>,
}

impl App {
    /// Builds the gateway from its configuration (module docs).
    ///
    /// # Errors
    /// A start-up error, as a message naming the flag and file at fault.
    pub(crate) async fn build(config: ServeConfig) -> Result<App, String> {
        // Not fatal: the faces still serve, up to the lower limit.
        match listener::raise_open_files_limit() {
            Ok(limit) => tracing::debug!(?limit, "open-files limit"),
            Err(e) => warn_line!("gateway serve: warning: {e}"),
        }
        let admin_token = secrets::admin_token_file(&config.admin)?;
        let trusted = trust::load(&config.tokens.jwks_files)?;
        for (issuer, path) in &config.tokens.jwks_files {
            if issuer.is_none() {
                warn_line!(
                    "gateway serve: {} is unbound: its keys verify tokens of any iss (bind it with --trust-jwks-issuer ISSUER=FILE)",
                    path.display()
                );
            }
        }
        let (keystore, follower) = store::open(&config.store).await?;
        let tokens = &config.tokens;
        // The key its signing pointer names: on a fleet, one for all nodes;
        // a new one of --alg's algorithm.
        let (key, token_alg) = signing_key(&keystore, tokens)?;
        // Before the actor, which takes its metric handles at spawn.
        let metrics = telemetry::install_handle()?;
        let upkeep = metrics.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(METRICS_UPKEEP).await;
                upkeep.run_upkeep();
            }
        });
        let actor = KmsConfig::default()
            .with_trusted_jwks(trusted)
            .with_token_alg(token_alg)
            .with_token_purposes(vec![tokens.purpose.clone()])
            .with_token_cache(tokens.token_cache)
            .with_token_cache_bytes(tokens.token_cache_bytes);
        let handle = KmsActor::spawn(actor, keystore, &Bus::new()).map_err(|e| e.to_string())?;
        // A provider that is down does not hold the start.
        let issuers = trust::issuers(tokens, &handle)?.map(Arc::new);
        let follower = follower.map(Arc::new);
        let readiness = Arc::new(Readiness::new(issuers.clone(), follower.clone()));
        // After the providers start (which set their own policies, none).
        for (issuer, policy) in &tokens.issuer_policies {
            handle
                .issuer_keys()
                .set_validation(issuer, Some(policy.clone()));
        }
        // After the store opened: a start that fails there leaves no file.
        // With client certificates, those authenticate instead.
        let admin_secret = match admin_token {
            Some(secret) => Some(secret),
            None if config.tls.admin_client_ca.is_some() => None,
            None => Some(secrets::generate()?),
        };
        let allow_group = config.tls.allow_group;
        let public_tls = face_tls(config.tls.public.as_ref(), "--tls-cert", None, allow_group)?;
        let admin_tls = face_tls(
            config.tls.admin.as_ref(),
            "--admin-tls-cert",
            config.tls.admin_client_ca.as_deref(),
            allow_group,
        )?;
        let faces = &config.faces;
        let public_listener = bind(faces.listen, "--listen").await?;
        let admin_listener = bind(faces.admin_listen, "--admin-listen").await?;
        let metrics_listener = match faces.metrics_listen {
            Some(addr) => Some(bind(addr, "--metrics-listen").await?),
            None => None,
        };
        let admin_addr = local(&admin_listener)?;
        let render = metrics.clone();
        let admin = &config.admin;
        // The admin face's requests are audited (target `kms::audit`) under
        // this principal.
        let admin_routes = admin_router(
            handle.client().with_principal("gateway-admin"),
            AdminConfig {
                admin_token: admin_secret.as_ref().map(|s| Arc::clone(&s.token)),
                metrics: Some(Arc::new(move || render.render())),
                allowed_hosts: admin_hosts(admin_addr, &admin.hosts),
                max_lifetime: admin.mint_max_lifetime,
                issuer: admin.token_issuer.clone(),
                audience: admin.token_audience.clone(),
                ..AdminConfig::new(key.clone())
            },
        );
        if let Some(path) = admin_secret.as_ref().and_then(|s| s.generated.as_ref()) {
            info_line!("gateway serve: admin secret in {}", path.display());
        }
        let scheme = |tls: &Option<FaceTls>| if tls.is_some() { "https" } else { "http" };
        let serving_line = format!(
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
        let mut public_options = public::Options::new(
            tokens,
            &config.proxy,
            faces,
            public_tls.is_some(),
            handle.client().topic(),
        );
        public_options.readiness = Arc::clone(&readiness);
        let (public_router, access) = public::router(&handle, &key, public_options);
        let access_rules = config
            .proxy
            .access_rules
            .as_ref()
            .map(|file| file.path.clone())
            .zip(access);
        let access_log = if config.logs.access_log {
            Some(AccessLog::start(
                config.proxy.trusted_proxies.clone(),
                config.proxy.forward_auth_path.clone(),
            )?)
        } else {
            None
        };
        let logged = |router| Handler {
            access_log: access_log.as_ref().map(|(log, _)| log.clone()),
            ..Handler::new(router)
        };
        let mut all = vec![
            Face {
                name: "public",
                socket: public_listener,
                handler: logged(public_router),
                tls: public_tls.map(|face| face.acceptor),
            },
            Face {
                name: "admin",
                socket: admin_listener,
                handler: logged(listener::guarded(admin_routes, faces.request_timeout)),
                tls: admin_tls.map(|face| face.acceptor),
            },
        ];
        if let Some(socket) = metrics_listener {
            let port = local(&socket)?.port();
            info_line!(
                "gateway serve: metrics on http://{}/metrics",
                local(&socket)?
            );
            all.push(Face {
                name: "metrics",
                socket,
                handler: Handler::new(listener::guarded(
                    telemetry::router(metrics, port, &admin.hosts),
                    faces.request_timeout,
                )),
                tls: None,
            });
        }
        Ok(App {
            handle,
            faces: all,
            limits: faces.limits,
            certificates,
            jwks_files: config.tokens.jwks_files,
            access_rules,
            serving_line,
            readiness,
            trusted_proxies: config.proxy.trusted_proxies.clone(),
            access_log,
            shutdown_delay: faces.shutdown_delay,
            drain_timeout: faces.drain_timeout,
            issuers,
            _admin_secret: admin_secret,
            _follower: follower,
        })
    }

    /// Serves until SIGINT or SIGTERM (SIGHUP reloads); then, not ready,
    /// serves on for the shutdown delay (a second stop signal ends it),
    /// stops accepting, drains what is in flight for at most the drain
    /// timeout and shuts the actor down (the store is closed).
    pub(crate) async fn run(self, mut signals: Signals) {
        info_line!("{}", self.serving_line);
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let servers: Vec<_> = self
            .faces
            .into_iter()
            .map(|face| {
                let server = listener::serve(
                    face.name,
                    face.socket,
                    face.handler,
                    self.limits,
                    self.trusted_proxies.clone(),
                    face.tls,
                    stop_rx.clone(),
                );
                (face.name, tokio::spawn(server))
            })
            .collect();
        let reload = || {
            trust::reload(&self.handle, &self.jwks_files);
            if let Some(issuers) = &self.issuers {
                trust::refresh(issuers);
            }
            if let Some((path, layer)) = &self.access_rules {
                access_rules::reload(path, layer);
            }
            for certificates in &self.certificates {
                tls::report(certificates, "SIGHUP", certificates.reload());
            }
        };
        while signals.next().await == Signal::Reload {
            reload();
        }
        self.readiness.shut_down();
        if !self.shutdown_delay.is_zero() {
            info_line!(
                "gateway serve: stopping in {} s (--shutdown-delay): /readyz answers 503, everything else is served",
                self.shutdown_delay.as_secs_f64()
            );
            let delay = tokio::time::sleep(self.shutdown_delay);
            tokio::pin!(delay);
            loop {
                tokio::select! {
                    () = &mut delay => break,
                    signal = signals.next() => match signal {
                        Signal::Reload => reload(),
                        Signal::Stop => {
                            info_line!("gateway serve: a second stop signal: the shutdown delay is cut short");
                            break;
                        }
                    },
                }
            }
        }
        info_line!("gateway serve: stopping");
        let _ = stop_tx.send(true);
        // One deadline for every face together: a connection that never
        // finishes its request must not keep the store open forever.
        let drained_by = tokio::time::Instant::now() + self.drain_timeout;
        for (name, server) in servers {
            let abort = server.abort_handle();
            match tokio::time::timeout_at(drained_by, server).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => warn_line!("gateway serve: the {name} face's task failed: {e}"),
                Err(_) => {
                    abort.abort();
                    warn_line!(
                        "gateway serve: the {name} face did not drain in {} s (--drain-timeout); closing anyway",
                        self.drain_timeout.as_secs_f64()
                    );
                }
            }
        }
        if let Some((log, writer)) = self.access_log {
            // Off the runtime's workers: it waits for the writer thread.
            let _ = tokio::task::spawn_blocking(move || log.finish(writer)).await;
        }
        self.handle.shutdown().await;
        info_line!("gateway serve: stopped");
    }
}

/// A face's TLS: its certificates (reloaded) and its acceptor.
struct FaceTls {
    certificates: Arc<tls::Certificates>,
    acceptor: TlsAcceptor,
}

/// The TLS of a face given its certificate and key files, if any.
///
/// # Errors
/// The files' or the CA file's refusals (`tls.rs`).
fn face_tls(
    files: Option<&CertFiles>,
    flag: &'static str,
    client_ca: Option<&Path>,
    allow_group: bool,
) -> Result<Option<FaceTls>, String> {
    let Some(files) = files else {
        return Ok(None);
    };
    let certificates =
        tls::Certificates::load(files.cert.clone(), files.key.clone(), flag, allow_group)?;
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

async fn bind(addr: SocketAddr, flag: &str) -> Result<TcpListener, String> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| format!("{flag} {addr}: {e}"))
}

fn local(listener: &TcpListener) -> Result<SocketAddr, String> {
    listener.local_addr().map_err(|e| e.to_string())
}
