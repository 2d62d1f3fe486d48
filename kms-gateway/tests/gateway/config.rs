//! `gateway serve --config FILE`: the README's complete example file,
//! loaded with its paths and addresses put under a temporary directory
//! (its certificates made by rcgen, its secrets written 0600), serving
//! HTTPS and proxying to an upstream the test starts; a flag on the
//! command line wins over the file's key, a list there replaces the
//! file's; unknown keys, wrong types and refused values are usage errors
//! naming the line and column. Deadlines only catch hangs.
#![cfg(target_os = "linux")]

use crate::support::serving;
use crate::support::upstream;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};
use serde_json::json;
use serving::{admin_http, json, run_to_exit, Serving};
use upstream::{received, Upstream};

/// The fenced block after `<!-- tested: config -->` in README.md.
fn readme_example() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    let text = std::fs::read_to_string(path).expect("README.md");
    let after = text
        .split_once("<!-- tested: config -->")
        .expect("the marker")
        .1;
    let body = after
        .split_once("```toml\n")
        .expect("a toml block after the marker")
        .1;
    body.split_once("\n```")
        .expect("the block's end")
        .0
        .to_owned()
}

fn write(path: &Path, text: &str, mode: u32) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

const ADMIN_TOKEN: &str = "config-test-admin-secret-0123456789abcdef";

/// Writes every file the example names under `root`, and the example
/// itself with its paths there, its listeners on free loopback ports and
/// its upstream at `upstream`: the file's path, and the CA's PEM path.
fn example_under(root: &Path, upstream: &str) -> (String, String) {
    let etc = root.join("etc");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    // OpenSSL (curl) finds an issuer by its name: give it one.
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "config test CA");
    let ca_key = KeyPair::generate().expect("key");
    let ca_pem = ca_params.self_signed(&ca_key).expect("CA").pem();
    let ca = Issuer::new(ca_params, ca_key);
    let mut params = CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
    params
        .subject_alt_names
        .push(SanType::IpAddress("127.0.0.1".parse().expect("ip")));
    let key = KeyPair::generate().expect("key");
    let cert = params.signed_by(&key, &ca).expect("signed");
    write(&etc.join("tls/public.crt"), &cert.pem(), 0o644);
    write(&etc.join("tls/public.key"), &key.serialize_pem(), 0o600);
    write(&etc.join("ca.crt"), &ca_pem, 0o644);
    write(&etc.join("admin-token"), ADMIN_TOKEN, 0o600);
    write(&etc.join("master-key"), &"ab".repeat(32), 0o600);
    let partner = json!({"keys": [{
        "kty": "OKP",
        "crv": "Ed25519",
        "kid": "partner-1",
        "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
    }]});
    write(&etc.join("partner-jwks.json"), &partner.to_string(), 0o644);
    let text = readme_example()
        .replace("/etc/kms-gateway/", &format!("{}/", etc.display()))
        .replace("/var/lib/kms-gateway/", &format!("{}/var/", root.display()))
        .replace("0.0.0.0:8443", "127.0.0.1:0")
        .replace("127.0.0.1:8081", "127.0.0.1:0")
        .replace("127.0.0.1:9600", "127.0.0.1:0")
        .replace("http://127.0.0.1:3000", upstream);
    let file = root.join("serve.toml");
    write(&file, &text, 0o644);
    (
        file.to_str().expect("utf-8").to_owned(),
        etc.join("ca.crt").to_str().expect("utf-8").to_owned(),
    )
}

