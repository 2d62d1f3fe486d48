//! The main job (`kms-gateway` with no command): the vector phase and the
//! token phase (`workload.rs`) through the KMS actor from `--clients`
//! tasks, with a live line and a report (`report.rs`), then the HTTP phase
//! (`http_phase.rs`) against the public face `serve` serves.

mod http_phase;
mod report;
mod vectors;
mod workload;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use kms::actor::{KmsActor, KmsClient, KmsConfig};
use kms::bus::Bus;
use kms::core::{Keystore, KmsError};

use crate::config::JobConfig;
use crate::telemetry;
use report::{latency_histogram, live_line, print_latency_and_batches, print_result};
use workload::{token_jobs, vector_jobs, Job, Target, TOKEN_POOL};

/// What each client records; the reporter reads and resets `window`.
struct Tally {
    window: Histogram<u64>,
    all: Histogram<u64>,
    matched: usize,
    mismatches: Vec<String>,
    retries: usize,
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

/// Runs the main job, then its HTTP phase; `Ok(false)` if any verdict or
/// status differed.
pub(crate) async fn run(options: &JobConfig) -> Result<bool, String> {
    let verdicts = through_actor(options).await?;
    let statuses = http_phase::run(options).await?;
    Ok(verdicts && statuses)
}

/// The vector and token phases; `Ok(false)` if any verdict differed.
async fn through_actor(options: &JobConfig) -> Result<bool, String> {
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

fn word(valid: bool) -> &'static str {
    if valid {
        "valid"
    } else {
        "invalid"
    }
}
