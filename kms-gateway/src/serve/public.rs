//! `serve`'s public face: `GET /.well-known/jwks.json` (a snapshot per
//! key-set change, `Cache-Control: public, max-age=--jwks-max-age`,
//! `ETag`, 304), `GET /whoami`
//! behind `kms::http::BearerLayer` (200 with the verified claims, else the
//! RFC 6750 challenge), the probes `GET /livez`, `/healthz` and `/readyz`
//! (`readiness.rs`), and the forward-auth routes
//! (`forward_auth.rs`, behind the same layer). Nothing here issues tokens
//! or changes keys; any other path is 404. Every answer has a
//! `Content-Type` (but forward auth's empty 200) and
//! `X-Content-Type-Options: nosniff`. With `--resource`, the
//! protected-resource metadata document (RFC 9728) at its well-known
//! path, and every 401 challenge names it. The main job's HTTP phase
//! serves the same router.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use kms::access::AccessRules;
use kms::actor::TokenKeys;
use kms::core::KeyId;
use kms::http::{
    error_response, jwks_router_with, AccessLayer, BearerLayer, ClientAddress, JwksConfig,
    ResourceMetadata, VerifiedClaims,
};
use kms::jose::Validation;
use serde_json::Value;

use super::claim_headers::ClaimHeaders;
use super::proxy::Proxy;
use super::readiness::{self, Readiness};
use super::{forward_auth, listener};
use crate::config::{FaceSettings, ProxySettings, TokenSettings};

/// What the public face serves, from `serve`'s configuration.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// How the JWK Set is served (`--jwks-max-age`).
    pub(crate) jwks: JwksConfig,
    /// What `/whoami` and forward auth check of a token's claims.
    pub(crate) validation: Validation,
    /// The forward-auth prefix (`--forward-auth-path`), if served.
    pub(crate) forward_auth: Option<String>,
    /// The claims written as headers (`--claim-header`).
    pub(crate) claim_headers: Arc<ClaimHeaders>,
    /// `--request-timeout`, on the face's own routes.
    pub(crate) request_timeout: Duration,
    /// The proxy mode (`--upstream`): every other path goes upstream.
    pub(crate) proxy: Option<Arc<Proxy>>,
    /// `--trusted-proxy`: who the client is (the origin of its verify
    /// requests).
    pub(crate) client_address: ClientAddress,
    /// `--access-rules`: the proxy mode's and forward auth's rules.
    pub(crate) access_rules: Option<AccessRules>,
    /// `--token-cookie`: the cookie a token may come in.
    pub(crate) token_cookie: Option<String>,
    /// `--resource`: the protected-resource metadata, if served.
    pub(crate) resource_metadata: Option<ResourceMetadata>,
    /// What `/readyz` reads (always ready unless set).
    pub(crate) readiness: Arc<Readiness>,
}

impl Options {
    /// The public face's options from the pieces of the configuration it
    /// reads; `tls` says whether the face is HTTPS (the proxy's
    /// `X-Forwarded-Proto`), `topic` is the KMS client's (refusals are
    /// counted under it).
    pub(crate) fn new(
        tokens: &TokenSettings,
        proxy: &ProxySettings,
        faces: &FaceSettings,
        tls: bool,
        topic: &str,
    ) -> Self {
        let claim_headers = Arc::new(proxy.claim_headers.clone());
        let upstream = proxy.upstream.as_ref().map(|upstream| {
            Arc::new(Proxy::new(
                upstream.clone(),
                proxy,
                faces.limits.idle_timeout,
                Arc::clone(&claim_headers),
                tls,
                topic.to_owned(),
            ))
        });
        Options {
            jwks: JwksConfig::default().with_max_age(tokens.jwks_max_age),
            validation: tokens.validation.clone(),
            forward_auth: proxy.forward_auth_path.clone(),
            claim_headers,
            request_timeout: faces.request_timeout,
            proxy: upstream,
            client_address: proxy.trusted_proxies.clone(),
            access_rules: proxy.access_rules.as_ref().map(|file| file.rules.clone()),
            token_cookie: proxy.token_cookie.clone(),
            resource_metadata: proxy.resource_metadata.clone(),
            readiness: Arc::default(),
        }
    }
}

/// The public face: JWKS, `/whoami` and forward auth behind the bearer
/// layer, the probes; with a proxy, every other path behind the same
/// layer to the upstream, else 404. With access rules, forward auth and
/// the proxy sit behind them instead (`kms::http::AccessLayer`), and the
/// layer comes back with the router, for SIGHUP to replace its rules.
/// The request timeout and `nosniff` cover the face's own routes, not the
/// upstream's answers.
pub(crate) fn router(
    handle: &kms::actor::KmsHandle,
    key: &KeyId,
    options: Options,
) -> (Router, Option<AccessLayer>) {
    // Of its keystore, only its own key's tokens (a shared store holds
    // other tenants' token keys too).
    // Each token verified as its client's request (the origin table keeps
    // a forger's signatures out of other clients' batches).
    let mut bearer = BearerLayer::new(handle.client(), TokenKeys::of(key), options.validation)
        .with_client_address(options.client_address);
    if let Some(name) = &options.token_cookie {
        bearer = bearer.with_token_cookie(name);
    }
    if let Some(metadata) = &options.resource_metadata {
        bearer = bearer.with_resource_metadata(metadata);
    }
    let access = options
        .access_rules
        .map(|rules| AccessLayer::new(rules, bearer.clone()));
    let verified = Router::new().route(
        "/whoami",
        get(|mut request: Request| async move {
            // Taken out of the request, not cloned as `Extension`
            // would: the claims are written back as they came.
            match request.extensions_mut().remove::<VerifiedClaims>() {
                Some(VerifiedClaims(claims)) => {
                    listener::no_store(Json(Value::Object(claims.into_map())).into_response())
                }
                // Only behind the layer, which always sets them.
                None => error_response(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "http.internal",
                    "no verified claims",
                ),
            }
        }),
    );
    let mut own = Router::new()
        .merge(readiness::routes(options.readiness))
        .merge(verified.layer(bearer.clone()));
    if let Some(path) = &options.forward_auth {
        let checks = forward_auth::routes(
            path,
            Arc::clone(&options.claim_headers),
            handle.client().topic().to_owned(),
            options
                .resource_metadata
                .as_ref()
                .map(|metadata| Arc::from(metadata.url())),
        );
        own = own.merge(match &access {
            Some(access) => checks.layer(access.for_forward_auth(path)),
            None => checks.layer(bearer.clone()),
        });
    }
    if let Some(metadata) = &options.resource_metadata {
        own = own.merge(match &access {
            Some(access) => access.metadata_router(metadata),
            None => metadata.router(),
        });
    }
    let own = own
        .merge(jwks_router_with(handle.client(), key.clone(), options.jwks))
        .method_not_allowed_fallback(|| async {
            error_response(
                StatusCode::METHOD_NOT_ALLOWED,
                "http.method_not_allowed",
                "this route does not take that method",
            )
        });
    let timeout = options.request_timeout;
    let router = match options.proxy {
        None => listener::guarded(
            own.fallback(|| async {
                error_response(StatusCode::NOT_FOUND, "http.not_found", "no such route")
            }),
            timeout,
        ),
        // Set after the layer, so that it does not wrap it.
        Some(proxy) => {
            let upstream =
                Router::new().fallback(move |request: Request| Arc::clone(&proxy).forward(request));
            listener::guarded(own, timeout).fallback_service(match &access {
                Some(access) => upstream.layer(access.clone()),
                None => upstream.layer(bearer),
            })
        }
    };
    (router, access)
}
