//! `gateway serve` as a user starts it: the `kms-gateway` binary on loopback
//! ports it picks (port 0), driven over real sockets, stopped by SIGTERM.
//! Also its start-up refusals and exit codes. Deadlines only catch hangs.
#![cfg(unix)]

use crate::support::serving;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serving::{gateway, http, http_full, json, run_to_exit, Serving};

#[test]
fn serve_answers_on_both_faces_and_stops_on_sigterm() {
    let s = Serving::start(&[]);
    assert_eq!(
        http(s.public, "GET", "/healthz", &[], ""),
        (200, r#"{"status":"ok"}"#.to_owned())
    );
    assert_eq!(http(s.public, "GET", "/whoami", &[], "").0, 401);
    // Nothing on the public face issues tokens or changes keys.
    assert_eq!(http(s.public, "POST", "/tokens", &[], "{}").0, 404);
    assert_eq!(http(s.public, "POST", "/keys/rotate", &[], "").0, 404);

    let (status, body) = s.admin("POST", "/tokens", r#"{"sub":"alice"}"#);
    assert_eq!(status, 200, "{body}");
    let issued = json(&body);
    let token = issued["token"].as_str().expect("token");
    let (status, body) = s.whoami(token);
    assert_eq!(status, 200, "{body}");
    assert_eq!(json(&body)["sub"], "alice");

    let (status, body) = s.admin("POST", "/keys/rotate", "");
    assert_eq!(status, 200, "{body}");
    assert_ne!(json(&body)["kid"], issued["kid"]);
    let (_, body) = http(s.public, "GET", "/.well-known/jwks.json", &[], "");
    assert_eq!(json(&body)["keys"].as_array().map(Vec::len), Some(2));
    // The rotated-away version still verifies.
    assert_eq!(s.whoami(token).0, 200);
    let (status, body) = s.admin("GET", "/metrics", "");
    assert_eq!(status, 200);
    assert!(body.contains("kms_ops_total"), "{body}");
    assert!(body.contains("kms_build_info{"), "{body}");
    // The admin face needs its secret, which this start generated.
    assert_eq!(http(s.admin, "GET", "/metrics", &[], "").0, 401);
    assert_eq!(
        s.early.iter().map(String::as_str).collect::<Vec<_>>(),
        [format!(
            "gateway serve: admin secret in {}",
            s.secret_path().display()
        )],
        "nothing below warn by default"
    );
    assert_eq!(s.stop(), 0);
}

#[test]
fn rust_log_turns_on_the_actor_events() {
    let s = Serving::start_with_env(&[], &[("RUST_LOG", "kms_actor=info")]);
    let started = s
        .early
        .iter()
        .find(|l| l.contains("KMS actor started"))
        .unwrap_or_else(|| panic!("no start event in {:?}", s.early));
    assert!(started.contains("curve_backend="), "{started}");
    assert_eq!(s.stop(), 0);
}

/// `serve`'s flags for a durable store in `dir`: `--store` and a
/// `--master-key-file` of 32 bytes of `byte` (two hex digits), mode 0600.
fn durable_store(dir: &std::path::Path, byte: &str) -> [String; 4] {
    use std::os::unix::fs::PermissionsExt;
    let key_file = dir.join("master.hex");
    std::fs::write(&key_file, format!("{}\n", byte.repeat(32))).expect("write key");
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let path = |p: std::path::PathBuf| p.to_str().expect("utf-8").to_owned();
    [
        "--store".to_owned(),
        path(dir.join("store")),
        "--master-key-file".to_owned(),
        path(key_file),
    ]
}

#[test]
fn a_durable_store_keeps_the_signing_key_across_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let args = durable_store(dir.path(), "ab");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let kid = |s: &Serving| {
        let (_, body) = http(s.public, "GET", "/.well-known/jwks.json", &[], "");
        json(&body)["keys"][0]["kid"].clone()
    };
    let first = Serving::start(&args);
    let before = kid(&first);
    assert_eq!(first.stop(), 0);
    let second = Serving::start(&args);
    assert_eq!(
        kid(&second),
        before,
        "the same key, read back from the store"
    );
    assert_eq!(second.stop(), 0);
}

/// Runs the gateway to completion with `args` (killed past the deadline):
/// exit code and stderr. `serve` runs get loopback ports of their own, so a
/// regression that serves instead of refusing cannot take fixed ports.
fn run(args: &[&str]) -> (i32, String) {
    let mut command = Command::new(gateway());
    command.args(args);
    if args.first() == Some(&"serve") && !args.contains(&"--help") {
        for flag in ["--listen", "--admin-listen"] {
            if !args.contains(&flag) {
                command.args([flag, "127.0.0.1:0"]);
            }
        }
    }
    let (code, _, stderr) = run_to_exit(command);
    (code, stderr)
}

#[test]
fn start_up_refusals_exit_1_and_usage_errors_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = |name: &str, text: &str, mode: u32| {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        path
    };
    let blank = file("blank-token", "  \n", 0o600);
    let shared_token = file("shared-token", "s3cret\n", 0o644);
    let open_key = file("open.hex", &"ab".repeat(32), 0o644);
    let short_key = file("short.hex", "abcd", 0o600);
    let good_key = file("good.hex", &"ab".repeat(32), 0o600);
    let good_token = file("good-token", &"c".repeat(40), 0o600);
    let full = dir.path().join("full");
    std::fs::create_dir(&full).expect("mkdir");
    std::fs::write(full.join("something"), "x").expect("write");
    // A store whose database was renamed: its root record may be the only
    // wrapped copy of its master key, and is kept.
    let renamed = dir.path().join("renamed");
    std::fs::create_dir(&renamed).expect("mkdir");
    std::fs::write(renamed.join("keystore.root"), "record").expect("write");
    std::fs::write(renamed.join("keystore.redb.bak"), "db").expect("write");
    let store = dir.path().join("store");
    let s = |p: &Path| p.to_str().expect("utf-8").to_owned();
    for (args, says) in [
        (
            vec![
                "serve".to_owned(),
                "--admin-listen".into(),
                "0.0.0.0:0".into(),
            ],
            "loopback",
        ),
        (
            vec!["serve".into(), "--admin-token-file".into(), s(&blank)],
            "is empty",
        ),
        (
            vec![
                "serve".into(),
                "--admin-listen".into(),
                "0.0.0.0:0".into(),
                "--admin-token-file".into(),
                s(&good_token),
            ],
            "--admin-host",
        ),
        (
            vec![
                "serve".into(),
                "--admin-listen".into(),
                "0.0.0.0:0".into(),
                "--admin-host".into(),
                "kms.internal".into(),
                "--admin-token-file".into(),
                s(&good_token),
            ],
            "--admin-tls-cert",
        ),
        (
            vec![
                "serve".into(),
                "--admin-token-file".into(),
                s(&shared_token),
            ],
            "for every user",
        ),
        (
            vec![
                "serve".into(),
                "--store".into(),
                s(&store),
                "--master-key-file".into(),
                s(&open_key),
            ],
            "for every user",
        ),
        (
            vec![
                "serve".into(),
                "--store".into(),
                s(&store),
                "--master-key-file".into(),
                s(&short_key),
            ],
            "64 hex",
        ),
        (
            vec![
                "serve".into(),
                "--store".into(),
                s(&full),
                "--master-key-file".into(),
                s(&good_key),
            ],
            "not empty",
        ),
        (
            vec![
                "serve".into(),
                "--store".into(),
                s(&renamed),
                "--master-key-file".into(),
                s(&good_key),
            ],
            "not empty",
        ),
        (
            vec!["serve".into(), "--trust-jwks".into(), s(&blank)],
            "trust-jwks",
        ),
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, stderr) = run(&args);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    assert_eq!(
        std::fs::read_to_string(renamed.join("keystore.root")).expect("kept"),
        "record"
    );
    // TLS ending at a local proxy, said so: the same flags start.
    let mut child = Command::new(gateway())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "0.0.0.0:0",
        ])
        .args(["--admin-host", "kms.internal", "--admin-insecure-http"])
        .arg("--admin-token-file")
        .arg(&good_token)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let serving = std::io::BufRead::lines(std::io::BufReader::new(stderr))
        .map_while(Result::ok)
        .find(|line| line.contains("public face on"));
    let _ = child.kill();
    let _ = child.wait();
    assert!(serving.is_some(), "--admin-insecure-http did not start");
    assert_eq!(run(&["--help"]).0, 0);
    assert_eq!(run(&["--version"]).0, 0);
    assert_eq!(run(&["serve", "--help"]).0, 0);
    if !cfg!(feature = "etcd") {
        let key = s(&good_key);
        let (code, stderr) = run(&[
            "serve",
            "--etcd",
            "http://127.0.0.1:2379",
            "--master-key-file",
            &key,
        ]);
        assert_eq!(code, 2, "{stderr}");
        assert!(stderr.contains("--features etcd"), "{stderr}");
    }
    assert_eq!(run(&["--bogus"]).0, 2);
    assert_eq!(run(&["serve", "--alg", "HS256"]).0, 2);
    assert_eq!(
        run(&["serve", "--store", "/tmp/x"]).0,
        2,
        "--store needs --master-key-file"
    );
    // A check of the flags alone: a usage error, before anything starts.
    let (code, stderr) = run(&["serve", "--key", "gateway"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--key gateway: expected TENANT:PURPOSE"),
        "{stderr}"
    );
}

