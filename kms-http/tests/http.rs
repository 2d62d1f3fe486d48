//! The HTTP faces end to end, in process (`tower::ServiceExt::oneshot`,
//! no sockets): the bearer layer's answers (RFC 6750), the JWKS, the admin
//! router, and concurrent requests coalescing into batches.

use std::sync::Arc;

use axum::body::{to_bytes, Body};
use axum::http::{header, Request, StatusCode};
use axum::routing::get;
use axum::{Extension, Router};
use kms_actor::{KmsActor, KmsConfig, KmsHandle, TokenKeys};
use kms_bus::Bus;
use kms_core::{KeyId, Keystore};
use kms_http::{admin_router, jwks_router, AdminConfig, BearerLayer, VerifiedClaims, JWKS_PATH};
use kms_jose::Validation;
use serde_json::{json, Value};
use tower::ServiceExt;

fn spawn(config: KmsConfig) -> (KmsHandle, KeyId) {
    let ks = Keystore::new();
    let key = ks.create_ed25519("gateway", "tokens").expect("create");
    (
        KmsActor::spawn(config, ks, &Bus::new()).expect("spawn"),
        key,
    )
}

/// The public face: `/whoami` behind the layer, and the JWKS.
fn public(handle: &KmsHandle, key: &KeyId) -> Router {
    let whoami = Router::new()
        .route(
            "/whoami",
            get(
                |Extension(VerifiedClaims(claims)): Extension<VerifiedClaims>| async move {
                    axum::Json(Value::Object(claims.into_map()))
                },
            ),
        )
        .layer(BearerLayer::new(
            handle.client(),
            TokenKeys::of(key),
            Validation::default(),
        ));
    whoami.merge(jwks_router(handle.client(), key.clone()))
}

async fn send(
    router: &Router,
    request: Request<Body>,
) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    let response = router.clone().oneshot(request).await.expect("infallible");
    let (parts, body) = response.into_parts();
    let body = to_bytes(body, 1 << 20).await.expect("body").to_vec();
    (parts.status, parts.headers, body)
}

fn get_with(path: &str, authorization: &[&str]) -> Request<Body> {
    let mut request = Request::get(path);
    for a in authorization {
        request = request.header(header::AUTHORIZATION, *a);
    }
    request.body(Body::empty()).expect("request")
}

fn challenge(headers: &axum::http::HeaderMap) -> String {
    headers
        .get(header::WWW_AUTHENTICATE)
        .map(|v| v.to_str().expect("ascii").to_owned())
        .unwrap_or_default()
}

