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

use crate::support::serving;
use crate::support::upstream;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serving::{forged, http_full, json, now, Serving, CLAIM_HEADERS, HANG};
use upstream::{received, Upstream};

/// The fenced block after `<!-- tested: NAME -->` in docs/RUNBOOK.md.
fn runbook_block(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/RUNBOOK.md");
    let text = std::fs::read_to_string(&path).expect("RUNBOOK.md");
    let marker = format!("<!-- tested: {name} -->");
    let after = text
        .split_once(&marker)
        .unwrap_or_else(|| panic!("no {marker} in RUNBOOK.md"))
        .1;
    let body = after
        .split_once("```")
        .and_then(|(_, rest)| rest.split_once('\n'))
        .expect("a fenced block after the marker")
        .1;
    body.split_once("\n```")
        .expect("the block's end")
        .0
        .to_owned()
}

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
    let port = free_port();
    let site = runbook_block("nginx")
        .replace("127.0.0.1:8080", &gateway.to_string())
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
        ],
    );
    assert_eq!(status, 200, "{name}: {body} {}", proxy.log_text());
    let echo = json(&body);
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

#[test]
fn nginx_auth_request_passes_only_verified_claims() {
    check_through("nginx", nginx);
}

#[test]
fn caddy_forward_auth_passes_only_verified_claims() {
    check_through("caddy", caddy);
}
