//! Forward authentication behind the real proxies: NGINX (`auth_request`)
//! and Caddy (`forward_auth`), each started by the test on a loopback port
//! with the configuration `docs/RUNBOOK.md` shows (the block after its
//! `<!-- tested: nginx -->` or `<!-- tested: caddy -->` marker, with the
//! test's addresses put in), in front of the echoing upstream of
//! support/upstream.rs, asking `gateway serve`.
//!
//! Needs Debian's `nginx` and `caddy` (installed by `.ci/run`); run with
//! `cargo test -p kms-gateway --features proxy-tests --test gateway proxies::`.
#![cfg(target_os = "linux")]

use crate::support::runbook::runbook_block;
use crate::support::serving;
use crate::support::upstream;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serving::{forged, http_full, json, now, Serving, CLAIM_HEADERS, HANG};
use upstream::{received, Upstream};

/// A loopback port nobody listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// A proxy process, killed when dropped.
struct Proxy {
    child: Child,
    addr: SocketAddr,
    log: std::path::PathBuf,
}

impl Proxy {
    fn start(mut command: Command, addr: SocketAddr, log: std::path::PathBuf) -> Proxy {
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .unwrap_or_else(|e| panic!("{command:?}: {e} (is it installed?)"));
        let mut proxy = Proxy { child, addr, log };
        let started = Instant::now();
        while TcpStream::connect(addr).is_err() {
            if let Ok(Some(status)) = proxy.child.try_wait() {
                panic!("{command:?} exited {status}: {}", proxy.log_text());
            }
            assert!(
                started.elapsed() < HANG,
                "no listener: {}",
                proxy.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        proxy
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn nginx(dir: &Path, gateway: SocketAddr, service: SocketAddr) -> Proxy {
    nginx_for(dir, &[gateway], service)
}

/// NGINX as RUNBOOK shows it, with one `server` line per gateway.
fn nginx_for(dir: &Path, gateways: &[SocketAddr], service: SocketAddr) -> Proxy {
    let port = free_port();
    let servers: Vec<String> = gateways.iter().map(|g| format!("server {g};")).collect();
    let site = runbook_block("nginx")
        .replace("server 127.0.0.1:8080;", &servers.join("\n    "))
        .replace("127.0.0.1:3000", &service.to_string())
        .replace("listen 8000;", &format!("listen 127.0.0.1:{port};"));
    std::fs::write(dir.join("site.conf"), site).expect("site.conf");
    let d = dir.display();
    // Run as root (CI), NGINX would hand its workers to `nobody`, who
    // cannot write the temporary directory.
    let user = if euid_is_root() {
        "user root root;"
    } else {
        ""
    };
    let main = format!(
        "{user}\ndaemon off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
         error_log {d}/error.log warn;\nevents {{ worker_connections 512; }}\n\
         http {{\n access_log off;\n client_body_temp_path {d}/body;\n\
         proxy_temp_path {d}/proxy;\n fastcgi_temp_path {d}/fastcgi;\n\
         uwsgi_temp_path {d}/uwsgi;\n scgi_temp_path {d}/scgi;\n\
         include {d}/site.conf;\n}}\n"
    );
    std::fs::write(dir.join("nginx.conf"), main).expect("nginx.conf");
    let mut command = Command::new("nginx");
    command
        .arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(dir.join("nginx.conf"));
    Proxy::start(
        command,
        SocketAddr::from(([127, 0, 0, 1], port)),
        dir.join("nginx.stderr"),
    )
}

fn euid_is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn caddy(dir: &Path, gateway: SocketAddr, service: SocketAddr) -> Proxy {
    let port = free_port();
    let site = runbook_block("caddy")
        .replace("127.0.0.1:8080", &gateway.to_string())
        .replace("127.0.0.1:3000", &service.to_string())
        .replace(":8000 {", &format!("http://127.0.0.1:{port} {{"));
    // No admin endpoint, no certificates, nothing kept: a test's Caddy.
    let file = format!("{{\n\tadmin off\n\tauto_https off\n}}\n\n{site}\n");
    std::fs::write(dir.join("Caddyfile"), file).expect("Caddyfile");
    let mut command = Command::new("caddy");
    command
        .args(["run", "--adapter", "caddyfile", "--config"])
        .arg(dir.join("Caddyfile"))
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("XDG_DATA_HOME", dir.join("data"));
    Proxy::start(
        command,
        SocketAddr::from(([127, 0, 0, 1], port)),
        dir.join("caddy.stderr"),
    )
}

/// The cases every proxy must pass, through `proxy`.
fn check_through(name: &str, start: fn(&Path, SocketAddr, SocketAddr) -> Proxy) {
    let dir = tempfile::tempdir().expect("tempdir");
    let up = Upstream::start();
    let gw = Serving::start(&CLAIM_HEADERS);
    let proxy = start(dir.path(), gw.public, up.addr);
    let through = |path: &str, headers: &[(&str, &str)]| {
        let mut headers = headers.to_vec();
        let host = proxy.addr.to_string();
        headers.push(("Host", &host));
        let (status, _, body) = http_full(proxy.addr, "GET", path, &headers, "");
        (status, body)
    };

    let alice = format!("Bearer {}", gw.mint(r#"{"sub":"alice"}"#));
    let (status, body) = through(
        "/app/items?id=7",
        &[
            ("Authorization", &alice),
            ("X-Auth-Subject", "forged"),
            ("X-Auth-Roles", "admin"),
            // Read as X-Auth-Roles by CGI-style services.
            ("X_Auth_Roles", "admin"),
        ],
    );
    assert_eq!(status, 200, "{name}: {body} {}", proxy.log_text());
    let echo = json(&body);
    assert!(
        echo["headers"]
            .as_array()
            .expect("headers")
            .iter()
            .all(|pair| !pair[0].as_str().expect("name").contains('_')),
        "{name}: {echo}"
    );
    assert_eq!(echo["target"], "/app/items?id=7", "{name}");
    assert_eq!(received(&echo, "x-auth-subject"), ["alice"], "{name}");
    // The token has no roles: the client's copy must not pass for one.
    assert!(received(&echo, "x-auth-roles").is_empty(), "{name}: {echo}");

    let bob = format!("Bearer {}", gw.mint(r#"{"sub":"bob","roles":["a","b"]}"#));
    let (status, body) = through("/", &[("Authorization", &bob)]);
    assert_eq!(status, 200, "{name}: {body}");
    let echo = json(&body);
    assert_eq!(received(&echo, "x-auth-subject"), ["bob"], "{name}");
    assert_eq!(received(&echo, "x-auth-roles"), [r#"["a","b"]"#], "{name}");
    let reached = up.requests();
    assert_eq!(reached, 2, "{name}");

    let short = gw.mint(&format!(r#"{{"sub":"carol","exp":{}}}"#, now() + 1));
    std::thread::sleep(Duration::from_millis(2100));
    let token = alice.trim_start_matches("Bearer ");
    for (what, bearer) in [
        ("forged", Some(format!("Bearer {}", forged(token)))),
        ("expired", Some(format!("Bearer {short}"))),
        ("missing", None),
    ] {
        let headers: Vec<(&str, &str)> = bearer
            .iter()
            .map(|b| ("Authorization", b.as_str()))
            .chain([("X-Auth-Subject", "forged")])
            .collect();
        let (status, body) = through("/app", &headers);
        assert_eq!(status, 401, "{name}, {what}: {body}");
    }
    assert_eq!(
        up.requests(),
        reached,
        "{name}: a refused request reached the service"
    );
    drop(proxy);
    assert_eq!(gw.stop(), 0);
}

/// A rolling update behind NGINX: two gateways trusting one partner's
/// keys, a steady load through NGINX, and one gateway stopped with
/// `--shutdown-delay 2`. Every request is answered 200: during the delay
/// the stopping gateway still serves; after it, NGINX retries a refused
/// or closed connection on the other.
#[test]
fn nginx_loses_no_request_while_a_gateway_stops_with_a_shutdown_delay() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;
    let dir = tempfile::tempdir().expect("tempdir");
    let partner = crate::support::partner::Partner::new("p1", 7);
    let set = dir.path().join("partner.jwks");
    crate::support::partner::write_set(&set, &[&partner]);
    let trust = format!("partner={}", set.display());
    let args = [
        "--trust-jwks-issuer",
        trust.as_str(),
        "--shutdown-delay",
        "2",
        "--claim-header",
        "sub=X-Auth-Subject",
    ];
    let up = Upstream::start();
    let mut leaving = Serving::start(&args);
    let staying = Serving::start(&args);
    let proxy = nginx_for(dir.path(), &[leaving.public, staying.public], up.addr);
    let bearer = format!(
        "Bearer {}",
        partner.token_with(serde_json::json!({}), serde_json::json!({"iss": "partner"}))
    );
    let host = proxy.addr.to_string();
    let stop = AtomicBool::new(false);
    let answers = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                let headers = [("Authorization", bearer.as_str()), ("Host", host.as_str())];
                let mut mine = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let (status, _, body) = http_full(proxy.addr, "GET", "/app", &headers, "");
                    mine.push((status, body));
                    // Steady, not a flood: a pause between requests.
                    std::thread::sleep(Duration::from_millis(5));
                }
                answers.lock().expect("answers").extend(mine);
            });
        }
        std::thread::sleep(Duration::from_millis(500));
        let signalled = Instant::now();
        leaving.signal("TERM");
        let (took, _) = serving::readyz_until(leaving.public, 503, HANG);
        assert!(took < Duration::from_millis(500), "503 after {took:?}");
        let (code, log) = leaving.exited();
        assert_eq!(code, 0, "{log:?}");
        assert!(signalled.elapsed() >= Duration::from_secs(2));
        // On past the stop, through the other gateway alone.
        std::thread::sleep(Duration::from_millis(1500));
        stop.store(true, Ordering::Relaxed);
    });
    let answers = answers.into_inner().expect("answers");
    assert!(answers.len() > 100, "only {} requests", answers.len());
    let lost: Vec<_> = answers
        .iter()
        .filter(|(status, _)| *status != 200)
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {} requests not 200: {:?}\n{}",
        lost.len(),
        answers.len(),
        lost.first(),
        proxy.log_text()
    );
    assert_eq!(staying.stop(), 0);
}

#[test]
fn nginx_auth_request_passes_only_verified_claims() {
    check_through("nginx", nginx);
}

#[test]
fn caddy_forward_auth_passes_only_verified_claims() {
    check_through("caddy", caddy);
}

/// The access rules RUNBOOK shows, through `proxy` configured as RUNBOOK
/// shows: every kind of answer, the normalization cases against the rule
/// on `/admin/`, the cookie cases. `gateway_body` says whether the proxy
/// passes the gateway's refusal on whole (Caddy) or answers with its own
/// page (NGINX).
fn check_rules_through(
    name: &str,
    start: fn(&Path, SocketAddr, SocketAddr) -> Proxy,
    gateway_body: bool,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = dir.path().join("rules.toml");
    std::fs::write(&rules, runbook_block("access-rules")).expect("rules");
    let rules = rules.to_str().expect("utf-8").to_owned();
    let up = Upstream::start();
    let mut args = vec![
        "--access-rules",
        rules.as_str(),
        "--token-cookie",
        "kms_token",
    ];
    args.extend_from_slice(&CLAIM_HEADERS);
    let gw = Serving::start(&args);
    let proxy = start(dir.path(), gw.public, up.addr);
    let through = |method: &str, path: &str, headers: &[(&str, &str)]| {
        let mut headers = headers.to_vec();
        let host = proxy.addr.to_string();
        headers.push(("Host", &host));
        http_full(proxy.addr, method, path, &headers, "")
    };
    let reader = gw.mint(r#"{"sub":"rita","scope":"orders:read","tenant":"acme"}"#);
    let writer = gw.mint(r#"{"sub":"will","scope":"orders:write","tenant":"beta"}"#);
    let outsider = gw.mint(r#"{"sub":"otto","tenant":"zeta","groups":"dev"}"#);
    let ops = gw.mint(r#"{"sub":"olga","groups":["ops"]}"#);
    let bearer = |token: &str| format!("Bearer {token}");
    let (reader_b, writer_b, outsider_b, ops_b) = (
        bearer(&reader),
        bearer(&writer),
        bearer(&outsider),
        bearer(&ops),
    );

    // (method, path, Authorization, status, the gateway's error, its
    // requirement)
    let cases: &[(&str, &str, &str, u16, &str, &str)] = &[
        // A route needing no token, and its method.
        ("GET", "/public/page?x=1", "", 200, "", ""),
        ("POST", "/public/page", "", 403, "access_denied", ""),
        // The preflight rule.
        ("OPTIONS", "/orders/7", "", 200, "", ""),
        // Token rules: none, a scope missing, a claim missing, both met.
        ("POST", "/orders/7", "", 401, "", ""),
        (
            "POST",
            "/orders/7",
            &reader_b,
            403,
            "insufficient_scope",
            "scope",
        ),
        ("POST", "/orders/7", &writer_b, 200, "", ""),
        (
            "GET",
            "/orders/7",
            &outsider_b,
            403,
            "insufficient_scope",
            "claim",
        ),
        ("GET", "/orders/7", &reader_b, 200, "", ""),
        // The default.
        ("GET", "/reports/1", &ops_b, 403, "access_denied", ""),
        // Normalization against the rule on /admin/: escapes decoded,
        // but dot-segments and repeated slashes, which the proxy passes
        // on unresolved, refused.
        (
            "GET",
            "/admin/x",
            &outsider_b,
            403,
            "insufficient_scope",
            "claim",
        ),
        (
            "GET",
            "/orders/../admin/x",
            &ops_b,
            403,
            "invalid_request",
            "",
        ),
        (
            "GET",
            "/orders/%2e%2e/admin/x",
            &ops_b,
            403,
            "invalid_request",
            "",
        ),
        ("GET", "//admin/x", &ops_b, 403, "invalid_request", ""),
        (
            "GET",
            "/%61dmin/x",
            &outsider_b,
            403,
            "insufficient_scope",
            "claim",
        ),
        ("GET", "/%61dmin/x", &ops_b, 200, "", ""),
        ("GET", "/ADMIN/x", &ops_b, 403, "access_denied", ""),
        ("GET", "/admin%2Fx", &ops_b, 403, "invalid_request", ""),
        ("GET", "/public/..;/admin/x", "", 403, "invalid_request", ""),
    ];
    for (method, path, authorization, status, error, requirement) in cases {
        let headers: Vec<(&str, &str)> = if authorization.is_empty() {
            Vec::new()
        } else {
            vec![("Authorization", authorization)]
        };
        let (got, lines, body) = through(method, path, &headers);
        assert_eq!(
            got,
            *status,
            "{name}: {method} {path}: {body} {}",
            proxy.log_text()
        );
        if gateway_body && !error.is_empty() {
            let answer = json(&body);
            assert_eq!(answer["error"], *error, "{name}: {method} {path}");
            if !requirement.is_empty() {
                assert_eq!(
                    answer["requirement"], *requirement,
                    "{name}: {method} {path}"
                );
                let challenge = lines
                    .iter()
                    .find_map(|l| {
                        l.strip_prefix("www-authenticate: ")
                            .or_else(|| l.strip_prefix("Www-Authenticate: "))
                    })
                    .unwrap_or("");
                assert!(
                    challenge.starts_with("Bearer error=\"insufficient_scope\""),
                    "{name}: {lines:?}"
                );
            }
        }
    }
    // What the proxy may let through and cut short, or upper-case: never
    // to the service.
    let reached = up.requests();
    for (method, path) in [
        ("GET", "/admin/x#/../../public/y"),
        ("post", "/orders/7"),
        ("GET", "/admin;x/y"),
    ] {
        let (status, _, body) = through(method, path, &[("Authorization", &outsider_b)]);
        assert!(
            status == 400 || status == 403,
            "{name}: {method} {path}: {status} {body}"
        );
    }
    assert_eq!(
        up.requests(),
        reached,
        "{name}: a refused request reached the service"
    );
    // A client's own X-Original-URI naming another path than the proxy's.
    let (status, _, _) = through(
        "GET",
        "/admin/x",
        &[
            ("X-Original-URI", "/public/x"),
            ("Authorization", &outsider_b),
        ],
    );
    assert_eq!(status, 403, "{name}");
    let (status, _, _) = through("GET", "/admin/x", &[("X-Original-URI", "/public/x")]);
    assert!(status == 401 || status == 403, "{name}: {status}");
    // The token in a cookie: a read passes, another site's form does not.
    let cookie = format!("kms_token={writer}");
    let (status, _, body) = through("GET", "/orders/7", &[("Cookie", &cookie)]);
    assert_eq!(status, 200, "{name}: {body}");
    assert_eq!(received(&json(&body), "x-auth-subject"), ["will"], "{name}");
    let cross = [
        ("Cookie", cookie.as_str()),
        ("Sec-Fetch-Site", "cross-site"),
    ];
    assert_eq!(through("POST", "/orders/7", &cross).0, 403, "{name}");
    let same = [
        ("Cookie", cookie.as_str()),
        ("Sec-Fetch-Site", "same-origin"),
    ];
    assert_eq!(through("POST", "/orders/7", &same).0, 200, "{name}");
    drop(proxy);
    assert_eq!(gw.stop(), 0);
}

#[test]
fn nginx_auth_request_applies_the_access_rules() {
    check_rules_through("nginx", nginx, false);
}

#[test]
fn caddy_forward_auth_applies_the_access_rules() {
    check_rules_through("caddy", caddy, true);
}
