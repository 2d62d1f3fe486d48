//! `serve --store` under a PKCS#11 root (`--master-key-pkcs11`): SoftHSM2
//! tokens and keys made by the test in a temporary directory, handed to
//! each gateway through `SOFTHSM2_CONF`. The store keeps its keys across
//! restarts; each failure is exit 1 naming what failed (never the PIN),
//! and leaves a store that opens under its own root as before.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use kms_testkit::softhsm::SoftHsm;

use crate::support::serving::{run_to_exit, serve_command, Serving};

const PIN: &str = "24680";

/// A token `kms` with the AES-256 keys `master` and `other`, a token
/// `spare`, and a PIN file (mode 0600) holding `pin`.
fn tokens(dir: &Path) -> (SoftHsm, PathBuf) {
    let hsm = SoftHsm::new().expect("SoftHSM2");
    hsm.token("kms", PIN);
    hsm.aes_key("kms", PIN, "master", 32);
    hsm.aes_key("kms", PIN, "other", 32);
    hsm.token("spare", PIN);
    let pin_file = secret(dir, "pin", &format!("{PIN}\n"));
    (hsm, pin_file)
}

fn secret(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    path
}

fn text(path: &Path) -> String {
    path.to_str().expect("utf-8").to_owned()
}

/// `--store` under the token `token`'s key `key`.
fn pkcs11_args(hsm: &SoftHsm, store: &Path, token: &str, key: &str, pin: &Path) -> Vec<String> {
    [
        "--store",
        &text(store),
        "--master-key-pkcs11",
        &text(&hsm.module()),
        "--pkcs11-token",
        token,
        "--pkcs11-key",
        key,
        "--pkcs11-pin-file",
        &text(pin),
    ]
    .map(str::to_owned)
    .to_vec()
}

fn start(hsm: &SoftHsm, args: &[String]) -> Serving {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let conf = text(&hsm.conf());
    Serving::start_with_env(&args, &[("SOFTHSM2_CONF", &conf)])
}

/// Runs `serve` with `args` to its exit: the code and stderr.
fn refused(hsm: &SoftHsm, args: &[String]) -> (i32, String) {
    let mut command = serve_command();
    command.args(args).env("SOFTHSM2_CONF", hsm.conf());
    let (code, _, stderr) = run_to_exit(command);
    (code, stderr)
}

fn kid(s: &Serving) -> String {
    s.kids().first().cloned().expect("a kid")
}

#[test]
fn a_store_under_a_softhsm2_key_keeps_its_keys_and_refuses_every_other_root() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (hsm, pin) = tokens(dir.path());
    let store = dir.path().join("store");
    let args = pkcs11_args(&hsm, &store, "kms", "master", &pin);

    let first = start(&hsm, &args);
    let kid_before = kid(&first);
    let token = first.mint(r#"{"sub":"alice"}"#);
    assert_eq!(first.whoami(&token).0, 200);
    assert_eq!(first.stop(), 0);
    let record = std::fs::read_to_string(store.join("keystore.root")).expect("root record");
    assert!(record.contains("kind pkcs11"), "{record}");
    assert!(record.contains("mechanism CKM_AES_GCM"), "{record}");
    assert!(!record.contains(PIN), "{record}");

    // Every wrong root: exit 1, naming what failed, never the PIN.
    let wrong_pin = secret(dir.path(), "wrong-pin", "13579\n");
    let key_file = secret(dir.path(), "master.hex", &format!("{}\n", "ab".repeat(32)));
    let cases: Vec<(Vec<String>, &[&str])> = vec![
        (
            pkcs11_args(&hsm, &store, "kms", "master", &wrong_pin),
            &["PinIncorrect", "\"kms\""],
        ),
        (
            pkcs11_args(&hsm, &store, "absent", "master", &pin),
            &["no token", "\"absent\""],
        ),
        (
            pkcs11_args(&hsm, &store, "kms", "absent", &pin),
            &["no AES secret key", "\"absent\""],
        ),
        (
            pkcs11_args(&hsm, &store, "kms", "other", &pin),
            &["cannot unwrap", "\"other\""],
        ),
        (
            pkcs11_args(&hsm, &store, "spare", "master", &pin),
            &["no AES secret key", "\"spare\""],
        ),
        (
            vec![
                "--store".into(),
                text(&store),
                "--master-key-file".into(),
                text(&key_file),
            ],
            &["PKCS#11", "give --master-key-pkcs11"],
        ),
    ];
    for (args, says) in cases {
        let (code, stderr) = refused(&hsm, &args);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        for said in says {
            assert!(stderr.contains(said), "{args:?}: {stderr}");
        }
        assert!(
            !stderr.contains(PIN) && !stderr.contains("13579"),
            "{stderr}"
        );
    }

    let second = start(&hsm, &args);
    assert_eq!(kid(&second), kid_before, "the same key, unwrapped again");
    assert_eq!(second.whoami(&token).0, 200, "an old token verifies");
    let (status, body) = second.admin("POST", "/keys/rotate", "");
    assert_eq!(status, 200, "{body}");
    assert_eq!(second.kids().len(), 2);
    assert_eq!(second.stop(), 0);
    let third = start(&hsm, &args);
    assert_eq!(third.kids().len(), 2, "the rotation was durable");
    assert_eq!(third.stop(), 0);
}

