//! The `serde` feature: a key id travels as its text form, an attestation
//! as JSON with hex public keys, and a configuration file may give some
//! fields (the rest default), names `max_wait` in µs, and refuses unknown
//! fields and invalid values.

use std::time::Duration;

use kms_actor::KmsConfig;
use kms_bus::{Backend, Overflow};
use kms_core::{Attestation, KeyId, Keystore};
use kms_jose::Algorithm;

#[test]
fn a_key_id_is_its_text_form_and_a_bad_one_is_refused() {
    let ks = Keystore::new();
    let key = ks.create_ed25519("acme", "tokens").expect("create");
    let json = serde_json::to_string(&key).expect("serialize");
    assert_eq!(json, format!("\"{key}\""));
    assert_eq!(serde_json::from_str::<KeyId>(&json).expect("parse"), key);
    for bad in ["\"kms:acme\"", "\"KMS:a:b:ed25519:x:v1\"", "17"] {
        assert!(serde_json::from_str::<KeyId>(bad).is_err(), "{bad}");
    }
}

#[test]
fn an_attestation_round_trips_with_hex_public_keys() {
    let ks = Keystore::new();
    let key = ks.create_ed25519("acme", "tokens").expect("create");
    ks.rotate(&key).expect("rotate");
    let attestation = ks.attest(&key).expect("attest");
    let json = serde_json::to_value(&attestation).expect("serialize");
    let hex: String = attestation.versions[1]
        .public_key
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(json["versions"][1]["public_key"], hex.as_str());
    assert_eq!(json["head"], attestation.head.to_string().as_str());
    assert_eq!(json["alg"], "ed25519");
    let back: Attestation = serde_json::from_value(json.clone()).expect("parse");
    assert_eq!(back, attestation);
    let mut short = json;
    short["versions"][0]["public_key"] = "abcd".into();
    assert!(serde_json::from_value::<Attestation>(short).is_err());
}

#[test]
fn a_config_file_gives_some_fields_and_the_rest_default() {
    let config: KmsConfig = serde_json::from_str(
        r#"{"threads": 3, "max_wait_us": 250, "token_alg": "Ed25519",
            "backend": "Classic", "overflow": "Wait", "request_topic": "edge.kms"}"#,
    )
    .expect("parse");
    let expected = KmsConfig::default()
        .with_threads(3)
        .with_max_wait(Duration::from_micros(250))
        .with_token_alg(Algorithm::Ed25519)
        .with_backend(Backend::Classic)
        .with_overflow(Overflow::Wait)
        .with_request_topic("edge.kms".to_owned());
    assert_eq!(config, expected);
    let json = serde_json::to_value(&expected).expect("serialize");
    assert_eq!(json["max_wait_us"], 250);
    assert!(json.get("trusted_jwks").is_none());
    assert_eq!(
        serde_json::from_value::<KmsConfig>(json).expect("round trip"),
        expected
    );
    for bad in [
        r#"{"thread": 3}"#,
        r#"{"token_alg": "HS256"}"#,
        r#"{"overflow": "Drop"}"#,
        r#"{"max_wait_us": -1}"#,
    ] {
        assert!(serde_json::from_str::<KmsConfig>(bad).is_err(), "{bad}");
    }
}
