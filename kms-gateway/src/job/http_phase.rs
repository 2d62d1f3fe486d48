//! The main job's HTTP phase: the public face of `gateway serve` on an
//! ephemeral loopback port, driven for `--duration` seconds by
//! `--clients` concurrent tasks over keep-alive HTTP/1.1 connections (a
//! hyper client), each request a real token whose answer is known:
//!
//! | token | expected |
//! |---|---|
//! | issued by the gateway (`sign_jwt`), current head | 200 |
//! | issued before a rotation (a retained, no longer head version) | 200 |
//! | signed by a trusted partner key (`--trust-jwks`-style set) | 200 |
//! | forged (signature altered) | 401 |
//! | expired, or not yet valid (`nbf` an hour ahead) | 401 |
//! | signed by the partner under a `kid` nobody trusts | 401 |
//! | malformed | 401 |
//!
//! Every status is checked against its expectation; the report gives
//! requests/s, latency p50/p99 and the actor's mean batch size.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ed25519_dalek::{Signer, SigningKey};
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use indicatif::{ProgressBar, ProgressStyle};
use kms::actor::{KmsActor, KmsClient, KmsConfig};
use kms::bus::Bus;
use kms::core::{KeyId, Keystore};
use kms::jose::{sign_compact, Algorithm, Header, TrustedJwkSet};
use serde_json::json;

use super::report::{latency_histogram, print_latency_and_batches, print_result};
use crate::config::{JobConfig, ServeConfig};
use crate::serve::{listener, public};

/// Requests prepared up front (`POOL / 8` rounds of four) and sent
/// round-robin.
const POOL: usize = 4096;

/// Longest one request may take before it counts as a wrong answer (a
/// stalled server must not hang the main job).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The partner's trusted `kid`.
const PARTNER_KID: &str = "partner-1";

/// One prepared request: its token and the status it must get.
struct Probe {
    label: &'static str,
    authorization: String,
    expect: u16,
}

/// What the clients record.
struct Tally {
    latency: Histogram<u64>,
    matched: usize,
    mismatches: Vec<String>,
}

/// Runs the HTTP phase; `Ok(false)` if any status differed.
pub(crate) async fn run(options: &JobConfig) -> Result<bool, String> {
    let keystore = Keystore::new();
    let key = keystore
        .create_ed25519("gateway", "tokens")
        .map_err(|e| e.to_string())?;
    let partner = SigningKey::from_bytes(&[0x5a; 32]);
    let partner_set = TrustedJwkSet::from_json(
        json!({"keys": [{
            "kty": "OKP", "crv": "Ed25519", "kid": PARTNER_KID, "alg": "EdDSA",
            "x": base64_url(&partner.verifying_key().to_bytes()),
        }]})
        .to_string()
        .as_bytes(),
    )
    .map_err(|e| e.to_string())?;
    let config = KmsConfig::default().with_trusted_jwks(vec![partner_set]);
    let handle = KmsActor::spawn(config, keystore, &Bus::new()).map_err(|e| e.to_string())?;
    let kms = handle.client();
    let probes = Arc::new(probes(&kms, &key, &partner).await?);

    let socket = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("binding a loopback port: {e}"))?;
    let addr = socket.local_addr().map_err(|e| e.to_string())?;
    // Served as `serve` serves it: its accept loop, its defaults.
    let defaults = ServeConfig::default();
    let public_options = public::Options::new(
        &defaults.tokens,
        &defaults.proxy,
        &defaults.faces,
        false,
        handle.client().topic(),
    );
    // Every client of the phase connects from loopback: no per-address
    // limit.
    let mut limits = defaults.faces.limits;
    limits.max_connections_per_ip = usize::MAX;
    let (stop_server, stopped) = tokio::sync::watch::channel(false);
    let server = tokio::spawn(listener::serve(
        "public",
        socket,
        listener::Handler::new(public::router(&handle, &key, public_options).0),
        limits,
        defaults.proxy.trusted_proxies.clone(),
        None,
        stopped,
    ));
    eprintln!(
        "gateway: HTTP phase on http://{addr}: {} clients over keep-alive connections for {:.1} s",
        options.clients,
        options.duration.as_secs_f64()
    );

    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(options.clients)
        .build_http();
    let uri: hyper::Uri = format!("http://{addr}/whoami")
        .parse()
        .map_err(|e| format!("{e}"))?;
    let next = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Mutex::new(Tally {
        latency: latency_histogram()?,
        matched: 0,
        mismatches: Vec::new(),
    }));
    let before = handle.stats();
    let started = Instant::now();
    let tasks: Vec<_> = (0..options.clients)
        .map(|_| {
            let (client, uri, probes, next, stop, tally) = (
                client.clone(),
                uri.clone(),
                Arc::clone(&probes),
                Arc::clone(&next),
                Arc::clone(&stop),
                Arc::clone(&tally),
            );
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let probe = &probes[next.fetch_add(1, Ordering::Relaxed) % probes.len()];
                    let sent = Instant::now();
                    let status = tokio::time::timeout(
                        REQUEST_TIMEOUT,
                        send(&client, &uri, &probe.authorization),
                    )
                    .await
                    .unwrap_or_else(|_| Err("no answer within 30 s".to_owned()));
                    let micros = u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX);
                    let mut t = tally.lock().unwrap_or_else(PoisonError::into_inner);
                    t.latency.saturating_record(micros);
                    match status {
                        Ok(s) if s == probe.expect => t.matched += 1,
                        Ok(s) => t.mismatches.push(format!(
                            "{}: got {s}, expected {}",
                            probe.label, probe.expect
                        )),
                        Err(e) => t.mismatches.push(format!("{}: {e}", probe.label)),
                    }
                }
            })
        })
        .collect();

    let progress = ProgressBar::new_spinner();
    progress.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
            .map_err(|e| e.to_string())?,
    );
    while started.elapsed() < options.duration {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let sent = next.load(Ordering::Relaxed);
        progress.set_message(format!(
            "HTTP: {sent} requests, {:.0}/s",
            sent as f64 / started.elapsed().as_secs_f64()
        ));
        progress.tick();
    }
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await
            .map_err(|e| format!("a client task failed: {e}"))?;
    }
    let took = started.elapsed();
    progress.finish_and_clear();
    let stats = handle.stats().since(&before);
    let _ = stop_server.send(true);
    server.await.map_err(|e| e.to_string())?;
    handle.shutdown().await;

    let t = tally.lock().unwrap_or_else(PoisonError::into_inner);
    let total = t.matched + t.mismatches.len();
    println!("gateway HTTP report");
    println!(
        "  requests            {total} (/whoami, 8 kinds of token: current, rotated-away, partner; \
         forged, expired, not yet valid, unknown kid, malformed)"
    );
    println!(
        "  statuses            {} as expected, {} differ",
        t.matched,
        t.mismatches.len()
    );
    for m in t.mismatches.iter().take(10) {
        println!("    {m}");
    }
    println!(
        "  throughput          {:.0} requests/s ({} clients, {:.2} s)",
        total as f64 / took.as_secs_f64(),
        options.clients,
        took.as_secs_f64()
    );
    print_latency_and_batches(&t.latency, &stats);
    let pass = t.mismatches.is_empty() && total > 0;
    print_result(pass);
    Ok(pass)
}

