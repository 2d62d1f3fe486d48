//! The public face's probes: `GET /livez` (and `/healthz`, the same)
//! answers 200 while the process serves; `GET /readyz` answers 200
//! `{"ready":true}` when the node can answer correctly, else 503
//! `{"ready":false,"reasons":[…]}` with, in this order, any of:
//!
//! * `issuer_keys`: an `--issuer` whose keys have not been fetched once
//!   since start (its tokens would be refused);
//! * `fleet_sync`: a fleet node whose watch on etcd has not answered once
//!   since start;
//! * `shutting_down`: SIGTERM or SIGINT arrived (`--shutdown-delay`).
//!
//! Invariant: a reason, once gone, comes back only as `shutting_down`.
//! Later outages of a provider or of etcd are shared by every replica and
//! show in metrics and logs, not here: one outage must not take every
//! replica out of rotation while each still serves from memory. Neither
//! probe needs a token, and neither says more than the reasons' names.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use kms::oidc::Issuers;
use serde_json::json;

use super::listener::no_store;
use super::store::{self, Follower};

/// The reason an issuer's keys were never fetched.
pub(crate) const ISSUER_KEYS: &str = "issuer_keys";
/// The reason a fleet node has not synced with etcd.
pub(crate) const FLEET_SYNC: &str = "fleet_sync";
/// The reason the gateway is stopping.
pub(crate) const SHUTTING_DOWN: &str = "shutting_down";

/// What `/readyz` reads (module docs).
#[derive(Debug, Default)]
pub(crate) struct Readiness {
    /// The `--issuer`s, if any.
    issuers: Option<Arc<Issuers>>,
    /// A fleet node's follower, if on etcd.
    follower: Option<Arc<Follower>>,
    /// Set once by the first stop signal.
    shutting_down: AtomicBool,
}

impl Readiness {
    /// Readiness of a node with these issuers and this fleet follower.
    pub(crate) fn new(issuers: Option<Arc<Issuers>>, follower: Option<Arc<Follower>>) -> Self {
        Readiness {
            issuers,
            follower,
            shutting_down: AtomicBool::new(false),
        }
    }

    /// From now on `/readyz` says `shutting_down`.
    pub(crate) fn shut_down(&self) {
        // Relaxed: a flag read on its own, synchronising with nothing.
        self.shutting_down.store(true, Ordering::Relaxed);
    }

    /// Why the node is not ready, in the documented order; empty when it
    /// is.
    pub(crate) fn reasons(&self) -> Vec<&'static str> {
        let mut reasons = Vec::new();
        if self.issuers.as_ref().is_some_and(|i| !i.all_fetched()) {
            reasons.push(ISSUER_KEYS);
        }
        if self.follower.as_ref().is_some_and(|f| !store::synced(f)) {
            reasons.push(FLEET_SYNC);
        }
        // Relaxed: see `shut_down`.
        if self.shutting_down.load(Ordering::Relaxed) {
            reasons.push(SHUTTING_DOWN);
        }
        reasons
    }
}

/// `/readyz`, `/livez` and `/healthz`, every answer `Cache-Control:
/// no-store` (a probe's answer is for now only).
pub(crate) fn routes(readiness: Arc<Readiness>) -> Router {
    let live = || async { no_store(Json(json!({"status": "ok"})).into_response()) };
    Router::new()
        .route("/livez", get(live))
        .route("/healthz", get(live))
        .route(
            "/readyz",
            get(move || async move {
                let reasons = readiness.reasons();
                let response = if reasons.is_empty() {
                    Json(json!({"ready": true})).into_response()
                } else {
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        Json(json!({"ready": false, "reasons": reasons})),
                    )
                        .into_response()
                };
                no_store(response)
            }),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_without_issuers_or_fleet_is_ready_until_it_stops() {
        let readiness = Readiness::new(None, None);
        assert!(readiness.reasons().is_empty());
        readiness.shut_down();
        assert_eq!(readiness.reasons(), [SHUTTING_DOWN]);
    }
}
