//! Trusted keys held by (issuer, `kid`): a set bound to an issuer verifies
//! only that issuer's tokens, two issuers may share a `kid`, one issuer's
//! keys are replaced without touching the others', and the header's `typ`
//! is checked on a full check and on a cache hit alike.

use std::time::{SystemTime, UNIX_EPOCH};

use ed25519_dalek::{Signer, SigningKey};
use kms_actor::{JwtSigner, KmsActor, KmsConfig, KmsHandle, TokenKeys};
use kms_bus::Bus;
use kms_core::{Keystore, KmsError};
use kms_jose::{sign_compact, Algorithm, Header, TrustedJwkSet, Validation};
use serde_json::{json, Value};

use crate::support::code;

const IDP_A: &str = "https://a.example";
const IDP_B: &str = "https://b.example";

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

fn spawn(config: KmsConfig) -> KmsHandle {
    KmsActor::spawn(config, Keystore::new(), &Bus::new()).expect("spawn")
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A set of one Ed25519 key named `kid`.
fn set(signing: &SigningKey, kid: &str) -> TrustedJwkSet {
    let jwk = json!({"kty": "OKP", "crv": "Ed25519", "kid": kid,
        "x": b64(&signing.verifying_key().to_bytes())});
    TrustedJwkSet::from_json(json!({"keys": [jwk]}).to_string().as_bytes()).expect("set")
}

fn token(signing: &SigningKey, header: Header, claims: &Value) -> String {
    sign_compact(&header, claims, |input| signing.sign(input).to_bytes()).expect("sign")
}

fn claims(iss: Option<&str>) -> Value {
    let mut claims = json!({"sub": "alice", "exp": now() + 600});
    if let Some(iss) = iss {
        claims["iss"] = json!(iss);
    }
    claims
}

fn by(kid: &str, iss: Option<&str>, signing: &SigningKey) -> String {
    token(
        signing,
        Header::new(Algorithm::EdDSA, Some(kid.to_owned())),
        &claims(iss),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kid_belongs_to_its_issuer() {
    let (a, b, partner) = (
        SigningKey::from_bytes(&[1; 32]),
        SigningKey::from_bytes(&[2; 32]),
        SigningKey::from_bytes(&[3; 32]),
    );
    // Both providers name their key "k1"; a partner's unbound set names
    // its key "p1".
    let handle = spawn(KmsConfig::default().with_trusted_jwks(vec![
        set(&a, "k1").bound_to(IDP_A),
        set(&b, "k1").bound_to(IDP_B),
        set(&partner, "p1"),
    ]));
    let kms = handle.client();
    let keys = TokenKeys::trusted_only();
    let v = Validation::default();
    let got = kms
        .verify_jwt(&by("k1", Some(IDP_A), &a), &keys, &v)
        .await
        .expect("A's token under A's key");
    assert_eq!(
        got.signer,
        JwtSigner::Trusted {
            issuer: Some(IDP_A.to_owned()),
            kid: "k1".to_owned()
        }
    );
    kms.verify_jwt(&by("k1", Some(IDP_B), &b), &keys, &v)
        .await
        .expect("B's token under B's key");
    // A's key cannot speak for B, nor B's for A.
    for forged in [by("k1", Some(IDP_B), &a), by("k1", Some(IDP_A), &b)] {
        assert_eq!(
            code(kms.verify_jwt(&forged, &keys, &v).await),
            "jose.invalid_signature"
        );
    }
    // The unbound key speaks for any other issuer, or none, but not for a
    // bound one; a bound key not for a token of another issuer.
    let unbound = kms
        .verify_jwt(&by("p1", Some("https://partner"), &partner), &keys, &v)
        .await
        .expect("unbound");
    assert_eq!(
        unbound.signer,
        JwtSigner::Trusted {
            issuer: None,
            kid: "p1".to_owned()
        }
    );
    kms.verify_jwt(&by("p1", None, &partner), &keys, &v)
        .await
        .expect("unbound, no iss");
    for refused in [
        by("p1", Some(IDP_A), &partner),
        by("k1", Some("https://partner"), &a),
        by("k1", None, &a),
    ] {
        assert_eq!(
            code(kms.verify_jwt(&refused, &keys, &v).await),
            "jose.unknown_kid"
        );
    }
    // The issuer check still runs after the signature: a caller that
    // accepts only B refuses A's valid token.
    let mut only_b = Validation::default();
    only_b.issuers = vec![IDP_B.to_owned()];
    assert_eq!(
        code(
            kms.verify_jwt(&by("k1", Some(IDP_A), &a), &keys, &only_b)
                .await
        ),
        "jose.wrong_issuer"
    );
    // Nor does a keystore key speak for a bound issuer.
    let key = handle
        .client()
        .create_key("acme", "tokens")
        .await
        .expect("create");
    let own = kms
        .sign_jwt(&key, &claims(Some(IDP_A)))
        .await
        .expect("sign");
    let own_keys = TokenKeys::of(&key);
    assert_eq!(
        code(kms.verify_jwt(&own, &own_keys, &v).await),
        "jose.unknown_kid"
    );
    let unbound_iss = kms
        .sign_jwt(&key, &claims(Some("https://gateway.example")))
        .await
        .expect("sign");
    kms.verify_jwt(&unbound_iss, &own_keys, &v)
        .await
        .expect("a keystore token of another iss");
    // A kid twice within one issuer is refused; across issuers it is not.
    assert!(matches!(
        handle.reload_trusted_jwks(&[set(&a, "k1").bound_to(IDP_A), set(&b, "k1").bound_to(IDP_A)]),
        Err(KmsError::InvalidConfig { .. })
    ));
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacing_one_issuers_keys_leaves_the_others() {
    let (a1, a2, b) = (
        SigningKey::from_bytes(&[4; 32]),
        SigningKey::from_bytes(&[5; 32]),
        SigningKey::from_bytes(&[6; 32]),
    );
    // A's keys are kept from outside (its jwks_uri), B's configured.
    let handle =
        spawn(KmsConfig::default().with_trusted_jwks(vec![set(&b, "b-1").bound_to(IDP_B)]));
    handle
        .issuer_keys()
        .replace(IDP_A, &set(&a1, "a-1"))
        .expect("A's first set");
    let kms = handle.client();
    let keys = TokenKeys::trusted_only();
    let v = Validation::default();
    let old = by("a-1", Some(IDP_A), &a1);
    kms.verify_jwt(&old, &keys, &v).await.expect("old key");
    // The provider rotated: its new set has only "a-2" (its own `issuer`
    // is ignored: the set is bound to the issuer named).
    assert_eq!(
        handle
            .issuer_keys()
            .replace(IDP_A, &set(&a2, "a-2").bound_to("ignored"))
            .expect("replaced"),
        2
    );
    kms.verify_jwt(&by("a-2", Some(IDP_A), &a2), &keys, &v)
        .await
        .expect("new key");
    // The old token was cached; the generation moved, so it is checked
    // again, and its key is gone.
    assert_eq!(
        code(kms.verify_jwt(&old, &keys, &v).await),
        "jose.unknown_kid"
    );
    kms.verify_jwt(&by("b-1", Some(IDP_B), &b), &keys, &v)
        .await
        .expect("B untouched");
    handle.shutdown().await;
}

/// A refetch that installs `next` for its issuer, counting its calls.
struct Provider {
    keys: kms_actor::IssuerKeys,
    next: TrustedJwkSet,
    calls: std::sync::atomic::AtomicUsize,
}

impl kms_actor::JwksRefetch for Provider {
    fn refetch<'a>(
        &'a self,
        issuer: &'a str,
        _kid: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>> {
        Box::pin(async move {
            self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if issuer == IDP_A {
                self.keys.replace(issuer, &self.next).expect("replace");
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_kid_asks_for_a_refetch_and_a_reload_keeps_remote_keys() {
    let (a1, a2, partner) = (
        SigningKey::from_bytes(&[8; 32]),
        SigningKey::from_bytes(&[9; 32]),
        SigningKey::from_bytes(&[10; 32]),
    );
    let handle = spawn(KmsConfig::default().with_trusted_jwks(vec![set(&partner, "p")]));
    let issuer_keys = handle.issuer_keys();
    // Known before its first fetch, with no keys: an unbound key cannot
    // answer for it.
    issuer_keys
        .replace(IDP_A, &TrustedJwkSet::default())
        .expect("empty");
    let provider = std::sync::Arc::new(Provider {
        keys: issuer_keys.clone(),
        next: set(&a1, "a-1").bound_to(IDP_A),
        calls: std::sync::atomic::AtomicUsize::new(0),
    });
    issuer_keys.set_refetch(provider.clone());
    let kms = handle.client();
    let keys = TokenKeys::trusted_only();
    let v = Validation::default();
    // The first token under "a-1" finds it after the refetch.
    kms.verify_jwt(&by("a-1", Some(IDP_A), &a1), &keys, &v)
        .await
        .expect("after a refetch");
    assert_eq!(provider.calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    // The unbound key's kid under A's iss: asked, and refused.
    assert_eq!(
        code(
            kms.verify_jwt(&by("p", Some(IDP_A), &partner), &keys, &v)
                .await
        ),
        "jose.unknown_kid"
    );
    assert_eq!(provider.calls.load(std::sync::atomic::Ordering::SeqCst), 2);
    // A known kid asks nothing; an unbound token asks nothing.
    kms.verify_jwt(&by("a-1", Some(IDP_A), &a1), &keys, &v)
        .await
        .expect("known");
    kms.verify_jwt(&by("p", None, &partner), &keys, &v)
        .await
        .expect("unbound");
    assert_eq!(provider.calls.load(std::sync::atomic::Ordering::SeqCst), 2);
    // A kid the provider does not have either: asked, still refused.
    assert_eq!(
        code(
            kms.verify_jwt(&by("a-2", Some(IDP_A), &a2), &keys, &v)
                .await
        ),
        "jose.unknown_kid"
    );
    // A reload of the configured sets keeps the remote issuer's keys, and
    // refuses a configured set bound to it.
    handle
        .reload_trusted_jwks(&[set(&partner, "p")])
        .expect("reload");
    kms.verify_jwt(&by("a-1", Some(IDP_A), &a1), &keys, &v)
        .await
        .expect("kept");
    assert!(matches!(
        handle.reload_trusted_jwks(&[set(&a2, "a-2").bound_to(IDP_A)]),
        Err(KmsError::InvalidConfig { .. })
    ));
    // And a configured issuer's keys are not replaced from elsewhere.
    let configured =
        spawn(KmsConfig::default().with_trusted_jwks(vec![set(&a1, "a-1").bound_to(IDP_B)]));
    assert!(matches!(
        configured
            .issuer_keys()
            .replace(IDP_B, &TrustedJwkSet::default()),
        Err(KmsError::InvalidConfig { .. })
    ));
    configured.shutdown().await;
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_typ_is_checked_fresh_and_from_the_cache() {
    let signing = SigningKey::from_bytes(&[7; 32]);
    let handle = spawn(KmsConfig::default().with_trusted_jwks(vec![set(&signing, "k")]));
    let kms = handle.client();
    let keys = TokenKeys::trusted_only();
    let any = Validation::default();
    let mut at_jwt = Validation::default();
    at_jwt.typ = Some("at+jwt".to_owned());
    let access = token(
        &signing,
        Header::new(Algorithm::EdDSA, Some("k".to_owned())).with_typ("at+jwt"),
        &claims(None),
    );
    let plain = by("k", None, &signing);
    // Fresh, then from the cache (the second call of each).
    for _ in 0..2 {
        kms.verify_jwt(&access, &keys, &at_jwt)
            .await
            .expect("at+jwt");
        kms.verify_jwt(&plain, &keys, &any).await.expect("any typ");
        assert_eq!(
            code(kms.verify_jwt(&plain, &keys, &at_jwt).await),
            "jose.wrong_typ"
        );
    }
    assert!(handle.stats().token_cache_hits >= 3);
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_issuer_may_have_its_own_claims_policy() {
    let (a, b, partner) = (
        SigningKey::from_bytes(&[11; 32]),
        SigningKey::from_bytes(&[12; 32]),
        SigningKey::from_bytes(&[13; 32]),
    );
    let handle = spawn(KmsConfig::default().with_trusted_jwks(vec![
        set(&a, "a").bound_to(IDP_A),
        set(&b, "b").bound_to(IDP_B),
        set(&partner, "p"),
    ]));
    // A's tokens carry aud "api-a" and typ at+jwt; B's none of that.
    let mut for_a = Validation::default();
    for_a.audiences = vec!["api-a".to_owned()];
    for_a.typ = Some("at+jwt".to_owned());
    handle.issuer_keys().set_validation(IDP_A, Some(for_a));
    let kms = handle.client();
    let keys = TokenKeys::trusted_only();
    let call = Validation::default();
    let with = |key: &SigningKey, kid: &str, iss: &str, aud: Option<&str>, typ: bool| {
        let mut claims = claims(Some(iss));
        if let Some(aud) = aud {
            claims["aud"] = json!(aud);
        }
        let mut header = Header::new(Algorithm::EdDSA, Some(kid.to_owned()));
        if typ {
            header = header.with_typ("at+jwt");
        }
        token(key, header, &claims)
    };
    let a_good = with(&a, "a", IDP_A, Some("api-a"), true);
    // Twice: a full check, then from the cache.
    for _ in 0..2 {
        kms.verify_jwt(&a_good, &keys, &call)
            .await
            .expect("A's policy accepts its aud, which the call's would refuse");
        for (refused, want) in [
            (with(&a, "a", IDP_A, Some("api-a"), false), "jose.wrong_typ"),
            (
                with(&a, "a", IDP_A, Some("api-b"), true),
                "jose.wrong_audience",
            ),
            (with(&a, "a", IDP_A, None, true), "jose.missing_claim"),
            // B and the partner keep the call's: no aud accepted.
            (
                with(&b, "b", IDP_B, Some("api-a"), true),
                "jose.wrong_audience",
            ),
            (
                with(&partner, "p", "https://p", Some("api-a"), true),
                "jose.wrong_audience",
            ),
        ] {
            assert_eq!(code(kms.verify_jwt(&refused, &keys, &call).await), want);
        }
        kms.verify_jwt(&with(&b, "b", IDP_B, None, false), &keys, &call)
            .await
            .expect("B under the call's");
    }
    // Removed: A's tokens are back under the call's.
    handle.issuer_keys().set_validation(IDP_A, None);
    assert_eq!(
        code(kms.verify_jwt(&a_good, &keys, &call).await),
        "jose.wrong_audience"
    );
    // A reload of the configured sets keeps the policies.
    let mut for_b = Validation::default();
    for_b.audiences = vec!["api-b".to_owned()];
    handle.issuer_keys().set_validation(IDP_B, Some(for_b));
    handle
        .reload_trusted_jwks(&[set(&a, "a").bound_to(IDP_A), set(&b, "b").bound_to(IDP_B)])
        .expect("reload");
    kms.verify_jwt(&with(&b, "b", IDP_B, Some("api-b"), false), &keys, &call)
        .await
        .expect("B's policy after the reload");
    handle.shutdown().await;
}
