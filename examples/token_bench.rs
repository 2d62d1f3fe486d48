//! Helpers of the HTTP token benchmark (`benches/http_tokens.sh`):
//!
//! * `gen --dir DIR`: an external issuer's JWK Set of `--keys` Ed25519 keys
//!   (`jwks.json`, kids `ext-<k>`, alg EdDSA) and `--tokens` JWTs under them
//!   (`tokens.txt`, one per line, keys in turn), a share `--forged-share`
//!   forged: their `sub` starts with `f` and one signature byte is changed;
//!   the others' `sub` starts with `t`; `kinds.txt` says `f` or `t` per
//!   line. Seeds are fixed, so runs compare.
//! * `peer --mode jsonwebtoken|floor --listen ADDR --jwks FILE`: an axum
//!   server on a 2-worker runtime answering `GET /whoami` like the
//!   gateway's public face (200 with the claims, else 401), with every key
//!   decoded once at start. `jsonwebtoken`: a per-request
//!   `jsonwebtoken::decode` (EdDSA; `--backend rust-crypto`, the default,
//!   or `aws-lc`). `floor`: parses the
//!   token, looks its `kid` up and checks `exp`, but verifies no signature:
//!   what HTTP and parsing alone cost. Both also answer `GET /auth` as the
//!   gateway's forward auth does with `--claim-header sub=X-Auth-Subject`
//!   (200 with no body and the `sub` as that header, else 401), for
//!   `benches/front_cpu.sh`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use clap::{Parser, Subcommand, ValueEnum};
use ed25519_dalek::{Signer, SigningKey};
use kms::jose::{sign_compact, Algorithm, Header};
use serde_json::{json, Value};

#[derive(Parser)]
#[command(
    name = "token_bench",
    about = "Token files and peer servers for benches/http_tokens.sh"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write jwks.json and tokens.txt into --dir.
    Gen {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long, default_value_t = 128)]
        keys: usize,
        #[arg(long, default_value_t = 20_000)]
        tokens: usize,
        #[arg(long, default_value_t = 0.01)]
        forged_share: f64,
    },
    /// Serve GET /whoami as a peer.
    Peer {
        #[arg(long, value_enum)]
        mode: Mode,
        #[arg(long)]
        listen: SocketAddr,
        #[arg(long)]
        jwks: PathBuf,
        /// jsonwebtoken's crypto backend.
        #[arg(long, value_enum, default_value = "rust-crypto")]
        backend: Backend,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Mode {
    Jsonwebtoken,
    Floor,
}

/// jsonwebtoken's backends (its `rust_crypto` and `aws_lc_rs` features).
#[derive(Clone, Copy, ValueEnum)]
enum Backend {
    RustCrypto,
    AwsLc,
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Gen {
            dir,
            keys,
            tokens,
            forged_share,
        } => generate(&dir, keys, tokens, forged_share),
        Command::Peer {
            mode,
            listen,
            jwks,
            backend,
        } => {
            // Both backends are built: the process picks one, explicitly.
            let _ = match backend {
                Backend::RustCrypto => {
                    jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER.install_default()
                }
                Backend::AwsLc => jsonwebtoken::crypto::aws_lc::DEFAULT_PROVIDER.install_default(),
            };
            peer(mode, listen, &jwks)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("token_bench: {e}");
            ExitCode::from(1)
        }
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn generate(
    dir: &std::path::Path,
    keys: usize,
    tokens: usize,
    forged_share: f64,
) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let signers: Vec<SigningKey> = (0..keys)
        .map(|k| {
            let mut seed = [0x77u8; 32];
            seed[..8].copy_from_slice(&(k as u64).to_le_bytes());
            SigningKey::from_bytes(&seed)
        })
        .collect();
    let jwks = json!({"keys": signers.iter().enumerate().map(|(k, s)| json!({
        "kty": "OKP", "crv": "Ed25519", "kid": format!("ext-{k}"), "alg": "EdDSA", "use": "sig",
        "x": URL_SAFE_NO_PAD.encode(s.verifying_key().to_bytes()),
    })).collect::<Vec<_>>()});
    std::fs::write(dir.join("jwks.json"), jwks.to_string()).map_err(|e| e.to_string())?;
    // Forged ones spread evenly: every `stride`-th token.
    let stride = if forged_share > 0.0 {
        (1.0 / forged_share).round() as usize
    } else {
        usize::MAX
    };
    let exp = now() + 24 * 3600;
    let mut out = String::with_capacity(tokens * 300);
    let mut kinds = String::with_capacity(tokens * 2);
    for i in 0..tokens {
        let k = i % keys;
        let forged = i % stride == stride / 2;
        let sub = format!("{}{i}", if forged { 'f' } else { 't' });
        let header = Header::new(Algorithm::EdDSA, Some(format!("ext-{k}")));
        let claims = json!({"sub": sub, "iss": "bench-issuer", "exp": exp});
        let mut token = sign_compact(&header, &claims, |input| signers[k].sign(input).to_bytes())
            .map_err(|e| e.to_string())?;
        if forged {
            let (head, signature) = token.rsplit_once('.').ok_or("no signature")?;
            let mut bytes = URL_SAFE_NO_PAD
                .decode(signature)
                .map_err(|e| e.to_string())?;
            bytes[7] ^= 0x10;
            token = format!("{head}.{}", URL_SAFE_NO_PAD.encode(bytes));
        }
        out.push_str(&token);
        out.push('\n');
        kinds.push_str(if forged { "f\n" } else { "t\n" });
    }
    std::fs::write(dir.join("tokens.txt"), out).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("kinds.txt"), kinds).map_err(|e| e.to_string())?;
    eprintln!(
        "token_bench: {keys} keys, {tokens} tokens in {}",
        dir.display()
    );
    Ok(())
}

