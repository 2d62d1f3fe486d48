//! The admin router's request bodies: a JSON object sent as
//! `application/json`, read by the project's strict object parser (a member
//! name twice is refused).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{Map, Value};

use crate::error_body::error_response;

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
            invalid_code(what),
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
            invalid_code(what),
            &format!("{what} takes the empty object {{}}"),
        )))
    }
}

/// `http.invalid_<what>` for the bodies the admin routes take, as a
/// stable code (`ErrorCode`).
fn invalid_code(what: &str) -> &'static str {
    match what {
        "rotate" => "http.invalid_rotate",
        "policy" => "http.invalid_policy",
        "trim" => "http.invalid_trim",
        "destroy" => "http.invalid_destroy",
        "claims" => "http.invalid_claims",
        _ => "http.invalid_body",
    }
}
