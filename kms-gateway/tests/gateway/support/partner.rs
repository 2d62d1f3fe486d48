//! A partner issuer's Ed25519 key, as the tests trust it: its JWK Set
//! entry, and tokens it signs with the header and claims a test chooses.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use ed25519_dalek::{Signer, SigningKey};
use serde_json::{json, Value};

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A partner's key: its JWK Set entry and tokens it signs.
pub struct Partner {
    pub kid: &'static str,
    key: SigningKey,
}

impl Partner {
    pub fn new(kid: &'static str, seed: u8) -> Partner {
        Partner {
            kid,
            key: SigningKey::from_bytes(&[seed; 32]),
        }
    }

    pub fn jwk(&self) -> Value {
        json!({
            "kty": "OKP",
            "crv": "Ed25519",
            "x": b64(&self.key.verifying_key().to_bytes()),
            "kid": self.kid,
        })
    }

    /// A token with `sub` its kid, expiring in 10 minutes.
    pub fn token(&self) -> String {
        self.token_with(json!({}), json!({}))
    }

    /// A token whose header adds `header`'s members to `alg` and `kid`,
    /// and whose claims add `claims`' members to `sub` (its kid) and `exp`
    /// (in 10 minutes).
    pub fn token_with(&self, header: Value, claims: Value) -> String {
        let exp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock")
            .as_secs()
            + 600;
        let mut head = json!({"alg": "EdDSA", "kid": self.kid});
        let mut body = json!({"sub": self.kid, "exp": exp});
        for (into, from) in [(&mut head, header), (&mut body, claims)] {
            if let (Some(into), Value::Object(from)) = (into.as_object_mut(), from) {
                into.extend(from);
            }
        }
        let input = format!(
            "{}.{}",
            b64(head.to_string().as_bytes()),
            b64(body.to_string().as_bytes())
        );
        let signature = b64(&self.key.sign(input.as_bytes()).to_bytes());
        format!("{input}.{signature}")
    }
}

/// Writes the JWK Set of `partners` to `path`.
pub fn write_set(path: &Path, partners: &[&Partner]) {
    let keys: Vec<_> = partners.iter().map(|p| p.jwk()).collect();
    std::fs::write(path, json!({ "keys": keys }).to_string()).expect("write the set");
}
