//! Keystore behaviour: sign with the head, verify every version, rotate,
//! attest, unknown ids, and secrets kept out of `Debug`.

use kms_core::ed25519::SignatureError;
use kms_core::{KeyId, KeyIdField, Keystore, KmsError};

#[test]
fn sign_returns_the_head_and_verifies() {
    let ks = Keystore::new();
    let id = ks.create_ed25519("acme", "tokens").expect("create");
    assert_eq!(id.version(), 1);
    let (signer, sig) = ks.sign(&id, b"hello").expect("sign");
    assert_eq!(signer, id);
    assert_eq!(ks.verify(&id, b"hello", &sig), Ok(()));
    assert_eq!(
        ks.verify(&id, b"hellO", &sig),
        Err(KmsError::InvalidSignature(SignatureError::Equation))
    );
    let pk = ks.public_key(&id).expect("public key");
    assert_eq!(kms_core::ed25519::verify(&pk, b"hello", &sig), Ok(()));
}

#[test]
fn rotation_keeps_old_versions_verifying_and_only_the_head_signs() {
    let ks = Keystore::new();
    let v1 = ks.create_ed25519("acme", "tokens").expect("create");
    let (_, sig1) = ks.sign(&v1, b"m").expect("sign v1");
    let v2 = ks.rotate(&v1).expect("rotate");
    assert_eq!(v2.version(), 2);
    assert_eq!(v2.uuid(), v1.uuid());
    let (signer, sig2) = ks.sign(&v1, b"m").expect("sign after rotate");
    assert_eq!(signer, v2, "the head signs even when v1 is named");
    assert_eq!(ks.verify(&v1, b"m", &sig1), Ok(()));
    assert_eq!(ks.verify(&v2, b"m", &sig2), Ok(()));
    assert!(
        ks.verify(&v1, b"m", &sig2).is_err(),
        "v2's signature is not v1's"
    );
    assert_ne!(ks.public_key(&v1).ok(), ks.public_key(&v2).ok());

    let att = ks.attest(&v1).expect("attest");
    assert_eq!(att.head, v2);
    assert_eq!(att.alg, kms_core::Alg::Ed25519);
    assert_eq!(att.versions.len(), 2);
    assert_eq!(att.versions[0].version, 1);
    assert_eq!(att.versions[1].version, 2);
    assert!(att.versions[0].created_at <= att.versions[1].created_at);
    assert_eq!(
        Some(att.versions[1].public_key.clone()),
        ks.public_key(&v2).ok().map(Vec::from)
    );
}

#[test]
fn unknown_keys_and_versions_are_typed_errors() {
    let ks = Keystore::new();
    let id = ks.create_ed25519("acme", "tokens").expect("create");
    let other_tenant: KeyId = id
        .to_string()
        .replace(":acme:", ":other:")
        .parse()
        .expect("well-formed");
    let err = ks.sign(&other_tenant, b"m").expect_err("other tenant");
    assert_eq!(err.code(), "kms.unknown_key");
    assert!(!err.is_retryable());
    let v9: KeyId = id
        .to_string()
        .replace(":v1", ":v9")
        .parse()
        .expect("well-formed");
    assert!(matches!(
        ks.verify(&v9, b"m", &[0; 64]),
        Err(KmsError::UnknownVersion {
            version: 9,
            head: 1,
            ..
        })
    ));
    assert!(matches!(
        ks.rotate(&v9),
        Err(KmsError::UnknownVersion { .. })
    ));
}

#[test]
fn bad_names_are_rejected_with_the_field() {
    let ks = Keystore::new();
    match ks.create_ed25519("ac me", "tokens") {
        Err(KmsError::InvalidKeyId(e)) => assert_eq!(e.field, KeyIdField::Tenant),
        other => panic!("expected InvalidKeyId, got {other:?}"),
    }
    match ks.create_ed25519("acme", "") {
        Err(KmsError::InvalidKeyId(e)) => assert_eq!(e.field, KeyIdField::Purpose),
        other => panic!("expected InvalidKeyId, got {other:?}"),
    }
}

#[test]
fn debug_output_has_no_secret() {
    let ks = Keystore::new();
    let id = ks.create_ed25519("acme", "tokens").expect("create");
    let text = format!("{ks:?} {:?}", ks.attest(&id).expect("attest"));
    assert!(text.contains("Keystore"));
    assert!(!text.to_lowercase().contains("secret"));
    assert!(!text.contains("signing_key"));
}

#[test]
fn clones_share_keys_across_threads() {
    let ks = Keystore::new();
    let id = ks.create_ed25519("acme", "tokens").expect("create");
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let ks = ks.clone();
            let id = id.clone();
            std::thread::spawn(move || ks.rotate(&id).expect("rotate").version())
        })
        .collect();
    let mut versions: Vec<u32> = handles
        .into_iter()
        .map(|h| h.join().expect("join"))
        .collect();
    versions.sort_unstable();
    assert_eq!(
        versions,
        vec![2, 3, 4, 5],
        "each rotation got its own version"
    );
    assert_eq!(ks.attest(&id).expect("attest").versions.len(), 5);
}

#[test]
fn wrong_lengths_are_invalid_argument_errors() {
    use kms_core::ed25519::{public_key_from_slice, signature_from_slice};
    assert!(public_key_from_slice(&[7; 32]).is_ok());
    assert!(signature_from_slice(&[7; 64]).is_ok());
    for (len, result) in [
        (31, public_key_from_slice(&[0; 31]).map(|_| ())),
        (33, public_key_from_slice(&[0; 33]).map(|_| ())),
        (0, signature_from_slice(&[]).map(|_| ())),
        (65, signature_from_slice(&[0; 65]).map(|_| ())),
    ] {
        match result {
            Err(e @ KmsError::InvalidArgument { .. }) => {
                assert_eq!(e.code(), "kms.invalid_argument");
                assert!(e.to_string().contains(&format!("got {len}")), "{e}");
            }
            other => panic!("length {len}: expected InvalidArgument, got {other:?}"),
        }
    }
}