/// `curl` over HTTPS trusting `ca`: (exit code, head and body).
fn curl(ca: &str, bearer: &str, url: &str) -> (i32, String) {
    let output = Command::new("curl")
        .args(["-sS", "-i", "--max-time", "30", "--cacert", ca, "-H"])
        .arg(format!("Authorization: Bearer {bearer}"))
        .arg(url)
        .output()
        .expect("curl (installed by .ci/run)");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[test]
fn the_readme_example_serves_and_the_command_line_wins() {
    let root = tempfile::tempdir().expect("tempdir");
    let up = Upstream::start();
    let (file, ca) = example_under(root.path(), &format!("http://{}", up.addr));
    // The command line replaces the file's claim-header list and its
    // forward-auth path.
    let s = Serving::start(&[
        "--config",
        &file,
        "--claim-header",
        "sub=X-Who",
        "--forward-auth-path",
        "/check",
        // Needs --upstream, which only the file gives.
        "--trusted-proxy",
        "192.0.2.0/24",
    ]);
    assert!(
        s.admin_secret.is_none(),
        "the file's admin-token-file is used"
    );
    let (status, body) = admin_http(
        s.admin,
        ADMIN_TOKEN,
        "POST",
        "/tokens",
        r#"{"sub":"alice","roles":["a"]}"#,
    );
    assert_eq!(status, 200, "{body}");
    let token = json(&body)["token"].as_str().expect("token").to_owned();
    let base = format!("https://127.0.0.1:{}", s.public.port());
    let (code, answer) = curl(&ca, &token, &format!("{base}/whoami"));
    assert_eq!(code, 0, "{answer}");
    let body = answer.split_once("\r\n\r\n").expect("body").1;
    assert_eq!(json(body)["iss"], "https://auth.example.com");
    assert_eq!(json(body)["aud"], "api");

    let (code, answer) = curl(&ca, &token, &format!("{base}/app?x=1"));
    assert_eq!(code, 0, "{answer}");
    let echo = json(answer.split_once("\r\n\r\n").expect("body").1);
    assert_eq!(echo["target"], "/app?x=1");
    assert_eq!(received(&echo, "x-who"), ["alice"]);
    // The file's list is replaced, not added to.
    assert!(received(&echo, "x-auth-roles").is_empty(), "{echo}");
    // strip-authorization = true, from the file.
    assert!(received(&echo, "authorization").is_empty(), "{echo}");
    assert_eq!(received(&echo, "x-forwarded-proto"), ["https"]);

    let (code, answer) = curl(&ca, &token, &format!("{base}/check/x"));
    assert_eq!(code, 0);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("x-who: alice"),
        "{answer}"
    );
    assert_eq!(up.requests(), 1);
    assert_eq!(s.stop(), 0);
}

/// `serve --config FILE` with `text` as the file: exit code and stderr.
fn refused(text: &str) -> (i32, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, text).expect("write");
    let mut command = serving::serve_command();
    command.arg("--config").arg(&file);
    let (code, _, stderr) = run_to_exit(command);
    (code, stderr)
}

#[test]
fn unknown_keys_wrong_types_and_refused_values_name_their_line_and_column() {
    for (text, expected) in [
        (
            "leeway = 5\nlisen = \"127.0.0.1:0\"\n",
            "bad.toml:2:1: unknown key \"lisen\"",
        ),
        (
            "claim-header = \"sub=X-A\"\n",
            "bad.toml:1:16: claim-header: expected an array",
        ),
        (
            "claim-header = [\"sub=X-A\", 3.5, {a = 1}]\n",
            "bad.toml:1:33: claim-header",
        ),
        (
            "strip-authorization = \"yes\"\n",
            "bad.toml:1:23: strip-authorization: expected true",
        ),
        (
            "header-timeout = [1]\n",
            "bad.toml:1:18: header-timeout: expected a string or a number",
        ),
        (
            "[serve]\nlisten = \"x\"\n",
            "bad.toml:1:2: unknown key \"serve\"",
        ),
        ("config = \"other.toml\"\n", "unknown key \"config\""),
        ("\n\nheader-timeout = 0\n", "bad.toml:3:1: "),
        ("\nclaim-header = [\"sub=Host\"]\n", "bad.toml:2:1: "),
        ("leeway = \n", "bad.toml:1:"),
    ] {
        let (code, stderr) = refused(text);
        assert_eq!(code, 2, "{text:?}: {stderr}");
        assert!(stderr.contains(expected), "{text:?}: {stderr}");
    }
}
