//! `serve --alg ML-DSA-*`: the gateway's key is made with `--alg`'s
//! algorithm, its JWKS publishes `AKP` keys (RFC 9964), its tokens are
//! minted under the parameter set's name and verify at `/whoami`; a
//! restart without `--alg` keeps the key's own algorithm, one with another
//! `--alg` exits 1; a trusted set's `AKP` key verifies a partner's
//! ML-DSA tokens, and a set holding `priv` is refused.

use base64::Engine;
use kms::core::ml_dsa::SigningKey;
use kms::core::Alg;
use serde_json::{json, Value};

use crate::support::serving::{self, json, Serving};

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn jwks(s: &Serving) -> Value {
    let (status, body) = serving::http(s.public, "GET", "/.well-known/jwks.json", &[], "");
    assert_eq!(status, 200, "{body}");
    json(&body)
}

fn header_alg(token: &str) -> String {
    let header = token.split('.').next().expect("header");
    let header = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header)
        .expect("base64url");
    json(std::str::from_utf8(&header).expect("utf-8"))["alg"]
        .as_str()
        .expect("alg")
        .to_owned()
}

#[test]
fn serve_mints_and_verifies_ml_dsa_tokens_and_keeps_its_keys_algorithm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key_file = dir.path().join("master.hex");
    std::fs::write(&key_file, format!("{}\n", "ab".repeat(32))).expect("write key");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }
    let store = dir.path().join("store");
    let base = [
        "--store",
        store.to_str().expect("utf-8"),
        "--master-key-file",
        key_file.to_str().expect("utf-8"),
    ];
    let with = |extra: &[&'static str]| {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        args
    };
    let first = Serving::start(&with(&["--alg", "ML-DSA-65"]));
    let set = jwks(&first);
    let key = &set["keys"][0];
    assert_eq!(key["kty"], "AKP");
    assert_eq!(key["alg"], "ML-DSA-65");
    assert!(key.get("x").is_none() && key.get("priv").is_none());
    let public = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(key["pub"].as_str().expect("pub"))
        .expect("base64url");
    assert_eq!(public.len(), Alg::MlDsa65.public_key_len());
    let token = first.mint(&json!({"sub": "alice", "exp": serving::now() + 600}).to_string());
    assert_eq!(header_alg(&token), "ML-DSA-65");
    let (status, body) = first.whoami(&token);
    assert_eq!(status, 200, "{body}");
    assert_eq!(first.whoami(&serving::forged(&token)).0, 401);
    let kid = first.kids();
    assert_eq!(first.stop(), 0);

    // Without --alg: the key's own algorithm.
    let second = Serving::start(&with(&[]));
    assert_eq!(second.kids(), kid);
    let again = second.mint(&json!({"sub": "bob", "exp": serving::now() + 600}).to_string());
    assert_eq!(header_alg(&again), "ML-DSA-65");
    assert_eq!(second.whoami(&token).0, 200, "the first run's token");
    assert_eq!(second.stop(), 0);

    // Another --alg than the key's: refused at start.
    let mut command = serving::serve_command();
    command.args(with(&["--alg", "EdDSA"]));
    let (code, _, stderr) = serving::run_to_exit(command);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("--alg EdDSA") && stderr.contains("ml-dsa-65"),
        "{stderr}"
    );
    // An alg the KMS does not sign with: a usage error.
    let mut command = serving::serve_command();
    command.args(["--alg", "RS256"]);
    assert_eq!(serving::run_to_exit(command).0, 2);
}

#[test]
fn a_trusted_akp_key_verifies_a_partners_ml_dsa_tokens_and_priv_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let partner = SigningKey::from_seed(Alg::MlDsa87, &[9; 32]).expect("key");
    let jwk = json!({"kty": "AKP", "alg": "ML-DSA-87", "pub": b64(partner.public_key()), "kid": "partner-pq"});
    let set = dir.path().join("partner.json");
    std::fs::write(&set, json!({"keys": [jwk]}).to_string()).expect("write");
    let s = Serving::start(&["--trust-jwks", set.to_str().expect("utf-8")]);
    let header = json!({"alg": "ML-DSA-87", "kid": "partner-pq"});
    let claims = json!({"sub": "carol", "exp": serving::now() + 600});
    let input = format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    );
    let signature = partner.sign(input.as_bytes()).expect("sign");
    let token = format!("{input}.{}", b64(&signature));
    let (status, body) = s.whoami(&token);
    assert_eq!(status, 200, "{body}");
    assert_eq!(json(&body)["sub"], "carol");
    assert_eq!(s.whoami(&serving::forged(&token)).0, 401);
    assert_eq!(s.stop(), 0);

    // A set with the private seed is refused at start.
    let mut private = jwk.clone();
    private["priv"] = json!(b64(&[9; 32]));
    std::fs::write(&set, json!({"keys": [private]}).to_string()).expect("write");
    let mut command = serving::serve_command();
    command.args(["--trust-jwks", set.to_str().expect("utf-8")]);
    let (code, _, stderr) = serving::run_to_exit(command);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("priv"), "{stderr}");
}

#[test]
fn an_ml_dsa_87_token_with_a_kilobyte_of_claims_fits_and_a_larger_one_is_refused() {
    let s = Serving::start(&["--alg", "ML-DSA-87"]);
    let fits = s.mint(&json!({"sub": "dave", "pad": "x".repeat(1000)}).to_string());
    assert_eq!(header_alg(&fits), "ML-DSA-87");
    assert!(fits.len() <= 8 * 1024, "{} bytes", fits.len());
    assert_eq!(s.whoami(&fits).0, 200);
    let (status, body) = s.admin(
        "POST",
        "/tokens",
        &json!({"sub": "dave", "pad": "x".repeat(2000)}).to_string(),
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(json(&body)["error"], "admin.token_too_large", "{body}");
    assert_eq!(s.stop(), 0);
}