#[test]
fn a_file_store_names_its_own_root_and_the_flags_are_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (hsm, pin) = tokens(dir.path());
    let store = dir.path().join("store");
    let key_file = secret(dir.path(), "master.hex", &format!("{}\n", "cd".repeat(32)));
    let file_args = vec![
        "--store".to_owned(),
        text(&store),
        "--master-key-file".to_owned(),
        text(&key_file),
    ];
    let first = start(&hsm, &file_args);
    let kid_before = kid(&first);
    assert_eq!(first.stop(), 0);
    let (code, stderr) = refused(&hsm, &pkcs11_args(&hsm, &store, "kms", "master", &pin));
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("master key file") && stderr.contains("give --master-key-file"),
        "{stderr}"
    );
    let again = start(&hsm, &file_args);
    assert_eq!(kid(&again), kid_before);
    assert_eq!(again.stop(), 0);

    // Exactly one root with --store, none without: usage errors.
    let mut both = pkcs11_args(&hsm, &store, "kms", "master", &pin);
    both.extend(["--master-key-file".to_owned(), text(&key_file)]);
    let no_store = pkcs11_args(&hsm, &store, "kms", "master", &pin)[2..].to_vec();
    let no_pin = pkcs11_args(&hsm, &store, "kms", "master", &pin)[..8].to_vec();
    for args in [both, no_store, no_pin] {
        let (code, stderr) = refused(&hsm, &args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
    }
    // A PIN file others can read is refused as every secret file is.
    std::fs::set_permissions(&pin, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let (code, stderr) = refused(&hsm, &pkcs11_args(&hsm, &store, "kms", "master", &pin));
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("--pkcs11-pin-file"), "{stderr}");
}

/// Runs `kms-gateway rewrap --store STORE` with `args`: code and stderr.
fn rewrap(hsm: &SoftHsm, store: &Path, args: &[String]) -> (i32, String) {
    let mut command = std::process::Command::new(crate::support::serving::gateway());
    command
        .args(["rewrap", "--store", &text(store)])
        .args(args)
        .env("SOFTHSM2_CONF", hsm.conf());
    let (code, _, stderr) = run_to_exit(command);
    (code, stderr)
}

/// `args` (a root's flags) with every flag prefixed `--to-`.
fn to(args: &[String]) -> Vec<String> {
    args.iter()
        .map(|a| match a.strip_prefix("--") {
            Some(flag) => format!("--to-{flag}"),
            None => a.clone(),
        })
        .collect()
}

