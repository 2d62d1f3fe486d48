//! Forward authentication (`/auth`, `--forward-auth-path`,
//! `--claim-header`) on `gateway serve` as a child process.
#![cfg(unix)]

use crate::support::serving;

use std::time::Duration;

use serving::{forged, http_full, now, run_to_exit, Serving};

/// The answer's headers named `name` (lowercase), in order.
fn header<'a>(lines: &'a [String], name: &str) -> Vec<&'a str> {
    lines
        .iter()
        .filter_map(|l| l.split_once(": "))
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v)
        .collect()
}

#[test]
fn auth_answers_200_with_the_chosen_claims_and_401_otherwise() {
    let s = Serving::start(&[
        "--claim-header",
        "sub=X-Auth-Subject",
        "--claim-header",
        "roles=X-Auth-Roles",
        "--claim-header",
        "tenant=X-Auth-Tenant",
        "--token-audience",
        "api",
        "--leeway",
        "0",
    ]);
    let token = s.mint(r#"{"sub":"alice","roles":["admin","ops"]}"#);
    let bearer = format!("Bearer {token}");
    // Any method, the prefix and any path under it, a query too.
    for (method, path) in [
        ("GET", "/auth"),
        ("POST", "/auth/"),
        ("GET", "/auth/api/v1/items?id=7&x=%2F"),
        ("DELETE", "/auth/a/b"),
    ] {
        let (status, lines, body) = http_full(
            s.public,
            method,
            path,
            &[
                ("Authorization", &bearer),
                // The client's own copy is not echoed back.
                ("X-Auth-Tenant", "forged"),
            ],
            "",
        );
        assert_eq!(status, 200, "{method} {path}: {body}");
        assert_eq!(body, "", "{method} {path}");
        assert_eq!(header(&lines, "x-auth-subject"), ["alice"]);
        assert_eq!(header(&lines, "x-auth-roles"), [r#"["admin","ops"]"#]);
        assert!(header(&lines, "x-auth-tenant").is_empty(), "{lines:?}");
    }
    // A path that merely starts with the prefix is not it.
    let (status, _, _) = s.get_with("/authz", &bearer);
    assert_eq!(status, 404);

    let short = s.mint(&format!(r#"{{"sub":"bob","exp":{}}}"#, now() + 1));
    let bad_sub = s.mint(r#"{"sub":"eve\r\nX-Admin: yes"}"#);
    std::thread::sleep(Duration::from_millis(2100));
    let challenge = r#"Bearer error="invalid_token", error_description="invalid token""#;
    for (what, token) in [
        ("forged", forged(&token)),
        ("expired", short),
        ("unwritable claim", bad_sub),
    ] {
        let bearer = format!("Bearer {token}");
        let (status, lines, body) = s.get_with("/auth/x", &bearer);
        assert_eq!(status, 401, "{what}: {body}");
        assert_eq!(header(&lines, "www-authenticate"), [challenge], "{what}");
        assert!(header(&lines, "x-auth-subject").is_empty(), "{what}");
        assert!(!lines.iter().any(|l| l.contains("X-Admin")), "{what}");
    }
    let (status, lines, _) = http_full(s.public, "GET", "/auth", &[], "");
    assert_eq!(status, 401);
    assert_eq!(header(&lines, "www-authenticate"), ["Bearer"]);

    // The refusals are counted by code.
    let (status, metrics) = s.admin("GET", "/metrics", "");
    assert_eq!(status, 200);
    assert!(
        metrics
            .lines()
            .any(|l| l.contains("http.unwritable_claim") && l.ends_with(" 1")),
        "{metrics}"
    );
    assert_eq!(s.stop(), 0);
}

#[test]
fn the_forward_auth_path_is_configurable() {
    let s = Serving::start(&["--forward-auth-path", "/_gateway/check"]);
    let bearer = format!("Bearer {}", s.mint(r#"{"sub":"a"}"#));
    let (status, _, _) = s.get_with("/_gateway/check/x", &bearer);
    assert_eq!(status, 200);
    let (status, _, _) = s.get_with("/auth", &bearer);
    assert_eq!(status, 404);
    // No --claim-header: 200 and no header of a claim.
    let (_, lines, _) = s.get_with("/_gateway/check", &bearer);
    assert!(!lines.iter().any(|l| l.contains(": a")), "{lines:?}");
    assert_eq!(s.stop(), 0);
}

#[test]
fn claim_headers_that_carry_framing_or_credentials_are_usage_errors() {
    for flags in [
        vec!["--claim-header", "sub=Authorization"],
        vec!["--claim-header", "sub=host"],
        vec!["--claim-header", "sub=Cookie"],
        vec!["--claim-header", "sub=Content-Length"],
        vec!["--claim-header", "sub=Transfer-Encoding"],
        vec!["--claim-header", "sub=Connection"],
        vec!["--claim-header", "sub=Upgrade"],
        vec!["--claim-header", "sub"],
        vec!["--claim-header", "sub=X-A", "--claim-header", "email=x-a"],
        vec!["--forward-auth-path", "/whoami"],
        vec!["--forward-auth-path", "auth"],
    ] {
        let mut command = serving::serve_command();
        command.args(&flags);
        let (code, _, stderr) = run_to_exit(command);
        assert_eq!(code, 2, "{flags:?}: {stderr}");
    }
}

#[test]
fn behind_a_trusted_proxy_each_forwarded_client_is_its_own_origin() {
    // --trusted-proxy without --upstream: forward auth behind a proxy on
    // loopback; the cache off, so every token is verified.
    let s = Serving::start(&["--trusted-proxy", "127.0.0.1", "--token-cache", "0"]);
    let forged = format!("Bearer {}", forged(&s.mint(r#"{"sub":"a"}"#)));
    let good = format!("Bearer {}", s.mint(r#"{"sub":"b"}"#));
    for (client, bearer, expected) in [
        // A client's own claim on the left is not believed.
        ("198.51.100.9, 203.0.113.1", &forged, 401),
        ("203.0.113.1", &forged, 401),
        ("203.0.113.2", &good, 200),
        // One IPv6 client: one /64.
        ("2001:db8:1:2::1", &good, 200),
        ("2001:db8:1:2::2", &good, 200),
    ] {
        let headers = [
            ("Authorization", bearer.as_str()),
            ("X-Forwarded-For", client),
        ];
        let (status, _, body) = http_full(s.public, "GET", "/auth", &headers, "");
        assert_eq!(status, expected, "{client}: {body}");
    }
    let (status, metrics) = s.admin("GET", "/metrics", "");
    assert_eq!(status, 200);
    let value = |name: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next())
            .map(str::to_owned)
    };
    // 203.0.113.1, 203.0.113.2 and 2001:db8:1:2::/64 (one request at a
    // time is verified alone anyway: nothing is set apart from a batch).
    assert_eq!(
        value("kms_origins_tracked{").as_deref(),
        Some("3"),
        "{metrics}"
    );
    assert_eq!(
        value("kms_verify_set_apart_total{").as_deref(),
        Some("0"),
        "{metrics}"
    );
    assert_eq!(s.stop(), 0);
}

#[test]
fn every_answer_that_depends_on_a_token_is_no_store() {
    let s = Serving::start(&["--claim-header", "sub=X-Auth-Subject"]);
    let token = s.mint(r#"{"sub":"alice"}"#);
    let bearer = format!("Bearer {token}");
    for (path, authorization, status) in [
        ("/whoami", bearer.as_str(), 200),
        ("/auth", bearer.as_str(), 200),
        ("/auth/x", bearer.as_str(), 200),
        ("/whoami", "Bearer nope", 401),
        ("/auth", "Bearer nope", 401),
    ] {
        let (got, lines, _) = s.get_with(path, authorization);
        assert_eq!(got, status, "{path}");
        assert_eq!(
            header(&lines, "cache-control"),
            ["no-store"],
            "{path}: {lines:?}"
        );
    }
    let (_, lines, _) = http_full(s.public, "GET", "/auth", &[], "");
    assert_eq!(
        header(&lines, "cache-control"),
        ["no-store"],
        "no token: {lines:?}"
    );
    assert_eq!(s.stop(), 0);
}

#[test]
fn a_non_ascii_string_claim_is_left_out_and_counted_and_json_stays_ascii() {
    let s = Serving::start(&[
        "--claim-header",
        "name=X-Auth-Name",
        "--claim-header",
        "groups=X-Auth-Groups",
        "--claim-header",
        "sub=X-Auth-Subject",
    ]);
    let token = s.mint(r#"{"sub":"alice","name":"Zoë","groups":["zoë","ops"]}"#);
    let (status, lines, _) = s.get_with("/auth", &format!("Bearer {token}"));
    assert_eq!(status, 200);
    assert_eq!(header(&lines, "x-auth-subject"), ["alice"]);
    assert!(header(&lines, "x-auth-name").is_empty(), "{lines:?}");
    assert_eq!(header(&lines, "x-auth-groups"), [r#"["zo\u00eb","ops"]"#]);
    let (_, metrics) = s.admin("GET", "/metrics", "");
    assert!(
        metrics.contains(r#"kms_claim_headers_omitted_total{claim="name"} 1"#),
        "{metrics}"
    );
    assert_eq!(s.stop(), 0);
}