async fn issue(admin: &Router, claims: Value) -> String {
    let request = Request::post("/tokens")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(claims.to_string()))
        .expect("request");
    let (status, _, body) = send(admin, request).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let body: Value = serde_json::from_slice(&body).expect("json");
    body["token"].as_str().expect("token").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bearer_layer_answers_as_rfc_6750_says() {
    let (handle, key) = spawn(KmsConfig::default());
    let public = public(&handle, &key);
    let admin = admin_router(handle.client(), AdminConfig::new(key.clone()));
    let token = issue(&admin, json!({"sub": "alice"})).await;

    let (status, _, body) = send(&public, get_with("/whoami", &[&format!("bearer {token}")])).await;
    assert_eq!(status, StatusCode::OK);
    let claims: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(claims["sub"], "alice");
    assert!(claims["exp"].as_u64().is_some() && claims["iat"].as_u64().is_some());

    let (status, headers, _) = send(&public, get_with("/whoami", &[])).await;
    assert_eq!(
        (status, challenge(&headers).as_str()),
        (StatusCode::UNAUTHORIZED, "Bearer")
    );
    let (status, headers, _) = send(&public, get_with("/whoami", &["Basic YTpi"])).await;
    assert_eq!(
        (status, challenge(&headers).as_str()),
        (StatusCode::UNAUTHORIZED, "Bearer")
    );
    let (status, headers, _) = send(
        &public,
        get_with(
            "/whoami",
            &[&format!("Bearer {token}"), &format!("Bearer {token}")],
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(challenge(&headers).contains("error=\"invalid_request\""));
    for (bad, reason) in [
        ("Bearer not.a.token".to_owned(), "jose.base64"),
        (format!("Bearer {token}x"), "jose."),
        (
            // Signed through the client: the admin face mints no expired
            // token.
            format!(
                "Bearer {}",
                handle
                    .client()
                    .sign_jwt(&key, &json!({"sub": "a", "exp": 1}))
                    .await
                    .expect("sign")
            ),
            "jose.expired",
        ),
    ] {
        let (status, headers, body) = send(&public, get_with("/whoami", &[&bad])).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{bad}");
        // The same generic answer whatever the reason: nothing from the
        // token, not the reason's code.
        let c = challenge(&headers);
        assert_eq!(
            c,
            "Bearer error=\"invalid_token\", error_description=\"invalid token\""
        );
        let body = String::from_utf8(body).expect("utf-8");
        assert!(!c.contains(reason) && !body.contains(reason), "{c} {body}");
        assert_eq!(
            serde_json::from_str::<Value>(&body).expect("json")["error"],
            "invalid_token"
        );
        assert_eq!(headers[header::CONTENT_TYPE], "application/json");
        assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    }

    // The JWKS: every version, JSON.
    let (status, headers, body) = send(&public, get_with(JWKS_PATH, &[])).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "application/json");
    let jwks: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(jwks["keys"][0]["kid"], key.to_string());

    // Shutting down: 503 with Retry-After, not a 401 for a good token.
    handle.shutdown().await;
    let (status, headers, _) =
        send(&public, get_with("/whoami", &[&format!("Bearer {token}")])).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(headers[header::RETRY_AFTER], "1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_router_issues_rotates_and_answers_errors_in_json() {
    let (handle, key) = spawn(KmsConfig::default());
    let admin = admin_router(handle.client(), AdminConfig::new(key.clone()));
    let public = public(&handle, &key);
    let old = issue(&admin, json!({"sub": "a"})).await;
    let (status, body) = post_json(&admin, "/keys/rotate", json!({})).await;
    assert_eq!(status, StatusCode::OK);
    let new_kid = body["kid"].as_str().expect("kid").to_owned();
    assert_ne!(new_kid, key.to_string());
    let new = issue(&admin, json!({"sub": "b"})).await;
    for token in [&old, &new] {
        let (status, _, _) =
            send(&public, get_with("/whoami", &[&format!("Bearer {token}")])).await;
        assert_eq!(status, StatusCode::OK, "a retained version still verifies");
    }
    let (_, _, body) = send(&public, get_with(JWKS_PATH, &[])).await;
    assert_eq!(
        serde_json::from_slice::<Value>(&body).expect("json")["keys"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );

    for (request, status, code) in [
        (
            Request::post("/tokens")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from("[1]"))
                .expect("request"),
            StatusCode::BAD_REQUEST,
            "http.invalid_claims",
        ),
        // A JSON body without its type: what a page's no-cors fetch sends.
        (
            Request::post("/tokens")
                .body(Body::from("{}"))
                .expect("request"),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "http.unsupported_media_type",
        ),
        (
            Request::post("/keys/rotate")
                .body(Body::empty())
                .expect("request"),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "http.unsupported_media_type",
        ),
        (
            Request::post("/keys/rotate")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(r#"{"now":true}"#))
                .expect("request"),
            StatusCode::BAD_REQUEST,
            "http.invalid_rotate",
        ),
        (
            Request::post("/tokens")
                .header(header::CONTENT_TYPE, "text/plain")
                .body(Body::from("{}"))
                .expect("request"),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "http.unsupported_media_type",
        ),
        (
            Request::get("/nowhere")
                .body(Body::empty())
                .expect("request"),
            StatusCode::NOT_FOUND,
            "http.not_found",
        ),
    ] {
        let (got, headers, body) = send(&admin, request).await;
        assert_eq!(got, status);
        assert_eq!(headers[header::CONTENT_TYPE], "application/json");
        assert_eq!(
            serde_json::from_slice::<Value>(&body).expect("json")["error"],
            code
        );
    }
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_secret_guards_every_admin_route() {
    let (handle, key) = spawn(KmsConfig::default());
    let config = AdminConfig {
        admin_token: Some(Arc::new(zeroize::Zeroizing::new(b"s3cret".to_vec()))),
        ..AdminConfig::new(key)
    };
    let admin = admin_router(handle.client(), config);
    for (method, path) in [
        ("POST", "/keys/rotate"),
        ("POST", "/tokens"),
        ("GET", "/metrics"),
        ("GET", "/nowhere"),
        ("GET", "/tokens"),
    ] {
        for authorization in [
            &[][..],
            &["Bearer wrong"],
            &["Bearer s3cre"],
            &["Basic s3cret"],
        ] {
            let mut request = Request::builder().method(method).uri(path);
            for a in authorization {
                request = request.header(header::AUTHORIZATION, *a);
            }
            let (status, _, body) =
                send(&admin, request.body(Body::from("{}")).expect("request")).await;
            assert_eq!(
                status,
                StatusCode::UNAUTHORIZED,
                "{method} {path} {authorization:?}"
            );
            assert_eq!(
                serde_json::from_slice::<Value>(&body).expect("json")["error"],
                "admin.unauthorized"
            );
        }
    }
    // With the secret: a wrong method or path is a JSON error too.
    for (method, path, status) in [
        ("GET", "/tokens", StatusCode::METHOD_NOT_ALLOWED),
        ("GET", "/nowhere", StatusCode::NOT_FOUND),
    ] {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::AUTHORIZATION, "Bearer s3cret")
            .body(Body::empty())
            .expect("request");
        let (got, _, body) = send(&admin, request).await;
        assert_eq!(got, status);
        assert!(serde_json::from_slice::<Value>(&body).expect("json")["error"].is_string());
    }
    let big = Request::post("/tokens")
        .header(header::AUTHORIZATION, "Bearer s3cret")
        .body(Body::from(format!(
            "{{\"pad\":\"{}\"}}",
            "x".repeat(100_000)
        )))
        .expect("request");
    let (status, _, body) = send(&admin, big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        serde_json::from_slice::<Value>(&body).expect("json")["error"],
        "http.bad_body"
    );
    let request = Request::post("/keys/rotate")
        .header(header::AUTHORIZATION, "Bearer s3cret")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from("{}"))
        .expect("request");
    assert_eq!(send(&admin, request).await.0, StatusCode::OK);
    handle.shutdown().await;
}

/// What a web page in a browser on the admin face's host can send: a
/// plain HTML form, a `no-cors` fetch, a request under a rebound DNS name.
/// Each is refused before it reaches the key, with or without the secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_face_refuses_what_a_web_page_can_send() {
    let (handle, key) = spawn(KmsConfig::default());
    let config = AdminConfig {
        admin_token: Some(Arc::new(zeroize::Zeroizing::new(b"s3cret".to_vec()))),
        allowed_hosts: vec!["127.0.0.1:8081".into(), "localhost:8081".into()],
        ..AdminConfig::new(key.clone())
    };
    let admin = admin_router(handle.client(), config);
    let destroy = |headers: &[(&str, &str)], body: &'static str| {
        let mut request = Request::post("/keys/destroy");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(Body::from(body)).expect("request")
    };
    let secret = ("authorization", "Bearer s3cret");
    let json = ("content-type", "application/json");
    for (headers, body, status, code) in [
        // An HTML form from another site (browsers add Origin to it).
        (
            &[
                ("host", "127.0.0.1:8081"),
                ("origin", "http://attacker.example"),
                ("content-type", "application/x-www-form-urlencoded"),
            ][..],
            "x=1",
            StatusCode::FORBIDDEN,
            "admin.cross_origin",
        ),
        // A no-cors fetch, marked by Fetch Metadata; even with the secret.
        (
            &[
                ("host", "127.0.0.1:8081"),
                ("sec-fetch-site", "cross-site"),
                secret,
                json,
            ],
            "{}",
            StatusCode::FORBIDDEN,
            "admin.cross_origin",
        ),
        // DNS rebinding: same origin for the page, the attacker's name.
        (
            &[("host", "rebind.attacker.example:8081"), secret, json],
            "{}",
            StatusCode::FORBIDDEN,
            "admin.forbidden_host",
        ),
        // The right host, a form body: no JSON type.
        (
            &[
                ("host", "localhost:8081"),
                secret,
                ("content-type", "text/plain"),
            ],
            "{}",
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "http.unsupported_media_type",
        ),
        (
            &[("host", "localhost:8081"), secret],
            "",
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "http.unsupported_media_type",
        ),
        // The right host, no secret.
        (
            &[("host", "127.0.0.1:8081"), json],
            "{}",
            StatusCode::UNAUTHORIZED,
            "admin.unauthorized",
        ),
    ] {
        let (got, _, answer) = send(&admin, destroy(headers, body)).await;
        assert_eq!(got, status, "{headers:?}");
        assert_eq!(
            serde_json::from_slice::<Value>(&answer).expect("json")["error"],
            code,
            "{headers:?}"
        );
    }
    // None of them reached the key; an operator's request does.
    assert!(handle.client().sign(&key, &b"m"[..]).await.is_ok());
    let (got, _, _) = send(
        &admin,
        destroy(&[("host", "127.0.0.1:8081"), secret, json], "{}"),
    )
    .await;
    assert_eq!(got, StatusCode::OK);
    assert!(handle.client().sign(&key, &b"m"[..]).await.is_err());
    handle.shutdown().await;
}

