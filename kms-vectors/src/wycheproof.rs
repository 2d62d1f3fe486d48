//! Wycheproof EdDSA verify JSON (`eddsa_verify_schema_v1.json`).

use serde_json::Value;

use crate::json::{self, case_error};
use crate::{Case, Suite, VectorError};

/// Parses a Wycheproof EdDSA (Ed25519) verify JSON document.
///
/// One case per `testGroups[].tests[]`, id = `tcId`, public key =
/// `testGroups[].publicKey.pk`, message = `msg`, signature = `sig` (all hex;
/// signatures of the wrong length are kept as given).
/// `result` `"valid"` / `"invalid"` / `"acceptable"` gives `file_expectation`
/// `Some(true)` / `Some(false)` / `None`. Groups whose `publicKey.curve` is
/// present and not `edwards25519` are rejected.
pub fn parse_wycheproof(json: &str) -> Result<Vec<Case>, VectorError> {
    parse_in(json, Suite::Wycheproof.as_str())
}

/// [`parse_wycheproof`] with errors reported against `origin`.
pub(crate) fn parse_in(text: &str, origin: &str) -> Result<Vec<Case>, VectorError> {
    from_value(&json::parse(text, origin)?, origin)
}

/// Extracts the cases of an already parsed Wycheproof document.
pub(crate) fn from_value(root: &Value, origin: &str) -> Result<Vec<Case>, VectorError> {
    let groups = json::top_field_array(root, "testGroups", origin)?;
    let mut cases = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        let public_key = group_public_key(group).map_err(|reason| VectorError::Format {
            origin: origin.to_owned(),
            reason: format!("testGroups[{g}]: {reason}"),
        })?;
        let tests = json::array(group, "tests").map_err(|reason| VectorError::Format {
            origin: origin.to_owned(),
            reason: format!("testGroups[{g}]: {reason}"),
        })?;
        for (t, test) in tests.iter().enumerate() {
            let tc_id = json::uint(test, "tcId").map_err(|reason| {
                case_error(origin, format!("at testGroups[{g}].tests[{t}]"), reason)
            })?;
            let id = tc_id.to_string();
            let case = parse_test(test, id.clone(), &public_key)
                .map_err(|reason| case_error(origin, id, reason))?;
            cases.push(case);
        }
    }
    json::check_unique_ids(&cases, origin)?;
    Ok(cases)
}

fn group_public_key(group: &Value) -> Result<Vec<u8>, String> {
    let key = json::field(group, "publicKey")?;
    if let Ok(curve) = json::field(key, "curve") {
        if curve.as_str() != Some("edwards25519") {
            return Err(format!(
                "publicKey.curve is {curve}, only edwards25519 (Ed25519) is supported"
            ));
        }
    }
    json::hex(key, "pk").map_err(|reason| format!("publicKey: {reason}"))
}

fn parse_test(test: &Value, id: String, public_key: &[u8]) -> Result<Case, String> {
    let message = json::hex(test, "msg")?;
    let signature = json::hex(test, "sig")?;
    let file_expectation = match json::string(test, "result")? {
        "valid" => Some(true),
        "invalid" => Some(false),
        "acceptable" => None,
        other => {
            return Err(format!(
                "field `result` is `{other}`, expected valid, invalid or acceptable"
            ))
        }
    };
    Ok(Case {
        suite: Suite::Wycheproof,
        id,
        public_key: public_key.to_vec(),
        message,
        signature,
        file_expectation,
    })
}