/// One GET with the given `Authorization`; the status, the body drained.
async fn send(
    client: &Client<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>>,
    uri: &hyper::Uri,
    authorization: &str,
) -> Result<u16, String> {
    let request = hyper::Request::get(uri.clone())
        .header(hyper::header::AUTHORIZATION, authorization)
        .body(Empty::new())
        .map_err(|e| e.to_string())?;
    let response = client.request(request).await.map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?;
    Ok(status)
}

/// The request pool: `POOL / 8` rounds of four requests, each round one
/// token of a kind chosen in turn (forged, expired, not yet valid, unknown
/// kid, malformed, or current for the last three of eight) and three valid
/// ones (current, rotated-away, partner).
async fn probes(kms: &KmsClient, key: &KeyId, partner: &SigningKey) -> Result<Vec<Probe>, String> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_secs();
    let claims = |i: usize| json!({"sub": format!("user-{i}"), "exp": now + 3600});
    let sign = |c: serde_json::Value| async move {
        kms.sign_jwt(key, &c).await.map_err(|e| e.to_string())
    };
    let partner_token = |kid: &str, c: serde_json::Value| {
        sign_compact(
            &Header::new(Algorithm::EdDSA, Some(kid.to_owned())),
            &c,
            |input| partner.sign(input).to_bytes(),
        )
        .map_err(|e| e.to_string())
    };
    // Issued before the rotation: their kid is a retained, older version.
    let mut rotated = Vec::with_capacity(POOL / 8);
    for i in 0..POOL / 8 {
        rotated.push(sign(claims(i)).await?);
    }
    kms.rotate(key).await.map_err(|e| e.to_string())?;
    let bearer = |t: &str| format!("Bearer {t}");
    let mut probes = Vec::with_capacity(POOL);
    for (i, old) in rotated.iter().enumerate() {
        let current = sign(claims(i)).await?;
        let (kind, token, expect) = match i % 8 {
            0 => ("forged", forge(&current), 401),
            1 => (
                "expired",
                sign(json!({"sub": "late", "exp": now - 3600})).await?,
                401,
            ),
            2 => (
                "not yet valid",
                sign(json!({"sub": "early", "exp": now + 7200, "nbf": now + 3600})).await?,
                401,
            ),
            3 => ("unknown kid", partner_token("partner-9", claims(i))?, 401),
            4 => ("malformed", format!("not-a-token-{i}"), 401),
            _ => ("current", current.clone(), 200),
        };
        probes.push(Probe {
            label: kind,
            authorization: bearer(&token),
            expect,
        });
        probes.push(Probe {
            label: "current",
            authorization: bearer(&current),
            expect: 200,
        });
        probes.push(Probe {
            label: "rotated-away",
            authorization: bearer(old),
            expect: 200,
        });
        probes.push(Probe {
            label: "partner",
            authorization: bearer(&partner_token(PARTNER_KID, claims(i))?),
            expect: 200,
        });
    }
    Ok(probes)
}

/// The token with one signature byte changed (still strict base64url).
fn forge(token: &str) -> String {
    let (head, signature) = token.rsplit_once('.').unwrap_or((token, ""));
    let mut bytes = base64_decode(signature);
    if let Some(b) = bytes.get_mut(10) {
        *b ^= 0x01;
    }
    format!("{head}.{}", base64_url(&bytes))
}

fn base64_url(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .unwrap_or_default()
}
