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

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use kms_actor::KmsClient;
use serde_json::json;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::admin_state::{Admin, AdminConfig};
use crate::error_body::{error_response, json_answer};
use crate::json_body::empty_object;
use crate::{key_admin, mint};

/// Largest request body the admin router reads (bytes).
const MAX_BODY: usize = 64 * 1024;

/// The admin router (module docs).
pub fn admin_router(client: KmsClient, config: AdminConfig) -> Router {
    let state = Admin::new(client, config);
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
