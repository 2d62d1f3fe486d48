//! The bearer layer (kms-http) as a server runs it: the fuzzer's bytes as
//! the `Authorization` header of a request to a route behind the layer,
//! verified through a running KMS actor. Never panics; answers 200 only
//! for a token under the trusted key (RFC 8032 §7.1 TEST 1's public key,
//! kid `test-1`: the seeds hold tokens it signed), else 400 or 401 with a
//! JSON body, and never anything of the token in a refusal.
#![no_main]

use std::sync::OnceLock;

use axum::body::{to_bytes, Body};
use axum::http::{header, HeaderValue, Request, StatusCode};
use axum::routing::get;
use axum::Router;
use kms_actor::{KmsActor, KmsConfig, KmsHandle, TokenKeys};
use kms_bus::Bus;
use kms_core::Keystore;
use kms_http::BearerLayer;
use kms_jose::{TrustedJwkSet, Validation};
use libfuzzer_sys::fuzz_target;
use tower::ServiceExt;

/// RFC 8032 §7.1 TEST 1's public key, base64url.
const TEST_1_X: &str = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo";

struct Harness {
    runtime: tokio::runtime::Runtime,
    router: Router,
    _handle: KmsHandle,
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let set = TrustedJwkSet::from_json(
            format!(
                r#"{{"keys":[{{"kty":"OKP","crv":"Ed25519","x":"{TEST_1_X}","kid":"test-1"}}]}}"#
            )
            .as_bytes(),
        )
        .expect("the trusted set");
        let handle = runtime.block_on(async {
            KmsActor::spawn(
                KmsConfig::default()
                    .with_threads(1)
                    .with_trusted_jwks(vec![set]),
                Keystore::new(),
                &Bus::new(),
            )
            .expect("spawn")
        });
        let router = Router::new()
            .route("/whoami", get(|| async { "ok" }))
            .layer(BearerLayer::new(
                handle.client(),
                TokenKeys::trusted_only(),
                Validation::default(),
            ));
        Harness {
            runtime,
            router,
            _handle: handle,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    // One header, or two when the input has a newline (the layer refuses
    // two); values a client could not send are not requests.
    let values: Vec<&[u8]> = data.splitn(2, |b| *b == b'\n').collect();
    let mut request = Request::get("/whoami");
    for value in &values {
        let Ok(value) = HeaderValue::from_bytes(value) else {
            return;
        };
        request = request.header(header::AUTHORIZATION, value);
    }
    let request = request.body(Body::empty()).expect("request");
    let harness = harness();
    let (status, body) = harness.runtime.block_on(async {
        let response = harness
            .router
            .clone()
            .oneshot(request)
            .await
            .expect("infallible");
        let status = response.status();
        let body = to_bytes(response.into_body(), 1 << 16).await.expect("body");
        (status, body)
    });
    match status {
        StatusCode::OK => assert_eq!(&body[..], b"ok"),
        StatusCode::BAD_REQUEST | StatusCode::UNAUTHORIZED => {
            let answer: serde_json::Value =
                serde_json::from_slice(&body).expect("a JSON refusal");
            assert!(answer["error"].is_string());
            if status == StatusCode::UNAUTHORIZED && answer["error"] == "invalid_token" {
                assert_eq!(answer["message"], "invalid token");
            }
        }
        other => panic!("unexpected status {other}"),
    }
});
