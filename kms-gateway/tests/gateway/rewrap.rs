//! `kms-gateway rewrap` between key files (the PKCS#11 moves are in
//! `root_pkcs11.rs`): the same key under a new file, a store in use or a
//! file that exists refused, and its usage errors.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use crate::support::serving::{gateway, run_to_exit, Serving};

fn rewrap(args: &[&str]) -> (i32, String) {
    let mut command = Command::new(gateway());
    command.arg("rewrap").args(args);
    let (code, _, stderr) = run_to_exit(command);
    (code, stderr)
}

fn text(path: &Path) -> &str {
    path.to_str().expect("utf-8")
}

#[test]
fn rewrap_moves_a_store_to_a_new_key_file_and_checks_its_flags() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let old = dir.path().join("old.hex");
    std::fs::write(&old, format!("{}\n", "3c".repeat(32))).expect("write");
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let new = dir.path().join("new.hex");
    let serve =
        |key: &Path| Serving::start(&["--store", text(&store), "--master-key-file", text(key)]);
    let first = serve(&old);
    let kid = first.kids();
    let move_args = [
        "--store",
        text(&store),
        "--master-key-file",
        text(&old),
        "--to-master-key-file",
        text(&new),
    ];
    let (code, stderr) = rewrap(&move_args);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("in use"), "{stderr}");
    assert!(!new.exists(), "nothing written while in use");
    assert_eq!(first.stop(), 0);

    let (code, stderr) = rewrap(&move_args);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        std::fs::read(&new).expect("new file"),
        std::fs::read(&old).expect("old file"),
        "the same master key"
    );
    let again = serve(&new);
    assert_eq!(again.kids(), kid);
    assert_eq!(again.stop(), 0);
    let (code, stderr) = rewrap(&move_args);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("refusing to overwrite"), "{stderr}");

    // A wrong current key: the records do not open, nothing written.
    let wrong = dir.path().join("wrong.hex");
    std::fs::write(&wrong, "00".repeat(32)).expect("write");
    std::fs::set_permissions(&wrong, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let third = dir.path().join("third.hex");
    let (code, stderr) = rewrap(&[
        "--store",
        text(&store),
        "--master-key-file",
        text(&wrong),
        "--to-master-key-file",
        text(&third),
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert!(!third.exists());

    // Usage: a root missing on either side, or two on one.
    for args in [
        vec!["--store", text(&store), "--master-key-file", text(&old)],
        vec![
            "--store",
            text(&store),
            "--to-master-key-file",
            text(&third),
        ],
        vec![
            "--store",
            text(&store),
            "--master-key-file",
            text(&old),
            "--master-key-pkcs11",
            "/m.so",
            "--pkcs11-token",
            "t",
            "--pkcs11-key",
            "k",
            "--pkcs11-pin-file",
            "p",
            "--to-master-key-file",
            text(&third),
        ],
        vec![
            "--master-key-file",
            text(&old),
            "--to-master-key-file",
            text(&third),
        ],
    ] {
        let (code, stderr) = rewrap(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
    }
    // An AWS KMS root in a build without it: a usage error saying how to
    // build one.
    if !cfg!(feature = "aws-kms") {
        let mut command = Command::new(gateway());
        command.args([
            "serve",
            "--store",
            text(&store),
            "--master-key-aws-kms",
            "alias/k",
        ]);
        let (code, _, stderr) = run_to_exit(command);
        assert_eq!(code, 2, "{stderr}");
        assert!(stderr.contains("--features aws-kms"), "{stderr}");
        let (code, stderr) = rewrap(&[
            "--store",
            text(&store),
            "--master-key-file",
            text(&old),
            "--to-master-key-aws-kms",
            "alias/k",
        ]);
        assert_eq!(code, 2, "{stderr}");
    }
}
