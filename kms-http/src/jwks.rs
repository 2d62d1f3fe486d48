//! [`jwks_router`]: the public JWK Set of the signing key, served from a
//! prepared snapshot.
//!
//! The route needs no credentials, so its cost per request must not reach
//! the actor: building the set is an `attest` on the priority lane (which
//! the actor serves before verifications, and where rotations and admin
//! calls wait too). So the set is built once per key-set generation
//! ([`KmsClient::key_set_generation`]) and kept as a snapshot: its JSON
//! body and an `ETag`.
//!
//! Invariants:
//! * A snapshot is tagged with the generation read *before* it was built,
//!   and served only while the generation is still that tag: a set built
//!   before a rotation, policy change, trim, destroy or fleet update is
//!   never served after it.
//! * At most one rebuild runs at a time; requests that find the snapshot
//!   stale meanwhile wait for it and serve its result (a flood after a
//!   change costs one `attest`).
//! * Answers carry `Cache-Control: public, max-age=N` ([`JwksConfig`]) and
//!   the snapshot's strong `ETag`; a `GET` whose `If-None-Match` matches
//!   it is answered 304 with no body (RFC 9110 §13.1.2, weak comparison).

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use kms_actor::KmsClient;
use kms_core::KeyId;
use sha2::{Digest, Sha256};

use crate::error_body::kms_error_response;

/// Where the JWK Set is served (RFC 8615 well-known path, as OpenID
/// Connect discovery and most gateways use).
pub const JWKS_PATH: &str = "/.well-known/jwks.json";

/// How the JWK Set route answers.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JwksConfig {
    /// `Cache-Control: public, max-age=` this, in whole seconds: how long
    /// a verifier or a proxy may reuse the set. Short, because a rotation
    /// signs with the new head at once and a verifier that does not
    /// re-fetch on an unknown `kid` waits this long. Default: 60 s.
    pub max_age: Duration,
}

impl Default for JwksConfig {
    fn default() -> Self {
        JwksConfig {
            max_age: Duration::from_secs(60),
        }
    }
}

impl JwksConfig {
    /// This config with `max_age` (whole seconds are sent).
    #[must_use]
    pub fn with_max_age(mut self, max_age: Duration) -> Self {
        self.max_age = max_age;
        self
    }
}

/// The set as served for one key-set generation.
struct Snapshot {
    generation: u64,
    body: Bytes,
    /// `"<32 hex digits of the body's SHA-256>"`.
    etag: HeaderValue,
}

#[derive(Clone)]
struct Jwks {
    client: KmsClient,
    key: KeyId,
    cache_control: HeaderValue,
    /// The newest snapshot (read on every request; written by a rebuild).
    snapshot: Arc<RwLock<Option<Arc<Snapshot>>>>,
    /// Held by the one rebuild in progress.
    rebuild: Arc<tokio::sync::Mutex<()>>,
}

/// A router serving `GET` [`JWKS_PATH`] with the default [`JwksConfig`]
/// ([`jwks_router_with`]).
pub fn jwks_router(client: KmsClient, key: KeyId) -> Router {
    jwks_router_with(client, key, JwksConfig::default())
}

/// A router serving `GET` [`JWKS_PATH`]: every version of `key`'s key that
/// verifies, from its `min_verify_version` to its head, none once it is
/// destroyed ([`KmsClient::jwks`]), `Content-Type: application/json`,
/// from a snapshot rebuilt when the key set changes (module docs), with
/// `Cache-Control` and `ETag`, and 304 for a matching `If-None-Match`. A
/// KMS error while building the set is a JSON error body
/// (`error_response`: 503 with `Retry-After` when the actor is
/// overloaded), and nothing is cached.
pub fn jwks_router_with(client: KmsClient, key: KeyId, config: JwksConfig) -> Router {
    let cache_control =
        HeaderValue::from_str(&format!("public, max-age={}", config.max_age.as_secs()))
            .unwrap_or_else(|_| HeaderValue::from_static("no-cache"));
    Router::new().route(JWKS_PATH, get(serve)).with_state(Jwks {
        client,
        key,
        cache_control,
        snapshot: Arc::default(),
        rebuild: Arc::default(),
    })
}

