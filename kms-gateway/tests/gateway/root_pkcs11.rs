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
    let hsm = SoftHsm::new();
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
    let mut fleet = vec!["--etcd".to_owned(), "http://127.0.0.1:1".to_owned()];
    fleet.extend_from_slice(&no_store);
    for args in [both, no_store, no_pin, fleet] {
        let (code, stderr) = refused(&hsm, &args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
    }
    // A PIN file others can read is refused as every secret file is.
    std::fs::set_permissions(&pin, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let (code, stderr) = refused(&hsm, &pkcs11_args(&hsm, &store, "kms", "master", &pin));
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("--pkcs11-pin-file"), "{stderr}");
}
