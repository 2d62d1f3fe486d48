//! [`Header`]: the JOSE header of a compact JWS (RFC 7515 §4), parsed
//! strictly.

use serde_json::{Map, Value};

use crate::alg::Algorithm;
use crate::error::{JoseError, Part};
use crate::object;

/// Longest decoded JOSE header accepted (bytes). Ours are ~60 bytes; 1 KiB
/// leaves room for other issuers' parameters and bounds parsing work.
pub const MAX_HEADER_BYTES: usize = 1024;

/// Header parameters refused outright: `crit` (this crate understands no
/// extension, and RFC 7515 §4.1.11 requires refusing a token whose
/// critical extension is not understood), and keys named by URL or
/// carried in the token itself (`jku`, `x5u`, `x5c`, `jwk`): a verifier
/// must choose its keys, never take them from the token.
const REFUSED: [&str; 5] = ["crit", "jku", "x5u", "x5c", "jwk"];

/// The parameters of a JOSE header this crate uses; any other parameter
/// is read past and ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    alg: Algorithm,
    kid: Option<String>,
    typ: Option<String>,
}

impl Header {
    /// A header for an issued token: `alg`, and `kid` if given; no `typ`.
    pub fn new(alg: Algorithm, kid: Option<String>) -> Self {
        Header {
            alg,
            kid,
            typ: None,
        }
    }

    /// This header with `typ` (RFC 7515 §4.1.9), for instance `at+jwt`
    /// (RFC 9068 §2.1).
    #[must_use]
    pub fn with_typ(mut self, typ: impl Into<String>) -> Self {
        self.typ = Some(typ.into());
        self
    }

    /// The `typ`, if the header has a string one (a `typ` of another JSON
    /// type reads as none: [`Validation::typ`](crate::Validation::typ)
    /// then refuses the token).
    pub fn typ(&self) -> Option<&str> {
        self.typ.as_deref()
    }

    /// The `alg`.
    pub fn alg(&self) -> Algorithm {
        self.alg
    }

    /// The `kid`, if the header has one.
    pub fn kid(&self) -> Option<&str> {
        self.kid.as_deref()
    }

    /// Parses a decoded JOSE header.
    ///
    /// # Errors
    /// [`JoseError::HeaderTooLong`] over [`MAX_HEADER_BYTES`];
    /// [`JoseError::NotAnObject`] or [`JoseError::Duplicate`] (RFC 7515
    /// §5.2) for the JSON; [`JoseError::RefusedHeader`] for `crit`, `jku`,
    /// `x5u`, `x5c` or `jwk`; [`JoseError::MissingAlg`] or
    /// [`JoseError::UnsupportedAlg`]; [`JoseError::KidNotString`].
    pub fn parse(json: &[u8]) -> Result<Self, JoseError> {
        if json.len() > MAX_HEADER_BYTES {
            return Err(JoseError::HeaderTooLong {
                len: json.len(),
                max: MAX_HEADER_BYTES,
            });
        }
        let map = object::parse(json, Part::Header)?;
        if let Some(name) = REFUSED.iter().find(|name| map.contains_key(**name)) {
            return Err(JoseError::RefusedHeader { name });
        }
        let alg = match map.get("alg") {
            Some(Value::String(alg)) => Algorithm::parse(alg)?,
            _ => return Err(JoseError::MissingAlg),
        };
        let kid = match map.get("kid") {
            None => None,
            Some(Value::String(kid)) => Some(kid.clone()),
            Some(_) => return Err(JoseError::KidNotString),
        };
        let typ = match map.get("typ") {
            Some(Value::String(typ)) => Some(typ.clone()),
            _ => None,
        };
        Ok(Header { alg, kid, typ })
    }

    /// The header as compact JSON: `{"alg":…,"kid":…}`, and `typ` when
    /// set (issued tokens have none: RFC 7519 §5.1 makes it optional).
    pub fn to_json(&self) -> String {
        let mut map = Map::new();
        map.insert("alg".to_owned(), Value::from(self.alg.as_str()));
        if let Some(kid) = &self.kid {
            map.insert("kid".to_owned(), Value::from(kid.as_str()));
        }
        if let Some(typ) = &self.typ {
            map.insert("typ".to_owned(), Value::from(typ.as_str()));
        }
        Value::Object(map).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_is_read_strictly() {
        let h = Header::parse(br#"{"typ":"JWT","alg":"Ed25519","kid":"k1","x-extra":[1]}"#)
            .expect("valid");
        assert_eq!((h.alg(), h.kid()), (Algorithm::Ed25519, Some("k1")));
        assert_eq!(h.typ(), Some("JWT"));
        assert_eq!(
            Header::parse(br#"{"alg":"EdDSA","typ":1}"#).map(|h| h.typ().map(str::to_owned)),
            Ok(None)
        );
        assert_eq!(
            Header::parse(br#"{"alg":"EdDSA"}"#).expect("valid").kid(),
            None
        );
        for (json, code) in [
            (&br#"{"alg":"none"}"#[..], "jose.unsupported_alg"),
            (br#"{"alg":"HS256","kid":"k"}"#, "jose.unsupported_alg"),
            (br#"{"kid":"k"}"#, "jose.missing_alg"),
            (br#"{"alg":7}"#, "jose.missing_alg"),
            (br#"{"alg":"EdDSA","kid":1}"#, "jose.kid_not_string"),
            (br#"{"alg":"EdDSA","crit":["exp"]}"#, "jose.refused_header"),
            (
                br#"{"alg":"EdDSA","jku":"https://x"}"#,
                "jose.refused_header",
            ),
            (br#"{"alg":"EdDSA","jwk":{}}"#, "jose.refused_header"),
            (br#"{"alg":"EdDSA","x5c":[]}"#, "jose.refused_header"),
            (br#"{"alg":"EdDSA","x5u":"u"}"#, "jose.refused_header"),
            (br#"{"alg":"EdDSA","alg":"EdDSA"}"#, "jose.duplicate_member"),
            (br#"["alg"]"#, "jose.not_an_object"),
        ] {
            let got = Header::parse(json).map_err(|e| e.code());
            assert_eq!(got, Err(code), "{}", String::from_utf8_lossy(json));
        }
        let long = format!(
            r#"{{"alg":"EdDSA","pad":"{}"}}"#,
            "x".repeat(MAX_HEADER_BYTES)
        );
        assert!(matches!(
            Header::parse(long.as_bytes()),
            Err(JoseError::HeaderTooLong { .. })
        ));
    }

    #[test]
    fn an_issued_header_round_trips() {
        let h = Header::new(Algorithm::EdDSA, Some("acme:tokens:v1".to_owned()));
        assert_eq!(h.to_json(), r#"{"alg":"EdDSA","kid":"acme:tokens:v1"}"#);
        assert_eq!(Header::parse(h.to_json().as_bytes()), Ok(h.clone()));
        let at = h.with_typ("at+jwt");
        assert_eq!(Header::parse(at.to_json().as_bytes()), Ok(at));
    }
}
