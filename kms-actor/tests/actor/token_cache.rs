//! The verified-token cache (`KmsConfig::token_cache`): a token that
//! verified is answered from it with the verdict a fresh verification
//! gives (the call's keys and validation still checked, the clock too),
//! refusals are never cached, and every change that could change a
//! verdict (rotation, policy, trim, destroy, a trusted JWK Set reload)
//! makes the next call verify in full, including a verdict computed
//! before the change and finished after it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ed25519_dalek::{Signer, SigningKey};
use kms_actor::test_hooks::{spawn_with_verifier, BatchVerifier};
use kms_actor::{KmsActor, KmsConfig, KmsHandle, KmsStats, TokenKeys, VerifiedJwt};
use kms_bus::Bus;
use kms_core::ed25519::verify_batch;
use kms_core::{KeyId, Keystore, KmsError};
use kms_jose::{sign_compact, Algorithm, Header, TrustedJwkSet, Validation};
use serde_json::json;

use crate::support::code;

const HANG: Duration = Duration::from_secs(60);

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

fn keys() -> TokenKeys {
    TokenKeys::keystore("gateway", "tokens")
}

/// An outside issuer's key under `kid` "ext-1" and its JWK Set.
fn outside(seed: u8) -> (SigningKey, TrustedJwkSet) {
    use base64::Engine;
    let signing = SigningKey::from_bytes(&[seed; 32]);
    let x =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(signing.verifying_key().to_bytes());
    let jwk = json!({"kty": "OKP", "crv": "Ed25519", "x": x, "kid": "ext-1"});
    let set = TrustedJwkSet::from_json(json!({"keys": [jwk]}).to_string().as_bytes()).expect("set");
    (signing, set)
}

fn outside_token(signing: &SigningKey, claims: serde_json::Value) -> String {
    sign_compact(
        &Header::new(Algorithm::EdDSA, Some("ext-1".to_owned())),
        &claims,
        |input| signing.sign(input).to_bytes(),
    )
    .expect("sign")
}

/// An actor (cache on, the default) over a keystore with one token key,
/// trusting `trusted`.
fn spawn(trusted: Vec<TrustedJwkSet>) -> (KmsHandle, KeyId) {
    spawn_config(KmsConfig::default().with_trusted_jwks(trusted))
}

fn spawn_config(config: KmsConfig) -> (KmsHandle, KeyId) {
    let ks = Keystore::new();
    let key = ks.create_ed25519("gateway", "tokens").expect("create");
    (
        KmsActor::spawn(config, ks, &Bus::new()).expect("spawn"),
        key,
    )
}

