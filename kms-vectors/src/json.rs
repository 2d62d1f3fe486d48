//! Helpers for walking a parsed JSON document with precise error reasons.
//!
//! The helpers return the reason as a `String`; the suite parsers wrap it in a
//! [`VectorError`] that names the case.

use std::collections::HashSet;

use serde_json::Value;

use crate::{Case, VectorError};

/// Parses `json`, reporting syntax errors (with line and column) against `origin`.
pub(crate) fn parse(json: &str, origin: &str) -> Result<Value, VectorError> {
    serde_json::from_str(json).map_err(|source| VectorError::Json {
        origin: origin.to_owned(),
        source,
    })
}

/// The JSON type of `value`, for error messages.
pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The member `key` of the object `value`.
pub(crate) fn field<'a>(value: &'a Value, key: &str) -> Result<&'a Value, String> {
    match value {
        Value::Object(map) => map.get(key).ok_or_else(|| format!("missing field `{key}`")),
        other => Err(format!("expected an object, found {}", kind(other))),
    }
}

/// The string member `key` of the object `value`.
pub(crate) fn string<'a>(value: &'a Value, key: &str) -> Result<&'a str, String> {
    let member = field(value, key)?;
    member
        .as_str()
        .ok_or_else(|| format!("field `{key}` is not a string (found {})", kind(member)))
}

/// The hex-string member `key` of the object `value`, decoded.
pub(crate) fn hex(value: &Value, key: &str) -> Result<Vec<u8>, String> {
    let text = string(value, key)?;
    ::hex::decode(text).map_err(|e| format!("field `{key}` is not hex: {e}"))
}

/// The non-negative integer member `key` of the object `value`.
pub(crate) fn uint(value: &Value, key: &str) -> Result<u64, String> {
    let member = field(value, key)?;
    member.as_u64().ok_or_else(|| {
        format!(
            "field `{key}` is not a non-negative integer (found {})",
            kind(member)
        )
    })
}

/// The array member `key` of the object `value`.
pub(crate) fn array<'a>(value: &'a Value, key: &str) -> Result<&'a [Value], String> {
    let member = field(value, key)?;
    member
        .as_array()
        .map(Vec::as_slice)
        .ok_or_else(|| format!("field `{key}` is not an array (found {})", kind(member)))
}

/// `value` as the top-level array of cases.
pub(crate) fn top_array<'a>(value: &'a Value, origin: &str) -> Result<&'a [Value], VectorError> {
    value
        .as_array()
        .map(Vec::as_slice)
        .ok_or_else(|| VectorError::Format {
            origin: origin.to_owned(),
            reason: format!("expected a top-level array of cases, found {}", kind(value)),
        })
}

/// The array member `key` of the top-level object `value`.
pub(crate) fn top_field_array<'a>(
    value: &'a Value,
    key: &str,
    origin: &str,
) -> Result<&'a [Value], VectorError> {
    array(value, key).map_err(|reason| VectorError::Format {
        origin: origin.to_owned(),
        reason: format!("top level: {reason}"),
    })
}

/// A [`VectorError::Case`] for the case `id` of `origin`.
pub(crate) fn case_error(origin: &str, id: impl Into<String>, reason: String) -> VectorError {
    VectorError::Case {
        origin: origin.to_owned(),
        id: id.into(),
        reason,
    }
}

/// Fails on the first case whose id repeats an earlier one.
pub(crate) fn check_unique_ids(cases: &[Case], origin: &str) -> Result<(), VectorError> {
    let mut seen = HashSet::with_capacity(cases.len());
    for case in cases {
        if !seen.insert(case.id.as_str()) {
            return Err(case_error(
                origin,
                case.id.clone(),
                "duplicate case id".to_owned(),
            ));
        }
    }
    Ok(())
}
