//! The algorithms identity providers sign with (feature `rsa-ecdsa`):
//! tokens signed by aws-lc-rs with freshly made keys verify under their
//! JWKs, `jsonwebtoken`'s RustCrypto backend (another implementation)
//! agrees, the key's type decides the algorithm (RFC 8725 §3.1), and the
//! keys a set must not use are skipped or refused.
#![cfg(feature = "rsa-ecdsa")]

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::{KeyPair as RsaKeyPair, KeySize};
use aws_lc_rs::signature::{self, EcdsaKeyPair, KeyPair, RsaEncoding};
use base64::Engine;
use kms_jose::{Algorithm, CompactJws, Header, JoseError, TrustedJwkSet};
use serde_json::{json, Value};

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A compact JWS of `claims` under `header`, signed by `sign`.
fn token(header: &Header, claims: &Value, sign: impl FnOnce(&[u8]) -> Vec<u8>) -> String {
    let input = format!(
        "{}.{}",
        b64(header.to_json().as_bytes()),
        b64(claims.to_string().as_bytes())
    );
    let signature = sign(input.as_bytes());
    format!("{input}.{}", b64(&signature))
}

struct Rsa {
    pair: RsaKeyPair,
    jwk: Value,
}

fn rsa(size: KeySize, kid: &str) -> Rsa {
    let pair = RsaKeyPair::generate(size).expect("rsa key");
    let public = pair.public_key();
    let jwk = json!({
        "kty": "RSA",
        "kid": kid,
        "n": b64(public.modulus().big_endian_without_leading_zero()),
        "e": b64(public.exponent().big_endian_without_leading_zero()),
    });
    Rsa { pair, jwk }
}

impl Rsa {
    fn sign(&self, encoding: &'static dyn RsaEncoding, input: &[u8]) -> Vec<u8> {
        let mut signature = vec![0; self.pair.public_modulus_len()];
        self.pair
            .sign(encoding, &SystemRandom::new(), input, &mut signature)
            .expect("sign");
        signature
    }
}

struct Ec {
    pair: EcdsaKeyPair,
    jwk: Value,
}

fn ec(alg: &'static signature::EcdsaSigningAlgorithm, crv: &str, kid: &str) -> Ec {
    let pair = EcdsaKeyPair::generate(alg).expect("ec key");
    let point = pair.public_key().as_ref().to_vec();
    let len = (point.len() - 1) / 2;
    let jwk = json!({
        "kty": "EC",
        "crv": crv,
        "kid": kid,
        "x": b64(&point[1..1 + len]),
        "y": b64(&point[1 + len..]),
    });
    Ec { pair, jwk }
}

impl Ec {
    fn sign(&self, input: &[u8]) -> Vec<u8> {
        self.pair
            .sign(&SystemRandom::new(), input)
            .expect("sign")
            .as_ref()
            .to_vec()
    }
}

fn set(keys: &[&Value]) -> TrustedJwkSet {
    TrustedJwkSet::from_json(json!({ "keys": keys }).to_string().as_bytes()).expect("set loads")
}

fn claims() -> Value {
    json!({"sub": "alice", "exp": 4_000_000_000u64})
}

/// Verifies `token` under the key `kid` of `set`, as a verifier does.
fn verify(set: &TrustedJwkSet, token: &str) -> Result<(), JoseError> {
    let jws = CompactJws::parse(token)?;
    let kid = jws.header().kid().expect("kid");
    let key = set.keys.iter().find(|k| k.kid == kid).expect("key");
    key.check_alg(jws.header().alg())?;
    jws.verify_with(&key.key)
}

