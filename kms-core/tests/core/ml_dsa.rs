//! Keys of an ML-DSA algorithm in the keystore: the algorithm is chosen at
//! creation and kept by every version, through signing, verification,
//! rotation, trimming, the durable store and sealed export and import;
//! the Ed25519 calls refuse such a key with a typed error.
#![cfg(feature = "ml-dsa")]

use kms_core::seal::SealKey;
use kms_core::{Alg, KeyPolicy, Keystore, KmsError, Signature};

const ML_DSA: [Alg; 3] = [Alg::MlDsa44, Alg::MlDsa65, Alg::MlDsa87];

fn master() -> SealKey {
    SealKey::from_bytes("master", 1, &[9; 32]).expect("key")
}

#[test]
fn a_key_keeps_its_algorithm_through_rotation_and_verifies_each_version() {
    let ks = Keystore::new();
    for alg in ML_DSA {
        let v1 = ks.create_key("acme", "tokens", alg).expect("create");
        assert_eq!(v1.alg(), alg);
        assert!(v1.to_string().contains(alg.as_str()));
        let (signer, first) = ks.sign_message(&v1, b"first").expect("sign");
        assert_eq!(signer, v1);
        assert!(
            matches!(first, Signature::MlDsa { alg: a, ref bytes } if a == alg && bytes.len() == alg.signature_len())
        );
        let v2 = ks.rotate(&v1).expect("rotate");
        assert_eq!(v2.alg(), alg);
        let (signer, second) = ks.sign_message(&v1, b"second").expect("sign");
        assert_eq!(signer, v2, "the head signs");
        ks.verify_message(&v1, b"first", first.as_bytes())
            .expect("v1 verifies");
        ks.verify_message(&v2, b"second", second.as_bytes())
            .expect("v2 verifies");
        assert!(matches!(
            ks.verify_message(&v2, b"first", first.as_bytes()),
            Err(KmsError::InvalidMlDsaSignature { .. })
        ));
        assert!(matches!(
            ks.verify_message(&v1, b"first", &first.as_bytes()[..64]),
            Err(KmsError::InvalidMlDsaSignature { .. })
        ));
        let attested = ks.attest(&v1).expect("attest");
        assert_eq!(attested.alg, alg);
        assert!(attested
            .versions
            .iter()
            .all(|v| v.public_key.len() == alg.public_key_len()));
        // The Ed25519 calls say what is wrong.
        for refused in [
            ks.sign(&v1, b"m").map(drop),
            ks.public_key(&v1).map(drop),
            ks.verifying_key(&v1).map(drop),
            ks.verify(&v1, b"m", &[0; 64]),
        ] {
            assert!(
                matches!(refused, Err(KmsError::WrongAlgorithm { alg: a, wanted: Alg::Ed25519, .. }) if a == alg),
                "{refused:?}"
            );
        }
    }
    // An Ed25519 key signs through both calls, and a 64-byte signature is
    // the only one it takes.
    let ed = ks.create_key("acme", "ed", Alg::Ed25519).expect("create");
    let (_, signature) = ks.sign_message(&ed, b"m").expect("sign");
    let (_, raw) = ks.sign(&ed, b"m").expect("sign");
    assert_eq!(signature, Signature::Ed25519(raw));
    ks.verify_message(&ed, b"m", signature.as_bytes())
        .expect("verifies");
    assert!(matches!(
        ks.verify_message(&ed, b"m", &[0; 63]),
        Err(KmsError::InvalidArgument { .. })
    ));
}

#[test]
fn a_durable_store_keeps_ml_dsa_keys_trimmed_versions_included() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (keys, signed) = {
        let ks = Keystore::create(dir.path(), master()).expect("create");
        let mut keys = Vec::new();
        let mut signed = Vec::new();
        for alg in ML_DSA {
            let v1 = ks.create_key("acme", alg.as_str(), alg).expect("create");
            let v2 = ks.rotate(&v1).expect("rotate");
            let v3 = ks.rotate(&v1).expect("rotate");
            // v1 trimmed: the retired record keeps its long public key.
            let mut policy = KeyPolicy::default();
            policy.min_verify_version = 2;
            ks.set_policy(&v1, policy).expect("policy");
            assert_eq!(ks.trim(&v1, 2).expect("trim"), 2);
            let (signer, signature) = ks.sign_message(&v2, b"m").expect("sign");
            assert_eq!(signer, v3, "the head signs");
            signed.push((signer, signature));
            keys.push((v1, ks.attest(&v3).expect("attest")));
        }
        (keys, signed)
    };
    let ks = Keystore::open(dir.path(), master()).expect("reopen");
    for (v1, attested) in &keys {
        assert_eq!(&ks.attest(v1).expect("attest"), attested, "all as it was");
    }
    for (head, signature) in &signed {
        ks.verify_message(head, b"m", signature.as_bytes())
            .expect("verifies after reopen");
        let (signer, again) = ks.sign_message(head, b"again").expect("signs after reopen");
        ks.verify_message(&signer, b"again", again.as_bytes())
            .expect("verifies");
    }
}

#[test]
fn an_ml_dsa_key_exports_sealed_and_imports_with_its_algorithm() {
    let (from, to) = (Keystore::new(), Keystore::new());
    let transport = SealKey::from_bytes("transport", 1, &[3; 32]).expect("key");
    for alg in ML_DSA {
        let key = from.create_key("acme", "tokens", alg).expect("create");
        let mut policy = KeyPolicy::default();
        policy.exportable = true;
        from.set_policy(&key, policy).expect("policy");
        let envelope = from.export_sealed(&key, &transport).expect("export");
        let imported = to
            .import_sealed("other", "tokens", &transport, &envelope)
            .expect("import");
        assert_eq!(imported.alg(), alg);
        assert_eq!(
            to.attest(&imported).expect("attest").versions[0].public_key,
            from.attest(&key).expect("attest").versions[0].public_key
        );
        let (_, signature) = to.sign_message(&imported, b"m").expect("sign");
        from.verify_message(&key, b"m", signature.as_bytes())
            .expect("the same key");
        // Another transport key opens nothing.
        let wrong = SealKey::from_bytes("transport", 1, &[4; 32]).expect("key");
        assert!(to
            .import_sealed("other", "tokens", &wrong, &envelope)
            .is_err());
    }
}
