//! The JSON error body of the admin router and the status each
//! [`KmsError`] maps to.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use kms_core::KmsError;

/// The HTTP status for a KMS error: 400 for a bad request (an argument, a
/// key id, a token, a signature, a key of another algorithm than the call
/// takes), 404 for an unknown key or version, 409 when the key's
/// state refuses the operation (disabled, destroyed, a version trimmed or
/// below `min_verify_version`, not exportable, no version left) or another
/// fleet node changed it first (`Conflict`), 501 for an algorithm this
/// build lacks, 503 (retryable) for
/// `Overloaded`, `Dropped`, `ShuttingDown`, a shared store `Unavailable`
/// and a failing entropy source, 500 otherwise.
pub(crate) fn status_of(error: &KmsError) -> StatusCode {
    match error {
        KmsError::InvalidArgument { .. }
        | KmsError::InvalidKeyId(_)
        | KmsError::InvalidToken { .. }
        | KmsError::InvalidSignature(_)
        | KmsError::InvalidMlDsaSignature { .. }
        | KmsError::WrongAlgorithm { .. } => StatusCode::BAD_REQUEST,
        KmsError::AlgorithmNotBuilt { .. } => StatusCode::NOT_IMPLEMENTED,
        KmsError::UnknownKey { .. } | KmsError::UnknownVersion { .. } => StatusCode::NOT_FOUND,
        // The key's state refuses the operation.
        KmsError::VersionsExhausted { .. }
        | KmsError::KeyDisabled { .. }
        | KmsError::KeyDestroyed { .. }
        | KmsError::NotExportable { .. }
        | KmsError::VersionDisallowed { .. }
        | KmsError::VersionTrimmed { .. }
        // Another fleet node changed the key first, every attempt.
        | KmsError::Conflict { .. } => StatusCode::CONFLICT,
        e if e.is_retryable() || matches!(e, KmsError::ShuttingDown) => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// In the extensions of every error answer this crate makes: its stable
/// code (`http.not_found`, or for a refused token the KMS's own code, such
/// as `jose.expired`, where the body says `invalid_token`), for an access
/// log. Codes form a bounded set; none holds anything of the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorCode(pub &'static str);

/// A JSON error answer: `{"error": code, "message": message}` with
/// `status`, `Content-Type: application/json`, `X-Content-Type-Options:
/// nosniff`, `Retry-After: 1` on a 503, and [`ErrorCode`] in its
/// extensions.
pub fn error_response(status: StatusCode, code: &'static str, message: &str) -> Response {
    error_body(status, code, message)
}

/// [`error_response`] with any body type a `String` makes (the layers'
/// refusals, whatever the inner service's body).
pub(crate) fn error_body<B: From<String>>(
    status: StatusCode,
    code: &'static str,
    message: &str,
) -> http::Response<B> {
    let body = serde_json::json!({"error": code, "message": message}).to_string();
    let mut response = json_response(status, body);
    response.extensions_mut().insert(ErrorCode(code));
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

/// `body`, JSON, with `status`, `Content-Type: application/json` and
/// `X-Content-Type-Options: nosniff`.
pub(crate) fn json_response<B: From<String>>(
    status: StatusCode,
    body: String,
) -> http::Response<B> {
    let mut response = http::Response::new(B::from(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// A KMS call's answer: 200 with the JSON `to_json` makes of its value, or
/// [`kms_error_response`] for its error.
pub(crate) fn json_answer<T>(
    result: Result<T, KmsError>,
    to_json: impl FnOnce(T) -> serde_json::Value,
) -> Response {
    match result {
        Ok(value) => axum::Json(to_json(value)).into_response(),
        Err(e) => kms_error_response(&e),
    }
}

/// [`error_response`] for a KMS error, with its code.
pub(crate) fn kms_error_response(error: &KmsError) -> Response {
    error_response(status_of(error), error.code(), &error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fleet_conflict_is_409_and_an_unreachable_store_503() {
        let conflict = KmsError::Conflict {
            record: "keys/t/p/u/head".to_owned(),
            attempts: 8,
        };
        let unavailable = KmsError::Unavailable {
            store: "etcd".to_owned(),
            reason: "down".to_owned(),
        };
        assert_eq!(status_of(&conflict), StatusCode::CONFLICT);
        let response = kms_error_response(&unavailable);
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
        assert_eq!(
            status_of(&KmsError::Overloaded),
            StatusCode::SERVICE_UNAVAILABLE
        );
    }
}
