//! `serve --access-rules FILE` as a user runs it: the rules in front of
//! the proxy mode and of forward auth, the path the upstream receives,
//! the face's own routes left alone, a bad file refused at start (exit 2,
//! with its line and column) and SIGHUP's all-or-nothing reload.
#![cfg(target_os = "linux")]

use crate::support::runbook::runbook_block;
use crate::support::serving;
use crate::support::upstream;

use std::path::Path;

use serving::{http_full, json, run_to_exit, serve_command, Serving, CLAIM_HEADERS};
use upstream::{received, Upstream};

/// The rules RUNBOOK shows for a typical API.
fn runbook_rules() -> String {
    runbook_block("access-rules")
}

fn write_rules(dir: &Path, text: &str) -> String {
    let path = dir.join("rules.toml");
    std::fs::write(&path, text).expect("rules");
    path.to_str().expect("utf-8").to_owned()
}

fn header<'a>(lines: &'a [String], name: &str) -> Option<&'a str> {
    lines.iter().find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

#[test]
fn the_rules_decide_what_reaches_the_upstream() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = write_rules(dir.path(), &runbook_rules());
    let up = Upstream::start();
    let url = format!("http://{}", up.addr);
    let mut args = vec!["--upstream", url.as_str(), "--access-rules", rules.as_str()];
    args.extend_from_slice(&CLAIM_HEADERS);
    let s = Serving::start(&args);
    let ops = format!(
        "Bearer {}",
        s.mint(r#"{"sub":"olga","groups":["dev","ops"]}"#)
    );
    let reader = format!(
        "Bearer {}",
        s.mint(r#"{"sub":"rita","scope":"orders:read","tenant":"acme"}"#)
    );
    let writer = format!(
        "Bearer {}",
        s.mint(r#"{"sub":"will","scope":"orders:read orders:write","tenant":"beta"}"#)
    );
    let send = |method: &str, target: &str, headers: &[(&str, &str)]| {
        http_full(s.public, method, target, headers, "")
    };

    // Anyone: no token looked at, no claim headers, the client's copies
    // still removed.
    let (status, _, body) = send(
        "GET",
        "/public/a?x=1",
        &[
            ("X-Auth-Subject", "forged"),
            ("Authorization", "Bearer junk"),
        ],
    );
    assert_eq!(status, 200, "{body}");
    let echo = json(&body);
    assert_eq!(echo["target"], "/public/a?x=1");
    assert!(received(&echo, "x-auth-subject").is_empty(), "{echo}");
    // The preflight rule.
    let (status, _, _) = send("OPTIONS", "/orders/7", &[("Origin", "https://app.example")]);
    assert_eq!(status, 200);
    let reached = up.requests();

    // The default denies, token or not; a token rule wants a token.
    for auth in [&[][..], &[("Authorization", ops.as_str())][..]] {
        let (status, _, body) = send("GET", "/elsewhere", auth);
        assert_eq!(
            (status, json(&body)["error"].clone()),
            (403, "access_denied".into())
        );
    }
    let (status, lines, _) = send("GET", "/orders/7", &[]);
    assert_eq!(
        (status, header(&lines, "www-authenticate")),
        (401, Some("Bearer"))
    );
    // A missing scope: 403 with the rule's scopes in the challenge.
    let (status, lines, body) = send("POST", "/orders/7", &[("Authorization", &reader)]);
    assert_eq!(status, 403);
    assert_eq!(
        header(&lines, "www-authenticate"),
        Some("Bearer error=\"insufficient_scope\", scope=\"orders:write\"")
    );
    assert_eq!(
        json(&body),
        serde_json::json!({"error": "insufficient_scope", "requirement": "scope"})
    );
    // A missing claim value: the kind only.
    let (status, _, body) = send("GET", "/admin/x", &[("Authorization", &reader)]);
    assert_eq!(
        (status, json(&body)["requirement"].clone()),
        (403, "claim".into())
    );
    assert_eq!(
        up.requests(),
        reached,
        "a refused request reached the upstream"
    );

    let (status, _, body) = send("POST", "/orders/7", &[("Authorization", &writer)]);
    assert_eq!(status, 200, "{body}");
    assert_eq!(received(&json(&body), "x-auth-subject"), ["will"]);
    // The upstream gets the path the rules matched.
    for target in [
        "/orders/../admin/x",
        "/orders/%2e%2e/admin/x",
        "//admin/x",
        "/%61dmin/x",
    ] {
        let (status, _, body) = send("GET", target, &[("Authorization", &reader)]);
        assert_eq!(status, 403, "{target}: {body}");
        let (status, _, body) = send("GET", target, &[("Authorization", &ops)]);
        assert_eq!(status, 200, "{target}: {body}");
        assert_eq!(json(&body)["target"], "/admin/x", "{target}");
    }
    // Case matters: the default.
    let (status, _, _) = send("GET", "/ADMIN/x", &[("Authorization", &ops)]);
    assert_eq!(status, 403);
    let reached = up.requests();
    for target in [
        "/admin%2Fx",
        "/public/..;/admin/x",
        "/public/../../etc",
        "/a%5cb",
    ] {
        let (status, _, body) = send("GET", target, &[("Authorization", &ops)]);
        assert_eq!(
            (status, json(&body)["error"].clone()),
            (400, "invalid_request".into()),
            "{target}"
        );
    }
    assert_eq!(up.requests(), reached);

    // The face's own routes are not subject to the rules.
    let (status, _, _) = send("GET", "/healthz", &[]);
    assert_eq!(status, 200);
    let (status, _, body) = send("GET", "/whoami", &[("Authorization", &reader)]);
    assert_eq!((status, json(&body)["sub"].clone()), (200, "rita".into()));
    assert_eq!(s.stop(), 0);
}

#[test]
fn forward_auth_judges_the_original_request() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = write_rules(dir.path(), &runbook_rules());
    let mut args = vec!["--access-rules", rules.as_str()];
    args.extend_from_slice(&CLAIM_HEADERS);
    let s = Serving::start(&args);
    let reader = format!(
        "Bearer {}",
        s.mint(r#"{"sub":"rita","scope":"orders:read","tenant":"acme"}"#)
    );
    // NGINX's check: X-Original-URI and X-Original-Method, as RUNBOOK's
    // configuration sets them.
    let check = |uri: &str, method: &str, extra: &[(&str, &str)]| {
        let mut headers = vec![("X-Original-URI", uri), ("X-Original-Method", method)];
        headers.extend_from_slice(extra);
        let (status, lines, _) = http_full(s.public, "GET", "/auth", &headers, "");
        (status, header(&lines, "x-auth-subject").map(str::to_owned))
    };
    let auth = [("Authorization", reader.as_str())];
    assert_eq!(check("/public/x", "GET", &[]), (200, None));
    assert_eq!(check("/public/x", "DELETE", &[]).0, 403);
    assert_eq!(
        check("/orders/1", "GET", &auth),
        (200, Some("rita".to_owned()))
    );
    assert_eq!(check("/orders/1", "PUT", &auth).0, 403);
    assert_eq!(check("/orders/1", "GET", &[]).0, 401);
    // NGINX answers 500 for any status but 401 and 403: a refused path is
    // 403; so is one NGINX would pass on unresolved.
    for refused in [
        "/public/..;/admin/x",
        "/admin/../public/x",
        "/admin/%2e%2e/public/x",
        "//public/x",
    ] {
        assert_eq!(check(refused, "GET", &[]).0, 403, "{refused}");
    }
    assert_eq!(
        check("/public/x", "GET", &[("X-Forwarded-Uri", "/admin/x")]).0,
        403
    );
    // Without X-Original-Method, NGINX's GET check would stand for any
    // method.
    let (status, _, _) = http_full(
        s.public,
        "GET",
        "/auth",
        &[("X-Original-URI", "/public/x")],
        "",
    );
    assert_eq!(status, 403);
    // Envoy: the original path under the route.
    let (status, _, _) = http_full(s.public, "GET", "/auth/public/x", &[], "");
    assert_eq!(status, 200);
    assert_eq!(s.stop(), 0);
}

#[test]
fn a_bad_rules_file_is_refused_at_start_with_its_line_and_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = write_rules(
        dir.path(),
        "[[rule]]\npath = \"/a\"\nallow = \"everyone\"\n",
    );
    let mut command = serve_command();
    command.args(["--access-rules", &rules]);
    let (code, _, stderr) = run_to_exit(command);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains(&format!("{rules}:3:9")), "{stderr}");
    assert!(stderr.contains("allow must be"), "{stderr}");
    let mut command = serve_command();
    command.args([
        "--access-rules",
        &dir.path().join("absent.toml").to_string_lossy(),
    ]);
    let (code, _, stderr) = run_to_exit(command);
    assert_eq!(code, 2, "{stderr}");
}

