//! The main job's report: the lines both phases print, and the live line.

use hdrhistogram::Histogram;
use kms::actor::KmsStats;
use std::time::Duration;

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
        "  batches             {} on the pool, mean batch size {:.1}; {} combined on callers' tasks ({} requests); {} verified alone on their caller's task (quiet node)",
        stats.batches,
        stats.mean_batch_size(),
        stats.combined_batches,
        stats.combined_requests,
        stats.caller_verified
    );
    if stats.token_cache_hits + stats.token_cache_misses > 0 {
        println!(
            "  token cache         {} hits, {} misses",
            stats.token_cache_hits, stats.token_cache_misses
        );
    }
}

/// The last report line.
pub(crate) fn print_result(pass: bool) {
    println!(
        "  result              {}",
        if pass { "PASS" } else { "FAIL" }
    );
}

/// Throughput, p99 and mean batch size since the last tick.
pub(crate) fn live_line(latency: &Histogram<u64>, window: &KmsStats, took: Duration) -> String {
    format!(
        "{:>7.0} verifies/s  p99 {:>6} µs  mean batch {:>5.1}",
        latency.len() as f64 / took.as_secs_f64().max(1e-9),
        latency.value_at_quantile(0.99),
        window.mean_batch_size()
    )
}