/// Keys by kid, decoded once.
struct Keys {
    decoding: HashMap<String, jsonwebtoken::DecodingKey>,
    mode: Mode,
}

fn peer(mode: Mode, listen: SocketAddr, jwks: &std::path::Path) -> Result<(), String> {
    let text = std::fs::read_to_string(jwks).map_err(|e| e.to_string())?;
    let set: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let mut decoding = HashMap::new();
    for key in set["keys"].as_array().ok_or("no keys")? {
        let kid = key["kid"].as_str().ok_or("no kid")?.to_owned();
        let x = key["x"].as_str().ok_or("no x")?;
        let decoded =
            jsonwebtoken::DecodingKey::from_ed_components(x).map_err(|e| e.to_string())?;
        decoding.insert(kid, decoded);
    }
    let keys = Arc::new(Keys { decoding, mode });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| format!("{listen}: {e}"))?;
        eprintln!(
            "token_bench peer: listening on http://{} (ready)",
            listener.local_addr().map_err(|e| e.to_string())?
        );
        let app = Router::new()
            .route("/whoami", get(whoami))
            .route("/auth", get(forward_auth))
            .with_state(keys);
        axum::serve(listener, app).await.map_err(|e| e.to_string())
    })
}

async fn whoami(State(keys): State<Arc<Keys>>, headers: HeaderMap) -> Response {
    match claims(&keys, &headers) {
        Some(claims) => Json(claims).into_response(),
        None => unauthorized(),
    }
}

/// Forward auth: 200 with no body and `X-Auth-Subject`, else 401.
async fn forward_auth(State(keys): State<Arc<Keys>>, headers: HeaderMap) -> Response {
    match claims(&keys, &headers) {
        Some(claims) => {
            let subject = claims["sub"].as_str().unwrap_or_default().to_owned();
            (StatusCode::OK, [("x-auth-subject", subject)]).into_response()
        }
        None => unauthorized(),
    }
}

/// The claims of the request's bearer token, as the peer's mode checks
/// it; `None` when it has none or it is refused.
fn claims(keys: &Keys, headers: &HeaderMap) -> Option<Value> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("Bearer"))
        .map(|(_, t)| t.trim())?;
    match keys.mode {
        Mode::Jsonwebtoken => verified(keys, token),
        Mode::Floor => unverified(keys, token),
    }
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
    )
        .into_response()
}

/// `jsonwebtoken::decode`, its key found by `kid`.
fn verified(keys: &Keys, token: &str) -> Option<Value> {
    let kid = jsonwebtoken::decode_header(token).ok()?.kid?;
    let key = keys.decoding.get(&kid)?;
    let validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::EdDSA);
    jsonwebtoken::decode::<Value>(token, key, &validation)
        .ok()
        .map(|data| data.claims)
}

/// Parses, looks the `kid` up, checks `exp`; no signature.
fn unverified(keys: &Keys, token: &str) -> Option<Value> {
    let mut parts = token.split('.');
    let (header, payload, _signature) = (parts.next()?, parts.next()?, parts.next()?);
    let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).ok()?).ok()?;
    keys.decoding.get(header["kid"].as_str()?)?;
    let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
    (claims["exp"].as_u64()? > now()).then_some(claims)
}
