//! The proxy mode (`serve --upstream`) as a user runs it: `gateway serve`
//! as a child process in front of a small upstream the test starts
//! (support/upstream.rs), both on loopback ports they pick. Deadlines
//! only catch hangs.
#![cfg(target_os = "linux")]

use crate::support::serving;
use crate::support::upstream;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use serde_json::Value;
use serving::{forged, http_full, json, now, Serving, CLAIM_HEADERS, HANG};
use upstream::{received, Upstream};

fn start(upstream: SocketAddr, extra: &[&str]) -> Serving {
    let url = format!("http://{upstream}");
    let mut args = vec!["--upstream", &url];
    args.extend_from_slice(&CLAIM_HEADERS);
    args.extend_from_slice(extra);
    Serving::start(&args)
}

#[test]
fn a_valid_token_reaches_the_upstream_with_its_claims_and_nothing_forged() {
    let up = Upstream::start();
    let s = start(up.addr, &[]);
    let token = s.mint(r#"{"sub":"alice"}"#);
    let bearer = format!("Bearer {token}");
    let target = "/api/items?id=7&x=%2F&y=a%20b";
    let (status, lines, body) = http_full(
        s.public,
        "GET",
        target,
        &[
            ("Authorization", &bearer),
            ("X-Auth-Subject", "forged"),
            ("X-Auth-Roles", "admin"),
            ("X-Forwarded-For", "1.2.3.4"),
            ("X-Forwarded-Host", "evil.example"),
            ("Forwarded", "for=1.2.3.4"),
            ("X-Hop", "secret"),
            ("Connection", "close, X-Hop"),
            ("Host", "api.example"),
        ],
        "",
    );
    assert_eq!(status, 200, "{body}");
    assert!(lines
        .iter()
        .any(|l| l.eq_ignore_ascii_case("x-upstream: yes")));
    let echo = json(&body);
    assert_eq!(echo["target"], target);
    assert_eq!(received(&echo, "x-auth-subject"), ["alice"]);
    assert!(received(&echo, "x-auth-roles").is_empty(), "{echo}");
    assert_eq!(received(&echo, "authorization"), [bearer.as_str()]);
    assert_eq!(received(&echo, "x-forwarded-for"), ["127.0.0.1"]);
    assert_eq!(received(&echo, "x-forwarded-proto"), ["http"]);
    assert_eq!(received(&echo, "x-forwarded-host"), ["api.example"]);
    assert_eq!(received(&echo, "host"), ["api.example"]);
    assert_eq!(
        received(&echo, "forwarded"),
        ["for=127.0.0.1;proto=http;host=\"api.example\""]
    );
    assert!(received(&echo, "x-hop").is_empty(), "{echo}");
    assert_eq!(up.requests(), 1);

    // The gateway's own routes stay its own; /auth is the upstream's
    // unless --forward-auth-path is given.
    let (status, _) = s.whoami(&token);
    assert_eq!(status, 200);
    let (status, _, _) = http_full(s.public, "GET", "/healthz", &[], "");
    assert_eq!(status, 200);
    assert_eq!(up.requests(), 1);
    let (status, _, body) = s.get_with("/auth", &bearer);
    assert_eq!(
        (status, json(&body)["target"].clone()),
        (200, "/auth".into())
    );
    assert_eq!(up.requests(), 2);

    // A forged, expired or missing token, or a claim that cannot be a
    // header: 401 from the gateway, never the upstream.
    let short = s.mint(&format!(r#"{{"sub":"bob","exp":{}}}"#, now() + 1));
    let bad = s.mint(r#"{"sub":"eve\nX-Admin: yes"}"#);
    std::thread::sleep(Duration::from_millis(2100));
    for (what, headers) in [
        ("forged", vec![format!("Bearer {}", forged(&token))]),
        ("expired", vec![format!("Bearer {short}")]),
        ("unwritable claim", vec![format!("Bearer {bad}")]),
        ("missing", vec![]),
    ] {
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|h| ("Authorization", h.as_str()))
            .collect();
        let (status, lines, _) = http_full(s.public, "POST", "/api/items", &headers, "{}");
        assert_eq!(status, 401, "{what}");
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("www-authenticate: Bearer")),
            "{what}: {lines:?}"
        );
    }
    assert_eq!(up.requests(), 2);
    assert_eq!(s.stop(), 0);
}

#[test]
fn a_trusted_proxys_forwarding_headers_are_kept_and_authorization_can_be_stripped() {
    let up = Upstream::start();
    let s = start(
        up.addr,
        &[
            "--trusted-proxy",
            "127.0.0.0/8",
            "--strip-authorization",
            "--forward-auth-path",
            "/auth",
        ],
    );
    let bearer = format!("Bearer {}", s.mint(r#"{"sub":"alice","roles":["a","b"]}"#));
    let (status, _, body) = http_full(
        s.public,
        "GET",
        "/x",
        &[
            ("Authorization", &bearer),
            ("X-Forwarded-For", "203.0.113.9"),
            ("X-Forwarded-Proto", "https"),
            ("X-Forwarded-Host", "api.example"),
        ],
        "",
    );
    assert_eq!(status, 200, "{body}");
    let echo = json(&body);
    assert_eq!(
        received(&echo, "x-forwarded-for"),
        ["203.0.113.9, 127.0.0.1"]
    );
    assert_eq!(received(&echo, "x-forwarded-proto"), ["https"]);
    assert_eq!(received(&echo, "x-forwarded-host"), ["api.example"]);
    assert_eq!(received(&echo, "x-auth-roles"), [r#"["a","b"]"#]);
    assert!(received(&echo, "authorization").is_empty(), "{echo}");
    // --forward-auth-path given: the route is the gateway's again.
    let (status, lines, body) = s.get_with("/auth/x", &bearer);
    assert_eq!((status, body.as_str()), (200, ""));
    assert!(
        lines.iter().any(|l| l == "x-auth-subject: alice"),
        "{lines:?}"
    );
    assert_eq!(up.requests(), 1);
    assert_eq!(s.stop(), 0);
}

#[test]
fn an_upstream_that_is_down_is_502_and_one_that_does_not_answer_504() {
    // A port nobody listens on: bound, then closed.
    let closed = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr");
    let s = start(closed, &[]);
    let bearer = format!("Bearer {}", s.mint(r#"{"sub":"a"}"#));
    let (status, _, body) = s.get_with("/x", &bearer);
    assert_eq!(status, 502, "{body}");
    assert_eq!(json(&body)["error"], "proxy.upstream_unavailable");
    assert_eq!(s.stop(), 0);

    let up = Upstream::start();
    let s = start(up.addr, &["--upstream-timeout", "1"]);
    let bearer = format!("Bearer {}", s.mint(r#"{"sub":"a"}"#));
    let started = Instant::now();
    let (status, _, body) = s.get_with("/hang", &bearer);
    let took = started.elapsed();
    assert_eq!(status, 504, "{body}");
    assert_eq!(json(&body)["error"], "proxy.upstream_timeout");
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(20),
        "{took:?}"
    );
    assert_eq!(s.stop(), 0);
}

/// The gateway's peak resident set (`VmHWM`), in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

#[test]
fn a_256_mib_body_streams_through_without_being_held() {
    const MIB: usize = 1024 * 1024;
    const SIZE: usize = 256 * MIB;
    let up = Upstream::start();
    let s = start(up.addr, &[]);
    let bearer = format!("Bearer {}", s.mint(r#"{"sub":"a"}"#));
    // Warm: the first proxied request sets up the client and its pool.
    let (status, _, _) = s.get_with("/warm", &bearer);
    assert_eq!(status, 200);
    let before = peak_rss_kib(s.child.id());
    let mut stream = TcpStream::connect(s.public).expect("connect");
    stream.set_read_timeout(Some(HANG)).expect("timeout");
    stream.set_write_timeout(Some(HANG)).expect("timeout");
    let head = format!(
        "POST /upload HTTP/1.1\r\nHost: {}\r\nAuthorization: {bearer}\r\n\
         Content-Type: application/octet-stream\r\nContent-Length: {SIZE}\r\n\
         Connection: close\r\n\r\n",
        s.public
    );
    stream.write_all(head.as_bytes()).expect("head");
    let chunk = vec![0x5a_u8; MIB];
    for _ in 0..SIZE / MIB {
        stream.write_all(&chunk).expect("body");
    }
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    let after = peak_rss_kib(s.child.id());
    let (head, body) = response.split_once("\r\n\r\n").expect("head");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let echo: Value = serde_json::from_str(body).expect("json");
    assert_eq!(echo["body_bytes"], SIZE as u64);
    let grown_mib = (after.saturating_sub(before)) / 1024;
    eprintln!("peak RSS {before} -> {after} KiB");
    assert!(
        grown_mib < 64,
        "peak RSS grew {grown_mib} MiB ({before} -> {after} KiB)"
    );
    assert_eq!(s.stop(), 0);
}

/// Sends a `POST` head announcing `size` bytes to the gateway, then
/// `chunks` (each after its pause); returns the stream, to read the
/// answer from.
fn upload(s: &Serving, bearer: &str, size: usize, chunks: &[(&[u8], Duration)]) -> TcpStream {
    let mut stream = TcpStream::connect(s.public).expect("connect");
    stream.set_read_timeout(Some(HANG)).expect("timeout");
    let head = format!(
        "POST /upload HTTP/1.1\r\nHost: {}\r\nAuthorization: {bearer}\r\n\
         Content-Length: {size}\r\nConnection: close\r\n\r\n",
        s.public
    );
    stream.write_all(head.as_bytes()).expect("head");
    for (chunk, pause) in chunks {
        std::thread::sleep(*pause);
        stream.write_all(chunk).expect("chunk");
    }
    stream
}

#[test]
fn an_upload_may_outlast_the_upstream_timeout_while_it_moves_and_a_stall_ends_it() {
    let up = Upstream::start();
    let s = start(up.addr, &["--upstream-timeout", "1", "--idle-timeout", "1"]);
    let bearer = format!("Bearer {}", s.mint(r#"{"sub":"a"}"#));
    // 2.4 s of upload, a chunk every 0.6 s: longer than the upstream
    // timeout, never idle for the idle timeout.
    let pause = Duration::from_millis(600);
    let chunk: &[u8] = b"0123456789";
    let mut stream = upload(&s, &bearer, 40, &[(chunk, pause); 4]);
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains(r#""body_bytes":40"#), "{answer}");

    // Half the body, then silence: cut at the idle timeout (the gateway
    // answers 502 or closes), not held.
    let started = Instant::now();
    let mut stream = upload(&s, &bearer, 40, &[(chunk, Duration::ZERO)]);
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(20), "held for {took:?}");
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 502"),
        "{answer}"
    );

    // An upstream that stops in the middle of its answer: the client gets
    // the head and what came, then the connection ends.
    let started = Instant::now();
    let mut stream = TcpStream::connect(s.public).expect("connect");
    stream.set_read_timeout(Some(HANG)).expect("timeout");
    let head = format!(
        "GET /stall HTTP/1.1\r\nHost: {}\r\nAuthorization: {bearer}\r\n\r\n",
        s.public
    );
    stream.write_all(head.as_bytes()).expect("head");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(20), "held for {took:?}");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("partial"), "{answer}");
    assert_eq!(s.stop(), 0);
}

#[test]
fn connect_and_trace_are_not_forwarded() {
    let up = Upstream::start();
    let s = start(up.addr, &[]);
    let bearer = format!("Bearer {}", s.mint(r#"{"sub":"a"}"#));
    for method in ["TRACE", "CONNECT"] {
        let (status, _, body) =
            http_full(s.public, method, "/x", &[("Authorization", &bearer)], "");
        assert_eq!(status, 405, "{method}: {body}");
    }
    assert_eq!(up.requests(), 0);
    assert_eq!(s.stop(), 0);
}

#[test]
fn no_underscored_header_and_no_untrusted_forwarding_header_reaches_the_upstream() {
    let up = Upstream::start();
    let s = start(up.addr, &[]);
    let bearer = format!("Bearer {}", s.mint(r#"{"sub":"alice"}"#));
    let (status, _, body) = http_full(
        s.public,
        "GET",
        "/x",
        &[
            ("Authorization", &bearer),
            // Read as X-Auth-Roles by CGI, WSGI and Rack servers.
            ("X_Auth_Roles", "admin"),
            ("X-Real-IP", "203.0.113.9"),
            ("X-Forwarded-Port", "443"),
            ("X-Forwarded-Prefix", "/admin"),
        ],
        "",
    );
    assert_eq!(status, 200, "{body}");
    let echo = json(&body);
    for name in [
        "x_auth_roles",
        "x-auth-roles",
        "x-real-ip",
        "x-forwarded-port",
        "x-forwarded-prefix",
    ] {
        assert!(received(&echo, name).is_empty(), "{name}: {echo}");
    }
    assert_eq!(received(&echo, "x-forwarded-for"), ["127.0.0.1"]);
    assert_eq!(s.stop(), 0);

    // A trusted proxy's own forwarding headers stay; `_` never passes.
    let s = start(up.addr, &["--trusted-proxy", "127.0.0.1"]);
    let bearer = format!("Bearer {}", s.mint(r#"{"sub":"alice"}"#));
    let (status, _, body) = http_full(
        s.public,
        "GET",
        "/x",
        &[
            ("Authorization", &bearer),
            ("X-Real-IP", "203.0.113.9"),
            ("X-Forwarded-Port", "443"),
            ("X_Auth_Subject", "mallory"),
        ],
        "",
    );
    assert_eq!(status, 200, "{body}");
    let echo = json(&body);
    assert_eq!(received(&echo, "x-real-ip"), ["203.0.113.9"]);
    assert_eq!(received(&echo, "x-forwarded-port"), ["443"]);
    assert!(received(&echo, "x_auth_subject").is_empty(), "{echo}");
    assert_eq!(received(&echo, "x-auth-subject"), ["alice"]);
    assert_eq!(s.stop(), 0);

    // A claim header may not be named with `_`.
    let mut command = serving::serve_command();
    command.args(["--claim-header", "roles=X_Auth_Roles"]);
    let (code, _, stderr) = serving::run_to_exit(command);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("_"), "{stderr}");
}

#[test]
fn a_duplicate_or_malformed_host_is_400_and_an_absolute_target_names_the_host() {
    let up = Upstream::start();
    let s = start(up.addr, &[]);
    let token = s.mint(r#"{"sub":"alice"}"#);
    let bearer = format!("Bearer {token}");
    let request = |target: &str, hosts: &[&str]| {
        let mut headers = vec![("Authorization", bearer.as_str())];
        headers.extend(hosts.iter().map(|host| ("Host", *host)));
        let (status, _, body) = http_full(s.public, "GET", target, &headers, "");
        (status, body)
    };
    for hosts in [
        &["a.example", "b.example"][..],
        &["a\"b.example"],
        &["a.example:99999"],
        &["user@a.example"],
    ] {
        let (status, body) = request("/x", hosts);
        assert_eq!(status, 400, "{hosts:?}: {body}");
        assert_eq!(json(&body)["error"], "proxy.invalid_host", "{hosts:?}");
    }
    assert_eq!(up.requests(), 0);
    let (status, body) = request("http://a.example:81/x?q=1", &["b.example"]);
    assert_eq!(status, 200, "{body}");
    let echo = json(&body);
    assert_eq!(received(&echo, "host"), ["a.example:81"]);
    assert_eq!(echo["target"], "/x?q=1");
    assert_eq!(
        received(&echo, "forwarded"),
        ["for=127.0.0.1;proto=http;host=\"a.example:81\""]
    );
    assert_eq!(s.stop(), 0);
}

#[test]
fn a_connect_that_hangs_and_an_upstream_that_stops_reading_are_504() {
    // A listener whose backlog is full: further connects hang.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (full, _held) = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind("127.0.0.1:0".parse().expect("addr"))
            .expect("bind");
        let listener = socket.listen(0).expect("listen");
        let addr = listener.local_addr().expect("addr");
        let mut held = Vec::new();
        for _ in 0..4 {
            if let Ok(Ok(stream)) = tokio::time::timeout(
                Duration::from_millis(200),
                tokio::net::TcpStream::connect(addr),
            )
            .await
            {
                held.push(stream);
            }
        }
        (addr, (listener, held))
    });
    let s = start(full, &["--upstream-connect-timeout", "0.5"]);
    let bearer = format!("Bearer {}", s.mint(r#"{"sub":"a"}"#));
    let started = Instant::now();
    let (status, _, body) = s.get_with("/x", &bearer);
    assert_eq!(status, 504, "{body}");
    assert_eq!(json(&body)["error"], "proxy.upstream_timeout");
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(s.stop(), 0);

    // An upstream that accepts and never reads: the upload cannot be
    // written, and the exchange ends at the idle timeout.
    let deaf = TcpListener::bind("127.0.0.1:0").expect("bind");
    let deaf_addr = deaf.local_addr().expect("addr");
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        while let Ok((stream, _)) = deaf.accept() {
            kept.push(stream);
        }
    });
    let s = start(
        deaf_addr,
        &["--idle-timeout", "1", "--upstream-timeout", "600"],
    );
    let bearer = format!("Bearer {}", s.mint(r#"{"sub":"a"}"#));
    const SIZE: usize = 512 * 1024 * 1024;
    let mut stream = TcpStream::connect(s.public).expect("connect");
    stream.set_read_timeout(Some(HANG)).expect("timeout");
    let head = format!(
        "POST /upload HTTP/1.1\r\nHost: {}\r\nAuthorization: {bearer}\r\n\
         Content-Length: {SIZE}\r\nConnection: close\r\n\r\n",
        s.public
    );
    stream.write_all(head.as_bytes()).expect("head");
    let mut writer = stream.try_clone().expect("clone");
    std::thread::spawn(move || {
        let chunk = vec![0x5a_u8; 1024 * 1024];
        for _ in 0..SIZE / chunk.len() {
            if writer.write_all(&chunk).is_err() {
                break;
            }
        }
    });
    let started = Instant::now();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 504"), "{answer}");
    assert!(answer.contains("proxy.upstream_timeout"), "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(s.stop(), 0);
}
