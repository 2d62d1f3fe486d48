//! ML-DSA-65 tokens through the KMS actor, beside aws-lc-rs called
//! directly on the same work, in the same group (feature `ml-dsa`:
//! `cargo bench --bench ml_dsa --features ml-dsa`), on actors with a
//! 2-thread pool whatever the machine (one with `sign_on_caller_when_idle`
//! on, the default, one with it off), so the direct side's 2 threads are
//! their match. The bench checks that each signed where it says.
//!
//! * `ml_dsa_65/sign/{actor_sign_jwt,aws_lc_rs}`: one token at a time from
//!   a thread outside the runtime (`block_on`, as a caller on another
//!   thread waits), the same claims each time. `actor_sign_jwt`:
//!   `KmsClient::sign_jwt` with a keystore ML-DSA-65 key (the pool idle:
//!   signed on the caller's task). `actor_sign_jwt_on_pool`: the same on
//!   an actor with `sign_on_caller_when_idle` off (the bus, the actor's
//!   task, a pool thread, the reply). `aws_lc_rs`: what a
//!   per-request signer does with the same key's seed: the header and
//!   claims as JSON and base64url, `PqdsaKeyPair::sign` (hedged), the
//!   signature in base64url. Target: aws_lc_rs / actor ≥ 0.9.
//!   `actor_sign_jwt_from_a_task`: the same from one tokio task, one token
//!   after another (`iter_custom` inside one `block_on`).
//! * `ml_dsa_65/verify/{actor_verify_jwt,aws_lc_rs}`: one token at a time,
//!   the verified-token cache off. `actor_verify_jwt`:
//!   `KmsClient::verify_jwt` of a token of that key (parse, the key by
//!   `kid`, the signature alone on the caller's task, the claims
//!   validated). `aws_lc_rs`: the per-request verifier of
//!   `examples/token_bench.rs` (`peer --mode ml-dsa`): split, base64url,
//!   the header's `alg`, `ParsedPublicKey::verify_sig` on a key parsed
//!   once, the claims and `exp`. Target: aws_lc_rs / actor ≥ 0.9.
//!   `actor_verify_jwt_from_a_task`: the same from one tokio task.
//! * `ml_dsa_65/sign/{keystore_sign_message,aws_lc_rs_raw}`: the keystore's
//!   `sign_message` on the bench's thread, and `PqdsaKeyPair::sign` alone,
//!   on a short message: what the primitive costs without JWS or actor.
//! * `ml_dsa_65/sign_concurrency`: not a Criterion timing. 1, 4, 16 and 64
//!   client tasks each signing one token at a time through the actor (the
//!   default one: a token on a client's task while the pool is idle, else
//!   on its 2-thread pool) against `min(clients, 2)` threads signing directly,
//!   2000 tokens a round, five rounds alternated: tokens a second and the
//!   ratio's median and spread. Set `ML_DSA_CONCURRENCY=0` to skip it.
//!
//! Results: docs/PERFORMANCE.md.

use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::signature::{KeyPair, ParsedPublicKey, PqdsaKeyPair, ML_DSA_65, ML_DSA_65_SIGNING};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use criterion::Criterion;
use kms::actor::{KmsActor, KmsConfig, TokenKeys};
use kms::bus::Bus;
use kms::core::{Alg, Keystore};
use kms::jose::Validation;
use serde_json::{json, Value};

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A per-request signer's token: header and claims, signed by aws-lc-rs.
fn sign_direct(key: &PqdsaKeyPair, kid: &str, claims: &Value) -> String {
    let header = json!({"alg": "ML-DSA-65", "kid": kid});
    let mut token = URL_SAFE_NO_PAD.encode(header.to_string());
    token.push('.');
    token.push_str(&URL_SAFE_NO_PAD.encode(claims.to_string()));
    let mut signature = vec![0; ML_DSA_65_SIGNING.signature_len()];
    let len = key
        .sign(token.as_bytes(), &mut signature)
        .expect("aws-lc-rs signs");
    token.push('.');
    token.push_str(&URL_SAFE_NO_PAD.encode(&signature[..len]));
    token
}

