//! `gateway serve --trust-jwks` reloads its files on SIGHUP, all or
//! nothing: a good reload replaces the trusted keys (a dropped partner key
//! is refused from then on, a new one accepted); a reload with a file that
//! fails keeps every old set and says why. Deadlines only catch hangs.
#![cfg(unix)]

use crate::support::serving;

use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use ed25519_dalek::{Signer, SigningKey};
use serde_json::json;
use serving::{Serving, HANG};

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A partner's key: its JWK Set entry and tokens it signs.
struct Partner {
    kid: &'static str,
    key: SigningKey,
}

impl Partner {
    fn new(kid: &'static str, seed: u8) -> Partner {
        Partner {
            kid,
            key: SigningKey::from_bytes(&[seed; 32]),
        }
    }

    fn jwk(&self) -> serde_json::Value {
        json!({
            "kty": "OKP",
            "crv": "Ed25519",
            "x": b64(&self.key.verifying_key().to_bytes()),
            "kid": self.kid,
        })
    }

    fn token(&self) -> String {
        let exp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock")
            .as_secs()
            + 600;
        let header = b64(json!({"alg": "EdDSA", "kid": self.kid})
            .to_string()
            .as_bytes());
        let claims = b64(json!({"sub": self.kid, "exp": exp}).to_string().as_bytes());
        let input = format!("{header}.{claims}");
        let signature = b64(&self.key.sign(input.as_bytes()).to_bytes());
        format!("{input}.{signature}")
    }
}

fn write_set(path: &Path, partners: &[&Partner]) {
    let keys: Vec<_> = partners.iter().map(|p| p.jwk()).collect();
    std::fs::write(path, json!({ "keys": keys }).to_string()).expect("write the set");
}

/// SIGHUP, then the line the reload logged.
fn hangup(s: &Serving) -> String {
    let status = Command::new("kill")
        .args(["-HUP", &s.child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    loop {
        let line = s.lines.recv_timeout(HANG).expect("a line about the reload");
        if line.contains("reload") {
            return line;
        }
    }
}

#[test]
fn sighup_reloads_the_trusted_sets_all_or_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (first, second) = (
        dir.path().join("first.json"),
        dir.path().join("second.json"),
    );
    let (p1, p2, p3) = (
        Partner::new("partner-1", 1),
        Partner::new("partner-2", 2),
        Partner::new("partner-3", 3),
    );
    write_set(&first, &[&p1]);
    write_set(&second, &[&p2]);
    let s = Serving::start(&[
        "--trust-jwks",
        first.to_str().expect("utf-8"),
        "--trust-jwks",
        second.to_str().expect("utf-8"),
    ]);
    assert_eq!(s.whoami(&p1.token()).0, 200);
    assert_eq!(s.whoami(&p2.token()).0, 200);
    assert_eq!(s.whoami(&p3.token()).0, 401);

    // Drop partner 1, add partner 3.
    write_set(&first, &[&p3]);
    let line = hangup(&s);
    assert!(
        line.contains("reloaded") && line.contains("2 keys"),
        "{line}"
    );
    assert_eq!(s.whoami(&p1.token()).0, 401, "a dropped key is refused");
    assert_eq!(s.whoami(&p3.token()).0, 200);
    assert_eq!(s.whoami(&p2.token()).0, 200);

    // One bad file: nothing changes, and the log says why.
    std::fs::write(&second, "{not json").expect("write");
    let line = hangup(&s);
    assert!(
        line.contains("refused") && line.contains("second.json"),
        "{line}"
    );
    assert_eq!(s.whoami(&p2.token()).0, 200, "the old sets stay");
    assert_eq!(s.whoami(&p3.token()).0, 200);
    // A kid twice across the files: refused whole too.
    write_set(&second, &[&p3]);
    let line = hangup(&s);
    assert!(line.contains("refused"), "{line}");
    assert_eq!(s.whoami(&p2.token()).0, 200);
    assert_eq!(s.stop(), 0);
}
