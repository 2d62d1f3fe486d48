//! ML-DSA tokens and `AKP` keys (RFC 9964, feature `ml-dsa`): RFC 9964's
//! JOSE examples verify through a trusted set, a private `AKP` key is
//! refused, a malformed one is refused from a file and skipped from a
//! fetch, a key verifies only its own `alg`, the published JWK has exactly
//! RFC 9964's members, and an ML-DSA-87 token fits [`MAX_TOKEN_BYTES`].
#![cfg(feature = "ml-dsa")]

use std::path::Path;

use kms_core::ml_dsa::SigningKey;
use kms_jose::{
    finish_compact, signing_input, Algorithm, CompactJws, Header, JoseError, Jwk, JwkSet,
    TrustedJwkSet, MAX_TOKEN_BYTES,
};
use serde_json::{json, Value};

const NAMES: [(Algorithm, kms_core::Alg); 3] = [
    (Algorithm::MlDsa44, kms_core::Alg::MlDsa44),
    (Algorithm::MlDsa65, kms_core::Alg::MlDsa65),
    (Algorithm::MlDsa87, kms_core::Alg::MlDsa87),
];

fn examples() -> Value {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/rfc9964_ml_dsa_jose_examples.json");
    serde_json::from_slice(&std::fs::read(path).expect("read")).expect("json")
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A token of `alg` signed by `key`, named `kid`.
fn token(key: &SigningKey, alg: Algorithm, kid: &str, claims: &Value) -> String {
    let header = Header::new(alg, Some(kid.to_owned()));
    let input = signing_input(&header, claims.to_string().as_bytes());
    let signature = key.sign(input.as_bytes()).expect("sign");
    finish_compact(input, &signature)
}

#[test]
fn rfc9964_examples_verify_under_their_public_jwks_and_their_private_jwks_are_refused() {
    let examples = examples();
    for (alg, _) in NAMES {
        let example = &examples["jose"][alg.as_str()];
        let private = example["jwk"].clone();
        assert!(private.get("priv").is_some());
        let refused = TrustedJwkSet::from_json(json!({"keys": [private]}).to_string().as_bytes());
        assert!(
            matches!(refused, Err(JoseError::InvalidJwk { ref reason, .. }) if reason.contains("priv")),
            "{refused:?}"
        );
        let mut public = private.clone();
        public.as_object_mut().expect("object").remove("priv");
        let set = TrustedJwkSet::from_json(json!({"keys": [public]}).to_string().as_bytes())
            .expect("a public AKP key loads");
        let key = &set.keys[0];
        assert_eq!(key.alg, Some(alg));
        let jws_text = example["jws"].as_str().expect("jws");
        let jws = CompactJws::parse(jws_text).expect("parses");
        assert_eq!(jws.header().alg(), alg);
        assert_eq!(jws.header().kid(), Some(key.kid.as_str()));
        jws.verify_with(&key.key).expect("the example verifies");
        // A flipped byte of the signature does not.
        let (input, signature) = jws_text.rsplit_once('.').expect("three parts");
        let mut bytes = CompactJws::parse(jws_text)
            .expect("parses")
            .signature()
            .to_vec();
        bytes[10] ^= 1;
        let tampered = format!("{input}.{}", b64(&bytes));
        assert_ne!(signature, b64(&bytes));
        assert!(matches!(
            CompactJws::parse(&tampered)
                .expect("parses")
                .verify_with(&key.key),
            Err(JoseError::SignatureRejected { .. })
        ));
    }
}

#[test]
fn a_key_verifies_only_its_own_parameter_set() {
    let k44 = SigningKey::from_seed(kms_core::Alg::MlDsa44, &[1; 32]).expect("key");
    let k65 = SigningKey::from_seed(kms_core::Alg::MlDsa65, &[1; 32]).expect("key");
    let set = JwkSet {
        keys: vec![
            Jwk::ml_dsa("k44", k44.public_key(), Algorithm::MlDsa44).expect("jwk"),
            Jwk::ml_dsa("k65", k65.public_key(), Algorithm::MlDsa65).expect("jwk"),
        ],
    };
    let trusted = TrustedJwkSet::from_json(serde_json::to_string(&set).expect("json").as_bytes())
        .expect("loads");
    let claims = json!({"sub": "alice"});
    let good = token(&k65, Algorithm::MlDsa65, "k65", &claims);
    let jws = CompactJws::parse(&good).expect("parses");
    jws.verify_with(&trusted.keys[1].key).expect("verifies");
    // The ML-DSA-44 key refuses an ML-DSA-65 token, and an Ed25519 name.
    assert!(matches!(
        trusted.keys[0].check_alg(Algorithm::MlDsa65),
        Err(JoseError::AlgMismatch { .. })
    ));
    assert!(matches!(
        trusted.keys[1].check_alg(Algorithm::EdDSA),
        Err(JoseError::AlgMismatch { .. })
    ));
    assert!(matches!(
        jws.verify_with(&trusted.keys[0].key),
        Err(JoseError::AlgMismatch { .. })
    ));
    // An Ed25519 key refuses an ML-DSA token.
    let okp = TrustedJwkSet::from_json(
        json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo", "kid": "ed"}]})
            .to_string()
            .as_bytes(),
    )
    .expect("loads");
    assert!(matches!(
        jws.verify_with(&okp.keys[0].key),
        Err(JoseError::AlgMismatch { .. })
    ));
    assert!(Jwk::ml_dsa("x", k44.public_key(), Algorithm::MlDsa65).is_err());
    assert!(Jwk::ml_dsa("x", k44.public_key(), Algorithm::EdDSA).is_err());
}

#[test]
fn a_published_akp_jwk_has_exactly_rfc9964s_members() {
    let key = SigningKey::from_seed(kms_core::Alg::MlDsa65, &[2; 32]).expect("key");
    let jwk = Jwk::ml_dsa("kid-1", key.public_key(), Algorithm::MlDsa65).expect("jwk");
    let value = serde_json::to_value(&jwk).expect("json");
    let mut names: Vec<&str> = value
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["alg", "kid", "kty", "pub", "use"]);
    assert_eq!(value["kty"], "AKP");
    assert_eq!(value["alg"], "ML-DSA-65");
    assert_eq!(value["pub"], b64(key.public_key()));
    assert_eq!(jwk.public_key(), b64(key.public_key()));
}

