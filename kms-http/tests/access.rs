//! The access layer in process (`tower::ServiceExt::oneshot`, no sockets):
//! the decision's answers (403 `access_denied`, 403 `insufficient_scope`
//! with its challenge, `anyone` with no token looked at), the normalized
//! path the inner service sees, forward-auth checks judged on the
//! original request, and rules replaced whole.

use axum::body::{to_bytes, Body};
use axum::extract::Request;
use axum::http::{header, HeaderMap, StatusCode};
use axum::Router;
use kms_access::AccessRules;
use kms_actor::{KmsActor, KmsConfig, KmsHandle, TokenKeys};
use kms_bus::Bus;
use kms_core::{KeyId, Keystore};
use kms_http::{AccessLayer, AccessRule, Anyone, BearerLayer, VerifiedClaims};
use kms_jose::Validation;
use serde_json::{json, Value};
use tower::ServiceExt;

const RULES: &str = r#"
default = "deny"
[[rule]]
path = "/public/"
methods = ["GET", "HEAD"]
allow = "anyone"
[[rule]]
path = "/"
methods = ["OPTIONS"]
allow = "anyone"
[[rule]]
path = "/orders/"
methods = ["POST"]
scopes = ["orders:write", "orders:read"]
[[rule]]
path = "/orders/"
claims = { tenant = ["acme", "beta"] }
[[rule]]
path = "/admin/"
claims = { "realm_access.roles" = "admin" }
issuers = ["https://idp.example.com"]
audiences = ["admin"]
"#;

fn spawn() -> (KmsHandle, KeyId) {
    let ks = Keystore::new();
    let key = ks.create_ed25519("gateway", "tokens").expect("create");
    (
        KmsActor::spawn(KmsConfig::default(), ks, &Bus::new()).expect("spawn"),
        key,
    )
}

/// An inner service that answers what it was given: the path and query
/// it saw, the deciding rule, whether anyone was let in, and the token's
/// subject.
async fn echo(request: Request) -> axum::Json<Value> {
    let extensions = request.extensions();
    axum::Json(json!({
        "target": request.uri().path_and_query().map(|p| p.as_str().to_owned()),
        "rule": extensions.get::<AccessRule>().map(|AccessRule(rule)| *rule),
        "anyone": extensions.get::<Anyone>().is_some(),
        "sub": extensions.get::<VerifiedClaims>().map(|VerifiedClaims(c)| c.get("sub").cloned()),
    }))
}

fn layer(handle: &KmsHandle, key: &KeyId) -> AccessLayer {
    // Tokens for two audiences pass the bearer layer; the rules tell them
    // apart.
    let mut validation = Validation::default();
    validation.audiences = vec!["admin".to_owned(), "billing".to_owned()];
    let bearer = BearerLayer::new(handle.client(), TokenKeys::of(key), validation);
    AccessLayer::new(AccessRules::from_toml(RULES).expect("rules"), bearer)
}

async fn send(
    router: &Router,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, HeaderMap, Value) {
    let mut request = Request::builder().method(method).uri(target);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = router
        .clone()
        .oneshot(request.body(Body::empty()).expect("request"))
        .await
        .expect("infallible");
    let (parts, body) = response.into_parts();
    let body = to_bytes(body, 1 << 20).await.expect("body");
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    (parts.status, parts.headers, body)
}

async fn token(handle: &KmsHandle, key: &KeyId, claims: Value) -> String {
    let mut claims = claims;
    claims["exp"] = json!(4_000_000_000u64);
    // The bearer layer's validation names two audiences: a token names
    // one.
    if claims.get("aud").is_none() {
        claims["aud"] = json!("billing");
    }
    let token = handle.client().sign_jwt(key, &claims).await.expect("sign");
    format!("Bearer {token}")
}

