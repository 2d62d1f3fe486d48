//! `gateway serve --issuer` against a real OpenID provider nobody here
//! wrote: Node's `oidc-provider` (tests/oidc, the version pinned in its
//! package-lock.json; `npm ci` there first, as `.ci/run` does), started on
//! a loopback port by the test and stopped by it, issuing RFC 9068 JWT
//! access tokens through the client_credentials grant. Tokens it signs
//! with EdDSA, Ed25519, RS256, PS256 and ES256 verify through `/whoami`;
//! a restart with new keys is followed at the first token under a new
//! `kid`; with the provider stopped, known keys still verify and an
//! unknown `kid` is refused within the fetch timeout; a flood of unknown
//! `kid`s causes a bounded number of fetches, counted at the provider.
//! With `--issuer-typ ISSUER=at+jwt` and `--issuer-audience`, the
//! provider's ID tokens are refused and its access tokens accepted.
//! Deadlines only catch hangs.
//!
//! `cargo test -p kms-gateway --features oidc-tests --test gateway oidc_provider::`
#![cfg(unix)]

use crate::support::serving;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use base64::Engine;
use serving::{http, json, Serving, HANG};

const ALGS: [&str; 5] = ["EdDSA", "Ed25519", "RS256", "PS256", "ES256"];
const AUDIENCE: &str = "https://api.example";

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/oidc")
}

/// A running `oidc-provider`.
struct Provider {
    child: Child,
    issuer: String,
    addr: SocketAddr,
    /// Requests to its JWK Set so far.
    jwks: Arc<AtomicUsize>,
}

