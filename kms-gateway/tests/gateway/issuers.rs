//! `gateway serve` with static JWK Sets bound to issuers
//! (`--trust-jwks-issuer`), RSA and EC keys in them, `--audience` and
//! `--max-token-lifetime`: a `kid` belongs to its issuer, RS256 and ES256
//! tokens verify through `/whoami`, and the audience and lifetime rules
//! hold for every token. Deadlines only catch hangs.
#![cfg(unix)]

use crate::support::serving;

use std::path::Path;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::{KeyPair as RsaKeyPair, KeySize};
use aws_lc_rs::signature::{self, EcdsaKeyPair, KeyPair};
use base64::Engine;
use ed25519_dalek::{Signer, SigningKey};
use serde_json::{json, Value};
use serving::{now, run_to_exit, serve_command, Serving};

const IDP_A: &str = "https://a.example";
const IDP_B: &str = "https://b.example";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn jws(header: &Value, claims: &Value, sign: impl FnOnce(&[u8]) -> Vec<u8>) -> String {
    let input = format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    );
    let signature = sign(input.as_bytes());
    format!("{input}.{}", b64(&signature))
}

fn ed_token(key: &SigningKey, kid: &str, claims: &Value) -> String {
    jws(&json!({"alg": "EdDSA", "kid": kid}), claims, |input| {
        key.sign(input).to_bytes().to_vec()
    })
}

fn ed_jwk(key: &SigningKey, kid: &str) -> Value {
    json!({"kty": "OKP", "crv": "Ed25519", "kid": kid,
        "x": b64(&key.verifying_key().to_bytes())})
}

fn write(path: &Path, keys: &[Value]) -> String {
    std::fs::write(path, json!({ "keys": keys }).to_string()).expect("write the set");
    path.to_str().expect("utf-8").to_owned()
}

fn claims(iss: &str) -> Value {
    json!({"iss": iss, "sub": "svc", "exp": now() + 600})
}

#[test]
fn a_kid_belongs_to_its_issuer_and_provider_algorithms_verify() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b, partner) = (
        SigningKey::from_bytes(&[1; 32]),
        SigningKey::from_bytes(&[2; 32]),
        SigningKey::from_bytes(&[3; 32]),
    );
    let rsa = RsaKeyPair::generate(KeySize::Rsa2048).expect("rsa");
    let p256 = EcdsaKeyPair::generate(&signature::ECDSA_P256_SHA256_FIXED_SIGNING).expect("ec");
    let point = p256.public_key().as_ref().to_vec();
    let rsa_jwk = json!({"kty": "RSA", "kid": "rsa-1",
        "n": b64(rsa.public_key().modulus().big_endian_without_leading_zero()),
        "e": b64(rsa.public_key().exponent().big_endian_without_leading_zero())});
    let ec_jwk = json!({"kty": "EC", "crv": "P-256", "kid": "ec-1",
        "x": b64(&point[1..33]), "y": b64(&point[33..])});
    // Both issuers name their Ed25519 key "k1"; A also signs RS256 and
    // ES256; a partner's set is unbound.
    let file_a = write(
        &dir.path().join("a.json"),
        &[ed_jwk(&a, "k1"), rsa_jwk, ec_jwk],
    );
    let file_b = write(&dir.path().join("b.json"), &[ed_jwk(&b, "k1")]);
    let file_p = write(&dir.path().join("partner.json"), &[ed_jwk(&partner, "p1")]);
    let s = Serving::start(&[
        "--trust-jwks-issuer",
        &format!("{IDP_A}={file_a}"),
        "--trust-jwks-issuer",
        &format!("{IDP_B}={file_b}"),
        "--trust-jwks",
        &file_p,
    ]);
    assert!(
        s.early
            .iter()
            .any(|line| line.contains("partner.json is unbound")),
        "{:?}",
        s.early
    );
    assert!(
        !s.early
            .iter()
            .any(|line| line.contains("a.json is unbound")),
        "{:?}",
        s.early
    );
    assert_eq!(s.whoami(&ed_token(&a, "k1", &claims(IDP_A))).0, 200);
    assert_eq!(s.whoami(&ed_token(&b, "k1", &claims(IDP_B))).0, 200);
    assert_eq!(s.whoami(&ed_token(&a, "k1", &claims(IDP_B))).0, 401);
    assert_eq!(s.whoami(&ed_token(&b, "k1", &claims(IDP_A))).0, 401);
    assert_eq!(
        s.whoami(&ed_token(&partner, "p1", &claims("https://p"))).0,
        200
    );
    assert_eq!(s.whoami(&ed_token(&partner, "p1", &claims(IDP_A))).0, 401);

    let rs256 = jws(
        &json!({"alg": "RS256", "kid": "rsa-1", "typ": "at+jwt"}),
        &claims(IDP_A),
        |input| {
            let mut out = vec![0; rsa.public_modulus_len()];
            rsa.sign(
                &signature::RSA_PKCS1_SHA256,
                &SystemRandom::new(),
                input,
                &mut out,
            )
            .expect("sign");
            out
        },
    );
    let es256 = jws(
        &json!({"alg": "ES256", "kid": "ec-1"}),
        &claims(IDP_A),
        |input| {
            p256.sign(&SystemRandom::new(), input)
                .expect("sign")
                .as_ref()
                .to_vec()
        },
    );
    let (status, body) = s.whoami(&rs256);
    assert_eq!(status, 200, "{body}");
    assert_eq!(s.whoami(&es256).0, 200);
    // The RSA key does not verify the ES256 signature claimed under it,
    // nor does B speak for A's RSA key.
    let swapped = es256.replacen(
        &b64(json!({"alg": "ES256", "kid": "ec-1"})
            .to_string()
            .as_bytes()),
        &b64(json!({"alg": "ES256", "kid": "rsa-1"})
            .to_string()
            .as_bytes()),
        1,
    );
    assert_eq!(s.whoami(&swapped).0, 401);
    assert_eq!(s.stop(), 0);
}

