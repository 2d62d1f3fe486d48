//! [`Jwk`] and [`JwkSet`] (RFC 7517) for the KMS's public keys: Ed25519
//! (`OKP`, RFC 8037 §2) and ML-DSA (`AKP`, RFC 9964 §4): what a gateway
//! publishes; and [`TrustedJwkSet`], an external issuer's set loaded once,
//! each key decoded and checked at load: Ed25519 keys, with the
//! `rsa-ecdsa` feature RSA and EC keys (RFC 7518 §6.2, §6.3), with the
//! `ml-dsa` feature ML-DSA keys.

use std::collections::HashSet;

use kms_core::ed25519::VerifyingKey;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::alg::Algorithm;
use crate::b64;
use crate::error::{JoseError, Part};
use crate::object;
use crate::public_key::PublicKey;

/// A published public key, never with a private member (`d`, `priv`).
/// An Ed25519 key has exactly `kty: "OKP"`, `crv: "Ed25519"`, `x` (the
/// 32-byte key, base64url), `kid`, `alg` and `use: "sig"`; an ML-DSA key
/// exactly `kty: "AKP"`, `alg` (`ML-DSA-44`, `-65` or `-87`), `pub` (the
/// key, FIPS 204 `pkEncode`, base64url), `kid` and `use: "sig"`. Only
/// serialized: keys are read through [`TrustedJwkSet::from_json`], which
/// checks them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Jwk {
    kty: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    crv: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    x: Option<String>,
    #[serde(rename = "pub", skip_serializing_if = "Option::is_none")]
    public: Option<String>,
    kid: String,
    alg: String,
    #[serde(rename = "use")]
    use_: String,
}

impl Jwk {
    /// The JWK of a 32-byte Ed25519 public key named `kid`, for tokens
    /// under `alg`.
    pub fn public(kid: &str, public_key: &[u8; 32], alg: Algorithm) -> Self {
        Jwk {
            kty: "OKP".to_owned(),
            crv: Some("Ed25519".to_owned()),
            x: Some(b64::encode(public_key)),
            public: None,
            kid: kid.to_owned(),
            alg: alg.as_str().to_owned(),
            use_: "sig".to_owned(),
        }
    }

    /// The `AKP` JWK (RFC 9964 §4) of the ML-DSA public key `public_key`
    /// of `alg` (`ML-DSA-44`, `-65`, `-87`), named `kid`.
    ///
    /// # Errors
    /// [`JoseError::InvalidJwk`] if `alg` is not an ML-DSA name or the key
    /// is not of its length (1312, 1952 or 2592 bytes).
    pub fn ml_dsa(kid: &str, public_key: &[u8], alg: Algorithm) -> Result<Self, JoseError> {
        let fits = alg.key_alg().filter(|_| alg.is_ml_dsa());
        match fits {
            Some(key_alg) if key_alg.public_key_len() == public_key.len() => Ok(Jwk {
                kty: "AKP".to_owned(),
                crv: None,
                x: None,
                public: Some(b64::encode(public_key)),
                kid: kid.to_owned(),
                alg: alg.as_str().to_owned(),
                use_: "sig".to_owned(),
            }),
            _ => Err(JoseError::InvalidJwk {
                kid: Some(kid.to_owned()),
                reason: format!(
                    "a {}-byte key is not an ML-DSA key under `{alg}`",
                    public_key.len()
                ),
            }),
        }
    }

    /// The `kid`.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The `x` member of an Ed25519 key: the public key, base64url (`""`
    /// for an ML-DSA key, whose key is [`Jwk::public_key`]).
    pub fn x(&self) -> &str {
        self.x.as_deref().unwrap_or_default()
    }

    /// The public key, base64url: an Ed25519 key's `x`, an ML-DSA key's
    /// `pub`.
    pub fn public_key(&self) -> &str {
        self.x
            .as_deref()
            .or(self.public.as_deref())
            .unwrap_or_default()
    }