/// The hits and misses between `before` and now.
fn hits_misses(handle: &KmsHandle, before: &KmsStats) -> (u64, u64) {
    let d = handle.stats().since(before);
    (d.token_cache_hits, d.token_cache_misses)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hit_gives_the_verdict_a_fresh_verification_gives() {
    let (signing, set) = outside(7);
    let (cached, _) = spawn(vec![set.clone()]);
    let (fresh, _) = spawn_config(
        KmsConfig::default()
            .with_trusted_jwks(vec![set])
            .with_token_cache(0),
    );
    let good = outside_token(
        &signing,
        json!({"sub": "a", "aud": "api", "exp": now() + 600}),
    );
    let mut forged = good.clone();
    forged.replace_range(forged.len() - 4.., "AAAA");
    let audience = |aud: &str| {
        let mut v = Validation::default();
        v.audiences = vec![aud.to_owned()];
        v
    };
    let issuer = {
        let mut v = audience("api");
        v.issuers = vec!["https://issuer.example".to_owned()];
        v
    };
    let cases: Vec<(&str, &String, TokenKeys, Validation)> = vec![
        ("verifies", &good, keys(), audience("api")),
        ("another audience", &good, keys(), audience("web")),
        ("an issuer required", &good, keys(), issuer),
        (
            "trusted keys not accepted",
            &good,
            TokenKeys::keystore("gateway", "tokens").without_trusted(),
            audience("api"),
        ),
        ("forged", &forged, keys(), audience("api")),
    ];
    let (kms, peer) = (cached.client(), fresh.client());
    // Cache the good token first, so every case below on it is a hit.
    assert!(kms
        .verify_jwt(&good, &keys(), &audience("api"))
        .await
        .is_ok());
    let before = cached.stats();
    for (name, token, keys, validation) in &cases {
        let hit = kms.verify_jwt(token, keys, validation).await;
        let full = peer.verify_jwt(token, keys, validation).await;
        match (&hit, &full) {
            (Ok(a), Ok(b)) => {
                assert_eq!((&a.claims, &a.signer), (&b.claims, &b.signer), "{name}");
                assert!(
                    a.cached && !b.cached,
                    "{name}: only the first from the cache"
                );
            }
            _ => assert_eq!(code(&hit), code(&full), "{name}"),
        }
    }
    assert_eq!(
        hits_misses(&cached, &before),
        (4, 1),
        "the four calls on the good token hit; the forged one missed"
    );
    // The keystore's own tokens: a hit refuses a key the call's keys do
    // not accept as a full check does.
    let (own, key) = spawn(Vec::new());
    let own_fresh = own.client();
    let token = own_fresh
        .sign_jwt(&key, &json!({"sub": "k", "exp": now() + 600}))
        .await
        .expect("sign");
    assert!(own_fresh
        .verify_jwt(&token, &keys(), &Validation::default())
        .await
        .is_ok());
    let before_own = own.stats();
    assert_eq!(
        code(
            &own_fresh
                .verify_jwt(&token, &TokenKeys::trusted_only(), &Validation::default())
                .await
        ),
        "jose.unknown_kid"
    );
    assert_eq!(
        code(
            &own_fresh
                .verify_jwt(
                    &token,
                    &TokenKeys::keystore("other", "tokens"),
                    &Validation::default()
                )
                .await
        ),
        "jose.unknown_kid"
    );
    assert_eq!(
        hits_misses(&own, &before_own),
        (2, 0),
        "both from the cache"
    );
    own.shutdown().await;
    // A refusal is never cached: the forged token misses every time.
    let before = cached.stats();
    for _ in 0..3 {
        assert_eq!(
            code(&kms.verify_jwt(&forged, &keys(), &audience("api")).await),
            "jose.invalid_signature"
        );
    }
    assert_eq!(hits_misses(&cached, &before), (0, 3));
    // Once shutdown began, a cached token is not answered from memory.
    let late = cached.client();
    cached.shutdown().await;
    assert!(matches!(
        late.verify_jwt(&good, &keys(), &audience("api")).await,
        Err(KmsError::ShuttingDown)
    ));
    fresh.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_token_is_refused_once_it_expires() {
    let (handle, key) = spawn(Vec::new());
    let kms = handle.client();
    // Two seconds: the first call must end before `exp` whatever the
    // machine's load.
    let exp = now() + 2;
    let token = kms
        .sign_jwt(&key, &json!({"sub": "a", "exp": exp}))
        .await
        .expect("sign");
    let mut strict = Validation::default();
    strict.leeway = Duration::ZERO;
    assert!(kms.verify_jwt(&token, &keys(), &strict).await.is_ok());
    while now() <= exp {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let before = handle.stats();
    assert_eq!(
        code(&kms.verify_jwt(&token, &keys(), &strict).await),
        "jose.expired"
    );
    assert_eq!(
        hits_misses(&handle, &before),
        (1, 0),
        "refused from the cache"
    );
    handle.shutdown().await;
}

/// Verifies `token` once, which must miss the cache (verified in full
/// after `what`); returns the verdict.
async fn after_change(
    handle: &KmsHandle,
    token: &str,
    what: &str,
) -> Result<VerifiedJwt, KmsError> {
    let kms = handle.client();
    let before = handle.stats();
    let verdict = kms.verify_jwt(token, &keys(), &Validation::default()).await;
    assert_eq!(
        hits_misses(handle, &before),
        (0, 1),
        "after {what}: verified in full, not from the cache"
    );
    verdict
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_to_the_keys_sends_the_next_call_past_the_cache() {
    let (handle, key) = spawn(Vec::new());
    let kms = handle.client();
    let claims = json!({"sub": "a", "exp": now() + 600});
    let v1 = kms.sign_jwt(&key, &claims).await.expect("sign");
    let validation = Validation::default();
    assert!(kms.verify_jwt(&v1, &keys(), &validation).await.is_ok());

    // A rotation: v1's token still verifies, but is checked again.
    let head = kms.rotate(&key).await.expect("rotate");
    assert!(after_change(&handle, &v1, "a rotation").await.is_ok());

    // A policy change that changes nothing for v1 (disable: signing only).
    let policy = kms.policy(&key).await.expect("policy");
    let mut disabled = policy.clone();
    disabled.enabled = false;
    kms.set_policy(&key, disabled).await.expect("disable");
    assert!(after_change(&handle, &v1, "a disable").await.is_ok());
    kms.set_policy(&key, policy.clone()).await.expect("enable");
    assert!(kms.verify_jwt(&v1, &keys(), &validation).await.is_ok());

    // min_verify_version past v1: refused from now on.
    let v2 = kms.sign_jwt(&head, &claims).await.expect("sign");
    assert!(kms.verify_jwt(&v2, &keys(), &validation).await.is_ok());
    let mut raised = policy;
    raised.min_verify_version = 2;
    kms.set_policy(&key, raised).await.expect("raise");
    assert_eq!(
        code(&after_change(&handle, &v1, "min_verify_version").await),
        "kms.version_disallowed"
    );

    // A trim below 2: v1 is gone, v2 still verifies but is checked again.
    assert!(kms.verify_jwt(&v2, &keys(), &validation).await.is_ok());
    kms.trim(&key, 2).await.expect("trim");
    assert!(after_change(&handle, &v2, "a trim").await.is_ok());

    // A destroy: a token cached before it is refused after it.
    assert!(kms.verify_jwt(&v2, &keys(), &validation).await.is_ok());
    let before = handle.stats();
    assert!(kms.verify_jwt(&v2, &keys(), &validation).await.is_ok());
    assert_eq!(hits_misses(&handle, &before), (1, 0), "cached");
    kms.destroy(&key).await.expect("destroy");
    assert_eq!(
        code(&after_change(&handle, &v2, "a destroy").await),
        "kms.key_destroyed"
    );
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_of_the_trusted_sets_sends_the_next_call_past_the_cache() {
    let (signing, set) = outside(7);
    let (handle, _) = spawn(vec![set.clone()]);
    let kms = handle.client();
    let token = outside_token(&signing, json!({"sub": "a", "exp": now() + 600}));
    assert!(kms
        .verify_jwt(&token, &keys(), &Validation::default())
        .await
        .is_ok());
    // The same set again: still verifies, checked again.
    handle.reload_trusted_jwks(&[set]).expect("reload");
    assert!(after_change(&handle, &token, "a reload").await.is_ok());
    // Another key under the same kid: the cached token no longer verifies.
    let (_, other) = outside(8);
    handle.reload_trusted_jwks(&[other]).expect("reload");
    assert_eq!(
        code(&after_change(&handle, &token, "a new key under its kid").await),
        "jose.invalid_signature"
    );
    // No set at all: its kid is unknown.
    handle.reload_trusted_jwks(&[]).expect("reload");
    assert_eq!(
        code(&after_change(&handle, &token, "its set dropped").await),
        "jose.unknown_kid"
    );
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verdict_computed_before_a_destroy_is_not_used_after_it() {
    // A verifier that, while `hold` is set, says it has its batch (its
    // keys resolved) on `entered` and holds it until `go`.
    let hold = Arc::new(AtomicBool::new(false));
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let (entered_tx, entered_rx) = std::sync::mpsc::channel::<()>();
    let channels = Arc::new(Mutex::new((go_rx, entered_tx)));
    let verifier: BatchVerifier = {
        let (hold, channels) = (Arc::clone(&hold), Arc::clone(&channels));
        Arc::new(move |items| {
            if hold.load(Ordering::SeqCst) {
                let channels = channels.lock().unwrap_or_else(PoisonError::into_inner);
                let _ = channels.1.send(());
                let _ = channels.0.recv_timeout(HANG);
            }
            verify_batch(items)
        })
    };
    let ks = Keystore::new();
    let key = ks.create_ed25519("gateway", "tokens").expect("create");
    // Verified on the pool (inline, the caller path and combining off), so
    // the held batch holds neither the actor nor this task.
    let config = KmsConfig::default()
        .with_threads(1)
        .with_inline_when_idle(false)
        .with_verify_on_caller_when_idle(false)
        .with_combine_max(0);
    let handle = spawn_with_verifier(config, ks, &Bus::new(), verifier, None).expect("spawn");
    let kms = handle.client();
    let token = kms
        .sign_jwt(&key, &json!({"sub": "a", "exp": now() + 600}))
        .await
        .expect("sign");
    hold.store(true, Ordering::SeqCst);
    let pending = {
        let (kms, token) = (kms.clone(), token.clone());
        tokio::spawn(async move {
            kms.verify_jwt(&token, &keys(), &Validation::default())
                .await
        })
    };
    // Wait until the batch is in the verifier (its key resolved), then
    // destroy the key while it is held there.
    tokio::task::spawn_blocking(move || entered_rx.recv_timeout(HANG))
        .await
        .expect("task")
        .expect("the batch reached the verifier");
    kms.destroy(&key).await.expect("destroy");
    hold.store(false, Ordering::SeqCst);
    go_tx.send(()).expect("go");
    let verdict = tokio::time::timeout(HANG, pending)
        .await
        .expect("no hang")
        .expect("task");
    assert!(
        verdict.is_ok(),
        "verified with the key it resolved: {verdict:?}"
    );
    assert_eq!(
        code(&after_change(&handle, &token, "a destroy during a verification").await),
        "kms.key_destroyed"
    );
    handle.shutdown().await;
}
