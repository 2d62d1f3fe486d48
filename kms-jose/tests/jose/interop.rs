//! Tokens written by others: the RFC 8037 appendix A example, exactly,
//! and the `jsonwebtoken` crate (its `rust_crypto` backend) both ways.

use std::time::{SystemTime, UNIX_EPOCH};

use ed25519_dalek::{Signer, SigningKey};
use kms_core::ed25519::VerifyingKey;
use kms_jose::{sign_compact, Algorithm, CompactJws, Header, JoseError, TrustedJwkSet, Validation};
use serde::{Deserialize, Serialize};

/// The RFC 8037 appendix A file in `testdata/`.
fn rfc8037() -> serde_json::Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/rfc8037_appendix_a.json"
    );
    let text = std::fs::read_to_string(path).expect("testdata/rfc8037_appendix_a.json");
    serde_json::from_str(&text).expect("json")
}

fn b64(text: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .expect("base64url")
}

/// jsonwebtoken's RustCrypto backend, installed for the process: a
/// workspace build enables its aws-lc backend too (for the HTTP bench's
/// peer), and with both it needs one chosen.
fn rust_crypto() {
    let _ = jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER.install_default();
}

#[test]
fn rfc8037_appendix_a_verifies_and_signs_to_the_same_bytes() {
    rust_crypto();
    let v = rfc8037();
    let text = |path: &[&str]| {
        path.iter()
            .fold(&v, |v, k| &v[*k])
            .as_str()
            .expect("string")
            .to_owned()
    };
    let jws_text = text(&["jws"]);
    let jws = CompactJws::parse(&jws_text).expect("A.4 parses");
    assert_eq!(jws.header().alg(), Algorithm::EdDSA);
    assert_eq!(jws.header().kid(), None);
    assert_eq!(jws.payload(), text(&["payload"]).as_bytes());
    let x: [u8; 32] = b64(&text(&["public_jwk", "x"]))
        .try_into()
        .expect("32 bytes");
    let key = VerifyingKey::from_bytes(&x).expect("A.2 key");
    assert_eq!(jws.verify(&key), Ok(()));
    // Signing A.4's input with A.1's `d` gives A.4's signature exactly
    // (Ed25519 is deterministic), and our header encodes as A.4's.
    let d: [u8; 32] = b64(&text(&["private_jwk", "d"]))
        .try_into()
        .expect("32 bytes");
    let signing = SigningKey::from_bytes(&d);
    assert_eq!(signing.verifying_key().to_bytes(), x);
    assert_eq!(
        &signing.sign(jws.signing_input()).to_bytes(),
        jws.signature()
    );
    let header = Header::new(Algorithm::EdDSA, None).to_json();
    assert_eq!(header, text(&["protected_header"]));
    assert!(jws_text.starts_with("eyJhbGciOiJFZERTQSJ9."));
    // A.2's public JWK has no `kid`: a trusted set skips it; the private
    // JWK of A.1 is refused outright.
    let public = serde_json::json!({"keys": [v["public_jwk"]]}).to_string();
    let set = TrustedJwkSet::from_json(public.as_bytes()).expect("loads");
    assert!(set.keys.is_empty() && set.skipped.len() == 1);
    let private = serde_json::json!({"keys": [v["private_jwk"]]}).to_string();
    assert!(matches!(
        TrustedJwkSet::from_json(private.as_bytes()),
        Err(JoseError::InvalidJwk { .. })
    ));
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Claims {
    sub: String,
    exp: u64,
}

fn later() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        + 600
}

/// PKCS#8 v1 DER of an Ed25519 seed (RFC 8410 §7): what `jsonwebtoken`
/// takes for a signing key.
fn pkcs8(seed: &[u8; 32]) -> Vec<u8> {
    let mut der = vec![
        0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04,
        0x20,
    ];
    der.extend_from_slice(seed);
    der
}

#[test]
fn jsonwebtoken_tokens_verify_here_and_ours_verify_there() {
    rust_crypto();
    let seed = [21u8; 32];
    let signing = SigningKey::from_bytes(&seed);
    let public = signing.verifying_key().to_bytes();
    let key = VerifyingKey::from_bytes(&public).expect("key");
    let claims = Claims {
        sub: "alice".to_owned(),
        exp: later(),
    };

    // Theirs, verified here.
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
    header.kid = Some("theirs-1".to_owned());
    let theirs = jsonwebtoken::encode(
        &header,
        &claims,
        &jsonwebtoken::EncodingKey::from_ed_der(&pkcs8(&seed)),
    )
    .expect("jsonwebtoken signs");
    let jws = CompactJws::parse(&theirs).expect("parses");
    assert_eq!(jws.header().kid(), Some("theirs-1"));
    assert_eq!(jws.verify(&key), Ok(()));
    let got = jws.claims().expect("claims");
    Validation::default()
        .validate(&got, SystemTime::now())
        .expect("valid claims");
    assert_eq!(got.deserialize::<Claims>(), Ok(claims.clone()));
    // Tampered: another payload under their signature.
    let (head, signature) = theirs.rsplit_once('.').expect("parts");
    let (header_b64, _) = head.split_once('.').expect("parts");
    let other = Claims {
        sub: "mallory".to_owned(),
        ..claims.clone()
    };
    let forged = format!(
        "{header_b64}.{}.{signature}",
        base64::Engine::encode(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            serde_json::to_vec(&other).expect("json")
        )
    );
    assert!(matches!(
        CompactJws::parse(&forged).expect("parses").verify(&key),
        Err(JoseError::Signature(_))
    ));

    // Ours, verified there.
    let ours = sign_compact(
        &Header::new(Algorithm::EdDSA, Some("ours-1".to_owned())),
        &claims,
        |input| signing.sign(input).to_bytes(),
    )
    .expect("sign");
    let x = base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, public);
    let decoded = jsonwebtoken::decode::<Claims>(
        &ours,
        &jsonwebtoken::DecodingKey::from_ed_components(&x).expect("key"),
        &jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::EdDSA),
    )
    .expect("jsonwebtoken verifies ours");
    assert_eq!(decoded.claims, claims);
    assert_eq!(decoded.header.kid.as_deref(), Some("ours-1"));
}

#[test]
fn a_hmac_token_keyed_with_the_public_key_is_refused() {
    rust_crypto();
    // The classic confusion: HS256 with the Ed25519 public key as secret.
    let public = SigningKey::from_bytes(&[4; 32]).verifying_key().to_bytes();
    let token = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &Claims {
            sub: "mallory".to_owned(),
            exp: later(),
        },
        &jsonwebtoken::EncodingKey::from_secret(&public),
    )
    .expect("hs256");
    assert!(matches!(
        CompactJws::parse(&token),
        Err(JoseError::UnsupportedAlg { alg }) if alg == "HS256"
    ));
}
