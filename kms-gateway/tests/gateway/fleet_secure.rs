//! `gateway serve --etcd` on a cluster that requires TLS with client
//! certificates and authenticates users (feature `etcd`: `cargo test -p
//! kms-gateway --features etcd --test gateway fleet_secure::`). The test makes a CA,
//! the member's and the clients' certificates (rcgen), starts etcd with
//! `--client-cert-auth`, adds a user with a role on the fleet's prefix and
//! turns authentication on, then checks: an empty prefix is refused
//! without `--etcd-create`; a node without a client certificate, with a
//! wrong password or without TLS does not start; a node with all of them
//! serves, and writes after its auth token expired; with `--etcd-compact`
//! a trim compacts etcd's history past the removal. Every wait is bounded.
#![cfg(unix)]

use crate::support::serving;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kms_testkit::etcd::{EtcdCluster, TlsFiles};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SanType};
use serving::{json, run_to_exit, Serving};

const PREFIX: &str = "/kms-secure";
const PASSWORD: &str = "kms-password-0123456789";

/// Writes `text` to `dir/name` with `mode`; the path as text.
fn write(dir: &Path, name: &str, text: &str, mode: u32) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    path.to_str().expect("utf-8").to_owned()
}

/// A CA, a member certificate for 127.0.0.1, and two client certificates
/// (`kms` for the gateway, `root` for etcdctl), as PEM files in `dir`.
fn certificates(dir: &Path) -> TlsFiles {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "kms test CA");
    let ca =
        CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("key")).expect("the CA");
    let leaf = |name: &str, sans: Vec<String>| {
        let mut params = CertificateParams::new(sans).expect("params");
        params.distinguished_name.push(DnType::CommonName, name);
        params
            .subject_alt_names
            .push(SanType::IpAddress("127.0.0.1".parse().expect("ip")));
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &ca).expect("signed");
        (cert.pem(), key.serialize_pem())
    };
    let (server_cert, server_key) = leaf("etcd", vec!["localhost".to_owned()]);
    let (root_cert, root_key) = leaf("root", Vec::new());
    let (kms_cert, kms_key) = leaf("kms", Vec::new());
    write(dir, "kms.crt", &kms_cert, 0o644);
    write(dir, "kms.key", &kms_key, 0o600);
    TlsFiles {
        ca: write(dir, "ca.crt", &ca.pem(), 0o644).into(),
        server_cert: write(dir, "server.crt", &server_cert, 0o644).into(),
        server_key: write(dir, "server.key", &server_key, 0o600).into(),
        client_cert: write(dir, "root.crt", &root_cert, 0o644).into(),
        client_key: write(dir, "root.key", &root_key, 0o600).into(),
    }
}

/// `args` for etcdctl, as the cluster's root user.
fn as_root<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec!["--user", "root:root-password"];
    all.extend_from_slice(args);
    all
}

