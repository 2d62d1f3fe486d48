//! Bad input never panics: arbitrary strings and mutated valid tokens
//! through the parser, the verifier and claims validation; and a mutated
//! token never verifies.

use std::time::SystemTime;

use ed25519_dalek::{Signer, SigningKey};
use kms_core::ed25519::VerifyingKey;
use kms_jose::{sign_compact, Algorithm, CompactJws, Header, TrustedJwkSet, Validation};
use proptest::prelude::*;

fn signer() -> (SigningKey, VerifyingKey) {
    let signing = SigningKey::from_bytes(&[11; 32]);
    let key = VerifyingKey::from_bytes(&signing.verifying_key().to_bytes()).expect("key");
    (signing, key)
}

fn valid_token() -> String {
    let (signing, _) = signer();
    sign_compact(
        &Header::new(Algorithm::Ed25519, Some("k".to_owned())),
        &serde_json::json!({"sub": "alice", "exp": 4_000_000_000u64, "aud": ["a", "b"]}),
        |input| signing.sign(input).to_bytes(),
    )
    .expect("sign")
}

/// Everything a verifier does with a token, ignoring the outcome.
fn exercise(token: &str) -> bool {
    let (_, key) = signer();
    let Ok(jws) = CompactJws::parse(token) else {
        return false;
    };
    let verified = jws.verify(&key).is_ok();
    if let Ok(claims) = jws.claims() {
        let _ = Validation::default().validate(&claims, SystemTime::now());
    }
    verified
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,300}") {
        exercise(&text);
        let _ = TrustedJwkSet::from_json(text.as_bytes());
    }

    #[test]
    fn arbitrary_bytes_as_a_jwk_set_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = TrustedJwkSet::from_json(&bytes);
    }

    #[test]
    fn a_mutated_token_never_verifies(position in 0usize..400, byte in any::<u8>()) {
        let token = valid_token();
        let mut bytes = token.clone().into_bytes();
        let at = position % bytes.len();
        prop_assume!(bytes[at] != byte);
        bytes[at] = byte;
        if let Ok(mutated) = String::from_utf8(bytes) {
            // A change of trailing bits would decode the same: strict
            // base64url refuses it, so no mutation verifies.
            prop_assert!(!exercise(&mutated), "{mutated} verified");
        }
    }
}

#[test]
fn the_unmutated_token_verifies() {
    assert!(exercise(&valid_token()));
}