/// A per-request verifier's verdict (as `token_bench peer --mode ml-dsa`).
fn verify_direct(key: &ParsedPublicKey, token: &str) -> Option<Value> {
    let (input, signature) = token.rsplit_once('.')?;
    let (header, payload) = input.split_once('.')?;
    let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).ok()?).ok()?;
    if header["alg"].as_str()? != "ML-DSA-65" {
        return None;
    }
    let signature = URL_SAFE_NO_PAD.decode(signature).ok()?;
    key.verify_sig(input.as_bytes(), &signature).ok()?;
    let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
    (claims["exp"].as_u64()? > now()).then_some(claims)
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let handle = {
        let _guard = rt.enter();
        KmsActor::spawn(
            KmsConfig::default().with_token_cache(0).with_threads(2),
            Keystore::new(),
            &Bus::new(),
        )
        .expect("spawn")
    };
    let kms = handle.client();
    let on_pool_handle = {
        let _guard = rt.enter();
        KmsActor::spawn(
            KmsConfig::default()
                .with_token_cache(0)
                .with_threads(2)
                .with_sign_on_caller_when_idle(false),
            Keystore::new(),
            &Bus::new(),
        )
        .expect("spawn")
    };
    let on_pool = on_pool_handle.client();
    let on_pool_key = rt
        .block_on(on_pool.create_key_of("bench", "tokens", Alg::MlDsa65))
        .expect("create");
    let key = rt
        .block_on(kms.create_key_of("bench", "tokens", Alg::MlDsa65))
        .expect("create");
    let claims = json!({"sub": "alice", "iss": "bench", "exp": now() + 24 * 3600});
    // Each actor signs where its bench says: the default one on the
    // caller's task (its pool idle), the other on its pool.
    rt.block_on(kms.sign_jwt(&key, &claims)).expect("sign");
    rt.block_on(on_pool.sign_jwt(&on_pool_key, &claims))
        .expect("sign");
    assert!(
        handle.stats().caller_signed == 1 && on_pool_handle.stats().caller_signed == 0,
        "actor_sign_jwt signs on the caller's task, actor_sign_jwt_on_pool on the pool"
    );
    // The direct side's key: the same parameter set, from a seed of its own
    // (the keystore's seed never leaves it).
    let direct = PqdsaKeyPair::from_seed(&ML_DSA_65_SIGNING, &[7; 32]).expect("key");
    let direct_public =
        ParsedPublicKey::new(&ML_DSA_65, direct.public_key().as_ref()).expect("public key");
    let kid = key.to_string();

    let keystore = Keystore::new();
    let local = keystore
        .create_key("bench", "tokens", Alg::MlDsa65)
        .expect("create");
    let mut sign = c.benchmark_group("ml_dsa_65/sign");
    sign.bench_function("keystore_sign_message", |b| {
        b.iter(|| keystore.sign_message(&local, b"bench input").expect("sign"))
    });
    sign.bench_function("aws_lc_rs_raw", |b| {
        b.iter(|| {
            let mut out = vec![0; ML_DSA_65_SIGNING.signature_len()];
            direct.sign(b"bench input", &mut out).expect("sign")
        })
    });
    sign.bench_function("actor_sign_jwt", |b| {
        b.iter(|| rt.block_on(kms.sign_jwt(&key, &claims)).expect("sign"))
    });
    sign.bench_function("actor_sign_jwt_on_pool", |b| {
        b.iter(|| {
            rt.block_on(on_pool.sign_jwt(&on_pool_key, &claims))
                .expect("sign")
        })
    });
    sign.bench_function("actor_sign_jwt_from_a_task", |b| {
        b.iter_custom(|iters| {
            from_a_task(&rt, iters, || async {
                kms.sign_jwt(&key, &claims).await.expect("sign");
            })
        })
    });
    sign.bench_function("aws_lc_rs", |b| {
        b.iter(|| sign_direct(&direct, &kid, &claims))
    });
    sign.finish();

    let ours = rt.block_on(kms.sign_jwt(&key, &claims)).expect("sign");
    let theirs = sign_direct(&direct, &kid, &claims);
    let (keys, validation) = (
        TokenKeys::keystore("bench", "tokens"),
        Validation::default(),
    );
    let mut verify = c.benchmark_group("ml_dsa_65/verify");
    verify.bench_function("actor_verify_jwt", |b| {
        b.iter(|| {
            rt.block_on(kms.verify_jwt(&ours, &keys, &validation))
                .expect("verifies")
        })
    });
    verify.bench_function("actor_verify_jwt_from_a_task", |b| {
        b.iter_custom(|iters| {
            from_a_task(&rt, iters, || async {
                kms.verify_jwt(&ours, &keys, &validation)
                    .await
                    .expect("verifies");
            })
        })
    });
    verify.bench_function("aws_lc_rs", |b| {
        b.iter(|| verify_direct(&direct_public, &theirs).expect("verifies"))
    });
    verify.finish();

    let concurrency_on = std::env::var("ML_DSA_CONCURRENCY").map_or(true, |v| v != "0");
    if concurrency_on && std::env::args().any(|a| a == "--bench") && !cfg!(debug_assertions) {
        for clients in [1, 4, 16, 64] {
            concurrency(&rt, &kms, &key, &claims, &direct, &kid, clients);
        }
    }
    rt.block_on(handle.shutdown());
    rt.block_on(on_pool_handle.shutdown());
    c.final_summary();
}

