//! [`Jwk`] and [`JwkSet`] (RFC 7517) for Ed25519 public keys (RFC 8037
//! §2): what a gateway publishes, and [`TrustedJwkSet`], an external
//! issuer's set loaded once, each key decoded and checked at load.

use std::collections::HashSet;

use kms_core::ed25519::VerifyingKey;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::alg::Algorithm;
use crate::b64;
use crate::error::{JoseError, Part};
use crate::object;

/// A published Ed25519 public key: exactly `kty: "OKP"`, `crv: "Ed25519"`,
/// `x` (the 32-byte key, base64url), `kid`, `alg` and `use: "sig"`, and
/// never a private member (`d`). Only serialized: keys are read through
/// [`TrustedJwkSet::from_json`], which checks them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Jwk {
    kty: String,
    crv: String,
    x: String,
    kid: String,
    alg: String,
    #[serde(rename = "use")]
    use_: String,
}

impl Jwk {
    /// The JWK of a 32-byte public key named `kid`, for tokens under `alg`.
    pub fn public(kid: &str, public_key: &[u8; 32], alg: Algorithm) -> Self {
        Jwk {
            kty: "OKP".to_owned(),
            crv: "Ed25519".to_owned(),
            x: b64::encode(public_key),
            kid: kid.to_owned(),
            alg: alg.as_str().to_owned(),
            use_: "sig".to_owned(),
        }
    }

    /// The `kid`.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The `x` member: the public key, base64url.
    pub fn x(&self) -> &str {
        &self.x
    }

    /// The `alg` member: the algorithm tokens under this key use.
    pub fn alg(&self) -> &str {
        &self.alg
    }
}

/// A JWK Set (RFC 7517 §5): `{"keys": [...]}`, as published.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct JwkSet {
    /// The keys, in order.
    pub keys: Vec<Jwk>,
}

/// A trusted external key: its `kid`, the key decoded and checked once,
/// and the `alg` its JWK named, if any (tokens under it must then use that
/// `alg`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedJwk {
    /// The `kid` tokens name it by.
    pub kid: String,
    /// The decoded public key.
    pub key: VerifyingKey,
    /// The `alg` the JWK bound it to; `None`: either Ed25519 name.
    pub alg: Option<Algorithm>,
}

impl TrustedJwk {
    /// Whether a token with header `alg` may verify under this key.
    ///
    /// # Errors
    /// [`JoseError::AlgMismatch`] when the JWK named another `alg`.
    pub fn check_alg(&self, alg: Algorithm) -> Result<(), JoseError> {
        match self.alg {
            Some(bound) if bound != alg => Err(JoseError::AlgMismatch {
                expected: bound.as_str(),
                got: alg.as_str(),
            }),
            _ => Ok(()),
        }
    }
}

/// A key of a loaded set that was skipped, and why (the caller logs it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedJwk {
    /// Its `kid`, if it had a string one.
    pub kid: Option<String>,
    /// Why it was skipped.
    pub reason: String,
}

/// The members that hold a secret: the private members of `OKP`, `EC` and
/// `RSA` keys (RFC 8037 §2, RFC 7518 §6.2.2 and §6.3.2) and an `oct` key's
/// `k` (RFC 7518 §6.4.1).
const SECRET_MEMBERS: [&str; 8] = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"];

/// An external issuer's JWK Set, loaded: its usable Ed25519 keys, and the
/// keys it skipped.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TrustedJwkSet {
    /// Usable keys, in the set's order; `kid`s are unique.
    pub keys: Vec<TrustedJwk>,
    /// Keys of other types or curves, without a string `kid`, for another
    /// `use`, or whose `key_ops` lack `verify`.
    pub skipped: Vec<SkippedJwk>,
}

