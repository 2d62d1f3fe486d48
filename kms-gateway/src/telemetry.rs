//! The gateway's metrics endpoint: Prometheus text at `http://<addr>/metrics`
//! through `metrics-exporter-prometheus`, with the histogram buckets the
//! library recommends (µs-scale latency, batch sizes 1–1024). The test
//! below scrapes it for every name of docs/DESIGN.md §7.

use std::net::SocketAddr;

use kms::actor::metrics::{
    describe, BATCH_SIZE, BATCH_SIZE_BUCKETS, BATCH_WAIT_SECONDS, LATENCY_BUCKETS_SECONDS,
    OP_DURATION_SECONDS,
};
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};

/// `kms_claim_headers_omitted_total{claim}` (counter): claim headers left
/// out because the claim's string value holds non-ASCII text.
pub(crate) const CLAIM_HEADERS_OMITTED_TOTAL: &str = "kms_claim_headers_omitted_total";

/// `kms_connections_refused_total{face,reason}` (counter): connections
/// closed right after `accept` (`reason="per_ip"`: over
/// `--max-connections-per-ip`).
pub(crate) const CONNECTIONS_REFUSED_TOTAL: &str = "kms_connections_refused_total";

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
pub fn install_handle() -> Result<PrometheusHandle, String> {
    let handle = with_buckets(PrometheusBuilder::new())
        .and_then(|b| b.install_recorder())
        .map_err(|e| format!("metrics recorder: {e}"))?;
    describe();
    Ok(handle)
}

/// `GET /metrics` alone, rendering `handle` (`--metrics-listen`: for
/// Prometheus, without the admin secret); any other path is a JSON 404.
/// A request whose `Host` is not an IP literal (any address, any port:
/// Prometheus scrapes pods by IP), `localhost:PORT` with the face's
/// `port`, or one of `names` (`--admin-host`, bare or with the port) is
/// 403 `metrics.forbidden_host`: a web page that rebinds its own name to
/// this address cannot read the metrics. (`serve` puts it under
/// `listener::guarded`, as every face.)
pub fn router(handle: PrometheusHandle, port: u16, names: &[String]) -> axum::Router {
    use axum::http::{header, StatusCode};
    let metrics = axum::routing::get(move || {
        let text = handle.render();
        async move { ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text) }
    });
    let names: std::sync::Arc<[String]> = names.iter().map(|n| n.to_ascii_lowercase()).collect();
    axum::Router::new()
        .route("/metrics", metrics)
        .fallback(|| async {
            kms::http::error_response(StatusCode::NOT_FOUND, "http.not_found", "no such route")
        })
        .layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let allowed = request
                    .headers()
                    .get(header::HOST)
                    .and_then(|host| host.to_str().ok())
                    .is_some_and(|host| host_allowed(host, port, &names));
                async move {
                    if allowed {
                        next.run(request).await
                    } else {
                        kms::http::error_response(
                            StatusCode::FORBIDDEN,
                            "metrics.forbidden_host",
                            "this face answers only an IP address, localhost or an --admin-host name as Host",
                        )
                    }
                }
            },
        ))
}

/// Whether `host` (a `Host` value) names the metrics face (see
/// [`router`]).
fn host_allowed(host: &str, port: u16, names: &[String]) -> bool {
    let host = host.to_ascii_lowercase();
    if host.parse::<SocketAddr>().is_ok() || host.parse::<std::net::Ipv4Addr>().is_ok() {
        return true;
    }
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return inner.parse::<std::net::Ipv6Addr>().is_ok();
    }
    let (name, given_port) = match host.rsplit_once(':') {
        Some((name, p)) => (name, Some(p)),
        None => (host.as_str(), None),
    };
    let port_ok = given_port.is_none_or(|p| p.parse::<u16>() == Ok(port));
    let named = names.iter().any(|n| n == name) || (name == "localhost" && given_port.is_some());
    named && port_ok
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

