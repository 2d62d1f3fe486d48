//! [`jwks_router`]: the public JWK Set of the signing key.

use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use kms_actor::KmsClient;
use kms_core::KeyId;

use crate::error_body::kms_error_response;

/// Where the JWK Set is served (RFC 8615 well-known path, as OpenID
/// Connect discovery and most gateways use).
pub const JWKS_PATH: &str = "/.well-known/jwks.json";

#[derive(Clone)]
struct Jwks {
    client: KmsClient,
    key: KeyId,
}

/// A router serving `GET` [`JWKS_PATH`]: every version of `key`'s key that
/// verifies, from its `min_verify_version` to its head, none once it is
/// destroyed ([`KmsClient::jwks`]), `Content-Type: application/json`. A KMS error
/// is a JSON error body (`error_response`).
pub fn jwks_router(client: KmsClient, key: KeyId) -> Router {
    Router::new()
        .route(JWKS_PATH, get(serve))
        .with_state(Jwks { client, key })
}

async fn serve(State(jwks): State<Jwks>) -> Response {
    match jwks.client.jwks(&jwks.key).await {
        Ok(set) => match serde_json::to_string(&set) {
            Ok(body) => (
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )],
                body,
            )
                .into_response(),
            Err(e) => kms_error_response(&kms_core::KmsError::Internal {
                reason: format!("serializing the JWK Set: {e}"),
            }),
        },
        Err(e) => kms_error_response(&e),
    }
}
