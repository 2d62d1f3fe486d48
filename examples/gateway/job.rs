//! The main job (`gateway` with no command): the vector phase and the
//! token phase through the KMS actor, with a live line and a report.

use crate::telemetry;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use kms::actor::{KmsActor, KmsClient, KmsConfig, KmsStats};
use kms::bus::Bus;
use kms::core::{KeyId, Keystore, KmsError};
use kms_vectors::{load_all_testdata, ExpectedVerdicts};

/// Distinct tokens signed up front and verified round-robin for the run.
const TOKEN_POOL: usize = 32_768;

/// The main job's flags (parsed by `main.rs`).
pub(crate) struct Options {
    pub(crate) clients: usize,
    pub(crate) duration: Duration,
    pub(crate) invalid_share: f64,
    pub(crate) keys: usize,
    pub(crate) metrics_addr: std::net::SocketAddr,
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

/// What each client records; the reporter reads and resets `window`.
struct Tally {
    window: Histogram<u64>,
    all: Histogram<u64>,
    matched: usize,
    mismatches: Vec<String>,
    retries: usize,
}

/// A latency histogram in µs: 1 µs to 60 s, 3 significant digits.
pub(crate) fn latency_histogram() -> Result<Histogram<u64>, String> {
    Histogram::new_with_bounds(1, 60_000_000, 3).map_err(|e| e.to_string())
}

/// The report lines both phases print: latency and the actor's batching.
pub(crate) fn print_latency_and_batches(latency: &Histogram<u64>, stats: &KmsStats) {
    println!(
        "  latency             p50 {} µs, p99 {} µs",
        latency.value_at_quantile(0.50),
        latency.value_at_quantile(0.99)
    );
    println!(
        "  batches             {} , mean batch size {:.1}; {} verified on their caller's task (quiet node)",
        stats.batches,
        stats.mean_batch_size(),
        stats.caller_verified
    );
}

/// The last report line.
pub(crate) fn print_result(pass: bool) {
    println!(
        "  result              {}",
        if pass { "PASS" } else { "FAIL" }
    );
}

impl Tally {
    fn new() -> Result<Self, String> {
        Ok(Tally {
            window: latency_histogram()?,
            all: latency_histogram()?,
            matched: 0,
            mismatches: Vec::new(),
            retries: 0,
        })
    }
}

/// Runs the main job; `Ok(false)` if any verdict differed.
pub(crate) async fn run(options: &Options) -> Result<bool, String> {
    // Before the actor: it takes its metric handles at spawn.
    match telemetry::install(options.metrics_addr) {
        Ok(()) => eprintln!(
            "gateway: metrics at http://{}/metrics",
            options.metrics_addr
        ),
        // The job still runs; only the endpoint is missing.
        Err(e) => eprintln!("gateway: warning: {e}; running without a metrics endpoint"),
    }
    let keystore = Keystore::new();
    let bus = Bus::new();
    let config = KmsConfig::default();
    let threads = config.threads;
    let handle = KmsActor::spawn(config, keystore.clone(), &bus).map_err(|e| e.to_string())?;
    let kms = handle.client();

    eprintln!(
        "gateway: preparing vectors and {TOKEN_POOL} tokens under {} keys...",
        options.keys
    );
    let vectors = Arc::new(vector_jobs()?);
    let tokens = Arc::new(token_jobs(&kms, &keystore, options).await?);

    let next = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let tallies: Vec<Arc<Mutex<Tally>>> = (0..options.clients)
        .map(|_| Tally::new().map(|t| Arc::new(Mutex::new(t))))
        .collect::<Result<_, _>>()?;
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(options.clients);
    for tally in &tallies {
        let (kms, vectors, tokens, next, stop, tally) = (
            kms.clone(),
            Arc::clone(&vectors),
            Arc::clone(&tokens),
            Arc::clone(&next),
            Arc::clone(&stop),
            Arc::clone(tally),
        );
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                // Every vector once, then tokens until told to stop.
                let job = match vectors.get(i) {
                    Some(job) => job,
                    None if stop.load(Ordering::Relaxed) => break,
                    None => &tokens[(i - vectors.len()) % tokens.len()],
                };
                let sent = Instant::now();
                let (verdict, retries) = verify(&kms, job).await;
                let micros = u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX);
                let mut t = tally.lock().unwrap_or_else(PoisonError::into_inner);
                t.retries += retries;
                t.window.saturating_record(micros);
                t.all.saturating_record(micros);
                match verdict {
                    Ok(valid) if valid == job.expect_valid => t.matched += 1,
                    Ok(valid) => t.mismatches.push(format!(
                        "{}: got {}, expected {}",
                        job.label,
                        word(valid),
                        word(job.expect_valid)
                    )),
                    Err(e) => t.mismatches.push(format!("{}: error {e}", job.label)),
                }
            }
        }));
    }

    // The live line, every half second, until the duration is up and
    // every vector has been sent.
    let progress = ProgressBar::new_spinner();
    progress.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
            .map_err(|e| e.to_string())?,
    );
    let mut window = latency_histogram()?;
    let (mut last_stats, mut last_tick) = (handle.stats(), Instant::now());
    while started.elapsed() < options.duration || next.load(Ordering::Relaxed) < vectors.len() {
        tokio::time::sleep(Duration::from_millis(500)).await;
        for tally in &tallies {
            let mut t = tally.lock().unwrap_or_else(PoisonError::into_inner);
            window.add(&t.window).map_err(|e| e.to_string())?;
            t.window.reset();
        }
        let stats = handle.stats();
        progress.set_message(live_line(
            &window,
            &stats.since(&last_stats),
            last_tick.elapsed(),
        ));
        progress.tick();
        window.reset();
        (last_stats, last_tick) = (stats, Instant::now());
    }
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.map_err(|e| format!("client task failed: {e}"))?;
    }
    let elapsed = started.elapsed();
    progress.finish_and_clear();
    let stats = handle.stats();
    handle.shutdown().await;

    let mut total = Tally::new()?;
    for tally in &tallies {
        let mut t = tally.lock().unwrap_or_else(PoisonError::into_inner);
        total.all.add(&t.all).map_err(|e| e.to_string())?;
        total.matched += t.matched;
        total.retries += t.retries;
        total.mismatches.append(&mut t.mismatches);
    }
    let requests = usize::try_from(total.all.len()).unwrap_or(usize::MAX);
    let all_match = total.mismatches.is_empty() && total.matched == requests;
    println!("gateway report");
    println!(
        "  requests            {requests} ({} test vectors, {} tokens under {} keys, {:.1} % forged)",
        vectors.len(),
        requests.saturating_sub(vectors.len()),
        options.keys,
        options.invalid_share * 100.0
    );
    println!(
        "  verdicts            {} as expected, {} differ",
        total.matched,
        total.mismatches.len()
    );
    println!(
        "  throughput          {:.0} verifies/s ({} clients, {threads} pool threads, {:.2} s)",
        requests as f64 / elapsed.as_secs_f64(),
        options.clients,
        elapsed.as_secs_f64()
    );
    println!(
        "  curve backend       {} (curve25519-dalek)",
        kms::core::ed25519::curve_backend()
    );
    print_latency_and_batches(&total.all, &stats);
    println!(
        "  retries             {} (overloaded or dropped, retried)",
        total.retries
    );
    for m in total.mismatches.iter().take(20) {
        println!("  MISMATCH {m}");
    }
    print_result(all_match);
    Ok(all_match)
}

