//! The bearer layer mounted in an embedder's own axum app: a KMS actor
//! over an in-memory keystore, an app whose `/orders` route sits behind
//! [`BearerLayer`] (its handler reads the verified claims) beside the
//! public JWK Set, served on a loopback port the system picks. It then
//! asks itself over HTTP/1.1 three times: with a token the KMS issued
//! (200 and the subject), with that token altered (401 with
//! `error="invalid_token"`) and with none (401), and exits 1 if any
//! answer differs.
//!
//! Run: `cargo run -p kms-http --example axum_app`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::ExitCode;

use axum::routing::get;
use axum::{Extension, Router};
use kms_actor::{KmsActor, KmsConfig, TokenKeys};
use kms_bus::Bus;
use kms_core::Keystore;
use kms_http::{jwks_router, BearerLayer, VerifiedClaims};
use kms_jose::Validation;
use serde_json::json;

/// The app's own handler: it runs only for a verified token, and reads
/// its claims from the request's extensions.
async fn orders(Extension(VerifiedClaims(claims)): Extension<VerifiedClaims>) -> String {
    let subject = claims.get("sub").and_then(|s| s.as_str()).unwrap_or("?");
    format!("orders of {subject}\n")
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("axum_app: {e}");
            ExitCode::from(1)
        }
    }
}

async fn run() -> Result<bool, String> {
    let keystore = Keystore::new();
    let key = keystore
        .create_ed25519("shop", "tokens")
        .map_err(|e| e.to_string())?;
    // A keystore key whose purpose is "tokens" (the default token purpose)
    // signs and verifies tokens.
    let handle =
        KmsActor::spawn(KmsConfig::default(), keystore, &Bus::new()).map_err(|e| e.to_string())?;
    let kms = handle.client();

    // The embedder's app: its routes behind the layer, the JWK Set beside.
    let app = Router::new()
        .route("/orders", get(orders))
        .layer(BearerLayer::new(
            kms.clone(),
            TokenKeys::of(&key),
            Validation::default(),
        ))
        .merge(jwks_router(kms.clone(), key.clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    println!("axum_app: serving on http://{addr}");

    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_secs()
        + 300;
    let token = kms
        .sign_jwt(&key, &json!({"sub": "alice", "exp": exp}))
        .await
        .map_err(|e| e.to_string())?;
    let mut forged = token.clone().into_bytes();
    let last = forged.len() - 2;
    forged[last] = if forged[last] == b'A' { b'B' } else { b'A' };
    let forged = String::from_utf8(forged).map_err(|e| e.to_string())?;

    let mut pass = true;
    for (label, authorization, status, says) in [
        ("issued", Some(token.as_str()), 200, "orders of alice"),
        ("altered", Some(forged.as_str()), 401, "invalid_token"),
        ("none", None, 401, "Bearer"),
    ] {
        // Blocking I/O off the runtime's workers.
        let authorization = authorization.map(str::to_owned);
        let answer = tokio::task::spawn_blocking(move || get_orders(addr, authorization))
            .await
            .map_err(|e| e.to_string())??;
        let ok = answer.starts_with(&format!("HTTP/1.1 {status} ")) && answer.contains(says);
        println!(
            "axum_app: {label:8} -> {} {}",
            answer.lines().next().unwrap_or_default(),
            if ok { "(as expected)" } else { "(WRONG)" }
        );
        pass &= ok;
    }
    handle.shutdown().await;
    Ok(pass)
}

/// `GET /orders` over one HTTP/1.1 connection: the whole answer, head and
/// body.
fn get_orders(addr: SocketAddr, token: Option<String>) -> Result<String, String> {
    let mut stream = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    let authorization = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "GET /orders HTTP/1.1\r\nHost: {addr}\r\n{authorization}Connection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .map_err(|e| e.to_string())?;
    Ok(answer)
}
