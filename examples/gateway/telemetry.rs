//! The gateway's metrics endpoint: Prometheus text at `http://<addr>/metrics`
//! through `metrics-exporter-prometheus`, with the histogram buckets the
//! library recommends (µs-scale latency, batch sizes 1–1024). Shared with
//! `tests/metrics_endpoint.rs`, which scrapes it.

use std::net::SocketAddr;

use kms::actor::metrics::{
    describe, BATCH_SIZE, BATCH_SIZE_BUCKETS, BATCH_WAIT_SECONDS, LATENCY_BUCKETS_SECONDS,
    OP_DURATION_SECONDS,
};
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};

/// Where the gateway serves its metrics unless told otherwise.
pub const DEFAULT_METRICS_ADDR: &str = "127.0.0.1:9600";

/// Installs the Prometheus exporter as the global `metrics` recorder,
/// listening on `addr` (call inside a tokio runtime, before spawning the
/// actor, which takes its metric handles at spawn).
///
/// # Errors
/// The exporter's error, as text, if the address cannot be bound or a
/// recorder is already installed.
pub fn install(addr: SocketAddr) -> Result<(), String> {
    with_buckets(PrometheusBuilder::new().with_http_listener(addr))
        .and_then(|b| b.install())
        .map_err(|e| format!("metrics endpoint on {addr}: {e}"))?;
    describe();
    Ok(())
}

/// Installs the Prometheus recorder with no listener of its own, for a
/// server that renders it on a route (`gateway serve`'s admin face).
///
/// # Errors
/// The exporter's error, as text, if a recorder is already installed.
#[cfg_attr(test, allow(dead_code))]
pub fn install_handle() -> Result<PrometheusHandle, String> {
    let handle = with_buckets(PrometheusBuilder::new())
        .and_then(|b| b.install_recorder())
        .map_err(|e| format!("metrics recorder: {e}"))?;
    describe();
    Ok(handle)
}

/// The library's recommended histogram buckets.
fn with_buckets(builder: PrometheusBuilder) -> Result<PrometheusBuilder, BuildError> {
    let latency = |name: &str| Matcher::Full(name.to_owned());
    builder
        .set_buckets_for_metric(latency(OP_DURATION_SECONDS), LATENCY_BUCKETS_SECONDS)
        .and_then(|b| {
            b.set_buckets_for_metric(latency(BATCH_WAIT_SECONDS), LATENCY_BUCKETS_SECONDS)
        })
        .and_then(|b| {
            b.set_buckets_for_metric(Matcher::Full(BATCH_SIZE.to_owned()), BATCH_SIZE_BUCKETS)
        })
}