    /// The `kty` member: `OKP` or `AKP`.
    pub fn kty(&self) -> &str {
        &self.kty
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
    pub key: PublicKey,
    /// The `alg` the JWK bound it to; `None`: any its type verifies.
    pub alg: Option<Algorithm>,
}

impl TrustedJwk {
    /// Whether a token with header `alg` may verify under this key: the
    /// key's type must verify it (RFC 8725 §3.1), and it must be the JWK's
    /// `alg` when the JWK named one.
    ///
    /// # Errors
    /// [`JoseError::AlgMismatch`] when it may not.
    pub fn check_alg(&self, alg: Algorithm) -> Result<(), JoseError> {
        self.key.check_alg(alg)?;
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

/// The members that hold a secret: the private members of `OKP`, `EC`,
/// `RSA` and `AKP` keys (RFC 8037 §2, RFC 7518 §6.2.2 and §6.3.2, RFC 9964
/// §4) and an `oct` key's `k` (RFC 7518 §6.4.1).
const SECRET_MEMBERS: [&str; 9] = ["d", "p", "q", "dp", "dq", "qi", "oth", "k", "priv"];

/// An external issuer's JWK Set, loaded: its usable keys, and the keys it
/// skipped.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TrustedJwkSet {
    /// Usable keys, in the set's order; `kid`s are unique.
    pub keys: Vec<TrustedJwk>,
    /// Keys of types or curves this build does not verify, without a
    /// string `kid`, for another `use`, whose `key_ops` lack `verify`, RSA
    /// keys outside 2048 to 8192 bits, RSA and EC keys whose `alg` is not
    /// one of their type's; from a fetched set, also the keys
    /// [`TrustedJwkSet::from_json`] would refuse.
    pub skipped: Vec<SkippedJwk>,
    /// The issuer this set's keys speak for, if bound to one
    /// ([`TrustedJwkSet::bound_to`]): a verifier uses them only for a
    /// token whose `iss` is exactly this. `None`: unbound, any `iss`.
    pub issuer: Option<String>,
}

/// A key type this build verifies, from a JWK's `kty` and `crv`.
enum Kind {
    Ed25519,
    #[cfg(feature = "rsa-ecdsa")]
    Rsa,
    #[cfg(feature = "rsa-ecdsa")]
    Ec(Algorithm),
    /// An `AKP` key, of the ML-DSA `alg` it names.
    #[cfg(feature = "ml-dsa")]
    MlDsa(Algorithm),
}

/// Why a key of a set is not used.
enum Verdict {
    /// Skipped in any set, with the reason.
    Skip(String),
    /// Refused by a file, skipped in a fetched set.
    Refuse(JoseError),
}

impl TrustedJwkSet {
    /// Loads a JWK Set document an operator wrote (a file): strict. Keys
    /// of a type or curve this build does not verify (Ed25519 always; with
    /// the `rsa-ecdsa` feature, `RSA` and `EC` on P-256 and P-384; with
    /// `ml-dsa`, `AKP` keys of `ML-DSA-44`, `-65` and `-87`), without a
    /// string `kid`, with a `use` other than `sig`, or with `key_ops` that
    /// lack `verify` (RFC 7517 §4.3), RSA keys outside 2048 to 8192 bits,
    /// and RSA or EC keys whose `alg` is not one of their type's are
    /// skipped (listed in `skipped`); every other key must be valid.
    ///
    /// # Errors
    /// [`JoseError::InvalidJwk`] for a document that is not a JSON object
    /// with a `keys` array, a key that is not an object, a key of any
    /// `kty` that holds a secret member (`d`, `p`, `q`, `dp`, `dq`, `qi`,
    /// `oth`, an `AKP` key's `priv`, or an `oct` key's `k`: a secret does
    /// not belong in a trusted set), an Ed25519 key without a valid
    /// 32-byte `x`, one rules 2–3 refuse, or one with an `alg` other than
    /// `EdDSA`/`Ed25519`, an RSA key without valid `n` and `e`, an EC key
    /// whose `x` and `y` are not a point of its curve, an `AKP` key
    /// without a string `alg` or whose `pub` is not of the length its
    /// `alg` demands; [`JoseError::DuplicateKid`] for a `kid` that appears
    /// twice.
    pub fn from_json(document: &[u8]) -> Result<Self, JoseError> {
        Self::load(document, true)
    }

