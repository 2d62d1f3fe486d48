//! The gateway's lifecycle as an operator's probes and signals see it:
//! `/livez`, `/healthz` and `/readyz`, the shutdown delay after SIGTERM
//! (not ready, still serving), a second signal cutting it short, the
//! drain of what is in flight (`Connection: close`, `--drain-timeout`),
//! and SIGHUP refetching the providers' keys. Deadlines only catch hangs.

use crate::support::partner::Partner;
use crate::support::provider::Provider;
use crate::support::serving;
use crate::support::upstream::Upstream;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use serving::{http_full, json, readyz_until, Serving, HANG};

/// `GET path` on its own connection: the status, header lines and body.
fn get(addr: SocketAddr, path: &str) -> (u16, Vec<String>, String) {
    http_full(addr, "GET", path, &[], "")
}

/// Whether a header line `name: value` is among `lines` (case ignored).
fn has(lines: &[String], line: &str) -> bool {
    lines.iter().any(|l| l.eq_ignore_ascii_case(line))
}

#[test]
fn the_probes_answer_without_a_token_and_are_not_cached() {
    let up = Upstream::start();
    let rules = tempfile::NamedTempFile::new().expect("temp");
    std::fs::write(rules.path(), "default = \"deny\"\n").expect("write");
    let url = format!("http://{}", up.addr);
    let s = Serving::start(&[
        "--upstream",
        &url,
        "--access-rules",
        rules.path().to_str().expect("path"),
    ]);
    for path in ["/livez", "/healthz"] {
        let (status, lines, body) = get(s.public, path);
        assert_eq!(
            (status, json(&body)),
            (200, serde_json::json!({"status": "ok"}))
        );
        assert!(has(&lines, "cache-control: no-store"), "{lines:?}");
    }
    let (status, lines, body) = get(s.public, "/readyz");
    assert_eq!(
        (status, json(&body)),
        (200, serde_json::json!({"ready": true}))
    );
    assert!(has(&lines, "cache-control: no-store"), "{lines:?}");
    // Neither went upstream nor was denied by the rules.
    assert_eq!(up.requests(), 0);
    assert_eq!(get(s.public, "/elsewhere").0, 403);
    assert_eq!(s.stop(), 0);
}