async fn serve(State(jwks): State<Jwks>, headers: HeaderMap) -> Response {
    match jwks.current().await {
        Ok(snapshot) => jwks.answer(&snapshot, &headers),
        Err(response) => *response,
    }
}

impl Jwks {
    /// The snapshot of the current generation, built if there is none.
    async fn current(&self) -> Result<Arc<Snapshot>, Box<Response>> {
        if let Some(snapshot) = self.fresh() {
            return Ok(snapshot);
        }
        let _one_at_a_time = self.rebuild.lock().await;
        // Built by the rebuild this one waited for.
        if let Some(snapshot) = self.fresh() {
            return Ok(snapshot);
        }
        // Read before building (module docs, first invariant).
        let generation = self.client.key_set_generation();
        let set = self
            .client
            .jwks(&self.key)
            .await
            .map_err(|e| Box::new(kms_error_response(&e)))?;
        let body = serde_json::to_vec(&set).map_err(|e| {
            Box::new(kms_error_response(&kms_core::KmsError::Internal {
                reason: format!("serializing the JWK Set: {e}"),
            }))
        })?;
        let digest = Sha256::digest(&body);
        let etag = HeaderValue::from_str(&format!("\"{}\"", hex16(&digest)))
            .unwrap_or_else(|_| HeaderValue::from_static("\"\""));
        let snapshot = Arc::new(Snapshot {
            generation,
            body: Bytes::from(body),
            etag,
        });
        *self
            .snapshot
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&snapshot));
        Ok(snapshot)
    }

    /// The snapshot, if it was built for the current generation.
    fn fresh(&self) -> Option<Arc<Snapshot>> {
        let generation = self.client.key_set_generation();
        self.snapshot
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .filter(|s| s.generation == generation)
            .cloned()
    }

    /// 200 with the body, or 304 when `If-None-Match` names its `ETag`.
    fn answer(&self, snapshot: &Snapshot, headers: &HeaderMap) -> Response {
        let cache = [
            (header::CACHE_CONTROL, self.cache_control.clone()),
            (header::ETAG, snapshot.etag.clone()),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ];
        if if_none_match(headers, &snapshot.etag) {
            return (StatusCode::NOT_MODIFIED, cache).into_response();
        }
        (
            cache,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            snapshot.body.clone(),
        )
            .into_response()
    }
}

/// Whether any `If-None-Match` header lists `etag` (or is `*`), by weak
/// comparison: a `W/` prefix is ignored (RFC 9110 §13.1.2, §8.8.3.2).
fn if_none_match(headers: &HeaderMap, etag: &HeaderValue) -> bool {
    let ours = etag.as_bytes();
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag).as_bytes() == ours)
}

/// The first 16 bytes of `digest` as 32 lowercase hex digits.
fn hex16(digest: &[u8]) -> String {
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_none_match_compares_weakly_and_takes_lists_and_star() {
        let etag = HeaderValue::from_static("\"abc\"");
        let with = |values: &[&str]| {
            let mut headers = HeaderMap::new();
            for v in values {
                headers.append(header::IF_NONE_MATCH, HeaderValue::from_str(v).unwrap());
            }
            if_none_match(&headers, &etag)
        };
        assert!(with(&["\"abc\""]));
        assert!(with(&["W/\"abc\""]));
        assert!(with(&["\"x\", \"abc\""]));
        assert!(with(&["\"x\"", "\"abc\""]));
        assert!(with(&["*"]));
        assert!(!with(&[]));
        assert!(!with(&["\"abd\""]));
        assert!(!with(&["abc"]));
    }
}