/// `etcdctl` on member 0; panics with its output unless it succeeds.
fn etcdctl(cluster: &EtcdCluster, args: &[&str]) -> String {
    let out = cluster.etcdctl(0, args).expect("run etcdctl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "etcdctl {args:?}: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// Runs `gateway serve` with `args` to its exit (it must refuse to start;
/// killed past the deadline): the exit code and stderr.
fn refused(args: &[String]) -> (i32, String) {
    let mut command = serving::serve_command();
    command.args(args);
    let (code, _, stderr) = run_to_exit(command);
    (code, stderr)
}

#[test]
fn a_node_needs_the_clusters_tls_its_user_and_etcd_create_to_start_a_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tls = certificates(dir.path());
    let cluster = EtcdCluster::start_tls(1, tls.clone()).expect("etcd with TLS");
    // RBAC: root (required to enable auth) and the fleet's user, whose role
    // may read and write the fleet's prefix only.
    etcdctl(
        &cluster,
        &["user", "add", "root:root-password", "--interactive=false"],
    );
    etcdctl(
        &cluster,
        &[
            "user",
            "add",
            &format!("kms:{PASSWORD}"),
            "--interactive=false",
        ],
    );
    etcdctl(&cluster, &["role", "add", "kms"]);
    etcdctl(
        &cluster,
        &[
            "role",
            "grant-permission",
            "kms",
            "--prefix=true",
            "readwrite",
            PREFIX,
        ],
    );
    etcdctl(&cluster, &["user", "grant-role", "kms", "kms"]);
    etcdctl(&cluster, &["auth", "enable"]);

    let master = write(dir.path(), "master.hex", &"5a".repeat(32), 0o600);
    let password = write(dir.path(), "password", &format!("{PASSWORD}\n"), 0o600);
    let wrong = write(dir.path(), "wrong", "not-the-password\n", 0o600);
    let path = |p: &PathBuf| p.to_str().expect("utf-8").to_owned();
    let kms_cert = dir.path().join("kms.crt");
    let kms_key = dir.path().join("kms.key");
    let node = |extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = [
            "--etcd",
            &cluster.endpoint(0),
            "--etcd-prefix",
            PREFIX,
            "--master-key-file",
            &master,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        args
    };
    let ca = path(&tls.ca);
    let (cert, key) = (path(&kms_cert), path(&kms_key));
    let tls_args = [
        "--etcd-ca",
        ca.as_str(),
        "--etcd-cert",
        cert.as_str(),
        "--etcd-key",
        key.as_str(),
    ];
    let user_args = [
        "--etcd-user",
        "kms",
        "--etcd-password-file",
        password.as_str(),
    ];

    // An empty prefix, everything else right: refused without
    // --etcd-create, and nothing written.
    let all: Vec<&str> = tls_args.iter().chain(&user_args).copied().collect();
    let (code, stderr) = refused(&node(&all));
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("--etcd-create"), "{stderr}");
    // No client certificate; a wrong password; no TLS at all: each refused.
    let no_cert: Vec<&str> = ["--etcd-ca", ca.as_str(), "--etcd-create"]
        .iter()
        .chain(&user_args)
        .copied()
        .collect();
    let bad_password: Vec<&str> = tls_args
        .iter()
        .chain(&[
            "--etcd-user",
            "kms",
            "--etcd-password-file",
            wrong.as_str(),
            "--etcd-create",
        ])
        .copied()
        .collect();
    for (what, args) in [
        ("no client certificate", no_cert),
        ("a wrong password", bad_password),
    ] {
        let (code, stderr) = refused(&node(&args));
        assert_eq!(code, 1, "{what}: {stderr}");
    }
    let plain = node(&["--etcd-create"]);
    let (code, stderr) = refused(&plain);
    assert_ne!(code, 0, "no TLS to a TLS endpoint: {stderr}");
    let listed = etcdctl(
        &cluster,
        &as_root(&["get", PREFIX, "--prefix", "--keys-only"]),
    );
    assert!(listed.trim().is_empty(), "nothing written: {listed}");

    // All of it, and --etcd-create: it serves; --etcd-compact compacts
    // after a trim.
    let mut args: Vec<&str> = all.clone();
    args.extend(["--etcd-create", "--etcd-compact"]);
    let args = node(&args);
    let s = Serving::start(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let (status, body) = s.admin("POST", "/tokens", r#"{"sub":"alice"}"#);
    assert_eq!(status, 200, "{body}");
    let token = json(&body)["token"].as_str().expect("token").to_owned();
    assert_eq!(s.whoami(&token).0, 200);
    let revision_before = |cluster: &EtcdCluster| -> i64 {
        let status = etcdctl(cluster, &as_root(&["endpoint", "status", "-w", "json"]));
        serde_json::from_str::<serde_json::Value>(&status).expect("json")[0]["Status"]["header"]
            ["revision"]
            .as_i64()
            .expect("revision")
    };
    // The auth token expires after 2 s unused (EtcdCluster::start_tls):
    // a write after 3 s quiet still lands, the client authenticating again.
    std::thread::sleep(Duration::from_secs(3));
    let (status, body) = s.admin("POST", "/keys/rotate", "");
    assert_eq!(status, 200, "after the auth token expired: {body}");
    let before = revision_before(&cluster);
    let (status, body) = s.admin("POST", "/keys/policy", r#"{"min_verify_version": 2}"#);
    assert_eq!(status, 200, "{body}");
    let (status, body) = s.admin("POST", "/keys/trim", r#"{"below": 2}"#);
    assert_eq!(status, 200, "{body}");
    // The history before the trim is gone: reading at an older revision
    // is refused as compacted.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = cluster
            .etcdctl(
                0,
                &as_root(&[
                    "get",
                    PREFIX,
                    "--prefix",
                    "--keys-only",
                    &format!("--rev={before}"),
                ]),
            )
            .expect("run etcdctl");
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() && said.contains("compacted") {
            break;
        }
        assert!(Instant::now() < deadline, "not compacted: {said}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(s.whoami(&token).0, 401, "v1 is below min_verify_version");
    assert_eq!(s.stop(), 0);
}
