//! `POST /tokens` on the admin face: a token minted within limits.
//!
//! The caller sends the claims as a JSON object (unique member names: a
//! duplicate is refused, never resolved); the server decides the claims
//! that say who vouches and for how long:
//!
//! * `iat` (now) and `jti` (128 random bits, 32 hex digits) are always set by
//!   the server; `iss` from [`AdminConfig::issuer`] and `aud` from
//!   [`AdminConfig::audience`], each only when configured. A caller that
//!   sends any of these four is refused (`admin.reserved_claim`).
//! * `exp`: the caller's, if it is an integer NumericDate after now and at
//!   most [`AdminConfig::max_lifetime`] ahead (a longer one is refused,
//!   `admin.lifetime_too_long`, not clamped; one in the past or not an
//!   integer is `admin.invalid_exp`); else now plus
//!   [`AdminConfig::token_lifetime`] (at most `max_lifetime`).
//! * `nbf`, if sent, must be an integer before `exp` (`admin.invalid_nbf`).
//! * The token must fit the verifier's limit
//!   (`kms_jose::MAX_TOKEN_BYTES`): larger claims are refused before
//!   signing (`admin.token_too_large`).
//!
//! Every refusal is 400 with the admin face's JSON error body (503
//! `kms.entropy_unavailable` if the OS random source fails). Each
//! token issued is an audit event (target `kms::audit`, operation
//! `mint`) with its `sub`, `aud`, `exp`, `jti`, the signing key version
//! and the caller's address, beside the actor's `sign` event.
//!
//! [`AdminConfig::issuer`]: crate::AdminConfig::issuer
//! [`AdminConfig::audience`]: crate::AdminConfig::audience
//! [`AdminConfig::max_lifetime`]: crate::AdminConfig::max_lifetime
//! [`AdminConfig::token_lifetime`]: crate::AdminConfig::token_lifetime

use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{ConnectInfo, State};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use kms_jose::{CompactJws, MAX_TOKEN_BYTES};
use serde_json::{json, Map, Value};

use crate::admin_state::Admin;
use crate::error_body::{error_response, kms_error_response};
use crate::json_body::json_object;

/// Claims only the server sets.
const RESERVED: [&str; 4] = ["iat", "jti", "iss", "aud"];

