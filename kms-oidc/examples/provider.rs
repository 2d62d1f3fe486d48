//! An identity provider's tokens verified through the actor: a stand-in
//! provider on a loopback port (its discovery document and its JWK Set,
//! as any OpenID provider serves them), [`Issuers::start`] keeping its
//! keys for the actor, then a token the provider signed verified with
//! `KmsClient::verify_jwt`, a forged one refused, and the provider's keys
//! rotated: a token under the new `kid` verifies once the refetch it
//! triggers has brought the new set. Exits 1 if any verdict differs.
//!
//! A real provider is configured the same way: `IssuerConfig::discovered`
//! with its issuer URL (https, or http to loopback as here).
//!
//! Run: `cargo run -p kms-oidc --example provider`.

use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use ed25519_dalek::{Signer, SigningKey};
use kms_actor::{KmsActor, KmsClient, KmsConfig, TokenKeys};
use kms_bus::Bus;
use kms_core::Keystore;
use kms_jose::{sign_compact, Algorithm, Header, Validation};
use kms_oidc::{FetchSettings, IssuerConfig, Issuers};
use serde_json::{json, Value};

/// The provider's state: its issuer URL and its signing keys by `kid`.
struct Provider {
    issuer: String,
    keys: Mutex<Vec<(String, SigningKey)>>,
}

async fn discovery(State(p): State<Arc<Provider>>) -> Json<Value> {
    Json(json!({
        "issuer": p.issuer,
        "jwks_uri": format!("{}/jwks", p.issuer),
        "id_token_signing_alg_values_supported": ["EdDSA"],
    }))
}

async fn jwks(State(p): State<Arc<Provider>>) -> Json<Value> {
    let keys = p.keys.lock().unwrap_or_else(PoisonError::into_inner);
    let keys: Vec<Value> = keys
        .iter()
        .map(|(kid, key)| {
            json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "use": "sig",
                "x": b64(&key.verifying_key().to_bytes())})
        })
        .collect();
    Json(json!({ "keys": keys }))
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A token the provider signs with `key` under `kid`, for 10 minutes.
fn token(key: &SigningKey, kid: &str, issuer: &str) -> Result<String, String> {
    let exp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_secs()
        + 600;
    sign_compact(
        &Header::new(Algorithm::EdDSA, Some(kid.to_owned())),
        &json!({"iss": issuer, "sub": "svc-42", "exp": exp}),
        |input| key.sign(input).to_bytes(),
    )
    .map_err(|e| e.to_string())
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("provider: {e}");
            ExitCode::from(1)
        }
    }
}

async fn run() -> Result<bool, String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let issuer = format!(
        "http://{}",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    let first = SigningKey::from_bytes(&[7; 32]);
    let provider = Arc::new(Provider {
        issuer: issuer.clone(),
        keys: Mutex::new(vec![("k1".to_owned(), first.clone())]),
    });
    let routes = Router::new()
        .route("/.well-known/openid-configuration", get(discovery))
        .route("/jwks", get(jwks))
        .with_state(Arc::clone(&provider));
    tokio::spawn(async move { axum::serve(listener, routes).await });

    let handle = KmsActor::spawn(KmsConfig::default(), Keystore::new(), &Bus::new())
        .map_err(|e| e.to_string())?;
    let issuers = Issuers::start(
        &handle.issuer_keys(),
        vec![IssuerConfig::discovered(issuer.clone())],
        // A short cooldown, so the rotation below is followed at once.
        FetchSettings::default().with_refetch_cooldown(Duration::from_millis(100)),
    )
    .map_err(|e| e.to_string())?;
    println!("provider: issuer {issuer}, keys kept for the actor");

    let kms = handle.client();
    // The first fetch runs in the background: the token verifies once the
    // provider's keys arrive.
    let valid = verifies_within(&kms, &token(&first, "k1", &issuer)?).await;
    let mut pass = true;
    let mut check = |label: &str, verified: bool, expected: bool| {
        println!(
            "provider: {label:28} {} {}",
            if verified { "verified" } else { "refused " },
            if verified == expected {
                "(as expected)"
            } else {
                "(WRONG)"
            }
        );
        pass &= verified == expected;
    };
    check("token under k1", valid, true);
    let mut forged = token(&first, "k1", &issuer)?.into_bytes();
    let at = forged.len() - 2;
    forged[at] = if forged[at] == b'A' { b'B' } else { b'A' };
    let forged = String::from_utf8(forged).map_err(|e| e.to_string())?;
    let forged_verified = kms
        .verify_jwt(&forged, &TokenKeys::trusted_only(), &Validation::default())
        .await
        .is_ok();
    check("forged token under k1", forged_verified, false);

    // The provider rotates: a token under k2 makes the actor refetch.
    let second = SigningKey::from_bytes(&[8; 32]);
    provider
        .keys
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(("k2".to_owned(), second.clone()));
    let rotated = verifies_within(&kms, &token(&second, "k2", &issuer)?).await;
    check("token under rotated-in k2", rotated, true);
    for status in issuers.status() {
        println!("provider: {} keys {:?}", status.issuer, status.kids);
    }
    drop(issuers);
    handle.shutdown().await;
    Ok(pass)
}

/// Whether `token` verifies within 10 s, tried every 20 ms: the keys it
/// needs arrive with a fetch in the background.
async fn verifies_within(kms: &KmsClient, token: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let verified = kms
            .verify_jwt(token, &TokenKeys::trusted_only(), &Validation::default())
            .await
            .is_ok();
        if verified || Instant::now() >= deadline {
            return verified;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
