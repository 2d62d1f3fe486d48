//! Issuers against a local HTTP provider the test controls (started on a
//! loopback port it picks, stopped with the test): discovery, keys that
//! follow rotation, the cooldown under a flood of made-up `kid`s, outages,
//! and what a real provider will not do on demand (`Cache-Control`, slow
//! and hanging answers, oversized and garbage documents, another issuer's
//! discovery document, a redirect loop, keys that must not be used).
//! Deadlines only catch hangs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, Response, StatusCode};
use axum::routing::get;
use axum::Router;
use ed25519_dalek::{Signer, SigningKey};
use kms_actor::{KmsActor, KmsConfig, KmsHandle, TokenKeys, VerifiedJwt};
use kms_bus::Bus;
use kms_core::{Keystore, KmsError};
use kms_jose::{sign_compact, Algorithm, Header, Validation};
use kms_oidc::{FetchError, FetchSettings, IssuerConfig, IssuerStatus, Issuers};
use serde_json::{json, Value};

/// The deadline that catches a hang.
const HANG: Duration = Duration::from_secs(30);

/// What the provider answers, changed by the tests as they go.
struct Script {
    /// The discovery document's `issuer` (`None`: the provider's own).
    issuer: Option<String>,
    keys: Vec<Value>,
    cache_control: Option<String>,
    /// Answer the JWK Set with this status instead.
    status: Option<u16>,
    /// Wait this long before answering the JWK Set.
    delay: Duration,
    /// Answer the JWK Set with this body instead.
    body: Option<String>,
}

struct Provider {
    script: Mutex<Script>,
    discovery_fetches: AtomicUsize,
    jwks_fetches: AtomicUsize,
    base: String,
}

impl Provider {
    fn script(&self, change: impl FnOnce(&mut Script)) {
        change(&mut self.script.lock().expect("script"));
    }

    fn jwks_fetches(&self) -> usize {
        self.jwks_fetches.load(Ordering::SeqCst)
    }
}

async fn discovery(State(p): State<Arc<Provider>>) -> Response<Body> {
    p.discovery_fetches.fetch_add(1, Ordering::SeqCst);
    let issuer = p.script.lock().expect("script").issuer.clone();
    let doc = json!({
        "issuer": issuer.unwrap_or_else(|| p.base.clone()),
        "jwks_uri": format!("{}/jwks", p.base),
        "id_token_signing_alg_values_supported": ["EdDSA"],
    });
    Response::new(Body::from(doc.to_string()))
}

async fn jwks(State(p): State<Arc<Provider>>) -> Response<Body> {
    p.jwks_fetches.fetch_add(1, Ordering::SeqCst);
    let (keys, cache_control, status, delay, body) = {
        let s = p.script.lock().expect("script");
        (
            s.keys.clone(),
            s.cache_control.clone(),
            s.status,
            s.delay,
            s.body.clone(),
        )
    };
    tokio::time::sleep(delay).await;
    let mut answer = Response::builder()
        .status(status.unwrap_or(200))
        .header(header::CONTENT_TYPE, "application/json");
    if let Some(value) = cache_control {
        answer = answer.header(header::CACHE_CONTROL, value);
    }
    let body = body.unwrap_or_else(|| json!({ "keys": keys }).to_string());
    answer.body(Body::from(body)).expect("response")
}

/// `/hop/N` redirects to `/hop/N+1`, forever.
async fn hop(Path(n): Path<u32>) -> Response<Body> {
    Response::builder()
        .status(StatusCode::FOUND)
        .header(header::LOCATION, format!("/hop/{}", n + 1))
        .body(Body::empty())
        .expect("response")
}