/// A refusal: its status, code and message.
type Refusal = (StatusCode, &'static str, String);

/// Random bytes in a `jti` (128 bits).
const JTI_BYTES: usize = 16;

/// What a token of `key`'s key adds to its claims' base64url, at most:
/// the header (`{"alg":…,"kid":…}`, the `kid` the head's key id, whose
/// version may have grown to 10 digits; a key id needs no JSON escape) as
/// base64url, two dots and the signature in base64url (86 characters for
/// Ed25519, 3227 to 6170 for ML-DSA).
fn header_and_signature(key: &kms_core::KeyId) -> usize {
    const LONGEST_ALG: usize = "ML-DSA-87".len();
    let header = r#"{"alg":"","kid":""}"#.len() + LONGEST_ALG + key.to_string().len() + 10;
    (header * 4).div_ceil(3) + 2 + (key.alg().signature_len() * 4).div_ceil(3)
}

/// `POST /tokens`.
pub(crate) async fn issue(
    State(admin): State<Admin>,
    parts: Parts,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    // The client's address, where the server gives it (`ConnectInfo`, as
    // `axum::serve` and the gateway's accept loop do).
    let peer = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.to_string());
    let claims = match json_object(&parts.headers, body, "claims") {
        Ok(claims) => claims,
        Err(refusal) => return *refusal,
    };
    let claims = match admin.limits(claims) {
        Ok(claims) => claims,
        Err((status, code, message)) => return error_response(status, code, &message),
    };
    let result = admin.client.sign_jwt(&admin.config.key, &claims).await;
    let (response, kid, outcome) = match result {
        Ok(token) if token.len() > MAX_TOKEN_BYTES => (
            error_response(
                StatusCode::BAD_REQUEST,
                "admin.token_too_large",
                &format!("the token would be over {MAX_TOKEN_BYTES} bytes, the verifier's limit"),
            ),
            String::new(),
            "token_too_large",
        ),
        Ok(token) => {
            let kid = CompactJws::parse(&token)
                .ok()
                .and_then(|jws| jws.header().kid().map(str::to_owned))
                .unwrap_or_default();
            (
                Json(json!({"token": token, "kid": kid})).into_response(),
                kid,
                "ok",
            )
        }
        Err(e) => (
            kms_error_response(&e),
            String::new(),
            e.code().trim_start_matches("kms."),
        ),
    };
    let text = |name: &str| match claims.get(name) {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    tracing::info!(
        target: kms_actor::AUDIT_TARGET,
        operation = "mint",
        key = kid.as_str(),
        outcome,
        principal = admin.client.principal().unwrap_or("unspecified"),
        sub = text("sub").as_str(),
        aud = text("aud").as_str(),
        exp = text("exp").as_str(),
        jti = text("jti").as_str(),
        peer = peer.as_deref().unwrap_or(""),
        "audit"
    );
    response
}

impl Admin {
    /// `claims` within the minting limits (module docs), with the claims
    /// the server sets; or the refusal's code and message.
    fn limits(&self, mut claims: Map<String, Value>) -> Result<Map<String, Value>, Refusal> {
        if let Some(name) = RESERVED.iter().find(|n| claims.contains_key(**n)) {
            return Err((
                StatusCode::BAD_REQUEST,
                "admin.reserved_claim",
                format!("`{name}` is set by the server, not the caller"),
            ));
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let max = self.config.max_lifetime.as_secs();
        let exp = match claims.get("exp") {
            None => now.saturating_add(self.config.token_lifetime.as_secs().min(max)),
            Some(value) => {
                let exp = value.as_u64().ok_or_else(|| {
                    (
                        StatusCode::BAD_REQUEST,
                        "admin.invalid_exp",
                        "`exp` must be an integer NumericDate (seconds since the epoch)".to_owned(),
                    )
                })?;
                if exp <= now {
                    return Err((
                        StatusCode::BAD_REQUEST,
                        "admin.invalid_exp",
                        "`exp` is not in the future".to_owned(),
                    ));
                }
                if exp - now > max {
                    return Err((
                        StatusCode::BAD_REQUEST,
                        "admin.lifetime_too_long",
                        format!("`exp` is {} s ahead; the most is {max} s", exp - now),
                    ));
                }
                exp
            }
        };
        if let Some(nbf) = claims.get("nbf") {
            if nbf.as_u64().is_none_or(|nbf| nbf >= exp) {
                return Err((
                    StatusCode::BAD_REQUEST,
                    "admin.invalid_nbf",
                    "`nbf` must be an integer NumericDate before `exp`".to_owned(),
                ));
            }
        }
        claims.insert("exp".to_owned(), json!(exp));
        claims.insert("iat".to_owned(), json!(now));
        claims.insert("jti".to_owned(), json!(jti()?));
        if let Some(issuer) = &self.config.issuer {
            claims.insert("iss".to_owned(), json!(issuer));
        }
        if let Some(audience) = &self.config.audience {
            claims.insert("aud".to_owned(), json!(audience));
        }
        let json_len = serde_json::to_vec(&claims).map_or(usize::MAX, |j| j.len());
        if json_len.saturating_mul(4).div_ceil(3) + header_and_signature(&self.config.key)
            > MAX_TOKEN_BYTES
        {
            return Err((
                StatusCode::BAD_REQUEST,
                "admin.token_too_large",
                format!("the token would be over {MAX_TOKEN_BYTES} bytes, the verifier's limit"),
            ));
        }
        Ok(claims)
    }
}

/// A fresh `jti`: 128 random bits from the OS, as 32 lowercase hex digits.
fn jti() -> Result<String, Refusal> {
    let mut bytes = [0u8; JTI_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "kms.entropy_unavailable",
            format!("the OS random source failed: {e}"),
        )
    })?;
    Ok(bytes
        .iter()
        .fold(String::with_capacity(2 * JTI_BYTES), |mut s, b| {
            s.push_str(&format!("{b:02x}"));
            s
        }))
}
