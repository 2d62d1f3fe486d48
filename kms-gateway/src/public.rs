//! `serve`'s public face: `GET /.well-known/jwks.json` (a snapshot per
//! key-set change, `Cache-Control: public, max-age=--jwks-max-age`,
//! `ETag`, 304), `GET /whoami`
//! behind `kms::http::BearerLayer` (200 with the verified claims, else the
//! RFC 6750 challenge) and `GET /healthz`. Nothing here issues tokens or
//! changes keys; any other path is 404. The main job's HTTP phase serves
//! the same router.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use kms::actor::TokenKeys;
use kms::core::KeyId;
use kms::http::{jwks_router_with, BearerLayer, JwksConfig, VerifiedClaims};
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
                    None => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
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
}