#[test]
fn the_config_files_access_rules_key_is_the_flag() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = write_rules(dir.path(), &runbook_rules());
    let config = dir.path().join("serve.toml");
    std::fs::write(&config, format!("access-rules = {rules:?}\n")).expect("config");
    let s = Serving::start(&["--config", config.to_str().expect("utf-8")]);
    let status = |uri: &str| {
        let original = [("X-Original-URI", uri), ("X-Original-Method", "GET")];
        http_full(s.public, "GET", "/auth", &original, "").0
    };
    assert_eq!((status("/public/x"), status("/reports")), (200, 403));
    assert_eq!(s.stop(), 0);
}

#[test]
fn sighup_replaces_the_rules_all_or_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = write_rules(dir.path(), &runbook_rules());
    let s = Serving::start(&["--access-rules", &rules]);
    let status = |uri: &str| {
        let original = [("X-Original-URI", uri), ("X-Original-Method", "GET")];
        http_full(s.public, "GET", "/auth", &original, "").0
    };
    assert_eq!((status("/public/x"), status("/status")), (200, 403));

    write_rules(
        dir.path(),
        "[[rule]]\npath = \"/status\"\nallow = \"anyone\"\n",
    );
    let line = s.hangup("access rules");
    assert!(
        line.contains("reloaded the access rules: 1 rules"),
        "{line}"
    );
    assert_eq!((status("/public/x"), status("/status")), (403, 200));

    write_rules(dir.path(), "[[rule]]\npath = \"/a//b\"\n");
    let line = s.hangup("access rules");
    assert!(
        line.contains("reload refused, the old access rules stay"),
        "{line}"
    );
    assert!(line.contains(&format!("{rules}:2:8")), "{line}");
    assert_eq!((status("/public/x"), status("/status")), (403, 200));
    assert_eq!(s.stop(), 0);
}