#[test]
fn malformed_akp_keys_are_refused_from_a_file_and_skipped_from_a_fetch() {
    let key = SigningKey::from_seed(kms_core::Alg::MlDsa44, &[3; 32]).expect("key");
    let public = b64(key.public_key());
    let good = json!({"kty": "AKP", "alg": "ML-DSA-44", "pub": public, "kid": "good"});
    for (bad, says) in [
        (json!({"kty": "AKP", "pub": public, "kid": "b"}), "alg"),
        (
            json!({"kty": "AKP", "alg": "ML-DSA-65", "pub": public, "kid": "b"}),
            "bytes",
        ),
        (
            json!({"kty": "AKP", "alg": "ML-DSA-44", "pub": "AAAA", "kid": "b"}),
            "bytes",
        ),
        (
            json!({"kty": "AKP", "alg": "ML-DSA-44", "pub": "A+A", "kid": "b"}),
            "base64url",
        ),
        (
            json!({"kty": "AKP", "alg": "ML-DSA-44", "pub": public, "priv": "AAAA", "kid": "b"}),
            "priv",
        ),
    ] {
        let doc = json!({"keys": [good, bad]}).to_string();
        let refused = TrustedJwkSet::from_json(doc.as_bytes());
        assert!(
            matches!(refused, Err(JoseError::InvalidJwk { ref reason, .. }) if reason.contains(says)),
            "{bad}: {refused:?}"
        );
        let fetched = TrustedJwkSet::from_fetched_json(doc.as_bytes()).expect("loads");
        assert_eq!(fetched.keys.len(), 1, "{bad}");
        assert_eq!(fetched.keys[0].kid, "good");
        assert_eq!(fetched.skipped.len(), 1, "{bad}");
    }
    // Another AKP algorithm is a foreign key: skipped even from a file.
    let doc = json!({"keys": [good, {"kty": "AKP", "alg": "SLH-DSA-SHA2-128s", "pub": public, "kid": "slh"}]});
    let set = TrustedJwkSet::from_json(doc.to_string().as_bytes()).expect("loads");
    assert_eq!(set.keys.len(), 1);
    assert_eq!(set.skipped.len(), 1);
}

#[test]
fn an_ml_dsa_87_token_fits_the_token_limit() {
    let key = SigningKey::from_seed(kms_core::Alg::MlDsa87, &[4; 32]).expect("key");
    let kid = "kms:acme-tenant:tokens:ml-dsa-87:67e55044-10b1-426f-9247-bb680e5fe0c8:v12";
    let claims = json!({
        "iss": "https://gateway.example.com", "sub": "a-user-with-a-long-name@example.com",
        "aud": ["https://api.example.com", "https://other.example.com"],
        "exp": 4_000_000_000u64, "iat": 1_800_000_000u64, "nbf": 1_800_000_000u64,
        "jti": "0f8fad5b-d9cb-469f-a165-70867728950e", "scope": "read write admin",
    });
    let token = token(&key, Algorithm::MlDsa87, kid, &claims);
    assert!(token.len() < MAX_TOKEN_BYTES, "{} bytes", token.len());
    let jws = CompactJws::parse(&token).expect("parses");
    assert_eq!(jws.signature().len(), 4627);
    println!("an ML-DSA-87 token with nine claims: {} bytes", token.len());
}