/// The endpoint serves every name of docs/DESIGN.md §7: the exporter on a
/// free local port, an actor driven through each kind of outcome, `/metrics`
/// scraped over plain HTTP/1.1.
#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::time::Duration;

    use super::*;
    use kms::actor::{KmsActor, KmsConfig};
    use kms::bus::Bus;
    use kms::core::{Keystore, KmsError};

    /// A local address nothing listens on now.
    fn free_addr() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
        listener.local_addr().expect("local addr")
    }

    fn scrape(addr: SocketAddr) -> String {
        let mut stream = TcpStream::connect(addr).expect("connect to the exporter");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        write!(
            stream,
            "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        )
        .expect("send");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("read");
        assert!(
            response.starts_with("HTTP/1.1 200"),
            "unexpected response: {}",
            response.lines().next().unwrap_or("")
        );
        response
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_endpoint_serves_every_design_metric() {
        let default = crate::config::METRICS_ADDR;
        assert!(default.ip().is_loopback() && default.port() == 9600);
        let addr = free_addr();
        install(addr).expect("install the exporter");
        let handle = KmsActor::spawn(
            KmsConfig::default().with_threads(1),
            Keystore::new(),
            &Bus::new(),
        )
        .expect("spawn");
        let kms = handle.client();
        let key = kms.create_key("acme", "tokens").await.expect("create");
        let (signer, signature) = kms.sign(&key, &b"m"[..]).await.expect("sign");
        kms.rotate(&key).await.expect("rotate");
        kms.attest(&key).await.expect("attest");
        // A batch with one forgery among many valid signatures is bisected.
        let mut forged = signature;
        forged[0] ^= 1;
        let verdicts = futures::future::join_all((0..200).map(|i| {
            let s = if i == 100 { forged } else { signature };
            kms.verify(&signer, &b"m"[..], s)
        }))
        .await;
        assert_eq!(verdicts.iter().filter(|v| v.is_err()).count(), 1);
        assert!(matches!(
            kms.verify(&signer, &b"m"[..], forged).await,
            Err(KmsError::InvalidSignature(_))
        ));

        let text = tokio::task::spawn_blocking(move || scrape(addr))
            .await
            .expect("scrape");
        for name in [
            "kms_ops_total{topic=\"kms.requests\",op=\"verify\",outcome=\"ok\"}",
            "kms_ops_total{topic=\"kms.requests\",op=\"verify\",outcome=\"invalid_signature\"}",
            "kms_ops_total{topic=\"kms.requests\",op=\"sign\",outcome=\"ok\"}",
            "kms_ops_total{topic=\"kms.requests\",op=\"rotate\",outcome=\"ok\"}",
            "kms_op_duration_seconds_bucket{topic=\"kms.requests\",op=\"verify\",le=\"0.00001\"}",
            "kms_batch_size_bucket{topic=\"kms.requests\",le=\"1024\"}",
            "kms_batch_wait_seconds_bucket{topic=\"kms.requests\",",
            "kms_batches_in_flight{topic=\"kms.requests\"}",
            "kms_bisections_total",
            "kms_weighted_searches_total{outcome=\"one\"}",
            "kms_bus_published_total{topic=\"kms.requests\"}",
            "kms_bus_lagged_total{topic=\"kms.requests\"}",
            "kms_bus_rejected_total{topic=\"kms.requests\"}",
            "# HELP kms_ops_total",
            "# HELP kms_build_info",
        ] {
            assert!(
                text.contains(name),
                "{name} missing from the scrape:\n{text}"
            );
        }
        let build_info = format!(
            "kms_build_info{{version=\"{}\",curve_backend=\"{}\",missed_curve_backend=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION"),
            handle.curve_backend(),
            kms::core::ed25519::missed_curve_backend().map_or("none", |b| b.name())
        );
        assert!(text.contains(&build_info), "{build_info} missing:\n{text}");
        // `outcome` values have no dots (they are codes without `kms.`).
        let outcomes: Vec<&str> = text
            .lines()
            .filter_map(|l| l.split("outcome=\"").nth(1)?.split('"').next())
            .collect();
        assert!(outcomes.contains(&"invalid_signature"), "{outcomes:?}");
        assert!(outcomes.iter().all(|o| !o.contains('.')), "{outcomes:?}");
        handle.shutdown().await;
    }
}