/// base64url without padding, for building tokens part by part.
fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A JSON leaf or small structure, for header and claim values.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_map(|f| serde_json::json!(f)),
        ".{0,12}".prop_map(serde_json::Value::from),
        proptest::collection::vec(".{0,4}", 0..3).prop_map(|v| serde_json::json!(v)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Well-formed base64url parts around arbitrary headers and claims:
    /// the parser gets past the split and the decoding, and a token signed
    /// by no one never verifies.
    #[test]
    fn arbitrary_headers_and_claims_never_panic_nor_verify(
        header in proptest::collection::vec(
            (prop_oneof![Just("alg".to_owned()), Just("kid".to_owned()), Just("typ".to_owned()), Just("crit".to_owned()), "[a-z]{1,3}"], json_value()),
            0..5,
        ),
        alg in prop_oneof![Just("EdDSA"), Just("Ed25519"), Just("none"), Just("HS256"), Just("RS256"), Just("ES256"), Just("ES384"), Just("PS512")],
        claims in proptest::collection::vec(("[a-z]{1,4}", json_value()), 0..6),
        signature in prop_oneof![
            proptest::collection::vec(any::<u8>(), 64..=64),
            proptest::collection::vec(any::<u8>(), 0..80),
            proptest::collection::vec(any::<u8>(), 250..=260),
        ],
    ) {
        let mut head = format!(r#"{{"alg":"{alg}""#);
        for (name, value) in &header {
            head += &format!(r#","{name}":{value}"#);
        }
        head.push('}');
        let mut body = String::from("{");
        for (i, (name, value)) in claims.iter().enumerate() {
            if i > 0 {
                body.push(',');
            }
            body += &format!(r#""{name}":{value}"#);
        }
        body.push('}');
        let token = format!("{}.{}.{}", b64(head.as_bytes()), b64(body.as_bytes()), b64(&signature));
        prop_assert!(!exercise(&token));
    }
}

/// The RSA and ECDSA side (feature `rsa-ecdsa`): JWK Sets of arbitrary
/// RSA and EC members, loaded as a file and as a fetched set, and tokens
/// under RS*/PS*/ES* algs with arbitrary signatures, checked against one
/// RSA and one EC key: nothing panics, nothing signed by no one verifies,
/// and a fetched set only ever skips what a file refuses.
#[cfg(feature = "rsa-ecdsa")]
mod rsa_ecdsa {
    use std::sync::OnceLock;

    use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
    use kms_jose::{CompactJws, TrustedJwkSet};
    use proptest::prelude::*;
    use serde_json::json;

    use super::b64;

    /// One RSA-2048 and one P-256 key, as a trusted set.
    fn keys() -> &'static TrustedJwkSet {
        static KEYS: OnceLock<TrustedJwkSet> = OnceLock::new();
        KEYS.get_or_init(|| {
            let rsa =
                aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).expect("rsa");
            let ec = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).expect("ec");
            let point = ec.public_key().as_ref();
            let doc = json!({"keys": [
                {"kty": "RSA", "kid": "rsa",
                 "n": b64(rsa.public_key().modulus().big_endian_without_leading_zero()),
                 "e": b64(rsa.public_key().exponent().big_endian_without_leading_zero())},
                {"kty": "EC", "crv": "P-256", "kid": "ec",
                 "x": b64(&point[1..33]), "y": b64(&point[33..])},
            ]});
            TrustedJwkSet::from_json(doc.to_string().as_bytes()).expect("set")
        })
    }

    fn member() -> impl Strategy<Value = serde_json::Value> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..300).prop_map(|b| json!(b64(&b))),
            ".{0,8}".prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            Just(serde_json::Value::Null),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        #[test]
        fn arbitrary_rsa_and_ec_members_never_panic(
            kty in prop_oneof![Just("RSA".to_owned()), Just("EC".to_owned()), Just("OKP".to_owned()), Just("oct".to_owned()), "[A-Z]{1,3}"],
            crv in prop_oneof![Just("P-256".to_owned()), Just("P-384".to_owned()), Just("P-521".to_owned()), Just("Ed25519".to_owned()), "[a-z0-9-]{0,6}"],
            alg in prop_oneof![Just("RS256".to_owned()), Just("PS512".to_owned()), Just("ES256".to_owned()), Just("ES384".to_owned()), Just("EdDSA".to_owned()), Just("HS256".to_owned()), "[A-Z0-9]{0,5}"],
            members in proptest::collection::vec(
                (prop_oneof![Just("n"), Just("e"), Just("x"), Just("y"), Just("d"), Just("use"), Just("key_ops")], member()),
                0..6,
            ),
            with_alg in any::<bool>(),
        ) {
            let mut key = serde_json::Map::new();
            key.insert("kty".to_owned(), json!(kty));
            key.insert("crv".to_owned(), json!(crv));
            key.insert("kid".to_owned(), json!("k"));
            if with_alg {
                key.insert("alg".to_owned(), json!(alg));
            }
            for (name, value) in members {
                key.insert(name.to_owned(), value);
            }
            let doc = json!({"keys": [key]}).to_string();
            let file = TrustedJwkSet::from_json(doc.as_bytes());
            let fetched = TrustedJwkSet::from_fetched_json(doc.as_bytes()).expect("one object loads");
            match file {
                Ok(set) => prop_assert_eq!(set, fetched),
                Err(_) => prop_assert!(fetched.keys.is_empty() && fetched.skipped.len() == 1),
            }
        }

        #[test]
        fn tokens_under_rsa_and_ecdsa_algs_signed_by_no_one_never_verify(
            alg in prop_oneof![Just("RS256"), Just("RS384"), Just("RS512"), Just("PS256"), Just("PS384"), Just("PS512"), Just("ES256"), Just("ES384")],
            kid in prop_oneof![Just("rsa"), Just("ec")],
            signature in prop_oneof![
                proptest::collection::vec(any::<u8>(), 256..=256),
                proptest::collection::vec(any::<u8>(), 64..=64),
                proptest::collection::vec(any::<u8>(), 0..600),
            ],
        ) {
            let head = json!({"alg": alg, "kid": kid}).to_string();
            let token = format!("{}.{}.{}", b64(head.as_bytes()), b64(b"{\"sub\":\"a\"}"), b64(&signature));
            if let Ok(jws) = CompactJws::parse(&token) {
                let key = keys().keys.iter().find(|k| k.kid == kid).expect("key");
                let verified = key.check_alg(jws.header().alg()).and_then(|()| jws.verify_with(&key.key));
                prop_assert!(verified.is_err());
            }
        }
    }
}
