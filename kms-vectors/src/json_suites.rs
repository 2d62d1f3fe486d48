//! The small JSON suites: speccheck, CCTV, RFC 8032 §7.1 and ZIP-215.

use serde_json::Value;

use crate::json::{self, case_error};
use crate::{Case, Suite, VectorError};

/// Parses ed25519-speccheck `cases.json`: a top-level array of
/// `{message, pub_key, signature}` (hex); id = 0-based index.
pub fn parse_speccheck(json: &str) -> Result<Vec<Case>, VectorError> {
    speccheck_in(json, Suite::Speccheck.as_str())
}

/// Parses C2SP CCTV `ed25519vectors.json`: a top-level array of
/// `{number, key, sig, msg, flags}`; `key` and `sig` are hex, `msg` is text
/// (its UTF-8 bytes are the message); id = `number`.
pub fn parse_cctv(json: &str) -> Result<Vec<Case>, VectorError> {
    cctv_in(json, Suite::Cctv.as_str())
}

/// Parses the RFC 8032 §7.1 JSON: `{vectors: [{name, public_key, message,
/// signature, ...}]}` (hex); id = `name` (e.g. `TEST 1`);
/// `file_expectation == Some(true)`.
pub fn parse_rfc8032(json: &str) -> Result<Vec<Case>, VectorError> {
    rfc8032_in(json, Suite::Rfc8032.as_str())
}

/// Parses the ZIP-215 small-order JSON: `{cases: [{number, vk, sig, msg_hex,
/// ...}]}` (hex); id = `number`.
pub fn parse_zip215(json: &str) -> Result<Vec<Case>, VectorError> {
    zip215_in(json, Suite::Zip215.as_str())
}

pub(crate) fn speccheck_in(text: &str, origin: &str) -> Result<Vec<Case>, VectorError> {
    speccheck_from_value(&json::parse(text, origin)?, origin)
}

pub(crate) fn cctv_in(text: &str, origin: &str) -> Result<Vec<Case>, VectorError> {
    cctv_from_value(&json::parse(text, origin)?, origin)
}

pub(crate) fn rfc8032_in(text: &str, origin: &str) -> Result<Vec<Case>, VectorError> {
    rfc8032_from_value(&json::parse(text, origin)?, origin)
}

pub(crate) fn zip215_in(text: &str, origin: &str) -> Result<Vec<Case>, VectorError> {
    zip215_from_value(&json::parse(text, origin)?, origin)
}

pub(crate) fn speccheck_from_value(root: &Value, origin: &str) -> Result<Vec<Case>, VectorError> {
    let items = json::top_array(root, origin)?;
    collect(
        items,
        origin,
        |index, _| Ok(index.to_string()),
        |item, id| {
            Ok(Case {
                suite: Suite::Speccheck,
                id,
                public_key: json::hex(item, "pub_key")?,
                message: json::hex(item, "message")?,
                signature: json::hex(item, "signature")?,
                file_expectation: None,
            })
        },
    )
}

pub(crate) fn cctv_from_value(root: &Value, origin: &str) -> Result<Vec<Case>, VectorError> {
    let items = json::top_array(root, origin)?;
    collect(
        items,
        origin,
        |_, item| json::uint(item, "number").map(|n| n.to_string()),
        |item, id| {
            Ok(Case {
                suite: Suite::Cctv,
                id,
                public_key: json::hex(item, "key")?,
                message: json::string(item, "msg")?.as_bytes().to_vec(),
                signature: json::hex(item, "sig")?,
                file_expectation: None,
            })
        },
    )
}

pub(crate) fn rfc8032_from_value(root: &Value, origin: &str) -> Result<Vec<Case>, VectorError> {
    let items = json::top_field_array(root, "vectors", origin)?;
    collect(
        items,
        origin,
        |_, item| match json::string(item, "name")? {
            "" => Err("field `name` is empty".to_owned()),
            name => Ok(name.to_owned()),
        },
        |item, id| {
            Ok(Case {
                suite: Suite::Rfc8032,
                id,
                public_key: json::hex(item, "public_key")?,
                message: json::hex(item, "message")?,
                signature: json::hex(item, "signature")?,
                file_expectation: Some(true),
            })
        },
    )
}

pub(crate) fn zip215_from_value(root: &Value, origin: &str) -> Result<Vec<Case>, VectorError> {
    let items = json::top_field_array(root, "cases", origin)?;
    collect(
        items,
        origin,
        |_, item| json::uint(item, "number").map(|n| n.to_string()),
        |item, id| {
            Ok(Case {
                suite: Suite::Zip215,
                id,
                public_key: json::hex(item, "vk")?,
                message: json::hex(item, "msg_hex")?,
                signature: json::hex(item, "sig")?,
                file_expectation: None,
            })
        },
    )
}

/// Builds one case per item: `id_of` finds the id (errors name the index),
/// then `build` reads the fields (errors name the id). Ids must be unique.
fn collect(
    items: &[Value],
    origin: &str,
    id_of: impl Fn(usize, &Value) -> Result<String, String>,
    build: impl Fn(&Value, String) -> Result<Case, String>,
) -> Result<Vec<Case>, VectorError> {
    let mut cases = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let id = id_of(index, item)
            .map_err(|reason| case_error(origin, format!("at index {index}"), reason))?;
        let case = build(item, id.clone()).map_err(|reason| case_error(origin, id, reason))?;
        cases.push(case);
    }
    json::check_unique_ids(&cases, origin)?;
    Ok(cases)
}