impl TrustedJwkSet {
    /// Loads a JWK Set document. Keys of another `kty`/`crv`, without a
    /// string `kid`, with a `use` other than `sig`, or with `key_ops` that
    /// lack `verify` (RFC 7517 §4.3) are skipped (listed in `skipped`);
    /// every other key must be a valid Ed25519 public key.
    ///
    /// # Errors
    /// [`JoseError::InvalidJwk`] for a document that is not a JSON object
    /// with a `keys` array, a key that is not an object, a key of any
    /// `kty` that holds a secret member (`d`, `p`, `q`, `dp`, `dq`, `qi`,
    /// `oth`, or an `oct` key's `k`: a secret does not belong in a trusted
    /// set), has no
    /// valid 32-byte `x`, a key rules 2–3 refuse, or an `alg` other than
    /// `EdDSA`/`Ed25519`; [`JoseError::DuplicateKid`] for a `kid` that
    /// appears twice.
    pub fn from_json(document: &[u8]) -> Result<Self, JoseError> {
        let set_error = |reason: &str| JoseError::InvalidJwk {
            kid: None,
            reason: reason.to_owned(),
        };
        #[derive(serde::Deserialize)]
        struct Raw<'a> {
            #[serde(borrow)]
            keys: Vec<&'a RawValue>,
        }
        // The set's own names are checked unique, then each key's.
        object::parse(document, Part::Payload)
            .map_err(|e| set_error(&format!("the set is not a JSON object: {e}")))?;
        let raw: Raw<'_> = serde_json::from_slice(document)
            .map_err(|e| set_error(&format!("the set has no `keys` array of objects: {e}")))?;
        let keys = raw
            .keys
            .iter()
            .map(|key| {
                object::parse(key.get().as_bytes(), Part::Payload).map_err(|e| match e {
                    JoseError::Duplicate { name, .. } => {
                        set_error(&format!("a key repeats the member {name}"))
                    }
                    _ => set_error("a key is not a JSON object"),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut set = TrustedJwkSet::default();
        let mut kids = HashSet::new();
        for key in &keys {
            let kid = match key.get("kid") {
                Some(Value::String(kid)) => Some(kid.clone()),
                _ => None,
            };
            let invalid = |reason: &str| JoseError::InvalidJwk {
                kid: kid.clone(),
                reason: reason.to_owned(),
            };
            let text = |name: &str| key.get(name).and_then(Value::as_str);
            let use_ = match key.get("use") {
                None => Ok(()),
                Some(Value::String(u)) if u == "sig" => Ok(()),
                Some(other) => Err(format!("`use` is {other}, not \"sig\"")),
            };
            // A secret in a set of trusted public keys is a leak, not a
            // key to skip, whatever its `kty` (or none): the asymmetric
            // types' private members (RFC 7518 §6.2.2, §6.3.2; RFC 8037
            // §2) and a symmetric key's `k` (RFC 7518 §6.4.1).
            if let Some(member) = SECRET_MEMBERS.iter().find(|m| key.contains_key(**m)) {
                return Err(invalid(&format!("holds a secret (`{member}`)")));
            }
            // RFC 7517 §4.3: a key whose `key_ops` are given and lack
            // `verify` may not verify.
            let ops = match key.get("key_ops") {
                None => Ok(()),
                Some(Value::Array(ops)) if ops.iter().any(|op| op == "verify") => Ok(()),
                Some(Value::Array(_)) => Err("`key_ops` does not include \"verify\"".to_owned()),
                Some(_) => Err("`key_ops` is not an array".to_owned()),
            };
            let use_ = use_.and(ops);
            let skip = match (text("kty"), text("crv"), &kid, use_) {
                (Some("OKP"), Some("Ed25519"), Some(_), Ok(())) => None,
                (Some("OKP"), Some("Ed25519"), None, _) => Some("no string `kid`".to_owned()),
                (Some("OKP"), Some("Ed25519"), Some(_), Err(reason)) => Some(reason),
                (kty, crv, ..) => Some(format!(
                    "not an Ed25519 key (kty {}, crv {})",
                    kty.unwrap_or("absent"),
                    crv.unwrap_or("absent")
                )),
            };
            if let Some(reason) = skip {
                set.skipped.push(SkippedJwk {
                    kid: kid.clone(),
                    reason,
                });
                continue;
            }
            let Some(kid) = kid.clone() else { continue };
            let x = text("x")
                .ok_or_else(|| invalid("no string `x`"))
                .and_then(|x| {
                    b64::decode(x, Part::Payload)
                        .map_err(|_| invalid("`x` is not strict base64url"))
                })?;
            let x: [u8; 32] = x
                .as_slice()
                .try_into()
                .map_err(|_| invalid("`x` is not 32 bytes"))?;
            let key_decoded = VerifyingKey::from_bytes(&x)
                .map_err(|e| invalid(&format!("`x` is not a usable Ed25519 key: {e}")))?;
            let alg = match key.get("alg") {
                None => None,
                Some(Value::String(alg)) => Some(
                    Algorithm::parse(alg)
                        .map_err(|_| invalid(&format!("`alg` `{alg}` is not EdDSA or Ed25519")))?,
                ),
                Some(_) => return Err(invalid("`alg` is not a string")),
            };
            if !kids.insert(kid.clone()) {
                return Err(JoseError::DuplicateKid { kid });
            }
            set.keys.push(TrustedJwk {
                kid,
                key: key_decoded,
                alg,
            });
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const X: &str = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo";

    #[test]
    fn a_published_jwk_has_exactly_the_six_members() {
        let key = ed25519_dalek::SigningKey::from_bytes(&[5; 32])
            .verifying_key()
            .to_bytes();
        let jwk = Jwk::public("acme:tokens:v1", &key, Algorithm::EdDSA);
        let value = serde_json::to_value(JwkSet { keys: vec![jwk] }).expect("json");
        let member = &value["keys"][0];
        let mut names: Vec<&str> = member
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        names.sort_unstable();
        assert_eq!(names, ["alg", "crv", "kid", "kty", "use", "x"]);
        assert_eq!(member["use"], "sig");
        assert_eq!(member["kty"], "OKP");
    }

    #[test]
    fn a_trusted_set_skips_foreign_keys_and_refuses_bad_ones() {
        let doc = json!({"keys": [
            {"kty": "OKP", "crv": "Ed25519", "x": X, "kid": "a", "alg": "Ed25519"},
            {"kty": "OKP", "crv": "Ed25519", "x": X, "kid": "b"},
            {"kty": "RSA", "n": "AQAB", "e": "AQAB", "kid": "rsa"},
            {"kty": "OKP", "crv": "X25519", "x": X, "kid": "ecdh"},
            {"kty": "OKP", "crv": "Ed25519", "x": X},
            {"kty": "OKP", "crv": "Ed25519", "x": X, "kid": "enc", "use": "enc"},
            {"kty": "OKP", "crv": "Ed25519", "x": X, "kid": "odd-use", "use": 1},
            {"kty": "OKP", "crv": "Ed25519", "x": X, "kid": "signer", "key_ops": ["sign"]},
            {"kty": "OKP", "crv": "Ed25519", "x": X, "kid": "odd-ops", "key_ops": "verify"},
            {"kty": "OKP", "crv": "Ed25519", "x": X, "kid": "c", "key_ops": ["verify"]}
        ]});
        let set = TrustedJwkSet::from_json(doc.to_string().as_bytes()).expect("loads");
        assert_eq!(
            set.keys.iter().map(|k| k.kid.as_str()).collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
        assert_eq!(set.keys[0].alg, Some(Algorithm::Ed25519));
        assert_eq!(set.keys[0].check_alg(Algorithm::Ed25519), Ok(()));
        assert!(matches!(
            set.keys[0].check_alg(Algorithm::EdDSA),
            Err(JoseError::AlgMismatch { .. })
        ));
        assert_eq!(set.keys[1].check_alg(Algorithm::EdDSA), Ok(()));
        assert_eq!(set.skipped.len(), 7);
        let dup_x = format!(
            r#"{{"keys":[{{"kty":"OKP","crv":"Ed25519","x":"{X}","x":"{X}","kid":"a"}}]}}"#
        );
        assert!(matches!(
            TrustedJwkSet::from_json(dup_x.as_bytes()),
            Err(JoseError::InvalidJwk { .. })
        ));
        let small_order = b64::encode(&{
            let mut y = [0u8; 32];
            y[0] = 1;
            y
        });
        for (doc, code) in [
            (
                json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": X, "kid": "a", "d": X}]}),
                "jose.invalid_jwk",
            ),
            // Private keys of any asymmetric type: refused, not skipped.
            (
                json!({"keys": [{"kty": "RSA", "n": "AQAB", "e": "AQAB", "d": "AQAB", "kid": "r"}]}),
                "jose.invalid_jwk",
            ),
            (
                json!({"keys": [{"kty": "RSA", "n": "AQAB", "e": "AQAB", "p": "AQAB", "kid": "r"}]}),
                "jose.invalid_jwk",
            ),
            (
                json!({"keys": [{"kty": "EC", "crv": "P-256", "x": X, "y": X, "d": X, "kid": "e"}]}),
                "jose.invalid_jwk",
            ),
            (
                json!({"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "h"}]}),
                "jose.invalid_jwk",
            ),
            (
                json!({"keys": [{"d": X, "kid": "no-kty"}]}),
                "jose.invalid_jwk",
            ),
            (
                json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "AAAA", "kid": "a"}]}),
                "jose.invalid_jwk",
            ),
            (
                json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": small_order, "kid": "a"}]}),
                "jose.invalid_jwk",
            ),
            (
                json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": X, "kid": "a", "alg": "RS256"}]}),
                "jose.invalid_jwk",
            ),
            (
                json!({"keys": [
                {"kty": "OKP", "crv": "Ed25519", "x": X, "kid": "a"},
                {"kty": "OKP", "crv": "Ed25519", "x": X, "kid": "a"}]}),
                "jose.duplicate_kid",
            ),
            (json!({"key": []}), "jose.invalid_jwk"),
            (json!({"keys": [1]}), "jose.invalid_jwk"),
            (json!([1]), "jose.invalid_jwk"),
        ] {
            assert_eq!(
                TrustedJwkSet::from_json(doc.to_string().as_bytes())
                    .map(|_| ())
                    .map_err(|e| e.code()),
                Err(code),
                "{doc}"
            );
        }
    }
}
