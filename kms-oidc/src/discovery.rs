//! The OpenID Connect discovery document (OpenID Connect Discovery 1.0 §3,
//! §4; RFC 8414 §2 names the same members): its `issuer`, which must be
//! the configured one exactly (§4.3), and its `jwks_uri`.

use reqwest::Url;

use crate::error::{short, FetchError};
use crate::fetch::check_url;

/// The `jwks_uri` of a discovery document fetched from `url` for
/// `issuer` (`url` names the document in errors).
///
/// # Errors
/// [`FetchError::Invalid`] for a document that is not a JSON object or
/// has no string `issuer` or `jwks_uri`; [`FetchError::IssuerMismatch`]
/// when its `issuer` is not `issuer` exactly; [`FetchError::Url`] for a
/// `jwks_uri` that may not be fetched after `url` (never `http` after
/// `https`, never a loopback host after a remote one).
pub fn jwks_uri_from_discovery(
    document: &[u8],
    issuer: &str,
    url: &Url,
) -> Result<Url, FetchError> {
    let invalid = |reason: &str| FetchError::Invalid {
        url: short(url.as_str()),
        reason: reason.to_owned(),
    };
    let value: serde_json::Value =
        serde_json::from_slice(document).map_err(|e| invalid(&format!("not JSON: {e}")))?;
    let object = value
        .as_object()
        .ok_or_else(|| invalid("not a JSON object"))?;
    let named = object
        .get("issuer")
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| invalid("no string `issuer`"))?;
    if named != issuer {
        return Err(FetchError::IssuerMismatch {
            expected: issuer.to_owned(),
            got: short(named),
        });
    }
    let jwks_uri = object
        .get("jwks_uri")
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| invalid("no string `jwks_uri`"))?;
    let jwks = check_url(jwks_uri)?;
    crate::fetch::allowed_after(url, &jwks).map_err(|reason| FetchError::Url {
        url: short(jwks_uri),
        reason,
    })?;
    Ok(jwks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url() -> Url {
        Url::parse("https://idp.example/.well-known/openid-configuration").expect("url")
    }

    #[test]
    fn the_document_must_name_this_issuer_exactly() {
        let doc = br#"{"issuer":"https://idp.example","jwks_uri":"https://idp.example/keys"}"#;
        assert_eq!(
            jwks_uri_from_discovery(doc, "https://idp.example", &url()).map(|u| u.to_string()),
            Ok("https://idp.example/keys".to_owned())
        );
        for (doc, issuer, outcome) in [
            (&doc[..], "https://idp.example/", "issuer_mismatch"),
            (doc, "https://other.example", "issuer_mismatch"),
            (
                br#"{"issuer":"https://idp.example"}"#,
                "https://idp.example",
                "invalid",
            ),
            (
                br#"{"issuer":1,"jwks_uri":"https://x"}"#,
                "https://idp.example",
                "invalid",
            ),
            (br#"[1]"#, "https://idp.example", "invalid"),
            (b"<html>", "https://idp.example", "invalid"),
            (
                br#"{"issuer":"https://idp.example","jwks_uri":"http://idp.example/keys"}"#,
                "https://idp.example",
                "url",
            ),
            (
                br#"{"issuer":"https://idp.example","jwks_uri":"https://127.0.0.1:8081/keys"}"#,
                "https://idp.example",
                "url",
            ),
        ] {
            assert_eq!(
                jwks_uri_from_discovery(doc, issuer, &url()).map_err(|e| e.outcome()),
                Err(outcome),
                "{}",
                String::from_utf8_lossy(doc)
            );
        }
    }
}
