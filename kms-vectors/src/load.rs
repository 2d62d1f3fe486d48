//! Reading files: format auto-detection, gzip, and the bundled test data.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::{json, json_suites, sign_input, wycheproof, Case, Suite, VectorError};

/// The `testdata/` directory next to this crate (`CARGO_MANIFEST_DIR/../testdata`).
pub fn testdata_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("testdata")
}

/// Parses `text` as a file of `suite`.
pub fn parse_suite(suite: Suite, text: &str) -> Result<Vec<Case>, VectorError> {
    parse_suite_in(suite, text, suite.as_str())
}

fn parse_suite_in(suite: Suite, text: &str, origin: &str) -> Result<Vec<Case>, VectorError> {
    match suite {
        Suite::Wycheproof => wycheproof::parse_in(text, origin),
        Suite::SignInput => sign_input::parse_in(text, origin),
        Suite::Speccheck => json_suites::speccheck_in(text, origin),
        Suite::Cctv => json_suites::cctv_in(text, origin),
        Suite::Rfc8032 => json_suites::rfc8032_in(text, origin),
        Suite::Zip215 => json_suites::zip215_in(text, origin),
    }
}

/// Reads the file of `suite` at `path` (no auto-detection; not gzip).
pub fn load_suite(suite: Suite, path: &Path) -> Result<Vec<Case>, VectorError> {
    let text = read_text(path)?;
    parse_suite_in(suite, &text, &origin(path, Some(suite)))
}

/// Reads a test-vector file, detecting its format.
///
/// A `.gz` file (by extension or gzip magic bytes) is decompressed first.
/// Text whose first non-blank character is `{` or `[` is JSON: an object with
/// `testGroups` is Wycheproof, with `vectors` RFC 8032, with `cases` ZIP-215;
/// an array of objects with `pub_key` is speccheck, with `number` and `key`
/// CCTV (an empty array gives no cases). Any other text is `sign.input`.
pub fn load_file(path: &Path) -> Result<Vec<Case>, VectorError> {
    let mut bytes = std::fs::read(path).map_err(|source| VectorError::Io {
        path: path.to_owned(),
        source,
    })?;
    let gzipped = path
        .extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("gz"))
        || bytes.starts_with(&[0x1f, 0x8b]);
    if gzipped {
        let mut plain = Vec::new();
        flate2::read::MultiGzDecoder::new(bytes.as_slice())
            .read_to_end(&mut plain)
            .map_err(|source| VectorError::Gzip {
                path: path.to_owned(),
                source,
            })?;
        bytes = plain;
    }
    let text = into_text(bytes, path)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);

    if !text.trim_start().starts_with(['{', '[']) {
        return sign_input::parse_in(text, &origin(path, Some(Suite::SignInput)));
    }
    let root = json::parse(text, &origin(path, None))?;
    let Some(suite) = detect_json(&root) else {
        if root.as_array().is_some_and(Vec::is_empty) {
            return Ok(Vec::new());
        }
        return Err(VectorError::Format {
            origin: origin(path, None),
            reason: "JSON of unknown format (expected a Wycheproof EdDSA file with `testGroups`, \
                     RFC 8032 `vectors`, ZIP-215 `cases`, or a speccheck / CCTV array)"
                .to_owned(),
        });
    };
    let origin = origin(path, Some(suite));
    match suite {
        Suite::Wycheproof => wycheproof::from_value(&root, &origin),
        Suite::Rfc8032 => json_suites::rfc8032_from_value(&root, &origin),
        Suite::Zip215 => json_suites::zip215_from_value(&root, &origin),
        Suite::Speccheck => json_suites::speccheck_from_value(&root, &origin),
        Suite::Cctv => json_suites::cctv_from_value(&root, &origin),
        // `detect_json` never returns it; kept so the match needs no panic.
        Suite::SignInput => sign_input::parse_in(text, &origin),
    }
}

/// The JSON suite of a parsed document, from its distinctive keys.
fn detect_json(root: &Value) -> Option<Suite> {
    match root {
        Value::Object(map) if map.contains_key("testGroups") => Some(Suite::Wycheproof),
        Value::Object(map) if map.contains_key("vectors") => Some(Suite::Rfc8032),
        Value::Object(map) if map.contains_key("cases") => Some(Suite::Zip215),
        Value::Array(items) => match items.first()? {
            Value::Object(first) if first.contains_key("pub_key") => Some(Suite::Speccheck),
            Value::Object(first) if first.contains_key("number") && first.contains_key("key") => {
                Some(Suite::Cctv)
            }
            _ => None,
        },
        _ => None,
    }
}

/// Every suite from [`testdata_dir`], in [`Suite::ALL`] order: Wycheproof,
/// the 1024-line `sign.input`, speccheck, CCTV, RFC 8032 and ZIP-215 (not the
/// Go `sign.input.gz`, whose lines duplicate `sign.input` lines).
pub fn load_all_testdata() -> Result<Vec<Case>, VectorError> {
    let dir = testdata_dir();
    let mut all = Vec::new();
    for suite in Suite::ALL {
        all.extend(load_suite(suite, &dir.join(suite.testdata_file()))?);
    }
    Ok(all)
}

/// Reads `path` as UTF-8 text.
pub(crate) fn read_text(path: &Path) -> Result<String, VectorError> {
    let bytes = std::fs::read(path).map_err(|source| VectorError::Io {
        path: path.to_owned(),
        source,
    })?;
    into_text(bytes, path)
}

fn into_text(bytes: Vec<u8>, path: &Path) -> Result<String, VectorError> {
    String::from_utf8(bytes).map_err(|source| VectorError::NotUtf8 {
        path: path.to_owned(),
        source,
    })
}

/// The `origin` of errors in the file at `path`.
fn origin(path: &Path, suite: Option<Suite>) -> String {
    match suite {
        Some(suite) => format!("{} ({suite})", path.display()),
        None => path.display().to_string(),
    }
}
