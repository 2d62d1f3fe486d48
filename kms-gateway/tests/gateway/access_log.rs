//! `--access-log` and `--log-format` as an operator reads them: one JSON
//! line per request on stdout with the documented fields and nothing of
//! the token, the forward-auth check's original request, the deciding
//! rule, the admin face's requests; JSON stderr lines; and a stdout no one
//! reads costs requests nothing (lines dropped and counted). Deadlines
//! only catch hangs.

use crate::support::serving;
use crate::support::upstream::Upstream;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::Value;
use serving::{forged, http_full, json, Serving, HANG};

/// The next access-log line, parsed.
fn next_line(s: &Serving) -> Value {
    let line = s.stdout.recv_timeout(HANG).expect("an access-log line");
    json(&line)
}

#[test]
fn each_request_is_one_json_line_with_the_token_but_never_the_token_itself() {
    let s = Serving::start(&["--access-log", "--token-issuer", "https://kms.example"]);
    let token = s.mint(r#"{"sub":"alice","secret_claim":"do-not-log"}"#);
    // The mint itself, on the admin face.
    let minted = next_line(&s);
    assert_eq!(minted["face"], "admin");
    assert_eq!(minted["method"], "POST");
    assert_eq!(minted["path"], "/tokens");
    assert_eq!(minted["status"], 200);
    assert!(
        minted.get("sub").is_none(),
        "the admin secret is no token: {minted}"
    );

    let bearer = format!("Bearer {token}");
    let (status, _, body) = s.get_with("/whoami?x=secret-query", &bearer);
    assert_eq!(status, 200, "{body}");
    let first = next_line(&s);
    let text = first.to_string();
    assert_eq!(first["method"], "GET");
    assert_eq!(first["path"], "/whoami", "no query");
    assert_eq!(first["status"], 200);
    assert_eq!(first["face"], "public");
    assert_eq!(first["client"], "127.0.0.1");
    assert_eq!(first["iss"], "https://kms.example");
    assert_eq!(first["sub"], "alice");
    assert_eq!(first["cached"], false);
    assert!(first["kid"]
        .as_str()
        .expect("kid")
        .starts_with("kms:gateway:tokens:"));
    assert!(first["duration_us"].as_u64().is_some());
    assert_eq!(first["bytes_out"].as_u64(), Some(body.len() as u64));
    let ts = first["ts"].as_str().expect("ts");
    assert_eq!(ts.len(), "2026-11-28T10:00:00.123456Z".len(), "{ts}");
    assert!(ts.ends_with('Z') && ts.as_bytes()[10] == b'T', "{ts}");
    for secret in [token.as_str(), "do-not-log", "secret-query"] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    assert!(first.get("code").is_none());

    s.get_with("/whoami", &bearer);
    assert_eq!(next_line(&s)["cached"], true, "the cache answered");

    // A refusal: its stable code, not the body's `invalid_token`.
    let (status, _, _) = s.get_with("/whoami", &format!("Bearer {}", forged(&token)));
    assert_eq!(status, 401);
    let refused = next_line(&s);
    assert_eq!(refused["status"], 401);
    assert_eq!(refused["code"], "jose.invalid_signature");
    assert!(refused.get("sub").is_none());
    let (status, _, _) = http_full(s.public, "GET", "/nowhere", &[], "");
    assert_eq!(status, 404);
    assert_eq!(next_line(&s)["code"], "http.not_found");
    assert_eq!(s.stop(), 0);
}

#[test]
fn forward_auth_logs_the_original_request_and_the_deciding_rule() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = dir.path().join("rules.toml");
    std::fs::write(
        &rules,
        "default = \"deny\"\n[[rule]]\npath = \"/public/\"\nallow = \"anyone\"\n\
         [[rule]]\npath = \"/app/\"\n",
    )
    .expect("write");
    let rules = rules.to_str().expect("utf-8");
    let s = Serving::start(&["--access-log", "--access-rules", rules]);
    let token = s.mint(r#"{"sub":"bob"}"#);
    let _minted = next_line(&s);
    let bearer = format!("Bearer {token}");
    let check = |uri: &str, method: &str, authorization: Option<&str>| {
        let mut headers = vec![("X-Original-URI", uri), ("X-Original-Method", method)];
        if let Some(a) = authorization {
            headers.push(("Authorization", a));
        }
        http_full(s.public, "GET", "/auth", &headers, "").0
    };
    assert_eq!(check("/app/items?id=7", "DELETE", Some(&bearer)), 200);
    let line = next_line(&s);
    assert_eq!(line["method"], "DELETE");
    assert_eq!(line["path"], "/app/items");
    assert_eq!(line["rule"], 1);
    assert_eq!(line["sub"], "bob");
    assert_eq!(check("/public/x", "GET", None), 200);
    let line = next_line(&s);
    assert_eq!(
        (line["path"].clone(), line["rule"].clone()),
        ("/public/x".into(), 0.into())
    );
    assert!(line.get("kid").is_none(), "no token looked at: {line}");
    assert_eq!(check("/elsewhere", "GET", Some(&bearer)), 403);
    let line = next_line(&s);
    assert_eq!(line["rule"], "default");
    assert_eq!(line["code"], "access_denied");
    assert_eq!(s.stop(), 0);
}

#[test]
fn the_proxy_mode_logs_what_reached_the_upstream() {
    let up = Upstream::start();
    let url = format!("http://{}", up.addr);
    let s = Serving::start(&["--access-log", "--upstream", &url]);
    let token = s.mint(r#"{"sub":"carol"}"#);
    let _minted = next_line(&s);
    let (status, _, body) = s.get_with("/api/x?q=1", &format!("Bearer {token}"));
    assert_eq!(status, 200);
    let line = next_line(&s);
    assert_eq!(line["path"], "/api/x");
    assert_eq!(line["sub"], "carol");
    assert_eq!(line["bytes_out"].as_u64(), Some(body.len() as u64));
    assert!(line.get("rule").is_none(), "no access rules: {line}");
    assert_eq!(s.stop(), 0);
}

#[test]
fn log_format_json_writes_every_other_line_as_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = dir.path().join("admin-secret");
    std::fs::write(&secret, "s".repeat(40)).expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let mut s = Serving::start(&[
        "--log-format",
        "json",
        "--admin-token-file",
        secret.to_str().expect("utf-8"),
    ]);
    let serving: Vec<String> = s.early.clone();
    s.signal("TERM");
    let (code, rest) = s.exited();
    assert_eq!(code, 0, "{rest:?}");
    let mut all = serving;
    all.extend(rest);
    assert!(!all.is_empty());
    for line in &all {
        let value = json(line);
        assert_eq!(value["target"], "kms_gateway", "{line}");
        assert!(value["fields"]["message"].is_string(), "{line}");
        assert!(value["timestamp"].is_string(), "{line}");
        assert!(
            value["level"] == "INFO" || value["level"] == "WARN",
            "{line}"
        );
    }
    assert!(
        all.iter().any(|l| l.contains("gateway serve: stopped")),
        "{all:?}"
    );
}

#[test]
fn a_stdout_no_one_reads_drops_lines_and_never_holds_a_request() {
    // stdout a pipe nobody reads: once it is full, the writer blocks and
    // the queue fills; requests go on, and the lines are counted dropped.
    let mut child = Command::new(serving::gateway())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
        ])
        .arg("--access-log")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let _unread = child.stdout.take();
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let (mut faces, mut secret_path) = (None, None);
    while faces.is_none() {
        let mut line = String::new();
        let read = std::io::BufRead::read_line(&mut stderr, &mut line).expect("stderr");
        assert!(read > 0, "gateway serve exited");
        if let Some(path) = line.trim().strip_prefix("gateway serve: admin secret in ") {
            secret_path = Some(path.to_owned());
        }
        if line.contains("public face on") {
            let addr = |face: &str| -> std::net::SocketAddr {
                line.split(&format!("{face} face on http://"))
                    .nth(1)
                    .and_then(|rest| rest.split([',', ' ']).next())
                    .expect("address")
                    .parse()
                    .expect("address")
            };
            faces = Some((addr("public"), addr("admin")));
        }
    }
    let (public, admin) = faces.expect("addresses");
    let mut stream = TcpStream::connect(public).expect("connect");
    stream.set_read_timeout(Some(HANG)).expect("timeout");
    let request = format!("GET /livez HTTP/1.1\r\nHost: {public}\r\n\r\n");
    let started = Instant::now();
    let mut buf = vec![0u8; 4096];
    let requests = 20_000;
    for _ in 0..requests {
        stream.write_all(request.as_bytes()).expect("write");
        let mut got = 0;
        loop {
            let n = stream.read(&mut buf[got..]).expect("read");
            assert!(n > 0, "closed");
            got += n;
            // The head, then the 15-byte body {"status":"ok"}.
            let text = &buf[..got];
            if let Some(end) = text.windows(4).position(|w| w == b"\r\n\r\n") {
                if got >= end + 4 + 15 {
                    break;
                }
            }
        }
    }
    assert!(
        started.elapsed() < HANG,
        "{requests} requests took {:?}",
        started.elapsed()
    );
    let secret = std::fs::read_to_string(secret_path.expect("the admin secret"))
        .expect("secret")
        .trim()
        .to_owned();
    let (status, metrics) = serving::admin_http(admin, &secret, "GET", "/metrics", "");
    assert_eq!(status, 200);
    let dropped: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("kms_access_log_dropped_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no dropped count in {metrics}"));
    assert!(dropped > 0, "{dropped}");
    let _ = child.kill();
    let _ = child.wait();
}
