//! The main job: a gateway that verifies real signatures through the KMS
//! actor over the bus, and reports whether every verdict was the expected one.
//!
//! ```text
//! cargo run --release --example gateway [-- --tokens N] [--ingress N] [--forged-per-mille N]
//! ```
//!
//! It starts a bus and a KMS actor over an in-memory keystore, creates
//! signing keys, then runs concurrent ingress tasks that verify through the
//! actor
//! * every vector in `testdata/` (sign.input, Wycheproof, RFC 8032,
//!   speccheck, CCTV, ZIP-215) with the verdict `expected_verdicts.tsv`
//!   requires, by raw public key, and
//! * generated tokens signed by the keystore and verified by key id (half
//!   of them under a key rotated after signing, so by a version that is no
//!   longer the head), with a share of forged ones that must be rejected.
//!
//! It ends with a report (requests, verdicts against expectation,
//! throughput, latency p50/p99, mean batch size) and exits 1 if any verdict
//! differs from its expectation. Defaults: 200 000 tokens, 256 ingress
//! tasks, 5 % forged.

use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;

use indicatif::{ProgressBar, ProgressState, ProgressStyle};
use kms::actor::{KmsActor, KmsClient, KmsConfig};
use kms::bus::Bus;
use kms::core::{KeyId, Keystore, KmsError};
use kms_vectors::{load_all_testdata, ExpectedVerdicts};

struct Options {
    tokens: usize,
    ingress: usize,
    forged_per_mille: usize,
}

/// What one request asks and what its verdict must be.
struct Job {
    label: String,
    target: Target,
    message: Bytes,
    signature: [u8; 64],
    expect_valid: bool,
}

enum Target {
    PublicKey([u8; 32]),
    Key(KeyId),
}

/// What the ingress tasks record.
#[derive(Default)]
struct Tally {
    latencies_us: Vec<u32>,
    matched: usize,
    mismatches: Vec<String>,
    retries: usize,
}

fn parse_options() -> Result<Options, String> {
    let mut o = Options {
        tokens: 200_000,
        ingress: 256,
        forged_per_mille: 50,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .ok_or_else(|| format!("{flag} needs a value"))?
            .parse::<usize>()
            .map_err(|e| format!("{flag}: {e}"))?;
        match flag.as_str() {
            "--tokens" => o.tokens = value,
            "--ingress" => o.ingress = value.max(1),
            "--forged-per-mille" => o.forged_per_mille = value.min(1000),
            _ => {
                return Err(format!(
                    "unknown flag {flag}; flags: --tokens N --ingress N --forged-per-mille N"
                ))
            }
        }
    }
    Ok(o)
}