async fn provider(keys: Vec<Value>) -> Arc<Provider> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let p = Arc::new(Provider {
        script: Mutex::new(Script {
            issuer: None,
            keys,
            cache_control: None,
            status: None,
            delay: Duration::ZERO,
            body: None,
        }),
        discovery_fetches: AtomicUsize::new(0),
        jwks_fetches: AtomicUsize::new(0),
        base,
    });
    let app = Router::new()
        .route("/.well-known/openid-configuration", get(discovery))
        .route("/jwks", get(jwks))
        .route("/hop/{n}", get(hop))
        .with_state(Arc::clone(&p));
    tokio::spawn(async move { axum::serve(listener, app).await });
    p
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn jwk(key: &SigningKey, kid: &str) -> Value {
    json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "use": "sig",
        "x": b64(&key.verifying_key().to_bytes())})
}

fn token(key: &SigningKey, kid: &str, iss: &str) -> String {
    let exp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        + 600;
    sign_compact(
        &Header::new(Algorithm::EdDSA, Some(kid.to_owned())),
        &json!({"iss": iss, "sub": "svc", "exp": exp}),
        |input| key.sign(input).to_bytes(),
    )
    .expect("sign")
}

/// An actor, and `config`'s issuer kept for it with `settings`.
fn kept(config: IssuerConfig, settings: FetchSettings) -> (KmsHandle, Issuers) {
    let handle = actor();
    let issuers = Issuers::start(&handle.issuer_keys(), vec![config], settings).expect("start");
    (handle, issuers)
}

/// Stops the fetches, then the actor.
async fn stop(handle: KmsHandle, issuers: Issuers) {
    drop(issuers);
    handle.shutdown().await;
}

fn actor() -> KmsHandle {
    KmsActor::spawn(KmsConfig::default(), Keystore::new(), &Bus::new()).expect("spawn")
}

async fn verify(handle: &KmsHandle, token: &str) -> Result<VerifiedJwt, KmsError> {
    handle
        .client()
        .verify_jwt(token, &TokenKeys::trusted_only(), &Validation::default())
        .await
}