#[test]
fn after_sigterm_it_is_not_ready_but_serves_for_the_shutdown_delay_then_stops() {
    let mut s = Serving::start(&["--shutdown-delay", "2"]);
    let token = s.mint(r#"{"sub":"alice"}"#);
    let signalled = Instant::now();
    s.signal("TERM");
    let (took, body) = readyz_until(s.public, 503, HANG);
    assert!(took < Duration::from_millis(500), "503 after {took:?}");
    assert_eq!(
        json(&body),
        serde_json::json!({"ready": false, "reasons": ["shutting_down"]})
    );
    // Everything else is served meanwhile, the admin face too.
    assert_eq!(s.whoami(&token).0, 200);
    assert_eq!(get(s.public, "/livez").0, 200);
    assert_eq!(s.admin("GET", "/keys/policy", "").0, 200);
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(s.whoami(&token).0, 200, "still serving 1 s into the delay");
    let (code, log) = s.exited();
    assert_eq!(code, 0, "{log:?}");
    assert!(
        signalled.elapsed() >= Duration::from_secs(2),
        "stopped after {:?}, within the delay",
        signalled.elapsed()
    );
    assert!(TcpStream::connect(s.public).is_err(), "still listening");
}

#[test]
fn a_second_signal_cuts_the_shutdown_delay_short() {
    let mut s = Serving::start(&["--shutdown-delay", "600"]);
    s.signal("INT");
    readyz_until(s.public, 503, HANG);
    s.signal("TERM");
    let (code, log) = s.exited();
    assert_eq!(code, 0, "{log:?}");
    assert!(log.iter().any(|l| l.contains("cut short")), "{log:?}");
}

#[test]
fn a_request_in_flight_at_the_stop_is_answered_with_connection_close() {
    let up = Upstream::start();
    let url = format!("http://{}", up.addr);
    let mut s = Serving::start(&["--upstream", &url]);
    let token = s.mint(r#"{"sub":"alice"}"#);
    let mut stream = TcpStream::connect(s.public).expect("connect");
    stream.set_read_timeout(Some(HANG)).expect("timeout");
    let request = format!(
        "GET /slow HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n\r\n",
        s.public
    );
    stream.write_all(request.as_bytes()).expect("write");
    std::thread::sleep(Duration::from_millis(300));
    s.signal("TERM");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let head = answer.split("\r\n\r\n").next().expect("head");
    assert!(
        head.lines()
            .any(|l| l.eq_ignore_ascii_case("connection: close")),
        "{head}"
    );
    let (code, log) = s.exited();
    assert_eq!(code, 0, "{log:?}");
}

#[test]
fn the_drain_timeout_bounds_a_request_that_never_ends() {
    let up = Upstream::start();
    let url = format!("http://{}", up.addr);
    let mut s = Serving::start(&["--upstream", &url, "--drain-timeout", "1", "--access-log"]);
    let token = s.mint(r#"{"sub":"alice"}"#);
    let mut stream = TcpStream::connect(s.public).expect("connect");
    let request = format!(
        "GET /hang HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n\r\n",
        s.public
    );
    stream.write_all(request.as_bytes()).expect("write");
    let deadline = Instant::now() + HANG;
    while up.requests() == 0 {
        assert!(Instant::now() < deadline, "the request never went upstream");
        std::thread::sleep(Duration::from_millis(10));
    }
    let signalled = Instant::now();
    s.signal("TERM");
    let (code, log) = s.exited();
    assert_eq!(code, 0, "{log:?}");
    assert!(
        signalled.elapsed() < Duration::from_secs(20),
        "{:?}",
        signalled.elapsed()
    );
    assert!(
        log.iter().any(|l| l.contains("did not drain in 1 s")),
        "{log:?}"
    );
    // The connection was closed at the deadline, so its line was written
    // (the writer finished; nothing was lost).
    assert!(!log.iter().any(|l| l.contains("may be lost")), "{log:?}");
    let mut lines = Vec::new();
    while let Ok(line) = s.stdout.recv_timeout(HANG) {
        lines.push(line);
    }
    assert!(
        lines.iter().any(|l| l.contains("\"path\":\"/hang\"")),
        "{lines:?}"
    );
}

#[test]
fn an_issuer_unreachable_at_start_keeps_readyz_503_until_its_keys_arrive() {
    let partner = Partner::new("p1", 7);
    // The provider's port, picked now, served later.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let issuer = format!("http://{}", listener.local_addr().expect("addr"));
    drop(listener);
    let s = Serving::start(&["--issuer", &issuer, "--jwks-fetch-timeout", "1"]);
    let (status, _, body) = get(s.public, "/readyz");
    assert_eq!(
        (status, json(&body)),
        (
            503,
            serde_json::json!({"ready": false, "reasons": ["issuer_keys"]})
        )
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(get(s.public, "/readyz").0, 503, "ready without the keys");
    let again = TcpListener::bind(issuer.trim_start_matches("http://")).expect("rebind the port");
    let _provider = Provider::start_on(again, vec![partner.jwk()]);
    readyz_until(s.public, 200, HANG);
    let token = partner.token_with(serde_json::json!({}), serde_json::json!({"iss": issuer}));
    assert_eq!(s.whoami(&token).0, 200);
    assert_eq!(s.stop(), 0);
}

#[test]
fn sighup_refetches_every_issuer_so_a_removed_key_stops_verifying() {
    let (old, new) = (Partner::new("old", 7), Partner::new("new", 8));
    let provider = Provider::start_on(
        TcpListener::bind("127.0.0.1:0").expect("bind"),
        vec![old.jwk(), new.jwk()],
    );
    let issuer = provider.issuer.clone();
    let s = Serving::start(&["--issuer", &issuer, "--jwks-refetch-cooldown", "0.1"]);
    readyz_until(s.public, 200, HANG);
    let claims = serde_json::json!({"iss": issuer});
    let token = old.token_with(serde_json::json!({}), claims.clone());
    assert_eq!(s.whoami(&token).0, 200);
    // The provider drops the key; the gateway's set would live on for its
    // lifetime without the operator's SIGHUP.
    provider.set_keys(vec![new.jwk()]);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(s.whoami(&token).0, 200, "refetched without being asked");
    let line = s.hangup("refetching the keys");
    assert!(line.contains("1 of 1 issuers"), "{line}");
    let started = Instant::now();
    while s.whoami(&token).0 != 401 {
        assert!(started.elapsed() < HANG, "the removed key still verifies");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        s.whoami(&new.token_with(serde_json::json!({}), claims)).0,
        200
    );
    assert_eq!(s.stop(), 0);
}