/// The time `iters` calls of `one` take one after another inside one
/// `block_on` on `rt` (a caller on the runtime, not a thread outside it).
fn from_a_task<F: std::future::Future<Output = ()>>(
    rt: &tokio::runtime::Runtime,
    iters: u64,
    one: impl Fn() -> F,
) -> std::time::Duration {
    rt.block_on(async {
        let started = std::time::Instant::now();
        for _ in 0..iters {
            one().await;
        }
        started.elapsed()
    })
}

/// Tokens a second: `clients` tasks each signing one token at a time
/// through the actor (on a client's task while its 2-thread pool is idle,
/// else on the pool), beside `min(clients, 2)` threads
/// each signing directly with aws-lc-rs; five rounds of each, alternated.
fn concurrency(
    rt: &tokio::runtime::Runtime,
    kms: &kms::actor::KmsClient,
    key: &kms::core::KeyId,
    claims: &Value,
    direct: &PqdsaKeyPair,
    kid: &str,
    clients: usize,
) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Instant;
    const TOKENS: usize = 2000;
    let actor_round = || {
        let next = Arc::new(AtomicUsize::new(0));
        let started = Instant::now();
        rt.block_on(async {
            let tasks: Vec<_> = (0..clients)
                .map(|_| {
                    let (kms, key, claims, next) =
                        (kms.clone(), key.clone(), claims.clone(), Arc::clone(&next));
                    tokio::spawn(async move {
                        while next.fetch_add(1, Ordering::Relaxed) < TOKENS {
                            kms.sign_jwt(&key, &claims).await.expect("sign");
                        }
                    })
                })
                .collect();
            for task in tasks {
                task.await.expect("client");
            }
        });
        TOKENS as f64 / started.elapsed().as_secs_f64()
    };
    let direct_round = || {
        let next = AtomicUsize::new(0);
        let started = Instant::now();
        std::thread::scope(|scope| {
            for _ in 0..clients.min(2) {
                scope.spawn(|| {
                    while next.fetch_add(1, Ordering::Relaxed) < TOKENS {
                        sign_direct(direct, kid, claims);
                    }
                });
            }
        });
        TOKENS as f64 / started.elapsed().as_secs_f64()
    };
    let mut ratios = Vec::new();
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let (a, d) = (actor_round(), direct_round());
        ours.push(a);
        theirs.push(d);
        ratios.push(a / d);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (lo, hi) = (
        ratios.iter().copied().fold(f64::MAX, f64::min),
        ratios.iter().copied().fold(0.0, f64::max),
    );
    println!(
        "ml_dsa_65/sign_concurrency clients={clients}: actor {:.0} tokens/s, aws-lc-rs on {} thread(s) {:.0}/s; actor/direct {:.3} ({lo:.3}-{hi:.3})",
        median(&mut ours),
        clients.min(2),
        median(&mut theirs),
        median(&mut ratios),
    );
}