fn refused(result: Result<VerifiedJwt, KmsError>) -> &'static str {
    match result {
        Err(KmsError::InvalidToken { code, .. }) => code,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Waits until `issuers`' only issuer's status satisfies `done`.
async fn until(issuers: &Issuers, done: impl Fn(&IssuerStatus) -> bool) -> IssuerStatus {
    let deadline = Instant::now() + HANG;
    loop {
        let status = issuers.status().remove(0);
        if done(&status) {
            return status;
        }
        assert!(Instant::now() < deadline, "never: {status:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_discovered_and_follow_rotation() {
    let (k1, k2) = (
        SigningKey::from_bytes(&[1; 32]),
        SigningKey::from_bytes(&[2; 32]),
    );
    let p = provider(vec![jwk(&k1, "k1")]).await;
    p.script(|s| s.cache_control = Some("public, max-age=120".to_owned()));
    let (handle, issuers) = kept(
        IssuerConfig::discovered(p.base.clone()),
        FetchSettings::default().with_refetch_cooldown(Duration::ZERO),
    );
    let status = until(&issuers, |s| !s.kids.is_empty()).await;
    assert_eq!(status.kids, ["k1"]);
    assert_eq!(status.lifetime, Duration::from_secs(120));
    assert_eq!(status.jwks_uri, Some(format!("{}/jwks", p.base)));
    assert!(!status.stale);
    verify(&handle, &token(&k1, "k1", &p.base))
        .await
        .expect("k1 verifies");
    // The provider rotates: the first token under "k2" is followed.
    p.script(|s| s.keys = vec![jwk(&k2, "k2")]);
    let before = p.jwks_fetches();
    verify(&handle, &token(&k2, "k2", &p.base))
        .await
        .expect("k2 after one refetch");
    assert_eq!(p.jwks_fetches(), before + 1);
    assert_eq!(issuers.status()[0].kids, ["k2"]);
    // The old key went with the old set.
    assert_eq!(
        refused(verify(&handle, &token(&k1, "k1", &p.base)).await),
        "jose.unknown_kid"
    );
    // The same key under another issuer's name is not this issuer's.
    assert_eq!(
        refused(verify(&handle, &token(&k2, "k2", "https://elsewhere.example")).await),
        "jose.unknown_kid"
    );
    // The discovery document was read once: its jwks_uri is kept.
    assert_eq!(p.discovery_fetches.load(Ordering::SeqCst), 1);
    stop(handle, issuers).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_set_leaves_the_token_cache_alone() {
    let k1 = SigningKey::from_bytes(&[9; 32]);
    let p = provider(vec![jwk(&k1, "k1")]).await;
    let (handle, issuers) = kept(
        IssuerConfig::discovered(p.base.clone()),
        FetchSettings::default().with_refetch_cooldown(Duration::ZERO),
    );
    until(&issuers, |s| !s.kids.is_empty()).await;
    let good = token(&k1, "k1", &p.base);
    verify(&handle, &good).await.expect("verifies");
    let hits = || handle.stats().token_cache_hits;
    verify(&handle, &good).await.expect("from the cache");
    let before = hits();
    // A made-up kid refetches the same set: the cache still answers.
    let fetches = p.jwks_fetches();
    assert_eq!(
        refused(verify(&handle, &token(&k1, "made-up", &p.base)).await),
        "jose.unknown_kid"
    );
    assert_eq!(p.jwks_fetches(), fetches + 1);
    verify(&handle, &good).await.expect("still verifies");
    assert_eq!(hits(), before + 1, "answered from the cache");
    stop(handle, issuers).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_issuers_own_claims_policy_replaces_the_calls() {
    let k1 = SigningKey::from_bytes(&[10; 32]);
    let p = provider(vec![jwk(&k1, "k1")]).await;
    let mut policy = Validation::default();
    policy.audiences = vec!["https://api.example".to_owned()];
    let (handle, issuers) = kept(
        IssuerConfig::discovered(p.base.clone()).with_validation(policy),
        FetchSettings::default(),
    );
    until(&issuers, |s| !s.kids.is_empty()).await;
    let exp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        + 600;
    let with_aud = sign_compact(
        &Header::new(Algorithm::EdDSA, Some("k1".to_owned())),
        &json!({"iss": p.base, "aud": "https://api.example", "exp": exp}),
        |input| k1.sign(input).to_bytes(),
    )
    .expect("sign");
    verify(&handle, &with_aud)
        .await
        .expect("the issuer's audience");
    assert_eq!(
        refused(verify(&handle, &token(&k1, "k1", &p.base)).await),
        "jose.missing_claim"
    );
    stop(handle, issuers).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_made_up_kids_fetches_once_per_cooldown() {
    let k1 = SigningKey::from_bytes(&[3; 32]);
    let p = provider(vec![jwk(&k1, "k1")]).await;
    let (handle, issuers) = kept(
        IssuerConfig::with_jwks_uri(p.base.clone(), format!("{}/jwks", p.base)),
        FetchSettings::default().with_refetch_cooldown(Duration::from_secs(600)),
    );
    until(&issuers, |s| !s.kids.is_empty()).await;
    let first = p.jwks_fetches();
    // 200 made-up kids, 50 at a time.
    for round in 0..4 {
        let calls = (0..50).map(|i| {
            let handle = &handle;
            let token = token(&k1, &format!("made-up-{round}-{i}"), &p.base);
            async move { refused(verify(handle, &token).await) }
        });
        for code in futures::future::join_all(calls).await {
            assert_eq!(code, "jose.unknown_kid");
        }
    }
    // The start's fetch began the cooldown: the flood caused none.
    assert_eq!(p.jwks_fetches(), first, "no fetch within the cooldown");
    // Discovery was skipped.
    assert_eq!(p.discovery_fetches.load(Ordering::SeqCst), 0);
    stop(handle, issuers).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_keeps_the_last_good_set_and_answers_unknown_kids_in_time() {
    let (k1, k2) = (
        SigningKey::from_bytes(&[4; 32]),
        SigningKey::from_bytes(&[5; 32]),
    );
    let p = provider(vec![jwk(&k1, "k1")]).await;
    let (handle, issuers) = kept(
        IssuerConfig::discovered(p.base.clone()),
        FetchSettings::default()
            .with_refetch_cooldown(Duration::ZERO)
            .with_fetch_timeout(Duration::from_secs(1)),
    );
    until(&issuers, |s| !s.kids.is_empty()).await;
    // Down: 503s, then a hang.
    p.script(|s| s.status = Some(503));
    assert_eq!(
        refused(verify(&handle, &token(&k2, "k2", &p.base)).await),
        "jose.unknown_kid"
    );
    let status = issuers.status().remove(0);
    assert!(
        matches!(
            status.last_error,
            Some(FetchError::Status { status: 503, .. })
        ),
        "{status:?}"
    );
    verify(&handle, &token(&k1, "k1", &p.base))
        .await
        .expect("the last good set stays");
    p.script(|s| {
        s.status = None;
        s.delay = Duration::from_secs(20);
    });
    let asked = Instant::now();
    assert_eq!(
        refused(verify(&handle, &token(&k2, "k2", &p.base)).await),
        "jose.unknown_kid"
    );
    let waited = asked.elapsed();
    assert!(waited < Duration::from_secs(5), "answered after {waited:?}");
    let status = until(&issuers, |s| s.last_error.is_some() && s.failures >= 2).await;
    assert!(
        matches!(status.last_error, Some(FetchError::Timeout { .. })),
        "{status:?}"
    );
    verify(&handle, &token(&k1, "k1", &p.base))
        .await
        .expect("still the last good set");
    stop(handle, issuers).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_older_than_the_maximum_stale_age_is_dropped() {
    let k1 = SigningKey::from_bytes(&[6; 32]);
    let p = provider(vec![jwk(&k1, "k1")]).await;
    let (handle, issuers) = kept(
        IssuerConfig::discovered(p.base.clone()),
        FetchSettings::default()
            .with_refetch_cooldown(Duration::ZERO)
            .with_max_stale(Duration::from_secs(1)),
    );
    until(&issuers, |s| !s.kids.is_empty()).await;
    p.script(|s| s.status = Some(500));
    // The background task looks at the clock every 5 s.
    until(&issuers, |s| s.kids.is_empty()).await;
    assert_eq!(
        refused(verify(&handle, &token(&k1, "k1", &p.base)).await),
        "jose.unknown_kid"
    );
    assert!(issuers.status()[0].stale);
    // Back: the first token under a known kid fetches it again.
    p.script(|s| s.status = None);
    verify(&handle, &token(&k1, "k1", &p.base))
        .await
        .expect("after the provider is back");
    stop(handle, issuers).await;
}

/// A change to the provider's script.
type Change = Box<dyn Fn(&mut Script)>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_a_provider_must_not_send_fail_the_fetch() {
    let k1 = SigningKey::from_bytes(&[7; 32]);
    let p = provider(vec![jwk(&k1, "k1")]).await;
    let settings = FetchSettings::default()
        .with_fetch_timeout(Duration::from_secs(1))
        .with_max_document_bytes(4096)
        .with_max_keys(4);
    let cases: Vec<(Change, IssuerConfig, &str)> = vec![
        (
            Box::new(|s| s.issuer = Some("https://impostor.example".to_owned())),
            IssuerConfig::discovered(p.base.clone()),
            "issuer_mismatch",
        ),
        (
            Box::new(|s| s.body = Some("x".repeat(5000))),
            IssuerConfig::with_jwks_uri(p.base.clone(), format!("{}/jwks", p.base)),
            "too_large",
        ),
        (
            Box::new(|s| s.body = Some("{\"keys\": [".to_owned())),
            IssuerConfig::with_jwks_uri(p.base.clone(), format!("{}/jwks", p.base)),
            "invalid",
        ),
        (
            Box::new(|s| s.body = Some("<html>down</html>".to_owned())),
            IssuerConfig::with_jwks_uri(p.base.clone(), format!("{}/jwks", p.base)),
            "invalid",
        ),
        (
            Box::new(|s| {
                s.keys = (0..5)
                    .map(|i| jwk(&SigningKey::from_bytes(&[i; 32]), &format!("k{i}")))
                    .collect();
            }),
            IssuerConfig::with_jwks_uri(p.base.clone(), format!("{}/jwks", p.base)),
            "invalid",
        ),
        (
            Box::new(|s| s.delay = Duration::from_secs(20)),
            IssuerConfig::with_jwks_uri(p.base.clone(), format!("{}/jwks", p.base)),
            "timeout",
        ),
        (
            Box::new(|_| {}),
            IssuerConfig::with_jwks_uri(p.base.clone(), format!("{}/hop/0", p.base)),
            "transport",
        ),
    ];
    for (change, config, outcome) in cases {
        p.script(|s| {
            *s = Script {
                issuer: None,
                keys: vec![jwk(&k1, "k1")],
                cache_control: None,
                status: None,
                delay: Duration::ZERO,
                body: None,
            };
            change(s);
        });
        let (handle, issuers) = kept(config, settings.clone());
        let status = until(&issuers, |s| s.last_error.is_some()).await;
        assert_eq!(
            status.last_error.as_ref().map(FetchError::outcome),
            Some(outcome),
            "{status:?}"
        );
        assert!(status.kids.is_empty() && status.stale, "{status:?}");
        assert_eq!(
            refused(verify(&handle, &token(&k1, "k1", &p.base)).await),
            "jose.unknown_kid"
        );
        stop(handle, issuers).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_control_sets_the_lifetime_and_bad_keys_are_skipped() {
    let k1 = SigningKey::from_bytes(&[8; 32]);
    let p = provider(vec![
        jwk(&k1, "k1"),
        json!({"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"}),
        json!({"kty": "OKP", "crv": "Ed25519", "kid": "private",
            "x": b64(&k1.verifying_key().to_bytes()), "d": b64(&[1; 32])}),
        json!({"kty": "EC", "crv": "P-521", "kid": "p521", "x": "AA", "y": "AA"}),
        json!({"kty": "RSA", "kid": "rsa-1024", "n": b64(&[0xc5; 128]), "e": "AQAB"}),
    ])
    .await;
    for (cache_control, lifetime) in [
        (Some("max-age=300"), 300),
        (Some("max-age=5"), 60),
        (Some("no-store"), 60),
        (Some("max-age=99999999"), 86_400),
        (None, 600),
    ] {
        p.script(|s| s.cache_control = cache_control.map(str::to_owned));
        let (handle, issuers) = kept(
            IssuerConfig::discovered(p.base.clone()),
            FetchSettings::default(),
        );
        let status = until(&issuers, |s| !s.kids.is_empty()).await;
        assert_eq!(
            status.lifetime,
            Duration::from_secs(lifetime),
            "{cache_control:?}"
        );
        assert_eq!(status.kids, ["k1"], "the others skipped");
        verify(&handle, &token(&k1, "k1", &p.base))
            .await
            .expect("k1 verifies");
        stop(handle, issuers).await;
    }
}

#[test]
fn a_configuration_that_cannot_work_is_refused_at_start() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let handle = actor();
        let keys = handle.issuer_keys();
        for (configs, settings) in [
            (
                vec![IssuerConfig::discovered("http://idp.example")],
                FetchSettings::default(),
            ),
            (
                vec![IssuerConfig::with_jwks_uri(
                    "https://idp.example",
                    "http://idp.example/jwks",
                )],
                FetchSettings::default(),
            ),
            (
                vec![
                    IssuerConfig::discovered("https://idp.example"),
                    IssuerConfig::discovered("https://idp.example"),
                ],
                FetchSettings::default(),
            ),
            (
                vec![IssuerConfig::discovered("https://idp.example")],
                FetchSettings::default().with_ca_pem(b"not a certificate".to_vec()),
            ),
        ] {
            assert!(Issuers::start(&keys, configs, settings).is_err());
        }
        handle.shutdown().await;
    });
}