/// jsonwebtoken's RustCrypto backend verifies `token` under `jwk`.
fn jsonwebtoken_accepts(token: &str, jwk: &Value, alg: jsonwebtoken::Algorithm) -> bool {
    let _ = jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER.install_default();
    let jwk: jsonwebtoken::jwk::Jwk = serde_json::from_value(jwk.clone()).expect("jwk");
    let key = jsonwebtoken::DecodingKey::from_jwk(&jwk).expect("decoding key");
    jsonwebtoken::decode::<Value>(token, &key, &jsonwebtoken::Validation::new(alg)).is_ok()
}

#[test]
fn every_rsa_algorithm_verifies_under_one_rsa_jwk() {
    let key = rsa(KeySize::Rsa2048, "rsa-1");
    let keys = set(&[&key.jwk]);
    for (alg, encoding, theirs) in [
        (
            Algorithm::RS256,
            &signature::RSA_PKCS1_SHA256 as &'static dyn RsaEncoding,
            jsonwebtoken::Algorithm::RS256,
        ),
        (
            Algorithm::RS384,
            &signature::RSA_PKCS1_SHA384,
            jsonwebtoken::Algorithm::RS384,
        ),
        (
            Algorithm::RS512,
            &signature::RSA_PKCS1_SHA512,
            jsonwebtoken::Algorithm::RS512,
        ),
        (
            Algorithm::PS256,
            &signature::RSA_PSS_SHA256,
            jsonwebtoken::Algorithm::PS256,
        ),
        (
            Algorithm::PS384,
            &signature::RSA_PSS_SHA384,
            jsonwebtoken::Algorithm::PS384,
        ),
        (
            Algorithm::PS512,
            &signature::RSA_PSS_SHA512,
            jsonwebtoken::Algorithm::PS512,
        ),
    ] {
        let header = Header::new(alg, Some("rsa-1".to_owned()));
        let good = token(&header, &claims(), |input| key.sign(encoding, input));
        assert_eq!(verify(&keys, &good), Ok(()), "{alg}");
        assert!(jsonwebtoken_accepts(&good, &key.jwk, theirs), "{alg}");
        // Another payload under the same signature.
        let (head, signature) = good.rsplit_once('.').expect("parts");
        let (header_part, _) = head.split_once('.').expect("parts");
        let forged = format!(
            "{header_part}.{}.{signature}",
            b64(br#"{"sub":"mallory","exp":4000000000}"#)
        );
        assert_eq!(
            verify(&keys, &forged),
            Err(JoseError::SignatureRejected { alg: alg.as_str() }),
            "{alg}"
        );
    }
    // RS256 signed, PS256 claimed: the padding is checked, not assumed.
    let pkcs1 = token(
        &Header::new(Algorithm::PS256, Some("rsa-1".to_owned())),
        &claims(),
        |input| key.sign(&signature::RSA_PKCS1_SHA256, input),
    );
    assert_eq!(
        verify(&keys, &pkcs1).map_err(|e| e.code()),
        Err("jose.invalid_signature")
    );
}

#[test]
fn es256_and_es384_verify_under_their_curves() {
    let p256 = ec(
        &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
        "P-256",
        "ec-256",
    );
    let p384 = ec(
        &signature::ECDSA_P384_SHA384_FIXED_SIGNING,
        "P-384",
        "ec-384",
    );
    let keys = set(&[&p256.jwk, &p384.jwk]);
    let es256 = token(
        &Header::new(Algorithm::ES256, Some("ec-256".to_owned())),
        &claims(),
        |input| p256.sign(input),
    );
    let es384 = token(
        &Header::new(Algorithm::ES384, Some("ec-384".to_owned())),
        &claims(),
        |input| p384.sign(input),
    );
    assert_eq!(verify(&keys, &es256), Ok(()));
    assert_eq!(verify(&keys, &es384), Ok(()));
    assert!(jsonwebtoken_accepts(
        &es256,
        &p256.jwk,
        jsonwebtoken::Algorithm::ES256
    ));
    assert!(jsonwebtoken_accepts(
        &es384,
        &p384.jwk,
        jsonwebtoken::Algorithm::ES384
    ));
    // A signature of the other curve's length is refused before any
    // arithmetic.
    let short = token(
        &Header::new(Algorithm::ES384, Some("ec-384".to_owned())),
        &claims(),
        |input| p256.sign(input),
    );
    assert_eq!(
        CompactJws::parse(&short).map(|_| ()).map_err(|e| e.code()),
        Err("jose.signature_length")
    );
}

#[test]
fn the_key_decides_the_algorithm() {
    let rsa_key = rsa(KeySize::Rsa2048, "rsa");
    let mut rs256_only = rsa_key.jwk.clone();
    rs256_only["kid"] = json!("rsa-rs256");
    rs256_only["alg"] = json!("RS256");
    let p256 = ec(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, "P-256", "p256");
    let ed = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
    let ed_jwk = json!({"kty": "OKP", "crv": "Ed25519", "kid": "ed",
        "x": b64(&ed.verifying_key().to_bytes())});
    let keys = set(&[&rsa_key.jwk, &rs256_only, &p256.jwk, &ed_jwk]);
    let signed_by_rsa = |alg: Algorithm, kid: &str| {
        token(
            &Header::new(alg, Some(kid.to_owned())),
            &claims(),
            |input| rsa_key.sign(&signature::RSA_PKCS1_SHA256, input),
        )
    };
    let signed_by_ec = |alg: Algorithm, kid: &str| {
        token(
            &Header::new(alg, Some(kid.to_owned())),
            &claims(),
            |input| p256.sign(input),
        )
    };
    let signed_by_ed = |alg: Algorithm, kid: &str| {
        use ed25519_dalek::Signer;
        token(
            &Header::new(alg, Some(kid.to_owned())),
            &claims(),
            |input| ed.sign(input).to_bytes().to_vec(),
        )
    };
    assert_eq!(
        verify(&keys, &signed_by_rsa(Algorithm::RS256, "rsa-rs256")),
        Ok(())
    );
    assert_eq!(
        verify(&keys, &signed_by_ed(Algorithm::Ed25519, "ed")),
        Ok(())
    );
    for mismatch in [
        // A 64-byte ECDSA signature presented under the RSA key and the
        // Ed25519 key; an Ed25519 signature under the EC key.
        signed_by_ec(Algorithm::ES256, "rsa"),
        signed_by_ec(Algorithm::ES256, "ed"),
        signed_by_ed(Algorithm::EdDSA, "p256"),
        signed_by_ed(Algorithm::Ed25519, "rsa"),
        // An RSA signature under the EC key and the Ed25519 key.
        signed_by_rsa(Algorithm::RS256, "p256"),
        signed_by_rsa(Algorithm::RS256, "ed"),
        // The JWK names RS256: PS256 is refused though the key is RSA.
        signed_by_rsa(Algorithm::PS256, "rsa-rs256"),
    ] {
        assert!(
            matches!(verify(&keys, &mismatch), Err(JoseError::AlgMismatch { .. })),
            "{mismatch}"
        );
    }
}

#[test]
fn hs256_keyed_with_an_rsa_keys_bytes_is_refused() {
    let key = rsa(KeySize::Rsa2048, "rsa");
    let _ = jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER.install_default();
    // The classic confusion: HMAC keyed with the public key a verifier
    // holds, its modulus bytes and its JWK text.
    let n = key.jwk["n"].as_str().expect("n").to_owned();
    for secret in [n.into_bytes(), key.jwk.to_string().into_bytes()] {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
        header.kid = Some("rsa".to_owned());
        let forged = jsonwebtoken::encode(
            &header,
            &claims(),
            &jsonwebtoken::EncodingKey::from_secret(&secret),
        )
        .expect("hs256");
        assert!(matches!(
            CompactJws::parse(&forged),
            Err(JoseError::UnsupportedAlg { alg }) if alg == "HS256"
        ));
    }
}

#[test]
fn keys_that_must_not_be_used_are_skipped_or_refused() {
    let weak = rsa(KeySize::Rsa2048, "weak");
    // A 1024-bit modulus: the top half of a real one.
    let n = weak
        .pair
        .public_key()
        .modulus()
        .big_endian_without_leading_zero()
        .to_vec();
    let mut short = weak.jwk.clone();
    short["n"] = json!(b64(&n[..128]));
    let p256 = ec(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, "P-256", "p256");
    let mut p521 = p256.jwk.clone();
    p521["crv"] = json!("P-521");
    p521["kid"] = json!("p521");
    let mut k1 = p256.jwk.clone();
    k1["crv"] = json!("secp256k1");
    k1["kid"] = json!("k1");
    let mut oaep = weak.jwk.clone();
    oaep["kid"] = json!("oaep");
    oaep["alg"] = json!("RSA-OAEP");
    let mut es_on_rsa = weak.jwk.clone();
    es_on_rsa["kid"] = json!("es-on-rsa");
    es_on_rsa["alg"] = json!("ES256");
    let mut leading_zero = weak.jwk.clone();
    leading_zero["kid"] = json!("zero");
    leading_zero["n"] = json!(b64(&[&[0u8][..], &n].concat()));
    let loaded = set(&[
        &short,
        &p521,
        &k1,
        &oaep,
        &es_on_rsa,
        &leading_zero,
        &p256.jwk,
    ]);
    assert_eq!(
        loaded
            .keys
            .iter()
            .map(|k| k.kid.as_str())
            .collect::<Vec<_>>(),
        ["zero", "p256"]
    );
    assert_eq!(
        loaded
            .skipped
            .iter()
            .map(|k| k.kid.as_deref().unwrap_or(""))
            .collect::<Vec<_>>(),
        ["weak", "p521", "k1", "oaep", "es-on-rsa"]
    );
    assert!(
        loaded.skipped[0].reason.contains("1024 bits"),
        "{:?}",
        loaded.skipped[0]
    );

    // Refused by a file, skipped in a fetched set: a private key, a point
    // off the curve, a coordinate of the wrong length, a modulus that is
    // not base64url.
    let mut private = weak.jwk.clone();
    private["kid"] = json!("private");
    private["d"] = json!("AQAB");
    let mut off_curve = p256.jwk.clone();
    off_curve["kid"] = json!("off");
    off_curve["y"] = off_curve["x"].clone();
    let mut short_x = p256.jwk.clone();
    short_x["kid"] = json!("short-x");
    short_x["x"] = json!(b64(&[1; 31]));
    let mut bad_n = weak.jwk.clone();
    bad_n["kid"] = json!("bad-n");
    bad_n["n"] = json!("not base64url!");
    for bad in [&private, &off_curve, &short_x, &bad_n] {
        let doc = json!({ "keys": [bad, &p256.jwk] }).to_string();
        assert_eq!(
            TrustedJwkSet::from_json(doc.as_bytes())
                .map(|_| ())
                .map_err(|e| e.code()),
            Err("jose.invalid_jwk"),
            "{bad}"
        );
        let fetched = TrustedJwkSet::from_fetched_json(doc.as_bytes()).expect("loads");
        assert_eq!(fetched.keys.len(), 1, "{bad}");
        assert_eq!(fetched.keys[0].kid, "p256");
        assert_eq!(fetched.skipped.len(), 1, "{bad}");
    }
    // A kid twice: a file is refused, a fetched set keeps the first.
    let doc = json!({ "keys": [&p256.jwk, &p256.jwk] }).to_string();
    assert!(matches!(
        TrustedJwkSet::from_json(doc.as_bytes()),
        Err(JoseError::DuplicateKid { .. })
    ));
    let fetched = TrustedJwkSet::from_fetched_json(doc.as_bytes()).expect("loads");
    assert_eq!((fetched.keys.len(), fetched.skipped.len()), (1, 1));
}