fn main() -> ExitCode {
    let options = match parse_options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start tokio: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(options)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

async fn run(options: Options) -> Result<bool, String> {
    let keystore = Keystore::new();
    let bus = Bus::new();
    let config = KmsConfig::default();
    let threads = config.threads;
    let handle = KmsActor::spawn(config, keystore.clone(), &bus).map_err(|e| e.to_string())?;
    let kms = handle.client();

    eprintln!(
        "gateway: preparing vectors and {} tokens...",
        options.tokens
    );
    let mut jobs = vector_jobs()?;
    let vectors = jobs.len();
    jobs.extend(token_jobs(&kms, &keystore, &options).await?);
    let jobs = Arc::new(jobs);

    let progress = ProgressBar::new(jobs.len() as u64);
    progress.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} verifies ({rate}, eta {eta})",
        )
        .map_err(|e| e.to_string())?
        .with_key(
            "rate",
            |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.0} verifies/s", state.per_sec());
            },
        ),
    );
    let next = Arc::new(AtomicUsize::new(0));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(options.ingress);
    for _ in 0..options.ingress {
        let (kms, jobs, next, tally, progress) = (
            kms.clone(),
            Arc::clone(&jobs),
            Arc::clone(&next),
            Arc::clone(&tally),
            progress.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut local = Tally::default();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                let sent = Instant::now();
                let (verdict, retries) = verify(&kms, job).await;
                local.retries += retries;
                let micros = sent.elapsed().as_micros();
                local
                    .latencies_us
                    .push(u32::try_from(micros).unwrap_or(u32::MAX));
                match verdict {
                    Ok(valid) if valid == job.expect_valid => local.matched += 1,
                    Ok(valid) => local.mismatches.push(format!(
                        "{}: got {}, expected {}",
                        job.label,
                        word(valid),
                        word(job.expect_valid)
                    )),
                    Err(e) => local.mismatches.push(format!("{}: error {e}", job.label)),
                }
                progress.inc(1);
            }
            let mut all = tally.lock().unwrap_or_else(|e| e.into_inner());
            all.latencies_us.append(&mut local.latencies_us);
            all.matched += local.matched;
            all.mismatches.append(&mut local.mismatches);
            all.retries += local.retries;
        }));
    }
    for task in tasks {
        task.await
            .map_err(|e| format!("ingress task failed: {e}"))?;
    }
    let elapsed = started.elapsed();
    progress.finish_and_clear();
    let stats = handle.stats();
    handle.shutdown().await;

    let mut tally = std::mem::take(&mut *tally.lock().unwrap_or_else(|e| e.into_inner()));
    tally.latencies_us.sort_unstable();
    let requests = jobs.len();
    let all_match = tally.mismatches.is_empty() && tally.matched == requests;
    println!("gateway report");
    println!(
        "  requests            {requests} ({vectors} test vectors, {} tokens)",
        requests - vectors
    );
    println!(
        "  verdicts            {} as expected, {} differ",
        tally.matched,
        tally.mismatches.len()
    );
    println!(
        "  throughput          {:.0} verifies/s ({} ingress tasks, {threads} pool threads, {:.2} s)",
        requests as f64 / elapsed.as_secs_f64(),
        options.ingress,
        elapsed.as_secs_f64()
    );
    println!(
        "  curve backend       {} (curve25519-dalek)",
        kms::core::ed25519::curve_backend()
    );
    println!(
        "  latency             p50 {} µs, p99 {} µs",
        percentile(&tally.latencies_us, 50),
        percentile(&tally.latencies_us, 99)
    );
    println!(
        "  batches             {} , mean batch size {:.1}",
        stats.batches,
        stats.mean_batch_size()
    );
    println!(
        "  retries             {} (overloaded or dropped, retried)",
        tally.retries
    );
    for m in tally.mismatches.iter().take(20) {
        println!("  MISMATCH {m}");
    }
    println!(
        "  result              {}",
        if all_match { "PASS" } else { "FAIL" }
    );
    Ok(all_match)
}