#[test]
fn rewrap_moves_a_store_from_a_file_to_a_token_to_another_key_and_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (hsm, pin) = tokens(dir.path());
    let store = dir.path().join("store");
    let key_file = secret(dir.path(), "master.hex", &format!("{}\n", "5a".repeat(32)));
    let file_root = vec!["--master-key-file".to_owned(), text(&key_file)];
    let under = |root: &[String]| {
        let mut args = vec!["--store".to_owned(), text(&store)];
        args.extend_from_slice(root);
        args
    };
    let first = start(&hsm, &under(&file_root));
    let kid_before = kid(&first);
    let token = first.mint(r#"{"sub":"moved"}"#);
    // A store in use is refused, and left as it was.
    let master = pkcs11_args(&hsm, &store, "kms", "master", &pin)[2..].to_vec();
    let mut args = file_root.clone();
    args.extend(to(&master));
    let (code, stderr) = rewrap(&hsm, &store, &args);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("in use"), "{stderr}");
    assert_eq!(first.stop(), 0);

    let check = |root: &[String]| {
        let s = start(&hsm, &under(root));
        assert_eq!(kid(&s), kid_before, "the same key under {root:?}");
        assert_eq!(
            s.whoami(&token).0,
            200,
            "an old token verifies under {root:?}"
        );
        assert_eq!(s.stop(), 0);
    };
    // A file to the token's key.
    let (code, stderr) = rewrap(&hsm, &store, &args);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("is now under PKCS#11 key \"master\""),
        "{stderr}"
    );
    check(&master);
    let (code, stderr) = refused(&hsm, &under(&file_root));
    assert_eq!(code, 1, "the old root no longer opens it: {stderr}");

    // The token's key to another of its keys: the first no longer opens it.
    let other = pkcs11_args(&hsm, &store, "kms", "other", &pin)[2..].to_vec();
    let mut args = master.clone();
    args.extend(to(&other));
    assert_eq!(rewrap(&hsm, &store, &args).0, 0);
    check(&other);
    assert_eq!(refused(&hsm, &under(&master)).0, 1);

    // Refusals change nothing: the wrong current root, a new key file that
    // exists.
    let mut args = master.clone();
    args.extend(["--to-master-key-file".to_owned(), text(&key_file)]);
    let (code, stderr) = rewrap(&hsm, &store, &args);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("\"master\""), "{stderr}");
    let mut args = other.clone();
    args.extend(["--to-master-key-file".to_owned(), text(&key_file)]);
    let (code, stderr) = rewrap(&hsm, &store, &args);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("refusing to overwrite"), "{stderr}");
    check(&other);

    // Back to a new key file, written 0600.
    let new_file = dir.path().join("new-master.hex");
    let mut args = other.clone();
    args.extend(["--to-master-key-file".to_owned(), text(&new_file)]);
    assert_eq!(rewrap(&hsm, &store, &args).0, 0);
    let mode = std::fs::metadata(&new_file)
        .expect("new file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    check(&["--master-key-file".to_owned(), text(&new_file)]);
    assert_eq!(refused(&hsm, &under(&other)).0, 1);
    let record = std::fs::read_to_string(store.join("keystore.root")).expect("record");
    assert!(
        record.contains("kind file") && !record.contains("wrapped"),
        "no copy wrapped by the old root: {record}"
    );
}

#[test]
fn a_rewrap_killed_midway_leaves_a_store_under_the_old_root_or_the_new() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (hsm, pin) = tokens(dir.path());
    let store = dir.path().join("store");
    let master = pkcs11_args(&hsm, &store, "kms", "master", &pin);
    let other = pkcs11_args(&hsm, &store, "kms", "other", &pin);
    let first = start(&hsm, &master);
    let kid_before = kid(&first);
    assert_eq!(first.stop(), 0);
    let (mut old, mut new) = (0, 0);
    let mut under = (master[2..].to_vec(), other[2..].to_vec());
    for round in 0..8u64 {
        let mut args = under.0.clone();
        args.extend(to(&under.1));
        let mut child = std::process::Command::new(crate::support::serving::gateway())
            .args(["rewrap", "--store", &text(&store)])
            .args(&args)
            .env("SOFTHSM2_CONF", hsm.conf())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn rewrap");
        // Spread over the command's run (tens of ms: the module loads);
        // the last round runs to its end.
        if round < 7 {
            std::thread::sleep(std::time::Duration::from_millis(round * 7));
            let _ = child.kill();
        }
        let status = child.wait().expect("reap rewrap");
        // The record names one of the two roots: that one opens the store
        // with the same key, the other is refused.
        let record = std::fs::read_to_string(store.join("keystore.root")).expect("record");
        let moved = record.contains(&format!("\"{}\"", under.1[5]));
        // Killed (no exit code), or finished: exit 0 and moved.
        if let Some(code) = status.code() {
            assert_eq!((code, moved), (0, true), "round {round}: finished");
        }
        if moved {
            new += 1;
            under = (under.1.clone(), under.0.clone());
        } else {
            old += 1;
        }
        let with = |root: &[String]| {
            let mut args = vec!["--store".to_owned(), text(&store)];
            args.extend_from_slice(root);
            args
        };
        let s = start(&hsm, &with(&under.0));
        assert_eq!(kid(&s), kid_before, "round {round}: the same key");
        assert_eq!(s.stop(), 0);
        assert_eq!(refused(&hsm, &with(&under.1)).0, 1, "round {round}");
    }
    assert!(new > 0, "the last round moved the store");
    println!("rewrap killed 7 times and run once: {old} left the old root, {new} the new");
}

