//! Three `kms-gateway serve --etcd` processes on one etcd (feature `etcd`:
//! `cargo test -p kms-gateway --features etcd --test gateway fleet::`, which builds
//! the binary with it): they start at once and sign with one key, a token
//! issued on one verifies on the others, a rotation on any node reaches
//! every node's JWKS, and concurrent rotations from two nodes make one
//! history. Every wait is bounded.
#![cfg(unix)]

// The etcd cluster the facade's fleet example and tests start.
use crate::support::serving;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use kms_testkit::etcd::EtcdCluster;
use serving::{admin_http, json, Serving};

/// Waits (at most 10 s) until every node lists exactly `want`.
fn wait_for_kids(nodes: &[Serving], want: &BTreeSet<String>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    for (i, node) in nodes.iter().enumerate() {
        loop {
            let have: BTreeSet<String> = node.kids().into_iter().collect();
            if have == *want {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "node {i} lists {have:?}, not {want:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Issues a token on `node`'s admin face: `(token, kid)`.
fn issue(node: &Serving, sub: &str) -> (String, String) {
    let (status, body) = node.admin("POST", "/tokens", &format!(r#"{{"sub":"{sub}"}}"#));
    assert_eq!(status, 200, "{body}");
    let body = json(&body);
    (
        body["token"].as_str().expect("token").to_owned(),
        body["kid"].as_str().expect("kid").to_owned(),
    )
}

/// Presents `token` to `node`'s `/whoami`: the status and the `sub`.
fn sub_at(node: &Serving, token: &str) -> (u16, String) {
    let (status, body) = node.whoami(token);
    let sub = if status == 200 {
        json(&body)["sub"].as_str().unwrap_or_default().to_owned()
    } else {
        String::new()
    };
    (status, sub)
}

/// Rotates on the admin face at `admin` with its `secret`; the new head's
/// kid.
fn rotate((admin, secret): (SocketAddr, &str)) -> String {
    let (status, body) = admin_http(admin, secret, "POST", "/keys/rotate", "{}");
    assert_eq!(status, 200, "{body}");
    json(&body)["kid"].as_str().expect("kid").to_owned()
}

/// A node's admin face and its secret.
fn face(node: &Serving) -> (SocketAddr, &str) {
    (node.admin, node.admin_secret.as_deref().expect("secret"))
}

#[test]
fn three_gateways_share_one_key_and_follow_each_others_rotations() {
    use std::os::unix::fs::PermissionsExt;
    let mut cluster = EtcdCluster::start(1).expect("etcd");
    let dir = tempfile::tempdir().expect("tempdir");
    let key_file = dir.path().join("master.hex");
    std::fs::write(&key_file, format!("{}\n", "5a".repeat(32))).expect("write key");
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let args = [
        "--etcd".to_owned(),
        cluster.endpoint(0),
        "--etcd-prefix".to_owned(),
        "/kms-gateways".to_owned(),
        "--master-key-file".to_owned(),
        key_file.to_str().expect("utf-8").to_owned(),
        // The fleet's first start: an empty prefix.
        "--etcd-create".to_owned(),
    ];

    // Started at once on an empty prefix: one store, one signing key.
    let nodes: Vec<Serving> = std::thread::scope(|s| {
        let starting: Vec<_> = (0..3)
            .map(|_| {
                s.spawn(|| {
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    Serving::start(&args)
                })
            })
            .collect();
        starting
            .into_iter()
            .map(|t| t.join().expect("start"))
            .collect()
    });
    // Ready once each follows etcd.
    for node in &nodes {
        serving::readyz_until(node.public, 200, serving::HANG);
    }
    let first: BTreeSet<String> = nodes[0].kids().into_iter().collect();
    assert_eq!(first.len(), 1, "one signing key, version 1: {first:?}");
    wait_for_kids(&nodes, &first);

    // Issued on one node, verified on the others.
    let (token, kid) = issue(&nodes[0], "alice");
    assert!(first.contains(&kid));
    for node in &nodes[1..] {
        assert_eq!(sub_at(node, &token), (200, "alice".to_owned()));
    }
    let mut forged = token.clone().into_bytes();
    let at = forged.len() - 10;
    forged[at] = if forged[at] == b'A' { b'B' } else { b'A' };
    let forged = String::from_utf8(forged).expect("utf-8");
    assert_eq!(sub_at(&nodes[2], &forged).0, 401);

    // A rotation on node 1 reaches every node; node 2 then signs with it
    // and node 0 verifies; the old version still verifies everywhere.
    let v2 = rotate(face(&nodes[1]));
    let mut want = first.clone();
    want.insert(v2.clone());
    wait_for_kids(&nodes, &want);
    let (token2, kid2) = issue(&nodes[2], "bob");
    assert_eq!(kid2, v2, "node 2 signs with the head node 1 made");
    assert_eq!(sub_at(&nodes[0], &token2), (200, "bob".to_owned()));
    assert_eq!(sub_at(&nodes[1], &token), (200, "alice".to_owned()));

    // Two nodes rotating at once: each gets its own version, one history.
    let made: Vec<String> = std::thread::scope(|s| {
        let rotating: Vec<_> = [face(&nodes[0]), face(&nodes[2])]
            .into_iter()
            .map(|admin| s.spawn(move || (0..5).map(|_| rotate(admin)).collect::<Vec<_>>()))
            .collect();
        rotating
            .into_iter()
            .flat_map(|t| t.join().expect("rotate"))
            .collect()
    });
    let distinct: BTreeSet<&String> = made.iter().collect();
    assert_eq!(distinct.len(), 10, "no version made twice: {made:?}");
    want.extend(made);
    assert_eq!(want.len(), 12, "v1, v2 and ten more");
    wait_for_kids(&nodes, &want);

    // An outage of etcd, which every node shares, leaves them in rotation,
    // serving from memory.
    cluster.kill_all();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    for node in &nodes {
        assert_eq!(serving::http(node.public, "GET", "/readyz", &[], "").0, 200);
        assert_eq!(sub_at(node, &token2), (200, "bob".to_owned()));
    }
    cluster.restart_stopped().expect("etcd again");

    for node in nodes {
        assert_eq!(node.stop(), 0);
    }
}

#[test]
fn plain_http_to_a_remote_etcd_is_warned_about_at_start() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let key_file = dir.path().join("master.hex");
    std::fs::write(&key_file, "5a".repeat(32)).expect("write key");
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    // Not loopback by its text; nothing answers there.
    let mut command = serving::serve_command();
    command
        .args(["--etcd", "http://0.0.0.0:1", "--master-key-file"])
        .arg(&key_file);
    let (code, _, stderr) = serving::run_to_exit(command);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("warning: --etcd http://0.0.0.0:1 is plain HTTP"),
        "{stderr}"
    );
}