/// Verifies one job through the actor, retrying retryable errors; returns
/// the verdict (`Ok(valid)`) or the non-retryable error, and the retry count.
async fn verify(kms: &KmsClient, job: &Job) -> (Result<bool, KmsError>, usize) {
    let mut retries = 0;
    loop {
        let result = match &job.target {
            Target::PublicKey(pk) => {
                kms.verify_with_public_key(*pk, job.message.clone(), job.signature)
                    .await
            }
            Target::Key(key) => kms.verify(key, job.message.clone(), job.signature).await,
        };
        match result {
            Ok(()) => return (Ok(true), retries),
            Err(KmsError::InvalidSignature(_)) => return (Ok(false), retries),
            Err(e) if e.is_retryable() && retries < 1000 => {
                retries += 1;
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
            Err(e) => return (Err(e), retries),
        }
    }
}

/// Every fixed-length vector in `testdata/`, with its required verdict.
/// (Wrong-length cases cannot be expressed through the API, which takes
/// exactly 32 and 64 bytes; all of them are expected invalid.)
fn vector_jobs() -> Result<Vec<Job>, String> {
    let expected = ExpectedVerdicts::load_default().map_err(|e| e.to_string())?;
    let cases = load_all_testdata().map_err(|e| e.to_string())?;
    let mut jobs = Vec::with_capacity(cases.len());
    for case in cases {
        let expect_valid = expected
            .for_case(&case)
            .ok_or_else(|| format!("no expected verdict for {} {}", case.suite, case.id))?;
        let Some((pk, sig)) = case.fixed() else {
            if expect_valid {
                return Err(format!(
                    "{} {} has a wrong length but is expected valid",
                    case.suite, case.id
                ));
            }
            continue;
        };
        jobs.push(Job {
            label: format!("{} {}", case.suite, case.id),
            target: Target::PublicKey(*pk),
            message: Bytes::from(case.message.clone()),
            signature: *sig,
            expect_valid,
        });
    }
    Ok(jobs)
}

/// Creates 8 keys through the actor, signs `options.tokens` tokens with the
/// keystore on all cores, then rotates the `passports` keys through the
/// actor, so half the tokens verify under a version that is no longer the
/// head. A share is forged (one flipped bit in the signature or the claims).
async fn token_jobs(
    kms: &KmsClient,
    keystore: &Keystore,
    options: &Options,
) -> Result<Vec<Job>, String> {
    let mut keys = Vec::new();
    for tenant in ["acme", "globex", "initech", "umbrella"] {
        for purpose in ["tokens", "passports"] {
            keys.push(
                kms.create_key(tenant, purpose)
                    .await
                    .map_err(|e| e.to_string())?,
            );
        }
    }
    let keystore = keystore.clone();
    let (count, forged_per_mille) = (options.tokens, options.forged_per_mille);
    let signer_keys = keys.clone();
    let jobs = tokio::task::spawn_blocking(move || {
        let keys = signer_keys;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let chunk = count.div_ceil(threads).max(1);
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..count)
                .step_by(chunk)
                .map(|start| {
                    let (keystore, keys) = (&keystore, &keys);
                    scope.spawn(move || {
                        (start..(start + chunk).min(count))
                            .map(|i| token(keystore, keys, i, forged_per_mille))
                            .collect::<Result<Vec<Job>, String>>()
                    })
                })
                .collect();
            let mut jobs = Vec::with_capacity(count);
            for w in workers {
                jobs.extend(w.join().map_err(|_| "token signer panicked".to_owned())??);
            }
            Ok::<Vec<Job>, String>(jobs)
        })
    })
    .await
    .map_err(|e| e.to_string())??;
    for key in keys.iter().filter(|k| k.purpose() == "passports") {
        kms.rotate(key).await.map_err(|e| e.to_string())?;
    }
    Ok(jobs)
}

fn token(
    keystore: &Keystore,
    keys: &[KeyId],
    i: usize,
    forged_per_mille: usize,
) -> Result<Job, String> {
    let key = &keys[i % keys.len()];
    let claims = format!(
        r#"{{"sub":"user-{i}","aud":"{}","iat":{},"scope":"read write"}}"#,
        key.purpose(),
        1_700_000_000 + i
    );
    let (signer, mut signature) = keystore
        .sign(key, claims.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut message = claims.into_bytes();
    // Deterministic spread of forgeries: a multiplicative hash of i.
    let forged = (i.wrapping_mul(2_654_435_761) >> 7) % 1000 < forged_per_mille;
    if forged {
        if i % 2 == 0 {
            signature[i % 64] ^= 1 << (i % 8);
        } else {
            let at = i % message.len();
            message[at] ^= 0x01;
        }
    }
    Ok(Job {
        label: format!("token {i} ({signer})"),
        target: Target::Key(signer),
        message: Bytes::from(message),
        signature,
        expect_valid: !forged,
    })
}

fn percentile(sorted: &[u32], p: usize) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) * p) / 100]
}

fn word(valid: bool) -> &'static str {
    if valid {
        "valid"
    } else {
        "invalid"
    }
}
