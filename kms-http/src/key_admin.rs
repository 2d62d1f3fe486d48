//! The admin face's key lifecycle routes, all on the signing key
//! ([`crate::AdminConfig::key`]):
//!
//! * `GET /keys/policy` → 200 with the whole policy:
//!   `{"min_verify_version", "enabled", "exportable", "auto_rotate_after_s"}`
//!   (`auto_rotate_after_s` in whole seconds, rounded up, or `null`);
//! * `POST /keys/policy` with a JSON object of any of those four fields →
//!   200 with the whole policy after the change (changes through this
//!   router are applied one at a time, so none loses another's fields; a
//!   change made meanwhile through another client of the KMS may be
//!   written over); another field, or a field
//!   of the wrong type, → 400 `http.invalid_policy`; a change the key
//!   refuses (`kms_core::Keystore::set_policy`) → 400 `kms.invalid_argument`;
//! * `POST /keys/trim` with `{"below": N}` → 200
//!   `{"min_available_version": M}` (the lowest version that keeps its
//!   secret afterwards);
//! * `POST /keys/destroy` with `{}` → 200 `{"destroyed": "<the
//!   signing key id>"}`;
//!   afterwards `POST /tokens` answers 409 `kms.key_destroyed` and the JWK
//!   Set is empty.
//!
//! Refusals have the admin face's JSON error body; the key's state
//! refusing an operation (destroyed, disabled) is 409.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use kms_core::KeyPolicy;
use serde_json::{json, Map, Value};

use crate::admin_state::Admin;
use crate::error_body::{error_response, json_answer, kms_error_response};
use crate::json_body::{empty_object, json_object};

/// `GET /keys/policy`.
pub(crate) async fn policy(State(admin): State<Admin>) -> Response {
    json_answer(admin.client.policy(&admin.config.key).await, |p| {
        policy_json(&p)
    })
}

/// `POST /keys/policy`.
pub(crate) async fn set_policy(
    State(admin): State<Admin>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let changes = match json_object(&headers, body, "policy") {
        Ok(changes) => changes,
        Err(refusal) => return *refusal,
    };
    // One change at a time through this face: the read and the write
    // back are not interleaved with another's. On a task of its own that
    // holds the lock to the end, so a client that disconnects cannot
    // release it while its write is still on its way.
    let one_at_a_time = Arc::clone(&admin.policy_change).lock_owned().await;
    let change = tokio::spawn(async move {
        let _held = one_at_a_time;
        let key = &admin.config.key;
        let current = match admin.client.policy(key).await {
            Ok(policy) => policy,
            Err(e) => return kms_error_response(&e),
        };
        let policy = match apply(current, &changes) {
            Ok(policy) => policy,
            Err(reason) => {
                return error_response(StatusCode::BAD_REQUEST, "http.invalid_policy", &reason)
            }
        };
        json_answer(admin.client.set_policy(key, policy).await, |p| {
            policy_json(&p)
        })
    });
    change.await.unwrap_or_else(|e| {
        kms_error_response(&kms_core::KmsError::Internal {
            reason: format!("the policy change failed: {e}"),
        })
    })
}

/// `POST /keys/trim`.
pub(crate) async fn trim(
    State(admin): State<Admin>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let request = match json_object(&headers, body, "trim") {
        Ok(request) => request,
        Err(refusal) => return *refusal,
    };
    let below = request
        .get("below")
        .and_then(Value::as_u64)
        .and_then(|below| u32::try_from(below).ok());
    let below = match (below, request.len()) {
        (Some(below), 1) => below,
        _ => {
            return error_response(
                StatusCode::BAD_REQUEST,
                "http.invalid_trim",
                "the body must be {\"below\": <version number>}",
            )
        }
    };
    json_answer(
        admin.client.trim(&admin.config.key, below).await,
        |min| json!({ "min_available_version": min }),
    )
}

/// `POST /keys/destroy` with `{}`.
pub(crate) async fn destroy(
    State(admin): State<Admin>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    if let Err(refusal) = empty_object(&headers, body, "destroy") {
        return *refusal;
    }
    let key = &admin.config.key;
    json_answer(
        admin.client.destroy(key).await,
        |()| json!({ "destroyed": key.to_string() }),
    )
}

/// The policy as the routes show it.
fn policy_json(policy: &KeyPolicy) -> Value {
    json!({
        "min_verify_version": policy.min_verify_version,
        "enabled": policy.enabled,
        "exportable": policy.exportable,
        // Whole seconds, rounded up (a period set through the Rust API may
        // have a fraction).
        "auto_rotate_after_s": policy
            .auto_rotate_after
            .map(|d| d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0))),
    })
}

/// `policy` with the fields of `changes` applied.
///
/// # Errors
/// A reason, for an unknown field or a field of the wrong type.
fn apply(mut policy: KeyPolicy, changes: &Map<String, Value>) -> Result<KeyPolicy, String> {
    for (field, value) in changes {
        let wrong = || format!("{field}: {value} is not a valid value");
        match field.as_str() {
            "min_verify_version" => {
                policy.min_verify_version = value
                    .as_u64()
                    .and_then(|v| u32::try_from(v).ok())
                    .ok_or_else(wrong)?;
            }
            "enabled" => policy.enabled = value.as_bool().ok_or_else(wrong)?,
            "exportable" => policy.exportable = value.as_bool().ok_or_else(wrong)?,
            "auto_rotate_after_s" => {
                policy.auto_rotate_after = match value {
                    Value::Null => None,
                    _ => Some(Duration::from_secs(value.as_u64().ok_or_else(wrong)?)),
                };
            }
            _ => {
                return Err(format!(
                    "unknown field {field:?}: the policy has min_verify_version, enabled, \
                     exportable and auto_rotate_after_s"
                ))
            }
        }
    }
    Ok(policy)
}