impl Provider {
    /// Starts it on `port` (0: any).
    fn start(port: u16) -> Provider {
        assert!(
            dir().join("node_modules/oidc-provider").is_dir(),
            "oidc-provider is not installed: run `npm ci` in {} (.ci/run does)",
            dir().display()
        );
        let mut child = Command::new("node")
            .arg("provider.mjs")
            .current_dir(dir())
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("node (Node.js is on the machine)");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        let jwks = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&jwks);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // Read to the end even once nobody waits for a line: a
                // pipe closed early would fail the provider's next write
                // (EPIPE ends Node).
                if line == "jwks" {
                    counter.fetch_add(1, Ordering::SeqCst);
                } else {
                    let _ = tx.send(line);
                }
            }
        });
        let line = loop {
            let line = lines.recv_timeout(HANG).expect("the provider's address");
            if line.starts_with("listening ") {
                break line;
            }
        };
        let issuer = line["listening ".len()..].to_owned();
        let addr = issuer["http://".len()..].parse().expect("address");
        Provider {
            child,
            issuer,
            addr,
            jwks,
        }
    }

    /// An access token for the resource https://api.example/ALG, from its
    /// token endpoint (client_credentials, client_secret_basic).
    fn token(&self, alg: &str) -> String {
        let basic = base64::engine::general_purpose::STANDARD.encode("svc:svc-secret");
        let body = format!(
            "grant_type=client_credentials&scope=api&resource=https%3A%2F%2Fapi.example%2F{alg}"
        );
        let (status, answer) = http(
            self.addr,
            "POST",
            "/token",
            &[
                ("Authorization", &format!("Basic {basic}")),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            &body,
        );
        assert_eq!(status, 200, "{answer}");
        json(&answer)["access_token"]
            .as_str()
            .expect("access_token")
            .to_owned()
    }

    /// An OpenID Connect ID token for `sub` (`typ` JWT, `aud` the
    /// client's id, `svc`), signed with the same keys as the access
    /// tokens.
    fn id_token(&self, sub: &str) -> String {
        let (status, token) = http(
            self.addr,
            "GET",
            &format!("/test/id_token?sub={sub}"),
            &[],
            "",
        );
        assert_eq!(status, 200, "{token}");
        token
    }

    fn jwks_fetches(&self) -> usize {
        self.jwks.load(Ordering::SeqCst)
    }

    fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + HANG;
        while self.child.try_wait().expect("wait").is_none() {
            assert!(Instant::now() < deadline, "the provider did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn header(token: &str) -> serde_json::Value {
    let part = token.split('.').next().expect("header");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .expect("base64url");
    serde_json::from_slice(&bytes).expect("json")
}

/// `token` with its header's `kid` replaced (the signature then fails,
/// but first the kid is looked up).
fn with_kid(token: &str, kid: &str) -> String {
    let mut h = header(token);
    h["kid"] = serde_json::json!(kid);
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(h.to_string());
    let rest = token.split_once('.').expect("parts").1;
    format!("{encoded}.{rest}")
}

/// Polls `/whoami` until `token` gets `want` (the gateway's first fetch
/// runs in the background).
fn until_status(s: &Serving, token: &str, want: u16) {
    let deadline = Instant::now() + HANG;
    loop {
        let (status, body) = s.whoami(token);
        if status == want {
            return;
        }
        assert!(Instant::now() < deadline, "{status}: {body}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_real_providers_tokens_rotation_and_outage() {
    let provider = Provider::start(0);
    let s = Serving::start(&[
        "--issuer",
        &provider.issuer,
        "--audience",
        AUDIENCE,
        "--jwks-fetch-timeout",
        "2",
        "--jwks-refetch-cooldown",
        "1",
        "--token-cache",
        "0",
    ]);
    assert!(
        s.early
            .iter()
            .any(|l| l.contains(&format!("keys of issuer {}", provider.issuer))),
        "{:?}",
        s.early
    );
    // Every algorithm the provider signs access tokens with.
    let tokens: Vec<String> = ALGS.iter().map(|alg| provider.token(alg)).collect();
    until_status(&s, &tokens[0], 200);
    for (alg, token) in ALGS.iter().zip(&tokens) {
        let h = header(token);
        assert_eq!(
            (h["alg"].as_str(), h["typ"].as_str()),
            (Some(*alg), Some("at+jwt"))
        );
        let (status, body) = s.whoami(token);
        assert_eq!(status, 200, "{alg}: {body}");
        assert_eq!(json(&body)["aud"], AUDIENCE, "{alg}: {body}");
    }

    // A flood of made-up kids: the cooldown (1 s) bounds the fetches.
    let before = provider.jwks_fetches();
    let flood_started = Instant::now();
    for i in 0..200 {
        let (status, _) = s.whoami(&with_kid(&tokens[2], &format!("made-up-{i}")));
        assert_eq!(status, 401);
    }
    let seconds = flood_started.elapsed().as_secs() as usize;
    let fetched = provider.jwks_fetches() - before;
    assert!(
        fetched <= seconds + 2,
        "{fetched} fetches in {seconds} s for 200 made-up kids"
    );

    // The metrics name the issuer: fetches, keys, freshness, refusals.
    let (status, metrics) = s.admin("GET", "/metrics", "");
    assert_eq!(status, 200);
    let issuer_label = format!("issuer=\"{}\"", provider.issuer);
    for name in [
        "kms_jwks_fetches_total{",
        "kms_jwks_keys{",
        "kms_jwks_age_seconds{",
        "kms_jwks_stale{",
        "kms_jwks_refetch_refused_total{",
    ] {
        assert!(
            metrics
                .lines()
                .any(|l| l.starts_with(name) && l.contains(&issuer_label)),
            "{name} {issuer_label} missing:\n{metrics}"
        );
    }
    assert!(
        metrics.lines().any(|l| l.starts_with("kms_jwks_keys{")
            && l.contains(&issuer_label)
            && l.ends_with(" 3")),
        "three keys:\n{metrics}"
    );

    // The provider restarts with new keys on the same address: the first
    // token under a new kid is followed.
    let port = provider.addr.port();
    provider.stop();
    let provider = Provider::start(port);
    std::thread::sleep(Duration::from_millis(1100)); // past the cooldown
    let rotated = provider.token("RS256");
    assert_ne!(header(&rotated)["kid"], header(&tokens[2])["kid"]);
    let (status, body) = s.whoami(&rotated);
    assert_eq!(status, 200, "{body}");
    // The old keys went with the old set.
    assert_eq!(s.whoami(&tokens[2]).0, 401);

    // The provider stops: known keys still verify, an unknown kid is
    // refused within the fetch timeout.
    provider.stop();
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(s.whoami(&rotated).0, 200, "the last good set stays");
    let asked = Instant::now();
    assert_eq!(s.whoami(&with_kid(&rotated, "never-seen")).0, 401);
    let waited = asked.elapsed();
    assert!(waited < Duration::from_secs(4), "answered after {waited:?}");
    assert_eq!(s.whoami(&rotated).0, 200);
    assert_eq!(s.stop(), 0);
}

#[test]
fn an_issuers_id_token_is_refused_where_its_access_tokens_are_required() {
    let provider = Provider::start(0);
    let issuer = provider.issuer.clone();
    // Both audiences the provider's tokens carry are the issuer's own,
    // so the ID token can fail on its `typ` alone; the global --audience
    // is another's.
    let s = Serving::start(&[
        "--issuer",
        &issuer,
        "--audience",
        "gateway",
        "--issuer-audience",
        &format!("{issuer}={AUDIENCE}"),
        "--issuer-audience",
        &format!("{issuer}=svc"),
        "--issuer-typ",
        &format!("{issuer}=at+jwt"),
    ]);
    let access = provider.token("RS256");
    assert_eq!(header(&access)["typ"], "at+jwt");
    until_status(&s, &access, 200);
    let id_token = provider.id_token("alice");
    let id_header = header(&id_token);
    assert_ne!(id_header["typ"], "at+jwt", "{id_header}");
    assert_eq!(id_header["alg"], "RS256");
    let (status, body) = s.whoami(&id_token);
    assert_eq!(status, 401, "an ID token passed: {body}");
    // Without the typ policy the same ID token verifies: the refusal
    // above is the policy's.
    let plain = Serving::start(&[
        "--issuer",
        &issuer,
        "--issuer-audience",
        &format!("{issuer}=svc"),
    ]);
    until_status(&plain, &id_token, 200);
    assert_eq!(plain.stop(), 0);
    assert_eq!(s.stop(), 0);
    provider.stop();
}
