//! The bearer layer counts the requests it refuses before a token reaches
//! the KMS (no credentials, two `Authorization` headers) in
//! `kms_token_refusals_total`, beside `verify_jwt`'s own codes. Its own
//! test binary: it installs a global metrics recorder.

use std::collections::HashMap;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::routing::get;
use axum::Router;
use kms_actor::{KmsActor, KmsConfig, TokenKeys};
use kms_bus::Bus;
use kms_core::Keystore;
use kms_http::BearerLayer;
use kms_jose::Validation;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use tower::ServiceExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_before_the_kms_are_counted_too() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder in this binary");
    let handle = KmsActor::spawn(
        KmsConfig::default().with_request_topic("bearer".to_owned()),
        Keystore::new(),
        &Bus::new(),
    )
    .expect("spawn");
    let router = Router::new()
        .route("/", get(|| async {}))
        .layer(BearerLayer::new(
            handle.client(),
            TokenKeys::trusted_only(),
            Validation::default(),
        ));
    for (headers, status) in [
        (vec![], StatusCode::UNAUTHORIZED),
        (vec!["Basic YTpi"], StatusCode::UNAUTHORIZED),
        (vec!["Bearer a", "Bearer b"], StatusCode::BAD_REQUEST),
        (vec!["Bearer not.a.token"], StatusCode::UNAUTHORIZED),
    ] {
        let mut request = Request::get("/");
        for value in &headers {
            request = request.header(header::AUTHORIZATION, *value);
        }
        let response = router
            .clone()
            .oneshot(request.body(Body::empty()).expect("request"))
            .await
            .expect("infallible");
        assert_eq!(response.status(), status, "{headers:?}");
    }
    handle.shutdown().await;
    let counts: HashMap<String, u64> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| {
            let key = key.key();
            if key.name() != kms_actor::metrics::TOKEN_REFUSALS_TOTAL {
                return None;
            }
            let code = key.labels().find(|l| l.key() == "code")?.value().to_owned();
            match value {
                DebugValue::Counter(n) => Some((code, n)),
                _ => None,
            }
        })
        .collect();
    assert_eq!(counts.get("http.no_credentials"), Some(&2), "{counts:?}");
    assert_eq!(counts.get("http.invalid_request"), Some(&1), "{counts:?}");
    assert_eq!(
        counts.get("jose.base64").or(counts.get("jose.malformed")),
        Some(&1),
        "{counts:?}"
    );
}