#[test]
fn the_admin_face_runs_the_key_lifecycle_durably_and_audits_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let args = durable_store(dir.path(), "cd");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let first = Serving::start(&args);
    let (_, body) = first.admin("POST", "/tokens", r#"{"sub":"old"}"#);
    let old_token = json(&body)["token"].as_str().expect("token").to_owned();
    let (status, _) = first.admin("POST", "/keys/rotate", "");
    assert_eq!(status, 200);
    let (status, body) = first.admin("POST", "/keys/policy", r#"{"min_verify_version": 2}"#);
    assert_eq!(
        (status, json(&body)["min_verify_version"].as_u64()),
        (200, Some(2))
    );
    let (status, body) = first.admin("POST", "/keys/trim", r#"{"below": 2}"#);
    assert_eq!(status, 200, "{body}");
    assert_eq!(first.kids().len(), 1, "v1 left the JWKS");
    assert_eq!(first.whoami(&old_token).0, 401, "a v1 token is refused");
    let audit: Vec<String> = {
        let mut audit = Vec::new();
        while let Ok(line) = first.lines.recv_timeout(Duration::from_millis(200)) {
            if line.contains("kms::audit") {
                audit.push(line);
            }
        }
        audit
    };
    // The mint: who asked for what, from where.
    assert!(
        audit.iter().any(|l| l.contains("operation=\"mint\"")
            && l.contains("sub=\"old\"")
            && l.contains("jti=\"")
            && l.contains("peer=\"127.0.0.1:")
            && l.contains("outcome=\"ok\"")),
        "no mint audit event in {audit:?}"
    );
    for operation in ["sign", "rotate", "set_policy", "trim"] {
        assert!(
            audit
                .iter()
                .any(|l| l.contains(&format!("operation=\"{operation}\""))
                    && l.contains("principal=\"gateway-admin\"")
                    && l.contains("outcome=\"ok\"")),
            "no {operation} audit event in {audit:?}"
        );
    }
    assert_eq!(first.stop(), 0);

    // Durable: the policy and the trim are there after a restart.
    let second = Serving::start(&args);
    let (_, body) = second.admin("GET", "/keys/policy", "");
    assert_eq!(json(&body)["min_verify_version"], 2);
    let kept = second.kids();
    assert_eq!(kept.len(), 1);
    let (status, body) = second.admin("POST", "/keys/destroy", "");
    assert_eq!(status, 200, "{body}");
    let (status, body) = second.admin("POST", "/tokens", r#"{"sub":"x"}"#);
    assert_eq!(
        (status, json(&body)["error"].as_str()),
        (409, Some("kms.key_destroyed"))
    );
    assert!(second.kids().is_empty());
    assert_eq!(second.stop(), 0);

    // A destroyed key is not the store's key any more: a restart makes a
    // new one, and the old one stays a tombstone.
    let third = Serving::start(&args);
    let fresh = third.kids();
    assert_eq!(fresh.len(), 1);
    assert_ne!(fresh, kept);
    let (status, _) = third.admin("POST", "/tokens", r#"{"sub":"new"}"#);
    assert_eq!(status, 200);
    assert_eq!(third.stop(), 0);
}

/// The main job needs no files: run from an empty directory (as an
/// installed binary is), it verifies every embedded vector and its tokens,
/// and reports PASS.
#[test]
fn the_main_job_runs_from_an_empty_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut command = Command::new(gateway());
    command
        .current_dir(dir.path())
        .args(["--clients", "4", "--duration", "0.2", "--keys", "2"])
        .args(["--metrics-addr", "127.0.0.1:0"]);
    let (code, report, _) = run_to_exit(command);
    assert_eq!(code, 0, "{report}");
    // 2 290 fixed-length vectors before any token; both phases pass.
    assert!(report.contains("2290 test vectors"), "{report}");
    assert_eq!(
        report.matches("result              PASS").count(),
        2,
        "{report}"
    );
}

/// The admin face always needs its secret: generated at start into a
/// private file when `--admin-token-file` is not given, removed at stop.
/// What a web page can send (a form, a foreign `Origin`, a rebound `Host`,
/// a POST without JSON) is refused before it reaches a key, and
/// `--metrics-listen` serves the metrics alone without the secret.
#[test]
fn the_admin_face_needs_its_secret_and_refuses_what_a_page_can_send() {
    use std::os::unix::fs::PermissionsExt;
    let s = Serving::start(&[
        "--admin-host",
        "kms-admin.internal",
        "--metrics-listen",
        "127.0.0.1:0",
    ]);
    let path = s.secret_path();
    let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    let dir = path.parent().expect("its directory").to_owned();
    assert_eq!(mode(&dir), 0o700);
    let secret = s.admin_secret.clone().expect("secret");
    assert_eq!(secret.len(), 64, "32 random bytes as hex");
    assert!(secret.bytes().all(|b| b.is_ascii_hexdigit()));

    let bearer = format!("Bearer {secret}");
    let port = s.admin.port();
    let rebound = format!("rebind.attacker.example:{port}");
    let named = format!("kms-admin.internal:{port}");
    let json_type = ("Content-Type", "application/json");
    for (headers, body, status) in [
        // No secret, on every route.
        (vec![json_type], "{}", 401),
        (
            vec![("Authorization", "Bearer wrong"), json_type],
            "{}",
            401,
        ),
        // A plain HTML form from a page on another site.
        (
            vec![
                ("Origin", "http://attacker.example"),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            "x=1",
            403,
        ),
        (
            vec![
                ("Authorization", &bearer),
                ("Sec-Fetch-Site", "cross-site"),
                json_type,
            ],
            "{}",
            403,
        ),
        // DNS rebinding: the page's own origin, the attacker's name.
        (
            vec![("Host", &rebound), ("Authorization", &bearer), json_type],
            "{}",
            403,
        ),
        // The secret, but no JSON.
        (
            vec![("Authorization", &bearer), ("Content-Type", "text/plain")],
            "{}",
            415,
        ),
        (vec![("Authorization", &bearer)], "", 415),
    ] {
        let (got, answer) = http(s.admin, "POST", "/keys/destroy", &headers, body);
        assert_eq!(got, status, "{headers:?}: {answer}");
    }
    // None reached the key: it still signs.
    assert_eq!(s.admin("POST", "/tokens", r#"{"sub":"a"}"#).0, 200);
    // The names the face answers to.
    for host in [
        named.as_str(),
        "kms-admin.internal",
        &format!("localhost:{port}"),
    ] {
        let (got, answer) = http(
            s.admin,
            "GET",
            "/keys/policy",
            &[("Host", host), ("Authorization", &bearer)],
            "",
        );
        assert_eq!(got, 200, "{host}: {answer}");
    }

    // --metrics-listen: the metrics alone, without the secret.
    let metrics: std::net::SocketAddr = s
        .early
        .iter()
        .find_map(|l| l.strip_prefix("gateway serve: metrics on http://"))
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .expect("the metrics address")
        .parse()
        .expect("socket address");
    let (status, text) = http(metrics, "GET", "/metrics", &[], "");
    assert_eq!(status, 200);
    assert!(text.contains("kms_ops_total"), "{text}");
    assert_eq!(http(metrics, "GET", "/keys/policy", &[], "").0, 404);
    assert_eq!(http(metrics, "POST", "/tokens", &[json_type], "{}").0, 404);
    // A page that rebinds its name to this address is refused; an IP
    // literal (Prometheus scrapes by IP), localhost and an --admin-host
    // name pass.
    let mport = metrics.port();
    for (host, want) in [
        (format!("rebind.attacker.example:{mport}"), 403),
        ("rebind.attacker.example".to_owned(), 403),
        (format!("localhost:{}", mport + 1), 403),
        ("10.1.2.3:9090".to_owned(), 200),
        ("[fd00::1]:9090".to_owned(), 200),
        ("[fd00::1]".to_owned(), 200),
        (format!("localhost:{mport}"), 200),
        ("kms-admin.internal".to_owned(), 200),
        (format!("KMS-admin.internal:{mport}"), 200),
    ] {
        let (got, body) = http(metrics, "GET", "/metrics", &[("Host", &host)], "");
        assert_eq!(got, want, "{host}: {body}");
    }

    assert_eq!(s.stop(), 0);
    assert!(!dir.exists(), "the secret's directory is removed at stop");
}

/// The JWK Set is cacheable for `--jwks-max-age`, carries an `ETag`, is
/// 304 for a matching `If-None-Match`, and changes (with its `ETag`) at a
/// rotation.
#[test]
fn the_jwks_is_cacheable_and_revalidates() {
    let s = Serving::start(&["--jwks-max-age", "7"]);
    let header = |lines: &[String], name: &str| -> String {
        lines
            .iter()
            .find_map(|l| {
                let (n, v) = l.split_once(':')?;
                n.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
            })
            .unwrap_or_else(|| panic!("no {name} in {lines:?}"))
    };
    let (status, lines, body) = http_full(s.public, "GET", "/.well-known/jwks.json", &[], "");
    assert_eq!(status, 200);
    assert_eq!(header(&lines, "cache-control"), "public, max-age=7");
    let etag = header(&lines, "etag");
    let (status, _, again) = http_full(
        s.public,
        "GET",
        "/.well-known/jwks.json",
        &[("If-None-Match", &etag)],
        "",
    );
    assert_eq!((status, again.as_str()), (304, ""));
    assert_eq!(s.admin("POST", "/keys/rotate", "").0, 200);
    let (status, lines, rotated) = http_full(
        s.public,
        "GET",
        "/.well-known/jwks.json",
        &[("If-None-Match", &etag)],
        "",
    );
    assert_eq!(status, 200, "the rotation changed the set");
    assert_ne!(header(&lines, "etag"), etag);
    assert_ne!(rotated, body);
    assert_eq!(s.stop(), 0);
}

/// On a store two tenants share, a gateway accepts only its own `--key`'s
/// tokens: beta's admin face mints `{"sub":"acme-root"}`, and acme's
/// gateway refuses it (a 200 would let one tenant's key vouch for
/// another's users).
#[test]
fn a_gateway_accepts_only_its_own_keys_tokens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = durable_store(dir.path(), "ef");
    let with_key = |key: &'static str| -> Vec<String> {
        let mut args = store.to_vec();
        args.extend(["--key".to_owned(), key.to_owned()]);
        args
    };
    let beta_args = with_key("beta:tokens");
    let beta = Serving::start(&beta_args.iter().map(String::as_str).collect::<Vec<_>>());
    let (status, body) = beta.admin("POST", "/tokens", r#"{"sub":"acme-root"}"#);
    assert_eq!(status, 200, "{body}");
    let minted = json(&body)["token"].as_str().expect("token").to_owned();
    assert_eq!(beta.whoami(&minted).0, 200, "beta accepts its own");
    assert_eq!(beta.stop(), 0);

    let acme_args = with_key("acme:tokens");
    let acme = Serving::start(&acme_args.iter().map(String::as_str).collect::<Vec<_>>());
    let (status, body) = acme.whoami(&minted);
    assert_eq!(status, 401, "{body}");
    let (_, body) = acme.admin("POST", "/tokens", r#"{"sub":"alice"}"#);
    let own = json(&body)["token"].as_str().expect("token").to_owned();
    assert_eq!(acme.whoami(&own).0, 200);
    assert_eq!(acme.stop(), 0);
}

/// `--token-issuer`, `--token-audience` and `--mint-max-lifetime`: the
/// admin face mints with the configured `iss` and `aud` (which `/whoami`
/// then accepts) and refuses a longer lifetime.
#[test]
fn minted_tokens_carry_the_configured_issuer_and_audience() {
    let s = Serving::start(&[
        "--token-issuer",
        "https://kms.example",
        "--token-audience",
        "api",
        "--mint-max-lifetime",
        "600",
    ]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let far = format!(r#"{{"sub":"a","exp":{}}}"#, now + 601);
    let (status, body) = s.admin("POST", "/tokens", &far);
    assert_eq!(
        (status, json(&body)["error"].as_str()),
        (400, Some("admin.lifetime_too_long"))
    );
    let (status, body) = s.admin("POST", "/tokens", r#"{"sub":"a"}"#);
    assert_eq!(status, 200, "{body}");
    let token = json(&body)["token"].as_str().expect("token").to_owned();
    let (status, body) = s.whoami(&token);
    assert_eq!(status, 200, "{body}");
    let claims = json(&body);
    assert_eq!(claims["iss"], "https://kms.example");
    assert_eq!(claims["aud"], "api");
    assert_eq!(s.stop(), 0);
}

/// Every secret file is checked once opened: no permission for other
/// users, never group-writable, group-readable only with
/// `--allow-group-readable-secrets` (through a symbolic link, as
/// Kubernetes mounts secrets), owned by this user or root; an admin secret
/// of at least 32 bytes; a bad master key's message repeats none of it.
#[test]
fn secret_files_are_checked_once_opened() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = "0123456789abcdef0123456789abcdef01234567";
    let file = |name: &str, text: &str, mode: u32| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        path.to_str().expect("utf-8").to_owned()
    };
    let admin = |path: &str, extra: &[&str]| {
        let mut args = vec!["serve", "--admin-token-file", path];
        args.extend(extra);
        run(&args)
    };
    let others_write = file("others-write", secret, 0o602);
    let group_read = file("group-read", secret, 0o640);
    let group_write = file("group-write", secret, 0o660);
    let short = file("short", "short-secret\n", 0o600);
    for (path, extra, says) in [
        (&others_write, &[][..], "for every user"),
        (&group_read, &[], "readable by its group"),
        (
            &group_write,
            &["--allow-group-readable-secrets"],
            "writable by its group",
        ),
        (&short, &[], "at least 32"),
    ] {
        let (code, stderr) = admin(path, extra);
        assert_eq!(code, 1, "{path}: {stderr}");
        assert!(stderr.contains(says), "{path}: {stderr}");
    }
    // A file owned by another user (when this test may chown).
    let foreign = file("foreign", secret, 0o600);
    if std::os::unix::fs::chown(&foreign, Some(1), Some(1)).is_ok() && effective_uid() != Some(1) {
        let (code, stderr) = admin(&foreign, &[]);
        assert_eq!(code, 1, "{stderr}");
        assert!(stderr.contains("owned by uid 1"), "{stderr}");
    }
    // Group-readable behind a symbolic link, allowed: it serves, and the
    // secret is the file's.
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&group_read, &link).expect("symlink");
    let link = link.to_str().expect("utf-8").to_owned();
    let s = Serving::start(&[
        "--admin-token-file",
        &link,
        "--allow-group-readable-secrets",
    ]);
    let (status, _) = serving::admin_http(s.admin, secret, "GET", "/keys/policy", "");
    assert_eq!(status, 200);
    assert_eq!(s.stop(), 0);
    // A master key that is not hex: the message names no byte of it.
    let bad_key = file("bad.hex", &"#".repeat(64), 0o600);
    let store = dir.path().join("store");
    let (code, stderr) = run(&[
        "serve",
        "--store",
        store.to_str().expect("utf-8"),
        "--master-key-file",
        &bad_key,
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("64 hex"), "{stderr}");
    assert!(!stderr.contains('#'), "the secret's text leaked: {stderr}");
}

/// This process's effective uid, from `/proc/self/status` (`None` if it
/// cannot be read).
fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// Every answer of the public face says its type and forbids sniffing; a
/// refused token's answer is the same whatever the reason.
#[test]
fn every_public_answer_has_a_type_and_nosniff() {
    let s = Serving::start(&[]);
    let header = |lines: &[String], name: &str| {
        lines.iter().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    };
    let (_, body) = s.admin("POST", "/tokens", r#"{"sub":"a"}"#);
    let token = json(&body)["token"].as_str().expect("token").to_owned();
    // One signature character changed (not the last, whose low bits are
    // padding).
    let mut forged = token.clone().into_bytes();
    let at = forged.len() - 10;
    forged[at] = if forged[at] == b'A' { b'B' } else { b'A' };
    let forged = String::from_utf8(forged).expect("ascii");
    let unknown_kid = "eyJhbGciOiJFZERTQSIsImtpZCI6Im5vYm9keSJ9.e30.AAAA";
    let mut refusals = Vec::new();
    for (method, path, authorization, status) in [
        ("GET", "/healthz", None, 200),
        ("GET", "/.well-known/jwks.json", None, 200),
        ("GET", "/whoami", Some(token.as_str()), 200),
        ("GET", "/whoami", None, 401),
        ("GET", "/whoami", Some(forged.as_str()), 401),
        ("GET", "/whoami", Some(unknown_kid), 401),
        ("GET", "/nowhere", None, 404),
        ("POST", "/healthz", None, 405),
    ] {
        let bearer = authorization.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> = bearer
            .iter()
            .map(|b| ("Authorization", b.as_str()))
            .collect();
        let (got, lines, body) = http_full(s.public, method, path, &headers, "");
        assert_eq!(got, status, "{method} {path}: {body}");
        assert_eq!(
            header(&lines, "x-content-type-options").as_deref(),
            Some("nosniff"),
            "{method} {path}"
        );
        assert!(header(&lines, "content-type").is_some(), "{method} {path}");
        if authorization.is_some() && status == 401 {
            refusals.push((header(&lines, "www-authenticate"), body));
        }
    }
    assert_eq!(refusals[0], refusals[1], "one answer for every refusal");
    assert_eq!(s.stop(), 0);
}

#[test]
fn trust_anchors_writable_by_other_users_are_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = |name: &str, text: &str, mode: u32| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        path.to_str().expect("utf-8").to_owned()
    };
    let set = file("set.json", r#"{"keys":[]}"#, 0o664);
    let ca = file("ca.pem", "not read further", 0o646);
    let rules = file("rules.toml", "default = \"token\"\n", 0o666);
    let config = file("serve.toml", "leeway = 5\n", 0o620);
    for (args, code) in [
        (vec!["serve", "--trust-jwks", &set], 1),
        (
            vec![
                "serve",
                "--issuer-ca",
                &ca,
                "--issuer",
                "https://idp.example",
            ],
            1,
        ),
        (vec!["serve", "--access-rules", &rules], 2),
        (vec!["serve", "--config", &config], 2),
    ] {
        let (got, stderr) = run(&args);
        assert_eq!(got, code, "{args:?}: {stderr}");
        assert!(
            stderr.contains("writable by other users"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn relative_paths_are_read_from_the_working_directory() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let write = |name: &str, text: &str, mode: u32| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    };
    write("mk", &"ab".repeat(32), 0o600);
    write("set.json", r#"{"keys":[]}"#, 0o644);
    write("rules.toml", "default = \"token\"\n", 0o644);
    write("serve.toml", "trust-jwks = [\"set.json\"]\n", 0o644);
    let cd = format!("cd '{}' && exec \"$@\"", dir.path().display());
    let args = [
        "--store",
        "st",
        "--master-key-file",
        "mk",
        "--config",
        "serve.toml",
        "--access-rules",
        "rules.toml",
        "--forward-auth-path",
        "/auth",
    ];
    let s = Serving::start_wrapped(&["sh", "-c", &cd, "sh"], &args, &[]);
    let kids = s.kids();
    assert_eq!(kids.len(), 1);
    assert!(
        dir.path().join("st").is_dir(),
        "the store is where it was named"
    );
    assert_eq!(s.stop(), 0);
    // Opened again from there: the same key.
    let s = Serving::start_wrapped(&["sh", "-c", &cd, "sh"], &args, &[]);
    assert_eq!(s.kids(), kids);
    assert_eq!(s.stop(), 0);
}
