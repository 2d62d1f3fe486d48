//! `gateway serve`: an HTTP gateway on the KMS, until SIGINT or SIGTERM.
//!
//! * Public face (`--listen`, default `127.0.0.1:8080`; port 0 picks a
//!   free port, logged; `public.rs`): `GET /.well-known/jwks.json`, `GET /whoami`
//!   (behind `kms_http::BearerLayer`: 200 with the verified claims, else
//!   the RFC 6750 challenge), the probes `GET /livez`, `/healthz` and
//!   `/readyz` (`readiness.rs`). Nothing that issues tokens or changes
//!   keys: any other path is 404.
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
//! outcome is one stderr line), and refetches every `--issuer`'s keys.
//!
//! Shutdown on SIGINT/SIGTERM (handlers installed before the store opens)
//! is graceful: `/readyz` turns 503 at once and everything is served for
//! `--shutdown-delay` (a second signal cuts it short); then every listener
//! stops accepting, requests in flight are answered (for at most
//! `--drain-timeout`), the actor shuts down (the store is closed), exit 0.
//! Every start-up error is a message and exit 1.
//!
//! It runs in two steps (`app.rs`): build (store, actor, issuers,
//! certificates, bound faces), then serve until a signal. Each subsystem
//! gets only its piece of the configuration (`config.rs`).

pub(crate) mod access_log;
pub(crate) mod access_rules;
mod app;
pub(crate) mod claim_headers;
pub(crate) mod forward_auth;
mod idle_body;
pub(crate) mod listener;
pub(crate) mod proxy;
pub(crate) mod public;
pub(crate) mod readiness;
pub(crate) mod secrets;
mod signals;
mod signer;
mod store;
mod tls;
mod trust;

#[cfg(feature = "etcd")]
pub(crate) use store::etcd_config;

use crate::config::ServeConfig;

/// Runs `gateway serve` until a signal; `Err` is a start-up error.
pub(crate) async fn run(config: ServeConfig) -> Result<(), String> {
    // First: a signal sent while the store opens (etcd may take a while)
    // must find its handler, not the default action.
    let signals = signals::Signals::install()?;
    app::App::build(config).await?.run(signals).await;
    Ok(())
}
