//! The gateway's metrics endpoint serves every name of docs/DESIGN.md §7: this test
//! installs the gateway's own exporter set-up (`examples/gateway/
//! telemetry.rs`) on a free local port, drives an actor through each kind
//! of outcome, and scrapes `/metrics` over plain HTTP/1.1.

#[path = "../examples/gateway/telemetry.rs"]
mod telemetry;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

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
    let default: SocketAddr = telemetry::DEFAULT_METRICS_ADDR
        .parse()
        .expect("the gateway's default address parses");
    assert!(default.ip().is_loopback() && default.port() == 9600);
    let addr = free_addr();
    telemetry::install(addr).expect("install the exporter");
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