#[test]
fn a_token_may_come_in_a_cookie_but_not_for_another_sites_form() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = write_rules(dir.path(), &runbook_rules());
    let up = Upstream::start();
    let url = format!("http://{}", up.addr);
    let mut args = vec![
        "--upstream",
        url.as_str(),
        "--forward-auth-path",
        "/auth",
        "--access-rules",
        rules.as_str(),
        "--token-cookie",
        "kms_token",
        "--strip-authorization",
    ];
    args.extend_from_slice(&CLAIM_HEADERS);
    let s = Serving::start(&args);
    let token = s.mint(r#"{"sub":"will","scope":"orders:write","tenant":["x","acme"]}"#);
    let cookie = format!("theme=dark; kms_token={token}; lang=en");
    let bearer = format!("Bearer {token}");
    let send = |method: &str, target: &str, headers: &[(&str, &str)]| {
        let (status, _, body) = http_full(s.public, method, target, headers, "");
        (status, body)
    };

    let (status, body) = send("GET", "/orders/1", &[("Cookie", &cookie)]);
    assert_eq!(status, 200, "{body}");
    let echo = json(&body);
    assert_eq!(received(&echo, "x-auth-subject"), ["will"]);
    // --strip-authorization takes the token cookie, and only it, away.
    assert_eq!(received(&echo, "cookie"), ["theme=dark; lang=en"]);
    // Both ways at once: 400, but where no token is looked at.
    let both = [
        ("Cookie", cookie.as_str()),
        ("Authorization", bearer.as_str()),
    ];
    let (status, body) = send("GET", "/orders/1", &both);
    assert_eq!(
        (status, json(&body)["error"].clone()),
        (400, "invalid_request".into())
    );
    assert_eq!(send("GET", "/public/x", &both).0, 200);
    // Another site's form cannot ride the cookie; the same site can.
    let cross = [
        ("Cookie", cookie.as_str()),
        ("Sec-Fetch-Site", "cross-site"),
    ];
    let (status, body) = send("POST", "/orders/1", &cross);
    assert_eq!(
        (status, json(&body)["error"].clone()),
        (403, "cross_site_request".into())
    );
    assert_eq!(send("GET", "/orders/1", &cross).0, 200);
    let same = [("Cookie", cookie.as_str()), ("Sec-Fetch-Site", "same-site")];
    assert_eq!(send("POST", "/orders/1", &same).0, 200);
    // The header is not a cookie: a cross-site request with it passes.
    let header = [
        ("Authorization", bearer.as_str()),
        ("Sec-Fetch-Site", "cross-site"),
    ];
    assert_eq!(send("POST", "/orders/1", &header).0, 200);
    // Forward auth: the original method decides.
    let check = |method: &str| {
        send(
            "GET",
            "/auth",
            &[
                ("Cookie", cookie.as_str()),
                ("Sec-Fetch-Site", "cross-site"),
                ("X-Original-URI", "/orders/1"),
                ("X-Original-Method", method),
            ],
        )
        .0
    };
    assert_eq!((check("GET"), check("DELETE")), (200, 403));
    assert_eq!(s.stop(), 0);

    // Without --strip-authorization the cookie goes upstream as it came.
    let s = Serving::start(&["--upstream", url.as_str(), "--token-cookie", "kms_token"]);
    let token = s.mint(r#"{"sub":"will"}"#);
    let cookie = format!("kms_token={token}; theme=dark");
    let (status, _, body) = http_full(s.public, "GET", "/x", &[("Cookie", &cookie)], "");
    assert_eq!(status, 200, "{body}");
    assert_eq!(received(&json(&body), "cookie"), [cookie.as_str()]);
    assert_eq!(s.stop(), 0);
}

#[test]
fn the_protected_resource_metadata_and_every_401_name_each_other() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = write_rules(dir.path(), &runbook_rules());
    let up = Upstream::start();
    let url = format!("http://{}", up.addr);
    let s = Serving::start(&[
        "--upstream",
        &url,
        "--access-rules",
        &rules,
        "--resource",
        "https://api.example.com/v1",
        "--authorization-server",
        "https://idp.example.com",
        "--authorization-server",
        "https://login.example.com/tenant",
    ]);
    let metadata_url = "https://api.example.com/.well-known/oauth-protected-resource/v1";
    let (status, lines, body) = http_full(
        s.public,
        "GET",
        "/.well-known/oauth-protected-resource/v1",
        &[],
        "",
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(header(&lines, "content-type"), Some("application/json"));
    assert_eq!(
        json(&body),
        serde_json::json!({
            "resource": "https://api.example.com/v1",
            "authorization_servers": ["https://idp.example.com", "https://login.example.com/tenant"],
            "bearer_methods_supported": ["header"],
            "scopes_supported": ["orders:write"],
        })
    );
    let challenge = |target: &str, auth: &[(&str, &str)]| {
        let (status, lines, _) = http_full(s.public, "GET", target, auth, "");
        (
            status,
            header(&lines, "www-authenticate").unwrap_or("").to_owned(),
        )
    };
    let bare = format!("Bearer resource_metadata=\"{metadata_url}\"");
    assert_eq!(challenge("/orders/1", &[]), (401, bare.clone()));
    assert_eq!(challenge("/whoami", &[]), (401, bare));
    let (status, refused) = challenge("/orders/1", &[("Authorization", "Bearer a.b.c")]);
    assert_eq!(status, 401);
    assert!(
        refused.starts_with("Bearer error=\"invalid_token\""),
        "{refused}"
    );
    assert!(
        refused.ends_with(&format!(", resource_metadata=\"{metadata_url}\"")),
        "{refused}"
    );
    assert_eq!(s.stop(), 0);

    let mut command = serve_command();
    command.args([
        "--resource",
        "http://api.example.com",
        "--authorization-server",
        "https://idp.example.com",
    ]);
    let (code, _, stderr) = run_to_exit(command);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("must be https"), "{stderr}");
}
