//! `serve`'s public face: `GET /.well-known/jwks.json` (a snapshot per
//! key-set change, `Cache-Control: public, max-age=--jwks-max-age`,
//! `ETag`, 304), `GET /whoami`
//! behind `kms::http::BearerLayer` (200 with the verified claims, else the
//! RFC 6750 challenge) and `GET /healthz`. Nothing here issues tokens or
//! changes keys; any other path is 404. Every answer has a `Content-Type`
//! and `X-Content-Type-Options: nosniff`. The main job's HTTP phase serves
//! the same router.

use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use kms::actor::TokenKeys;
use kms::core::KeyId;
use kms::http::{error_response, jwks_router_with, BearerLayer, JwksConfig, VerifiedClaims};
use kms::jose::Validation;
use serde_json::{json, Value};

/// The public face: JWKS, `/whoami` behind the bearer layer, `/healthz`.
pub(crate) fn router(
    handle: &kms::actor::KmsHandle,
    key: &KeyId,
    jwks: JwksConfig,
    validation: Validation,
) -> Router {
    let whoami = Router::new()
        .route(
            "/whoami",
            get(|mut request: Request| async move {
                // Taken out of the request, not cloned as `Extension`
                // would: the claims are written back as they came.
                match request.extensions_mut().remove::<VerifiedClaims>() {
                    Some(VerifiedClaims(claims)) => {
                        Json(Value::Object(claims.into_map())).into_response()
                    }
                    // Only behind the layer, which always sets them.
                    None => error_response(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "http.internal",
                        "no verified claims",
                    ),
                }
            }),
        )
        // Of its keystore, only its own key's tokens (a shared store holds
        // other tenants' token keys too).
        .layer(BearerLayer::new(
            handle.client(),
            TokenKeys::of(key),
            validation,
        ));
    Router::new()
        .route("/healthz", get(|| async { Json(json!({"status": "ok"})) }))
        .merge(whoami)
        .merge(jwks_router_with(handle.client(), key.clone(), jwks))
        .fallback(|| async {
            error_response(StatusCode::NOT_FOUND, "http.not_found", "no such route")
        })
        .method_not_allowed_fallback(|| async {
            error_response(
                StatusCode::METHOD_NOT_ALLOWED,
                "http.method_not_allowed",
                "this route does not take that method",
            )
        })
        .layer(axum::middleware::map_response(nosniff))
}

/// `X-Content-Type-Options: nosniff` on every answer: a browser never
/// reads one as another type than it says.
async fn nosniff(mut response: Response) -> Response {
    response.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}