/// Three `serve --etcd --etcd-create` nodes on an empty prefix under one
/// token's key: one root record, one wrapped master key, one signing key;
/// the record refuses a file root and another key.
#[cfg(feature = "etcd")]
#[test]
fn three_fleet_nodes_share_one_master_key_wrapped_by_a_softhsm2_token() {
    let cluster = kms_testkit::etcd::EtcdCluster::start(1).expect("etcd");
    let dir = tempfile::tempdir().expect("tempdir");
    let (hsm, pin) = tokens(dir.path());
    let fleet = |key: &str| -> Vec<String> {
        let mut args = vec![
            "--etcd".to_owned(),
            cluster.endpoint(0),
            "--etcd-prefix".to_owned(),
            "/kms-hsm".to_owned(),
        ];
        args.extend_from_slice(&pkcs11_args(&hsm, dir.path(), "kms", key, &pin)[2..]);
        args
    };
    let mut first = fleet("master");
    first.push("--etcd-create".to_owned());
    // One after another: SoftHSM2's file store answers GeneralError to
    // processes that open it at the same instant (an HSM serves many
    // clients; nodes starting at once agreeing on one record is the fleet
    // test's, under a file root).
    let nodes: Vec<Serving> = (0..3).map(|_| start(&hsm, &first)).collect();
    let kid_before = kid(&nodes[0]);
    for node in &nodes {
        assert_eq!(node.kids(), vec![kid_before.clone()], "one signing key");
    }
    let token = nodes[0].mint(r#"{"sub":"fleet"}"#);
    assert_eq!(nodes[2].whoami(&token).0, 200);
    let record = cluster
        .etcdctl(0, &["get", "/kms-hsm/root", "--print-value-only"])
        .expect("etcdctl");
    let record = String::from_utf8_lossy(&record.stdout).into_owned();
    assert!(
        record.contains("kind pkcs11") && record.contains("mechanism CKM_AES_GCM"),
        "{record}"
    );
    for node in nodes {
        assert_eq!(node.stop(), 0);
    }

    let key_file = secret(dir.path(), "master.hex", &format!("{}\n", "ab".repeat(32)));
    let mut as_file = fleet("master")[..4].to_vec();
    as_file.extend(["--master-key-file".to_owned(), text(&key_file)]);
    let (code, stderr) = refused(&hsm, &as_file);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("give --master-key-pkcs11"), "{stderr}");
    let (code, stderr) = refused(&hsm, &fleet("other"));
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("cannot unwrap"), "{stderr}");

    let again = start(&hsm, &fleet("master"));
    assert_eq!(kid(&again), kid_before, "the same key, unwrapped again");
    assert_eq!(again.whoami(&token).0, 200);

    // The fleet moves to the token's other key while a node runs: that
    // node goes on serving; a node started afterwards needs the new key.
    let mut args = fleet("master");
    args.extend(to(&fleet("other")[4..]));
    let mut command = std::process::Command::new(crate::support::serving::gateway());
    command
        .arg("rewrap")
        .args(&args)
        .env("SOFTHSM2_CONF", hsm.conf());
    let (code, _, stderr) = run_to_exit(command);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("is now under PKCS#11 key \"other\""),
        "{stderr}"
    );
    assert_eq!(again.whoami(&token).0, 200);
    assert_eq!(again.stop(), 0);
    assert_eq!(refused(&hsm, &fleet("master")).0, 1);
    let moved = start(&hsm, &fleet("other"));
    assert_eq!(kid(&moved), kid_before);
    assert_eq!(moved.stop(), 0);
}
