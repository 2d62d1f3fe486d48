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
        alg in prop_oneof![Just("EdDSA"), Just("Ed25519"), Just("none"), Just("HS256")],
        claims in proptest::collection::vec(("[a-z]{1,4}", json_value()), 0..6),
        signature in prop_oneof![
            proptest::collection::vec(any::<u8>(), 64..=64),
            proptest::collection::vec(any::<u8>(), 0..80),
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
