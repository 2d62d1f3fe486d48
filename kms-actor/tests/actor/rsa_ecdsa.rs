//! RS256, PS256, ES256 and ES384 tokens through the actor (feature
//! `rsa-ecdsa`): they verify under their issuers' keys, one at a time on
//! the caller's task, count as verify ops, are cached like any other, and
//! a key of one type never verifies another type's alg.

use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::{KeyPair as RsaKeyPair, KeySize};
use aws_lc_rs::signature::{self, EcdsaKeyPair, KeyPair, RsaEncoding};
use kms_actor::{JwtSigner, KmsActor, KmsConfig, TokenKeys};
use kms_bus::Bus;
use kms_core::Keystore;
use kms_jose::{Algorithm, Header, TrustedJwkSet, Validation};
use serde_json::{json, Value};

use crate::support::code;

const IDP: &str = "https://idp.example";

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn token(alg: Algorithm, kid: &str, sign: impl FnOnce(&[u8]) -> Vec<u8>) -> String {
    let exp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        + 600;
    let header = Header::new(alg, Some(kid.to_owned())).with_typ("at+jwt");
    let claims = json!({"iss": IDP, "sub": "svc", "exp": exp});
    let input = format!(
        "{}.{}",
        b64(header.to_json().as_bytes()),
        b64(claims.to_string().as_bytes())
    );
    let signature = sign(input.as_bytes());
    format!("{input}.{}", b64(&signature))
}

fn rsa_sig(pair: &RsaKeyPair, encoding: &'static dyn RsaEncoding, input: &[u8]) -> Vec<u8> {
    let mut out = vec![0; pair.public_modulus_len()];
    pair.sign(encoding, &SystemRandom::new(), input, &mut out)
        .expect("sign");
    out
}

fn ec_sig(pair: &EcdsaKeyPair, input: &[u8]) -> Vec<u8> {
    pair.sign(&SystemRandom::new(), input)
        .expect("sign")
        .as_ref()
        .to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_providers_algorithms_verify_through_the_actor() {
    let rsa = RsaKeyPair::generate(KeySize::Rsa2048).expect("rsa");
    let p256 = EcdsaKeyPair::generate(&signature::ECDSA_P256_SHA256_FIXED_SIGNING).expect("p256");
    let p384 = EcdsaKeyPair::generate(&signature::ECDSA_P384_SHA384_FIXED_SIGNING).expect("p384");
    let point = |pair: &EcdsaKeyPair| {
        let point = pair.public_key().as_ref().to_vec();
        let len = (point.len() - 1) / 2;
        (b64(&point[1..=len]), b64(&point[1 + len..]))
    };
    let ((x256, y256), (x384, y384)) = (point(&p256), point(&p384));
    let jwks: Value = json!({"keys": [
        {"kty": "RSA", "kid": "rsa", "use": "sig",
         "n": b64(rsa.public_key().modulus().big_endian_without_leading_zero()),
         "e": b64(rsa.public_key().exponent().big_endian_without_leading_zero())},
        {"kty": "EC", "crv": "P-256", "kid": "p256", "x": x256, "y": y256},
        {"kty": "EC", "crv": "P-384", "kid": "p384", "x": x384, "y": y384, "alg": "ES384"},
    ]});
    let set = TrustedJwkSet::from_json(jwks.to_string().as_bytes())
        .expect("set")
        .bound_to(IDP);
    let handle = KmsActor::spawn(
        KmsConfig::default().with_trusted_jwks(vec![set]),
        Keystore::new(),
        &Bus::new(),
    )
    .expect("spawn");
    let kms = handle.client();
    let keys = TokenKeys::trusted_only();
    let mut v = Validation::default();
    v.issuers = vec![IDP.to_owned()];
    v.typ = Some("at+jwt".to_owned());
    let good = [
        (
            token(Algorithm::RS256, "rsa", |i| {
                rsa_sig(&rsa, &signature::RSA_PKCS1_SHA256, i)
            }),
            "rsa",
        ),
        (
            token(Algorithm::PS256, "rsa", |i| {
                rsa_sig(&rsa, &signature::RSA_PSS_SHA256, i)
            }),
            "rsa",
        ),
        (
            token(Algorithm::ES256, "p256", |i| ec_sig(&p256, i)),
            "p256",
        ),
        (
            token(Algorithm::ES384, "p384", |i| ec_sig(&p384, i)),
            "p384",
        ),
    ];
    let before = handle.stats();
    for (token, kid) in &good {
        let got = kms.verify_jwt(token, &keys, &v).await.expect(kid);
        assert_eq!(
            got.signer,
            JwtSigner::Trusted {
                issuer: Some(IDP.to_owned()),
                kid: (*kid).to_owned()
            }
        );
        assert_eq!(got.claims.get("sub"), Some(&json!("svc")));
    }
    // Again: from the cache, no signature checked.
    for (token, kid) in &good {
        kms.verify_jwt(token, &keys, &v).await.expect(kid);
    }
    let after = handle.stats();
    assert_eq!(after.token_cache_hits - before.token_cache_hits, 4);
    // A key of one type never verifies another's alg: an ECDSA signature
    // presented as RS256 under the RSA key's kid is refused by type before
    // any arithmetic, and ES256 under the P-384 key.
    for (mismatch, want) in [
        (
            token(Algorithm::ES256, "rsa", |i| ec_sig(&p256, i)),
            "jose.alg_mismatch",
        ),
        (
            token(Algorithm::ES256, "p384", |i| ec_sig(&p256, i)),
            "jose.alg_mismatch",
        ),
        (
            token(Algorithm::RS256, "p256", |i| {
                rsa_sig(&rsa, &signature::RSA_PKCS1_SHA256, i)
            }),
            "jose.alg_mismatch",
        ),
        // RS256-signed bytes claimed as PS256: the padding is checked.
        (
            token(Algorithm::PS256, "rsa", |i| {
                rsa_sig(&rsa, &signature::RSA_PKCS1_SHA256, i)
            }),
            "jose.invalid_signature",
        ),
        // P-256 signature under the P-256 kid but over another input.
        (
            {
                let t = token(Algorithm::ES256, "p256", |i| ec_sig(&p256, i));
                let (head, sig) = t.rsplit_once('.').expect("parts");
                let (h, _) = head.split_once('.').expect("parts");
                format!(
                    "{h}.{}.{sig}",
                    b64(br#"{"iss":"https://idp.example","sub":"root","exp":4000000000}"#)
                )
            },
            "jose.invalid_signature",
        ),
    ] {
        assert_eq!(
            code(kms.verify_jwt(&mismatch, &keys, &v).await),
            want,
            "{mismatch}"
        );
    }
    handle.shutdown().await;
}
