//! [`admin_router`]: token issuance and key rotation, for a listener that
//! only operators reach (the gateway always protects it with a bearer
//! secret, and binds it to loopback unless told otherwise).
//!
//! Every request passes, in this order: the browser guard
//! (`admin_guard.rs`: 403 for an `Origin` header, a `Sec-Fetch-Site` other
//! than `none`, or a `Host` that is not one of
//! [`AdminConfig::allowed_hosts`]), then the secret (401 without it, when
//! [`AdminConfig::admin_token`] is set), then routing. Every `POST` needs
//! `Content-Type: application/json` and a JSON object body (`{}` for
//! `rotate` and `destroy`), else 415 or 400: a plain HTML form cannot send
//! one.
//!
//! Routes: `POST /tokens` (a JSON object of claims → `{"token", "kid"}`),
//! `POST /keys/rotate` (→ `{"kid"}` of the new head), the key lifecycle
//! (`GET`/`POST /keys/policy`, `POST /keys/trim`, `POST /keys/destroy`;
//! `key_admin.rs`), `GET /metrics` (when a renderer is configured). Every non-2xx answer has a JSON body
//! `{"error": "<stable code>", "message": "<text>"}`, the code being the
//! `KmsError` code where there is one.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use kms_actor::KmsClient;
use kms_core::KeyId;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

use crate::admin_guard::AllowedHosts;
use crate::error_body::{error_response, json_answer};
use crate::{key_admin, mint};

/// Largest request body the admin router reads (bytes).
const MAX_BODY: usize = 64 * 1024;

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

#[derive(Clone)]
pub(crate) struct Admin {
    pub(crate) client: KmsClient,
    pub(crate) config: AdminConfig,
    /// SHA-256 of `config.admin_token`, computed once.
    secret_digest: Option<[u8; 32]>,
    /// `config.allowed_hosts`, lowercased once.
    hosts: AllowedHosts,
    /// Held across a policy change's read, change and write back, so two
    /// concurrent `POST /keys/policy` cannot lose one's fields.
    pub(crate) policy_change: Arc<tokio::sync::Mutex<()>>,
}

/// The admin router (module docs).
pub fn admin_router(client: KmsClient, config: AdminConfig) -> Router {
    let secret_digest = config
        .admin_token
        .as_ref()
        .map(|secret| Sha256::digest(secret.as_slice()).into());
    let hosts = AllowedHosts::new(&config.allowed_hosts);
    let state = Admin {
        client,
        config,
        secret_digest,
        hosts,
        policy_change: Arc::default(),
    };
    // `layer`, not `route_layer`: the guard and the secret come before
    // routing, so every path (the fallbacks included) answers alike.
    Router::new()
        .route("/tokens", post(mint::issue))
        .route("/keys/rotate", post(rotate))
        .route(
            "/keys/policy",
            get(key_admin::policy).post(key_admin::set_policy),
        )
        .route("/keys/trim", post(key_admin::trim))
        .route("/keys/destroy", post(key_admin::destroy))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(middleware::from_fn_with_state(state.clone(), authorize))
        .layer(middleware::map_response(no_store))
        .with_state(state)
}

/// `Cache-Control: no-store` on every answer of the admin face (tokens,
/// policies and refusals alike): no cache keeps them; and
/// `X-Content-Type-Options: nosniff`.
async fn no_store(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// Refuses a request from a web page or to another host (403), then one
/// without the admin secret when one is configured (401).
async fn authorize(State(admin): State<Admin>, request: Request, next: Next) -> Response {
    if let Some(refusal) = admin.hosts.refusal(&request) {
        return refusal;
    }
    if authorized(&admin, request.headers()) {
        next.run(request).await
    } else {
        unauthorized()
    }
}

/// Whether `headers` carry the admin secret (or none is configured).
fn authorized(admin: &Admin, headers: &HeaderMap) -> bool {
    let Some(secret_digest) = &admin.secret_digest else {
        return true;
    };
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("Bearer"))
        .map(|(_, token)| token.trim().as_bytes());
    // Digests of equal length compared in constant time: comparing the
    // texts would end early on a length mismatch and tell the length.
    presented.is_some_and(|token| bool::from(Sha256::digest(token).ct_eq(secret_digest)))
}

fn unauthorized() -> Response {
    let mut response = error_response(
        StatusCode::UNAUTHORIZED,
        "admin.unauthorized",
        "the admin face needs its bearer secret",
    );
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

async fn not_found() -> Response {
    error_response(StatusCode::NOT_FOUND, "http.not_found", "no such route")
}

async fn method_not_allowed() -> Response {
    error_response(
        StatusCode::METHOD_NOT_ALLOWED,
        "http.method_not_allowed",
        "this route does not take that method",
    )
}

/// A request body that must be a JSON object sent as `Content-Type:
/// application/json` (parameters such as `charset` allowed); `what` names
/// it in the refusals: 415 `http.unsupported_media_type` for another type
/// or none (what an HTML form sends), 400 `http.invalid_<what>` for a body
/// that is not a JSON object and 400 `http.duplicate_name` for one that
/// names a member twice.
pub(crate) fn json_object(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    what: &str,
) -> Result<Map<String, Value>, Box<Response>> {
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            return Err(Box::new(error_response(
                rejection.status(),
                "http.bad_body",
                &rejection.body_text(),
            )))
        }
    };
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        return Err(Box::new(error_response(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "http.unsupported_media_type",
            &format!("the {what} must be application/json"),
        )));
    }
    // The project's strict object parser: a member name twice is refused,
    // never resolved (serde_json would keep the last).
    match kms_jose::Claims::from_json(&body) {
        Ok(object) => Ok(object.into_map()),
        Err(kms_jose::JoseError::Duplicate { name, .. }) => Err(Box::new(error_response(
            StatusCode::BAD_REQUEST,
            "http.duplicate_name",
            &format!("the member name {name} appears more than once"),
        ))),
        Err(_) => Err(Box::new(error_response(
            StatusCode::BAD_REQUEST,
            &format!("http.invalid_{what}"),
            &format!("the body must be a JSON object of {what}"),
        ))),
    }
}

/// A body that must be the empty JSON object `{}` (`rotate`, `destroy`):
/// the refusals of [`json_object`], and 400 `http.invalid_<what>` for an
/// object with members.
pub(crate) fn empty_object(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    what: &str,
) -> Result<(), Box<Response>> {
    if json_object(headers, body, what)?.is_empty() {
        Ok(())
    } else {
        Err(Box::new(error_response(
            StatusCode::BAD_REQUEST,
            &format!("http.invalid_{what}"),
            &format!("{what} takes the empty object {{}}"),
        )))
    }
}

/// `POST /keys/rotate` with `{}`.
async fn rotate(
    State(admin): State<Admin>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    if let Err(refusal) = empty_object(&headers, body, "rotate") {
        return *refusal;
    }
    json_answer(
        admin.client.rotate(&admin.config.key).await,
        |head| json!({ "kid": head.to_string() }),
    )
}

/// `GET /metrics`.
async fn metrics(State(admin): State<Admin>) -> Response {
    match &admin.config.metrics {
        Some(render) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4"),
            )],
            render(),
        )
            .into_response(),
        None => error_response(StatusCode::NOT_FOUND, "http.not_found", "no metrics here"),
    }
}
