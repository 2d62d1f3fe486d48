//! JWTs through the actor: issued tokens verify (before and after a
//! rotation), the JWK Set lists every version, trusted external keys are
//! found by `kid` with their `alg` binding, reloads are whole, and every
//! refusal names its reason.

use std::time::{SystemTime, UNIX_EPOCH};

use ed25519_dalek::{Signer, SigningKey};
use futures::future::join_all;
use kms_actor::{JwtSigner, KmsActor, KmsConfig, KmsHandle};
use kms_bus::Bus;
use kms_core::{KeyId, Keystore, KmsError};
use kms_jose::{sign_compact, Algorithm, Header, TrustedJwkSet, Validation};
use serde_json::json;

use crate::support::code;

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

fn spawn(config: KmsConfig) -> (KmsHandle, KeyId) {
    let ks = Keystore::new();
    let key = ks.create_ed25519("gateway", "tokens").expect("create");
    let handle = KmsActor::spawn(config, ks, &Bus::new()).expect("spawn");
    (handle, key)
}

/// An outside issuer's key and its JWK Set (`kid` "ext-1", `alg` bound to
/// `alg` if given).
fn outside(alg: Option<&str>) -> (SigningKey, TrustedJwkSet) {
    let signing = SigningKey::from_bytes(&[42; 32]);
    let x = base64_url(&signing.verifying_key().to_bytes());
    let mut jwk = json!({"kty": "OKP", "crv": "Ed25519", "x": x, "kid": "ext-1"});
    if let Some(alg) = alg {
        jwk["alg"] = json!(alg);
    }
    let set = TrustedJwkSet::from_json(json!({"keys": [jwk]}).to_string().as_bytes()).expect("set");
    (signing, set)
}