    /// Loads a JWK Set fetched from an issuer's `jwks_uri`: as
    /// [`TrustedJwkSet::from_json`], except that a key it would refuse (a
    /// private or symmetric key, a malformed one, a second key under a
    /// `kid`) is skipped with its reason and the rest of the set loads.
    ///
    /// # Errors
    /// [`JoseError::InvalidJwk`] for a document that is not a JSON object
    /// with a `keys` array of objects.
    pub fn from_fetched_json(document: &[u8]) -> Result<Self, JoseError> {
        Self::load(document, false)
    }

    /// This set, bound to `issuer` (an exact string, compared as RFC 7519
    /// §4.1.1 `StringOrURI`s are: no normalization).
    #[must_use]
    pub fn bound_to(mut self, issuer: impl Into<String>) -> Self {
        self.issuer = Some(issuer.into());
        self
    }

    fn load(document: &[u8], strict: bool) -> Result<Self, JoseError> {
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
        let mut set = TrustedJwkSet::default();
        let mut kids = HashSet::new();
        for key in &raw.keys {
            let verdict = match object::parse(key.get().as_bytes(), Part::Payload) {
                Ok(key) => judge(&key),
                Err(JoseError::Duplicate { name, .. }) => Err(Verdict::Refuse(set_error(
                    &format!("a key repeats the member {name}"),
                ))),
                Err(_) => return Err(set_error("a key is not a JSON object")),
            };
            let verdict = match verdict {
                Ok(key) if !kids.insert(key.kid.clone()) => {
                    Err(Verdict::Refuse(JoseError::DuplicateKid { kid: key.kid }))
                }
                other => other,
            };
            match verdict {
                Ok(key) => set.keys.push(key),
                Err(Verdict::Skip(reason)) => set.skipped.push(SkippedJwk {
                    kid: kid_of(key),
                    reason,
                }),
                Err(Verdict::Refuse(e)) if strict => return Err(e),
                Err(Verdict::Refuse(e)) => set.skipped.push(SkippedJwk {
                    kid: kid_of(key),
                    reason: e.to_string(),
                }),
            }
        }
        Ok(set)
    }
}

/// The string `kid` of a raw key, if it has one.
fn kid_of(key: &RawValue) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Kid {
        kid: Option<Value>,
    }
    match serde_json::from_str::<Kid>(key.get()) {
        Ok(Kid {
            kid: Some(Value::String(kid)),
        }) => Some(kid),
        _ => None,
    }
}

/// What becomes of one key (its members unique): [`TrustedJwkSet::from_json`]'s
/// rules.
fn judge(key: &serde_json::Map<String, Value>) -> Result<TrustedJwk, Verdict> {
    let kid = match key.get("kid") {
        Some(Value::String(kid)) => Some(kid.clone()),
        _ => None,
    };
    let refuse = |reason: &str| {
        Verdict::Refuse(JoseError::InvalidJwk {
            kid: kid.clone(),
            reason: reason.to_owned(),
        })
    };
    let text = |name: &str| key.get(name).and_then(Value::as_str);
    // A secret in a set of trusted public keys is a leak, not a key to
    // skip, whatever its `kty` (or none): the asymmetric types' private
    // members (RFC 7518 §6.2.2, §6.3.2; RFC 8037 §2) and a symmetric key's
    // `k` (RFC 7518 §6.4.1).
    if let Some(member) = SECRET_MEMBERS.iter().find(|m| key.contains_key(**m)) {
        return Err(refuse(&format!("holds a secret (`{member}`)")));
    }
    // RFC 9964 §4: an `AKP` key names its algorithm, which says how to read
    // `pub`; one without is malformed, not foreign (in a build that reads
    // `AKP` keys; one without `ml-dsa` skips them all).
    if cfg!(feature = "ml-dsa") && text("kty") == Some("AKP") && text("alg").is_none() {
        return Err(refuse("an AKP key without a string `alg` (RFC 9964 §4)"));
    }
    let kind = match (text("kty"), text("crv")) {
        (Some("OKP"), Some("Ed25519")) => Some(Kind::Ed25519),
        #[cfg(feature = "ml-dsa")]
        (Some("AKP"), _) => text("alg")
            .and_then(|alg| Algorithm::parse(alg).ok())
            .filter(|alg| alg.is_ml_dsa())
            .map(Kind::MlDsa),
        #[cfg(feature = "rsa-ecdsa")]
        (Some("RSA"), _) => Some(Kind::Rsa),
        #[cfg(feature = "rsa-ecdsa")]
        (Some("EC"), Some(crv)) => crate::aws_lc::EcKey::curve(crv).map(|(alg, _)| Kind::Ec(alg)),
        _ => None,
    };
    let Some(kind) = kind else {
        let (named, what) = match text("kty") {
            Some("AKP") => ("alg", text("alg")),
            _ => ("crv", text("crv")),
        };
        return Err(Verdict::Skip(format!(
            "not a key this build verifies (kty {}, {named} {})",
            text("kty").unwrap_or("absent"),
            what.unwrap_or("absent")
        )));
    };
    let Some(kid) = kid.clone() else {
        return Err(Verdict::Skip("no string `kid`".to_owned()));
    };
    match key.get("use") {
        None => {}
        Some(Value::String(u)) if u == "sig" => {}
        Some(other) => {
            let other = other.to_string();
            return Err(Verdict::Skip(format!(
                "`use` is {}, not \"sig\"",
                other.chars().take(32).collect::<String>().escape_debug()
            )));
        }
    }
    // RFC 7517 §4.3: a key whose `key_ops` are given and lack `verify`
    // may not verify.
    match key.get("key_ops") {
        None => {}
        Some(Value::Array(ops)) if ops.iter().any(|op| op == "verify") => {}
        Some(Value::Array(_)) => {
            return Err(Verdict::Skip(
                "`key_ops` does not include \"verify\"".to_owned(),
            ))
        }
        Some(_) => return Err(Verdict::Skip("`key_ops` is not an array".to_owned())),
    }
    let bytes = |name: &str| -> Result<Vec<u8>, Verdict> {
        let value = text(name).ok_or_else(|| refuse(&format!("no string `{name}`")))?;
        b64::decode(value, Part::Payload)
            .map_err(|_| refuse(&format!("`{name}` is not strict base64url")))
    };
    // The JWK's `alg`: an Ed25519 key's must name Ed25519 (else the set is
    // wrong); another type's `alg` that its type does not verify (an
    // encryption alg, say) skips the key.
    let alg = match key.get("alg") {
        None => None,
        Some(Value::String(alg)) => match (Algorithm::parse(alg), &kind) {
            (Ok(parsed), Kind::Ed25519) if parsed.is_ed25519() => Some(parsed),
            (_, Kind::Ed25519) => {
                return Err(refuse(&format!("`alg` `{alg}` is not EdDSA or Ed25519")))
            }
            #[cfg(feature = "rsa-ecdsa")]
            (Ok(parsed), Kind::Rsa) if crate::aws_lc::RsaKey::verifies(parsed) => Some(parsed),
            #[cfg(feature = "rsa-ecdsa")]
            (Ok(parsed), Kind::Ec(curve_alg)) if parsed == *curve_alg => Some(parsed),
            #[cfg(feature = "ml-dsa")]
            (Ok(parsed), Kind::MlDsa(named)) if parsed == *named => Some(parsed),
            #[cfg(any(feature = "rsa-ecdsa", feature = "ml-dsa"))]
            _ => {
                return Err(Verdict::Skip(format!(
                    "`alg` `{}` is not one this key's type verifies",
                    alg.chars().take(32).collect::<String>().escape_debug()
                )))
            }
        },
        Some(_) => return Err(refuse("`alg` is not a string")),
    };
    let key = match kind {
        Kind::Ed25519 => ed25519_key(&bytes, &refuse),
        #[cfg(feature = "rsa-ecdsa")]
        Kind::Rsa => rsa_key(&bytes, alg, &refuse),
        #[cfg(feature = "rsa-ecdsa")]
        Kind::Ec(curve_alg) => ec_key(&bytes, curve_alg, &refuse),
        #[cfg(feature = "ml-dsa")]
        Kind::MlDsa(alg) => ml_dsa_key(&bytes, alg, &refuse),
    }?;
    Ok(TrustedJwk { kid, key, alg })
}

fn ed25519_key(
    bytes: &dyn Fn(&str) -> Result<Vec<u8>, Verdict>,
    refuse: &dyn Fn(&str) -> Verdict,
) -> Result<PublicKey, Verdict> {
    let x: [u8; 32] = bytes("x")?
        .as_slice()
        .try_into()
        .map_err(|_| refuse("`x` is not 32 bytes"))?;
    VerifyingKey::from_bytes(&x)
        .map(PublicKey::ed25519)
        .map_err(|e| refuse(&format!("`x` is not a usable Ed25519 key: {e}")))
}

/// An `AKP` key's `pub` (RFC 9964 §4): exactly the length `alg` demands.
#[cfg(feature = "ml-dsa")]
fn ml_dsa_key(
    bytes: &dyn Fn(&str) -> Result<Vec<u8>, Verdict>,
    alg: Algorithm,
    refuse: &dyn Fn(&str) -> Verdict,
) -> Result<PublicKey, Verdict> {
    let key_alg = alg
        .key_alg()
        .ok_or_else(|| refuse(&format!("`{alg}` is not an ML-DSA algorithm")))?;
    let public = bytes("pub")?;
    if public.len() != key_alg.public_key_len() {
        return Err(refuse(&format!(
            "`pub` is {} bytes; an {alg} key has {}",
            public.len(),
            key_alg.public_key_len()
        )));
    }
    kms_core::ml_dsa::VerifyingKey::from_bytes(key_alg, &public)
        .map(PublicKey::ml_dsa)
        .map_err(|e| refuse(&format!("`pub` is not a usable {alg} key: {e}")))
}

#[cfg(feature = "rsa-ecdsa")]
fn rsa_key(
    bytes: &dyn Fn(&str) -> Result<Vec<u8>, Verdict>,
    alg: Option<Algorithm>,
    refuse: &dyn Fn(&str) -> Verdict,
) -> Result<PublicKey, Verdict> {
    use crate::aws_lc::{RsaKey, Unusable};
    match RsaKey::new(&bytes("n")?, &bytes("e")?, alg) {
        Ok(key) => Ok(PublicKey::rsa(key)),
        Err(Unusable::Weak(reason)) => Err(Verdict::Skip(reason)),
        Err(Unusable::Invalid(reason)) => Err(refuse(&reason)),
    }
}

#[cfg(feature = "rsa-ecdsa")]
fn ec_key(
    bytes: &dyn Fn(&str) -> Result<Vec<u8>, Verdict>,
    alg: Algorithm,
    refuse: &dyn Fn(&str) -> Verdict,
) -> Result<PublicKey, Verdict> {
    use crate::aws_lc::{EcKey, Unusable};
    match EcKey::new(alg, &bytes("x")?, &bytes("y")?) {
        Ok(key) => Ok(PublicKey::ec(key)),
        Err(Unusable::Weak(reason)) => Err(Verdict::Skip(reason)),
        Err(Unusable::Invalid(reason)) => Err(refuse(&reason)),
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