#[test]
fn audiences_and_the_lifetime_limit_apply_to_every_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = SigningKey::from_bytes(&[4; 32]);
    let file = write(&dir.path().join("a.json"), &[ed_jwk(&key, "k")]);
    let s = Serving::start(&[
        "--trust-jwks-issuer",
        &format!("{IDP_A}={file}"),
        "--audience",
        "api",
        "--audience",
        "https://api.example",
        "--max-token-lifetime",
        "3600",
    ]);
    let now = now();
    let token = |extra: Value| {
        let mut claims = json!({"iss": IDP_A, "sub": "svc", "iat": now, "exp": now + 600});
        for (name, value) in extra.as_object().expect("object") {
            claims[name] = value.clone();
        }
        ed_token(&key, "k", &claims)
    };
    assert_eq!(s.whoami(&token(json!({"aud": "api"}))).0, 200);
    assert_eq!(
        s.whoami(&token(json!({"aud": ["other", "https://api.example"]})))
            .0,
        200
    );
    assert_eq!(s.whoami(&token(json!({"aud": "other"}))).0, 401);
    assert_eq!(s.whoami(&token(json!({}))).0, 401, "no aud at all");
    assert_eq!(
        s.whoami(&token(json!({"aud": "api", "exp": now + 7200}))).0,
        401,
        "a lifetime of two hours"
    );
    let no_iat = ed_token(
        &key,
        "k",
        &json!({"iss": IDP_A, "aud": "api", "exp": now + 600}),
    );
    assert_eq!(s.whoami(&no_iat).0, 401, "no iat under a lifetime limit");
    // The gateway's own tokens carry an audience of the list.
    assert_eq!(s.stop(), 0);

    let mut bad = serve_command();
    bad.args(["--audience", "api", "--token-audience", "elsewhere"]);
    let (code, _, stderr) = run_to_exit(bad);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--token-audience"), "{stderr}");
    let mut malformed = serve_command();
    malformed.args(["--trust-jwks-issuer", "no-equals-sign"]);
    let (code, _, stderr) = run_to_exit(malformed);
    assert_eq!(code, 2, "{stderr}");
}

#[test]
fn the_gateway_starts_with_a_provider_down_and_its_own_tokens_verify() {
    // An address nothing listens on: the provider is down.
    let down = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://{}", listener.local_addr().expect("addr"))
    };
    let s = Serving::start(&["--issuer", &down, "--jwks-fetch-timeout", "1"]);
    let own = s.mint(&json!({"sub": "me", "exp": now() + 600}).to_string());
    assert_eq!(s.whoami(&own).0, 200, "the gateway's own tokens");
    // The provider's tokens are refused, never 5xx, within the timeout.
    let stranger = SigningKey::from_bytes(&[9; 32]);
    let started = std::time::Instant::now();
    assert_eq!(s.whoami(&ed_token(&stranger, "k", &claims(&down))).0, 401);
    assert!(started.elapsed() < std::time::Duration::from_secs(4));
    assert_eq!(s.stop(), 0);
}