fn base64_url(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn outside_token(
    signing: &SigningKey,
    alg: Algorithm,
    kid: &str,
    claims: serde_json::Value,
) -> String {
    sign_compact(&Header::new(alg, Some(kid.to_owned())), &claims, |input| {
        signing.sign(input).to_bytes()
    })
    .expect("sign")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issued_tokens_verify_before_and_after_a_rotation() {
    let (handle, key) = spawn(KmsConfig::default());
    let kms = handle.client();
    let claims = json!({"sub": "alice", "exp": now() + 600});
    let first = kms.sign_jwt(&key, &claims).await.expect("sign");
    let v2 = kms.rotate(&key).await.expect("rotate");
    let second = kms.sign_jwt(&key, &claims).await.expect("sign");
    let validation = Validation::default();
    for (token, kid) in [(&first, key.to_string()), (&second, v2.to_string())] {
        let jws = kms_jose::CompactJws::parse(token).expect("parse");
        assert_eq!(jws.header().kid(), Some(kid.as_str()));
        assert_eq!(jws.header().alg(), Algorithm::EdDSA);
        let got = kms
            .verify_jwt(token, &keys(), &validation)
            .await
            .expect("verifies");
        assert_eq!(got.claims.get("sub"), Some(&json!("alice")));
        assert_eq!(got.signer, JwtSigner::Key(kid.parse().expect("kid")));
    }
    let jwks = kms.jwks(&key).await.expect("jwks");
    let kids: Vec<&str> = jwks.keys.iter().map(|k| k.kid()).collect();
    assert_eq!(kids, [key.to_string(), v2.to_string()]);
    assert!(matches!(
        kms.sign_jwt(&key, &json!(["not", "an", "object"])).await,
        Err(KmsError::InvalidArgument { .. })
    ));
    let expired = kms
        .sign_jwt(&key, &json!({"sub": "a", "exp": now() - 3600}))
        .await
        .expect("sign");
    assert_eq!(
        code(kms.verify_jwt(&expired, &keys(), &validation).await),
        "jose.expired"
    );
    let (head, signature) = first.rsplit_once('.').expect("parts");
    let (header, _) = head.split_once('.').expect("parts");
    let forged = format!(
        "{header}.{}.{signature}",
        base64_url(br#"{"sub":"mallory","exp":9999999999}"#)
    );
    assert_eq!(
        code(kms.verify_jwt(&forged, &keys(), &validation).await),
        "jose.invalid_signature"
    );
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_keys_verify_only_the_alg_they_are_published_with() {
    let (handle, key) = spawn(KmsConfig::default().with_token_alg(Algorithm::Ed25519));
    let kms = handle.client();
    let token = kms
        .sign_jwt(&key, &json!({"exp": now() + 60}))
        .await
        .expect("sign");
    let jws = kms_jose::CompactJws::parse(&token).expect("parse");
    assert_eq!(jws.header().alg(), Algorithm::Ed25519);
    assert!(kms
        .verify_jwt(&token, &keys(), &Validation::default())
        .await
        .is_ok());
    assert_eq!(kms.jwks(&key).await.expect("jwks").keys.len(), 1);
    // The other alg under the same key: built here, signed by `sign`.
    let input = kms_jose::signing_input(
        &Header::new(Algorithm::EdDSA, Some(key.to_string())),
        json!({"exp": now() + 60}).to_string().as_bytes(),
    );
    let (_, signature) = kms
        .sign(&key, input.clone().into_bytes())
        .await
        .expect("sign");
    let eddsa = kms_jose::finish_compact(input, &signature);
    // The JWKS publishes the key with `Ed25519` alone: a token that names
    // the other alg is refused, as a verifier that enforces a JWK's `alg`
    // refuses it.
    assert_eq!(kms.jwks(&key).await.expect("jwks").keys[0].alg(), "Ed25519");
    assert_eq!(
        code(
            kms.verify_jwt(&eddsa, &keys(), &Validation::default())
                .await
        ),
        "jose.alg_mismatch"
    );
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trusted_keys_are_found_by_kid_with_their_alg_binding() {
    let (signing, set) = outside(Some("Ed25519"));
    let (handle, _) = spawn(KmsConfig::default().with_trusted_jwks(vec![set]));
    let kms = handle.client();
    let v = Validation::default();
    let claims = json!({"sub": "bob", "exp": now() + 600});
    let ok = outside_token(&signing, Algorithm::Ed25519, "ext-1", claims.clone());
    let got = kms.verify_jwt(&ok, &keys(), &v).await.expect("verifies");
    assert_eq!(got.claims.get("sub"), Some(&json!("bob")));
    assert_eq!(
        got.signer,
        JwtSigner::Trusted {
            issuer: None,
            kid: "ext-1".to_owned()
        }
    );
    let other_alg = outside_token(&signing, Algorithm::EdDSA, "ext-1", claims.clone());
    assert_eq!(
        code(kms.verify_jwt(&other_alg, &keys(), &v).await),
        "jose.alg_mismatch"
    );
    let stranger = SigningKey::from_bytes(&[43; 32]);
    let wrong_key = outside_token(&stranger, Algorithm::Ed25519, "ext-1", claims.clone());
    assert_eq!(
        code(kms.verify_jwt(&wrong_key, &keys(), &v).await),
        "jose.invalid_signature"
    );
    let unknown = outside_token(&signing, Algorithm::Ed25519, "ext-2", claims.clone());
    assert_eq!(
        code(kms.verify_jwt(&unknown, &keys(), &v).await),
        "jose.unknown_kid"
    );
    let no_kid = sign_compact(&Header::new(Algorithm::Ed25519, None), &claims, |i| {
        signing.sign(i).to_bytes()
    })
    .expect("sign");
    assert_eq!(
        code(kms.verify_jwt(&no_kid, &keys(), &v).await),
        "jose.missing_kid"
    );
    let none = format!(
        "{}.{}.",
        base64_url(br#"{"alg":"none","kid":"ext-1"}"#),
        base64_url(b"{}")
    );
    assert_eq!(
        code(kms.verify_jwt(&none, &keys(), &v).await),
        "jose.unsupported_alg"
    );
    assert_eq!(
        code(kms.verify_jwt("not a token", &keys(), &v).await),
        "jose.malformed"
    );
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloads_replace_the_trusted_keys_whole_and_refuse_duplicate_kids() {
    let (signing, set) = outside(None);
    let (handle, key) = spawn(KmsConfig::default());
    let kms = handle.client();
    let v = Validation::default();
    let token = outside_token(
        &signing,
        Algorithm::EdDSA,
        "ext-1",
        json!({"exp": now() + 60}),
    );
    assert_eq!(
        code(kms.verify_jwt(&token, &keys(), &v).await),
        "jose.unknown_kid"
    );
    assert_eq!(
        handle.reload_trusted_jwks(std::slice::from_ref(&set)),
        Ok(1)
    );
    assert!(kms.verify_jwt(&token, &keys(), &v).await.is_ok());
    // Twice the same kid: refused, and the loaded set stays.
    assert!(matches!(
        handle.reload_trusted_jwks(&[set.clone(), set.clone()]),
        Err(KmsError::InvalidConfig { .. })
    ));
    assert!(kms.verify_jwt(&token, &keys(), &v).await.is_ok());
    // A kid in the keystore's form: refused, whether the version exists
    // or not yet (a later rotation would make it).
    for kid in [key.to_string(), key.to_string().replace(":v1", ":v3")] {
        let mut clash = set.clone();
        clash.keys[0].kid = kid.clone();
        assert!(
            matches!(
                handle.reload_trusted_jwks(&[clash]),
                Err(KmsError::InvalidConfig { .. })
            ),
            "{kid}"
        );
    }
    assert_eq!(handle.reload_trusted_jwks(&[]), Ok(0));
    assert_eq!(
        code(kms.verify_jwt(&token, &keys(), &v).await),
        "jose.unknown_kid"
    );
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_of_other_purposes_neither_issue_nor_verify_tokens() {
    let (handle, _) = spawn(KmsConfig::default());
    let kms = handle.client();
    let passports = kms
        .create_key("gateway", "passports")
        .await
        .expect("create");
    assert!(matches!(
        kms.sign_jwt(&passports, &json!({"exp": now() + 60})).await,
        Err(KmsError::InvalidArgument { .. })
    ));
    let input = kms_jose::signing_input(
        &Header::new(Algorithm::EdDSA, Some(passports.to_string())),
        json!({"exp": now() + 60}).to_string().as_bytes(),
    );
    let (_, signature) = kms
        .sign(&passports, input.clone().into_bytes())
        .await
        .expect("sign");
    let token = kms_jose::finish_compact(input, &signature);
    assert_eq!(
        code(
            kms.verify_jwt(&token, &keys(), &Validation::default())
                .await
        ),
        "jose.unknown_kid"
    );
    handle.shutdown().await;
}

#[tokio::test(flavor = "current_thread")]
async fn concurrent_tokens_are_verified_in_one_batch() {
    let (signing, set) = outside(None);
    let (handle, _) = spawn(
        KmsConfig::default()
            .with_trusted_jwks(vec![set])
            .with_verify_on_caller_when_idle(false)
            .with_combine_max(0)
            .with_threads(1),
    );
    let kms = handle.client();
    let v = Validation::default();
    let tokens: Vec<String> = (0..64)
        .map(|i| {
            outside_token(
                &signing,
                Algorithm::EdDSA,
                "ext-1",
                json!({"sub": format!("user-{i}"), "exp": now() + 600}),
            )
        })
        .collect();
    let keys = keys();
    let verdicts = join_all(tokens.iter().map(|t| kms.verify_jwt(t, &keys, &v))).await;
    assert!(verdicts.iter().all(Result::is_ok), "{verdicts:?}");
    let stats = handle.stats();
    assert_eq!(stats.batched_requests, 64);
    assert!(stats.batches <= 2, "{stats:?}");
    handle.shutdown().await;
}

/// The keystore keys these tests issue with ("gateway", purposes "tokens"
/// and "passports"), and the trusted external keys.
fn keys() -> kms_actor::TokenKeys {
    kms_actor::TokenKeys::keystore("gateway", "tokens").and_keystore("gateway", "passports")
}

/// On a keystore several tenants share, a verifier accepts only the
/// tenants and purposes it names: beta's admin cannot mint a token that
/// acme's verifier accepts, whatever its claims.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verifier_accepts_only_the_keystore_keys_it_names() {
    let ks = Keystore::new();
    let acme = ks.create_ed25519("acme", "tokens").expect("create");
    let beta = ks.create_ed25519("beta", "tokens").expect("create");
    let (signing, set) = outside(None);
    let handle = KmsActor::spawn(
        KmsConfig::default().with_trusted_jwks(vec![set]),
        ks,
        &Bus::new(),
    )
    .expect("spawn");
    let kms = handle.client();
    let v = Validation::default();
    let claims = json!({"sub": "acme-root", "exp": now() + 600});
    let from_beta = kms.sign_jwt(&beta, &claims).await.expect("sign");
    let from_acme = kms.sign_jwt(&acme, &claims).await.expect("sign");
    let outside = outside_token(&signing, Algorithm::EdDSA, "ext-1", claims.clone());
    let acme_keys = kms_actor::TokenKeys::of(&acme);
    assert_eq!(
        code(kms.verify_jwt(&from_beta, &acme_keys, &v).await),
        "jose.unknown_kid"
    );
    assert!(kms.verify_jwt(&from_acme, &acme_keys, &v).await.is_ok());
    assert!(kms
        .verify_jwt(&from_beta, &kms_actor::TokenKeys::of(&beta), &v)
        .await
        .is_ok());
    // Trusted external keys: accepted unless refused.
    assert!(kms.verify_jwt(&outside, &acme_keys, &v).await.is_ok());
    assert_eq!(
        code(
            kms.verify_jwt(&outside, &acme_keys.clone().without_trusted(), &v)
                .await
        ),
        "jose.unknown_kid"
    );
    let none = kms_actor::TokenKeys::trusted_only();
    assert_eq!(
        code(kms.verify_jwt(&from_acme, &none, &v).await),
        "jose.unknown_kid"
    );
    handle.shutdown().await;
}