/// Throughput, p99 and mean batch size since the last tick.
fn live_line(latency: &Histogram<u64>, window: &KmsStats, took: Duration) -> String {
    format!(
        "{:>7.0} verifies/s  p99 {:>6} µs  mean batch {:>5.1}",
        latency.len() as f64 / took.as_secs_f64().max(1e-9),
        latency.value_at_quantile(0.99),
        window.mean_batch_size()
    )
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

/// Creates `options.keys` keys through the actor, signs [`TOKEN_POOL`]
/// tokens with the keystore on all cores, then rotates every second key
/// (the `passports` keys) through the actor, so their tokens verify under a
/// version that is no longer the head. A share `options.invalid_share` is
/// forged (one flipped bit in the signature or the claims).
async fn token_jobs(
    kms: &KmsClient,
    keystore: &Keystore,
    options: &Options,
) -> Result<Vec<Job>, String> {
    let mut keys = Vec::with_capacity(options.keys);
    for i in 0..options.keys {
        let tenant = format!("tenant-{}", i / 2);
        let purpose = if i % 2 == 0 { "tokens" } else { "passports" };
        keys.push(
            kms.create_key(&tenant, purpose)
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    let keystore = keystore.clone();
    // Forged when a hash of the index falls below this, out of 1 000 000.
    let forged_per_million = (options.invalid_share * 1_000_000.0).round() as usize;
    let count = TOKEN_POOL;
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
                            .map(|i| token(keystore, keys, i, forged_per_million))
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
    forged_per_million: usize,
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
    let forged = (i.wrapping_mul(2_654_435_761) >> 7) % 1_000_000 < forged_per_million;
    if forged {
        if i.is_multiple_of(2) {
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

fn word(valid: bool) -> &'static str {
    if valid {
        "valid"
    } else {
        "invalid"
    }
}
