//! `serve --store` under an AWS KMS root (`--master-key-aws-kms`) against
//! moto's KMS on a loopback port the test picks (`$MOTO_SERVER`, or
//! `moto_server` on the PATH), its keys made by the test; and `rewrap`
//! from a key file to the KMS key and back.

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use kms_testkit::moto::Moto;

use crate::support::serving::{gateway, http, json, run_to_exit, serve_command, Serving};

/// A new symmetric KMS key's id on `moto`, made through KMS's JSON API
/// (moto reads the service and region from the credential scope, and
/// checks no signature).
fn create_key(moto: &Moto) -> String {
    let (status, body) = http(
        moto.addr,
        "POST",
        "/",
        &[
            ("X-Amz-Target", "TrentService.CreateKey"),
            ("Content-Type", "application/x-amz-json-1.1"),
            (
                "Authorization",
                "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/kms/aws4_request, \
                     SignedHeaders=host, Signature=00",
            ),
        ],
        "{}",
    );
    assert_eq!(status, 200, "{body}");
    json(&body)["KeyMetadata"]["KeyId"]
        .as_str()
        .expect("key id")
        .to_owned()
}

/// The credentials and region the SDK's chain reads from the environment.
const AWS_ENV: [(&str, &str); 3] = [
    ("AWS_ACCESS_KEY_ID", "testing"),
    ("AWS_SECRET_ACCESS_KEY", "testing"),
    ("AWS_REGION", "us-east-1"),
];

fn text(path: &Path) -> String {
    path.to_str().expect("utf-8").to_owned()
}

#[test]
fn a_store_under_a_moto_kms_key_keeps_its_keys_and_moves_to_a_file_and_back() {
    let moto = Moto::start().expect("moto_server");
    let (master, other) = (create_key(&moto), create_key(&moto));
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let kms = |key: &str| {
        vec![
            "--store".to_owned(),
            text(&store),
            "--master-key-aws-kms".to_owned(),
            key.to_owned(),
            "--aws-kms-endpoint".to_owned(),
            moto.url.clone(),
        ]
    };
    let start = |args: &[String]| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Serving::start_with_env(&args, &AWS_ENV)
    };
    let refused = |args: &[String]| {
        let mut command = serve_command();
        command.args(args).envs(AWS_ENV);
        let (code, _, stderr) = run_to_exit(command);
        (code, stderr)
    };
    let first = start(&kms(&master));
    let kid = first.kids();
    let token = first.mint(r#"{"sub":"aws"}"#);
    assert_eq!(first.stop(), 0);
    let record = std::fs::read_to_string(store.join("keystore.root")).expect("record");
    assert!(
        record.contains("kind aws-kms") && record.contains("SYMMETRIC_DEFAULT"),
        "{record}"
    );

    // Another KMS key, an endpoint that does not answer: exit 1, named.
    let (code, stderr) = refused(&kms(&other));
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("cannot unwrap") && stderr.contains(&other),
        "{stderr}"
    );
    let closed = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("port");
        format!("http://{}", listener.local_addr().expect("addr"))
    };
    let mut unreachable = kms(&master);
    unreachable[5] = closed.clone();
    let (code, stderr) = refused(&unreachable);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains(&closed), "{stderr}");

    let again = start(&kms(&master));
    assert_eq!(again.kids(), kid);
    assert_eq!(again.whoami(&token).0, 200);
    assert_eq!(again.stop(), 0);

    // To a new key file and back to the KMS key.
    let rewrap = |args: &[String]| {
        let mut command = Command::new(gateway());
        command.arg("rewrap").args(args).envs(AWS_ENV);
        let (code, _, stderr) = run_to_exit(command);
        (code, stderr)
    };
    let key_file = dir.path().join("master.hex");
    let mut args = kms(&master);
    args.extend(["--to-master-key-file".to_owned(), text(&key_file)]);
    let (code, stderr) = rewrap(&args);
    assert_eq!(code, 0, "{stderr}");
    let mode = std::fs::metadata(&key_file)
        .expect("file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let file_root = vec![
        "--store".to_owned(),
        text(&store),
        "--master-key-file".to_owned(),
        text(&key_file),
    ];
    let under_file = start(&file_root);
    assert_eq!(under_file.kids(), kid);
    assert_eq!(under_file.stop(), 0);
    assert_eq!(refused(&kms(&master)).0, 1);
    let mut args = file_root.clone();
    args.extend([
        "--to-master-key-aws-kms".to_owned(),
        other.clone(),
        "--to-aws-kms-endpoint".to_owned(),
        moto.url.clone(),
    ]);
    let (code, stderr) = rewrap(&args);
    assert_eq!(code, 0, "{stderr}");
    let back = start(&kms(&other));
    assert_eq!(back.kids(), kid);
    assert_eq!(back.whoami(&token).0, 200);
    assert_eq!(back.stop(), 0);
}