fn challenge(headers: &HeaderMap) -> &str {
    headers
        .get(header::WWW_AUTHENTICATE)
        .map_or("", |v| v.to_str().expect("ascii"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_decision_answers_as_it_should() {
    let (handle, key) = spawn();
    let app = Router::new().fallback(echo).layer(layer(&handle, &key));
    let writer = token(
        &handle,
        &key,
        json!({"sub": "w", "scope": "orders:write", "scp": ["orders:read"]}),
    )
    .await;
    let reader = token(
        &handle,
        &key,
        json!({"sub": "r", "scope": "orders:read", "tenant": "zeta"}),
    )
    .await;
    let tenant = token(&handle, &key, json!({"sub": "t", "tenant": ["x", "beta"]})).await;
    let admin = token(
        &handle,
        &key,
        json!({"sub": "a", "iss": "https://idp.example.com", "aud": ["admin"], "realm_access": {"roles": ["admin"]}}),
    )
    .await;

    // Anyone: no token looked at, even a bad one.
    let (status, _, body) = send(
        &app,
        "GET",
        "/public/a?x=1",
        &[("authorization", "Bearer junk")],
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({"target": "/public/a?x=1", "rule": 0, "anyone": true, "sub": null})
    );
    // GET does not imply POST: the default denies, token or not.
    for auth in [&[][..], &[("authorization", writer.as_str())][..]] {
        let (status, headers, body) = send(&app, "POST", "/public/a", auth).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert_eq!(body["error"], "access_denied");
        assert_eq!(challenge(&headers), "");
    }
    // The preflight rule.
    let (status, _, body) = send(&app, "OPTIONS", "/orders/1", &[]).await;
    assert_eq!((status, body["rule"].clone()), (StatusCode::OK, json!(1)));

    // A token rule: no token is the bearer layer's 401.
    let (status, headers, _) = send(&app, "POST", "/orders/1", &[]).await;
    assert_eq!(
        (status, challenge(&headers)),
        (StatusCode::UNAUTHORIZED, "Bearer")
    );
    let (status, headers, _) = send(
        &app,
        "POST",
        "/orders/1",
        &[("authorization", "Bearer junk")],
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(challenge(&headers).contains("invalid_token"));
    // Scopes from `scope` and `scp` together.
    let (status, _, body) = send(&app, "POST", "/orders/1", &[("authorization", &writer)]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (body["rule"].clone(), body["sub"].clone()),
        (json!(2), json!("w"))
    );
    let (status, headers, body) =
        send(&app, "POST", "/orders/1", &[("authorization", &reader)]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body,
        json!({"error": "insufficient_scope", "requirement": "scope"})
    );
    assert_eq!(
        challenge(&headers),
        "Bearer error=\"insufficient_scope\", scope=\"orders:write orders:read\""
    );
    // A claim: the body names the kind, never the value.
    let (status, headers, body) =
        send(&app, "GET", "/orders/1", &[("authorization", &reader)]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body,
        json!({"error": "insufficient_scope", "requirement": "claim"})
    );
    assert_eq!(challenge(&headers), "Bearer error=\"insufficient_scope\"");
    let (status, _, _) = send(&app, "GET", "/orders/1", &[("authorization", &tenant)]).await;
    assert_eq!(status, StatusCode::OK);
    // Issuer and audience.
    let (status, _, body) = send(&app, "GET", "/admin/x", &[("authorization", &admin)]).await;
    assert_eq!((status, body["sub"].clone()), (StatusCode::OK, json!("a")));
    let (status, _, body) = send(&app, "GET", "/admin/x", &[("authorization", &tenant)]).await;
    assert_eq!(
        (status, body["requirement"].clone()),
        (StatusCode::FORBIDDEN, json!("claim"))
    );
    let roles = json!({"roles": ["admin"]});
    for (claims, kind) in [
        (
            json!({"iss": "https://other.example.com", "aud": "admin"}),
            "issuer",
        ),
        (
            json!({"iss": "https://idp.example.com", "aud": "billing"}),
            "audience",
        ),
        (
            json!({"iss": "https://idp.example.com", "aud": ["billing", "x"]}),
            "audience",
        ),
    ] {
        let mut claims = claims;
        claims["realm_access"] = roles.clone();
        let bearer = token(&handle, &key, claims).await;
        let (status, headers, body) =
            send(&app, "GET", "/admin/x", &[("authorization", &bearer)]).await;
        assert_eq!(
            (status, body["requirement"].clone()),
            (StatusCode::FORBIDDEN, json!(kind))
        );
        assert_eq!(challenge(&headers), "Bearer error=\"insufficient_scope\"");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inner_service_sees_the_path_that_was_matched() {
    let (handle, key) = spawn();
    let app = Router::new().fallback(echo).layer(layer(&handle, &key));
    let admin = token(
        &handle,
        &key,
        json!({"sub": "a", "iss": "https://idp.example.com", "aud": "admin", "realm_access": {"roles": "admin"}}),
    )
    .await;
    let other = token(&handle, &key, json!({"sub": "o", "tenant": "acme"})).await;
    for target in [
        "/orders/../admin/x",
        "/orders/%2e%2e/admin/x",
        "//admin/x",
        "/%61dmin/x?q=%2F",
    ] {
        // Matched against /admin/: the other token is refused...
        let (status, _, body) = send(&app, "GET", target, &[("authorization", &other)]).await;
        assert_eq!(
            (status, body["requirement"].clone()),
            (StatusCode::FORBIDDEN, json!("claim")),
            "{target}"
        );
        // ...and the admin's request reaches the service normalized.
        let (status, _, body) = send(&app, "GET", target, &[("authorization", &admin)]).await;
        assert_eq!(status, StatusCode::OK, "{target}");
        let expected = if target.ends_with("?q=%2F") {
            "/admin/x?q=%2F"
        } else {
            "/admin/x"
        };
        assert_eq!(body["target"], expected, "{target}");
    }
    // A segment's `;params` are left out of the match, as servlet
    // containers leave them out of what they serve, and kept upstream.
    let target = "/admin;jsessionid=1/x";
    let (status, _, body) = send(&app, "GET", target, &[("authorization", &other)]).await;
    assert_eq!(
        (status, body["requirement"].clone()),
        (StatusCode::FORBIDDEN, json!("claim"))
    );
    let (status, _, body) = send(&app, "GET", target, &[("authorization", &admin)]).await;
    assert_eq!(
        (status, body["target"].clone()),
        (StatusCode::OK, json!(target))
    );
    // `post` is not `POST` to the rules; some servers serve it as one.
    let (status, _, body) = send(&app, "post", "/orders/1", &[("authorization", &admin)]).await;
    assert_eq!(
        (status, body["error"].clone()),
        (StatusCode::BAD_REQUEST, json!("invalid_request"))
    );
    // Not matched (case matters): the default.
    let (status, _, body) = send(&app, "GET", "/ADMIN/x", &[("authorization", &admin)]).await;
    assert_eq!(
        (status, body["error"].clone()),
        (StatusCode::FORBIDDEN, json!("access_denied"))
    );
    // Refused before any rule: 400.
    for target in [
        "/admin%2Fx",
        "/public/..;/admin/x",
        "/public/../../x",
        "/a%5Cb",
        "/a%00",
    ] {
        let (status, _, body) = send(&app, "GET", target, &[("authorization", &admin)]).await;
        assert_eq!(
            (status, body["error"].clone()),
            (StatusCode::BAD_REQUEST, json!("invalid_request")),
            "{target}"
        );
    }
}

/// A forward-auth check: its method, target and headers, and the status
/// expected.
type Check<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], StatusCode);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forward_auth_check_judges_the_original_request() {
    let (handle, key) = spawn();
    let access = layer(&handle, &key).for_forward_auth("/auth");
    let app = Router::new().fallback(echo).layer(access);
    let other = token(&handle, &key, json!({"sub": "o", "tenant": "acme"})).await;
    let auth = ("authorization", other.as_str());
    let (ok, no) = (StatusCode::OK, StatusCode::FORBIDDEN);
    let uri = |u| ("x-original-uri", u);
    let method = |m| ("x-original-method", m);
    let cases: &[Check] = &[
        // NGINX: X-Original-URI and X-Original-Method (the check itself is
        // always a GET).
        ("GET", "/auth", &[uri("/public/x?y"), method("GET")], ok),
        ("GET", "/auth", &[uri("/public/x"), method("POST")], no),
        ("GET", "/auth", &[uri("/orders/7"), method("GET"), auth], ok),
        ("GET", "/auth", &[uri("/admin/x"), method("GET"), auth], no),
        // Without the method header, NGINX's GET would stand for any.
        ("GET", "/auth", &[uri("/public/x")], no),
        // ...nor a client's own X-Forwarded-Method beside it.
        (
            "GET",
            "/auth",
            &[uri("/orders/7"), ("x-forwarded-method", "GET"), auth],
            no,
        ),
        // Traefik, Caddy: X-Forwarded-Uri and -Method.
        (
            "GET",
            "/auth",
            &[
                ("x-forwarded-uri", "/public/x"),
                ("x-forwarded-method", "HEAD"),
            ],
            ok,
        ),
        (
            "GET",
            "/auth",
            &[
                ("x-forwarded-uri", "/%70ublic/x"),
                ("x-forwarded-method", "GET"),
            ],
            ok,
        ),
        // Envoy: the path under the route, the check's own method.
        ("POST", "/auth/public/x", &[], no),
        ("GET", "/auth/public/x", &[], ok),
        // The route itself, with no header: judged as /.
        ("OPTIONS", "/auth", &[], ok),
        ("GET", "/auth/", &[], no),
        // A client's own X-Original-URI beside the proxy's X-Forwarded-Uri.
        (
            "GET",
            "/auth",
            &[
                uri("/public/x"),
                method("GET"),
                ("x-forwarded-uri", "/admin/x"),
            ],
            no,
        ),
        (
            "GET",
            "/auth",
            &[
                uri("/public/x"),
                method("GET"),
                ("x-forwarded-uri", "/public/%78"),
            ],
            ok,
        ),
        (
            "GET",
            "/auth/admin/x",
            &[("x-forwarded-uri", "/public/x")],
            no,
        ),
        (
            "GET",
            "/auth",
            &[
                method("GET"),
                ("x-forwarded-method", "POST"),
                uri("/public/x"),
            ],
            no,
        ),
        // Refused paths and methods.
        ("GET", "/auth", &[uri("public/x"), method("GET")], no),
        (
            "GET",
            "/auth",
            &[uri("/public/..;/admin/x"), method("GET")],
            no,
        ),
        (
            "GET",
            "/auth",
            &[uri("/admin/x#/../../public/y"), method("GET")],
            no,
        ),
        (
            "GET",
            "/auth",
            &[uri("/public/x"), uri("/public/y"), method("GET")],
            no,
        ),
        ("GET", "/auth", &[uri("/public/x"), method("get")], no),
        // The proxy passes these on unresolved: never judged as another.
        (
            "GET",
            "/auth",
            &[uri("/admin/%2e%2e/public/x"), method("GET")],
            no,
        ),
        (
            "GET",
            "/auth",
            &[uri("/admin/../public/x"), method("GET")],
            no,
        ),
        (
            "GET",
            "/auth",
            &[uri("/admin//../public/x"), method("GET")],
            no,
        ),
        ("GET", "/auth", &[uri("//public/x"), method("GET")], no),
        (
            "GET",
            "/auth",
            &[
                ("x-forwarded-uri", "/public/./x"),
                ("x-forwarded-method", "GET"),
            ],
            no,
        ),
    ];
    for (method, target, headers, expected) in cases {
        let (status, _, body) = send(&app, method, target, headers).await;
        assert_eq!(status, *expected, "{method} {target} {headers:?}: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_are_replaced_whole_for_every_layer_sharing_them() {
    let (handle, key) = spawn();
    let access = layer(&handle, &key);
    let forward = access.for_forward_auth("/auth");
    let app = Router::new().fallback(echo).layer(access.clone());
    let checks = Router::new().fallback(echo).layer(forward);
    assert_eq!(
        send(&app, "GET", "/status", &[]).await.0,
        StatusCode::FORBIDDEN
    );
    access.replace_rules(
        AccessRules::from_toml("[[rule]]\npath = \"/status\"\nallow = \"anyone\"").expect("rules"),
    );
    assert_eq!(send(&app, "GET", "/status", &[]).await.0, StatusCode::OK);
    let original = [("x-original-uri", "/status"), ("x-original-method", "GET")];
    let (status, _, _) = send(&checks, "GET", "/auth", &original).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        send(&app, "GET", "/public/a", &[]).await.0,
        StatusCode::FORBIDDEN
    );
    assert_eq!(access.rules().len(), 1);
}
