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