#[tokio::test(flavor = "current_thread")]
async fn concurrent_requests_coalesce_into_batches() {
    let (handle, key) = spawn(
        KmsConfig::default()
            .with_verify_on_caller_when_idle(false)
            .with_combine_max(0)
            .with_threads(1),
    );
    let admin = admin_router(handle.client(), AdminConfig::new(key.clone()));
    let public = public(&handle, &key);
    let token = issue(&admin, json!({"sub": "a"})).await;
    let before = handle.stats();
    let calls = (0..64).map(|_| send(&public, get_with("/whoami", &[&format!("Bearer {token}")])));
    let answers = futures::future::join_all(calls).await;
    assert!(answers.iter().all(|(s, _, _)| *s == StatusCode::OK));
    let stats = handle.stats().since(&before);
    assert_eq!(stats.batched_requests, 64);
    assert!(stats.batches <= 2, "{stats:?}");
    handle.shutdown().await;
}

/// `POST path` with a JSON `body`: the status and the JSON answer.
async fn post_json(router: &Router, path: &str, body: Value) -> (StatusCode, Value) {
    let request = Request::post(path)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .expect("request");
    let (status, _, body) = send(router, request).await;
    (status, serde_json::from_slice(&body).expect("json"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_face_reads_and_changes_the_policy_trims_and_destroys() {
    let (handle, key) = spawn(KmsConfig::default());
    let admin = admin_router(handle.client(), AdminConfig::new(key.clone()));
    let public = public(&handle, &key);
    let old = issue(&admin, json!({"sub": "a"})).await;
    let (status, _) = post_json(&admin, "/keys/rotate", json!({})).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, body) = send(&admin, get_with("/keys/policy", &[])).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        serde_json::from_slice::<Value>(&body).expect("json"),
        json!({"min_verify_version": 1, "enabled": true, "exportable": false,
               "auto_rotate_after_s": null})
    );
    let jwks_len = |body: &[u8]| {
        serde_json::from_slice::<Value>(body).expect("json")["keys"]
            .as_array()
            .map(Vec::len)
    };
    let (_, _, body) = send(&public, get_with(JWKS_PATH, &[])).await;
    assert_eq!(jwks_len(&body), Some(2));

    // Raise min_verify_version: v1 leaves the JWKS and its tokens fail.
    let (status, policy) = post_json(
        &admin,
        "/keys/policy",
        json!({"min_verify_version": 2, "auto_rotate_after_s": 86400}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{policy}");
    assert_eq!(policy["min_verify_version"], 2);
    assert_eq!(policy["auto_rotate_after_s"], 86400);
    let (_, _, body) = send(&public, get_with(JWKS_PATH, &[])).await;
    assert_eq!(jwks_len(&body), Some(1));
    let (status, headers, _) =
        send(&public, get_with("/whoami", &[&format!("Bearer {old}")])).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(
        !challenge(&headers).contains("version"),
        "no key state leaks"
    );
    let new = issue(&admin, json!({"sub": "b"})).await;
    let (status, _, _) = send(&public, get_with("/whoami", &[&format!("Bearer {new}")])).await;
    assert_eq!(status, StatusCode::OK);

    for (path, body, status, code) in [
        (
            "/keys/policy",
            json!({"min_verify_version": 9}),
            StatusCode::BAD_REQUEST,
            "kms.invalid_argument",
        ),
        (
            "/keys/policy",
            json!({"colour": "red"}),
            StatusCode::BAD_REQUEST,
            "http.invalid_policy",
        ),
        (
            "/keys/policy",
            json!({"enabled": "yes"}),
            StatusCode::BAD_REQUEST,
            "http.invalid_policy",
        ),
        (
            "/keys/trim",
            json!({"below": 3}),
            StatusCode::BAD_REQUEST,
            "kms.invalid_argument",
        ),
        (
            "/keys/trim",
            json!({}),
            StatusCode::BAD_REQUEST,
            "http.invalid_trim",
        ),
    ] {
        let (got, answer) = post_json(&admin, path, body.clone()).await;
        assert_eq!(
            (got, answer["error"].as_str()),
            (status, Some(code)),
            "{body}"
        );
    }
    let (status, answer) = post_json(&admin, "/keys/trim", json!({"below": 2})).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["min_available_version"], 2);

    // Disabled: no tokens issued (409); enabled again: issued.
    let (status, _) = post_json(&admin, "/keys/policy", json!({"enabled": false})).await;
    assert_eq!(status, StatusCode::OK);
    let (status, answer) = post_json(&admin, "/tokens", json!({"sub": "c"})).await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (StatusCode::CONFLICT, Some("kms.key_disabled"))
    );
    let (status, _) = post_json(&admin, "/keys/policy", json!({"enabled": true})).await;
    assert_eq!(status, StatusCode::OK);

    let (status, answer) = post_json(&admin, "/keys/destroy", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let (status, answer) = post_json(&admin, "/tokens", json!({"sub": "d"})).await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (StatusCode::CONFLICT, Some("kms.key_destroyed"))
    );
    let (status, _, body) = send(&public, get_with(JWKS_PATH, &[])).await;
    assert_eq!((status, jwks_len(&body)), (StatusCode::OK, Some(0)));
    let (status, _, _) = send(&public, get_with("/whoami", &[&format!("Bearer {new}")])).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, answer) = post_json(&admin, "/keys/destroy", json!({})).await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (StatusCode::CONFLICT, Some("kms.key_destroyed"))
    );
    handle.shutdown().await;
}

/// The JWK Set is a snapshot per key-set generation: a flood of it does
/// not reach the actor's priority lane (here one message deep, where the
/// old route answered 503 and crowded out the rotation), a rotation
/// during the flood is answered and shows in the next answer, and a
/// matching `If-None-Match` is 304.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwks_flood_stays_off_the_actor_and_follows_rotations() {
    let (handle, key) = spawn(KmsConfig::default().with_priority_capacity(1));
    let public = public(&handle, &key);
    let (status, headers, first) = send(&public, get_with(JWKS_PATH, &[])).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CACHE_CONTROL], "public, max-age=60");
    let etag = headers[header::ETAG].clone();
    let flood = (0..2000).map(|_| send(&public, get_with(JWKS_PATH, &[])));
    let client = handle.client();
    let rotation = tokio::spawn(async move { client.rotate(&key).await });
    let answers = futures::future::join_all(flood).await;
    let rotated = rotation
        .await
        .expect("task")
        .expect("the rotation is answered");
    assert!(
        answers.iter().all(|(s, _, _)| *s == StatusCode::OK),
        "{:?}",
        answers.iter().map(|(s, _, _)| *s).collect::<Vec<_>>()
    );
    // After the rotation: the new set, under a new ETag.
    let request = Request::get(JWKS_PATH)
        .header(header::IF_NONE_MATCH, etag.clone())
        .body(Body::empty())
        .expect("request");
    let (status, headers, body) = send(&public, request).await;
    assert_eq!(status, StatusCode::OK, "the old ETag no longer matches");
    assert_ne!(headers[header::ETAG], etag);
    assert_ne!(body, first);
    let set: Value = serde_json::from_slice(&body).expect("json");
    assert!(set["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .any(|k| k["kid"] == rotated.to_string()));
    // The current ETag: 304, no body.
    let request = Request::get(JWKS_PATH)
        .header(header::IF_NONE_MATCH, headers[header::ETAG].clone())
        .body(Body::empty())
        .expect("request");
    let (status, again, body) = send(&public, request).await;
    assert_eq!(status, StatusCode::NOT_MODIFIED);
    assert!(body.is_empty());
    assert_eq!(again[header::ETAG], headers[header::ETAG]);
    handle.shutdown().await;
}

/// `POST /tokens` mints within limits: the server sets `iat`, `jti`, `iss`
/// and `aud`, refuses a caller's copy of them, a far or past `exp`, an
/// `nbf` after `exp`, duplicate names and claims too large for the
/// verifier; every answer is `Cache-Control: no-store`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minting_has_limits_and_the_server_sets_who_and_when() {
    let (handle, key) = spawn(KmsConfig::default());
    let config = AdminConfig {
        issuer: Some("https://kms.example".into()),
        audience: Some("api".into()),
        ..AdminConfig::new(key)
    };
    let admin = admin_router(handle.client(), config);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let post = |body: String| {
        Request::post("/tokens")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body))
            .expect("request")
    };
    for (body, code) in [
        (
            json!({"sub": "a", "exp": now + 10 * 365 * 86_400}).to_string(),
            "admin.lifetime_too_long",
        ),
        (
            json!({"sub": "a", "exp": now + 3700}).to_string(),
            "admin.lifetime_too_long",
        ),
        (
            json!({"sub": "a", "exp": now - 10}).to_string(),
            "admin.invalid_exp",
        ),
        (
            json!({"sub": "a", "exp": "soon"}).to_string(),
            "admin.invalid_exp",
        ),
        (
            json!({"sub": "a", "exp": now + 60, "nbf": now + 61}).to_string(),
            "admin.invalid_nbf",
        ),
        (
            json!({"sub": "a", "iss": "https://evil"}).to_string(),
            "admin.reserved_claim",
        ),
        (
            json!({"sub": "a", "aud": "api"}).to_string(),
            "admin.reserved_claim",
        ),
        (
            json!({"sub": "a", "iat": now}).to_string(),
            "admin.reserved_claim",
        ),
        (
            json!({"sub": "a", "jti": "mine"}).to_string(),
            "admin.reserved_claim",
        ),
        (
            r#"{"sub":"a","sub":"acme-root"}"#.to_owned(),
            "http.duplicate_name",
        ),
        (
            json!({"sub": "a", "pad": "x".repeat(7000)}).to_string(),
            "admin.token_too_large",
        ),
    ] {
        let (status, headers, answer) = send(&admin, post(body.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(headers[header::CACHE_CONTROL], "no-store");
        assert_eq!(
            serde_json::from_slice::<Value>(&answer).expect("json")["error"],
            code,
            "{body}"
        );
    }
    let mut jtis = Vec::new();
    for _ in 0..2 {
        let (status, headers, answer) = send(
            &admin,
            post(json!({"sub": "a", "exp": now + 3000}).to_string()),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers[header::CACHE_CONTROL], "no-store");
        let token = serde_json::from_slice::<Value>(&answer).expect("json")["token"]
            .as_str()
            .expect("token")
            .to_owned();
        let claims = kms_jose::CompactJws::parse(&token)
            .expect("parse")
            .claims()
            .expect("claims");
        assert_eq!(claims.get("iss"), Some(&json!("https://kms.example")));
        assert_eq!(claims.get("aud"), Some(&json!("api")));
        assert_eq!(claims.get("exp"), Some(&json!(now + 3000)));
        let iat = claims.get("iat").and_then(Value::as_u64).expect("iat");
        assert!(iat >= now && iat < now + 60, "{iat}");
        let jti = claims
            .get("jti")
            .and_then(Value::as_str)
            .expect("jti")
            .to_owned();
        assert!(
            jti.len() == 32 && jti.bytes().all(|b| b.is_ascii_hexdigit()),
            "{jti}"
        );
        jtis.push(jti);
    }
    assert_ne!(jtis[0], jtis[1]);
    // Without an exp: the default lifetime (15 min).
    let (_, _, answer) = send(&admin, post(json!({"sub": "b"}).to_string())).await;
    let token = serde_json::from_slice::<Value>(&answer).expect("json")["token"]
        .as_str()
        .expect("token")
        .to_owned();
    let claims = kms_jose::CompactJws::parse(&token)
        .expect("parse")
        .claims()
        .expect("claims");
    let exp = claims.get("exp").and_then(Value::as_u64).expect("exp");
    assert!(exp >= now + 900 && exp < now + 960, "{exp}");
    // A refusal before the secret check is no-store too.
    let (status, headers, _) = send(&admin, get_with("/nowhere", &[])).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(headers[header::CACHE_CONTROL], "no-store");
    handle.shutdown().await;
}
