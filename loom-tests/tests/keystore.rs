//! Loom model of rotation under load (docs/DESIGN.md §3.1 and §6), on the real
//! keystore code: a rotator adds versions while a verifier checks an old
//! version and a signer signs with the head. Checked in every interleaving:
//! * no torn key: a signature made "by the head" verifies under the id the
//!   signer was told, and `public_key` of that id is the key it verifies
//!   under;
//! * every retained version keeps verifying its old signature, and its
//!   public key never changes;
//! * the head never goes backwards, for any one observer, and an
//!   attestation is always a whole prefix `1..=head`.

#![cfg(kms_loom)]

use kms_core::{KeyId, Keystore};
use loom::thread;

/// Asserts that an attestation lists versions `1..=head` with `v1` as the
/// first public key, and returns the head version.
fn check_attestation(ks: &Keystore, key: &KeyId, v1_public_key: [u8; 32]) -> u32 {
    let attestation = ks.attest(key).expect("attest");
    let head = attestation.head.version();
    assert_eq!(attestation.versions.len(), head as usize, "a whole prefix");
    for (i, v) in attestation.versions.iter().enumerate() {
        assert_eq!(v.version as usize, i + 1);
    }
    assert_eq!(attestation.versions[0].public_key, v1_public_key);
    head
}

#[test]
fn rotation_races_old_version_verify_and_head_sign() {
    loom::model(|| {
        let ks = Keystore::new();
        let v1 = ks.create_ed25519("acme", "tokens").expect("create");
        let (signer, old_signature) = ks.sign(&v1, b"old").expect("sign");
        assert_eq!(signer, v1);
        let v1_public_key = ks.public_key(&v1).expect("public key");

        let rotator = {
            let (ks, v1) = (ks.clone(), v1.clone());
            thread::spawn(move || {
                let v2 = ks.rotate(&v1).expect("rotate");
                let v3 = ks.rotate(&v1).expect("rotate by an old version");
                assert_eq!((v2.version(), v3.version()), (2, 3));
            })
        };
        let verifier = {
            let (ks, v1) = (ks.clone(), v1.clone());
            thread::spawn(move || {
                ks.verify(&v1, b"old", &old_signature)
                    .expect("v1 still verifies");
                assert_eq!(ks.public_key(&v1).expect("public key"), v1_public_key);
                let first = check_attestation(&ks, &v1, v1_public_key);
                let second = check_attestation(&ks, &v1, v1_public_key);
                assert!(second >= first, "head went back from {first} to {second}");
            })
        };
        // The signer: each signature verifies under the id it came with,
        // and that id's public key is the one it verifies under.
        let mut last_head = 0;
        let mut signed = Vec::new();
        for message in [&b"a"[..], b"b"] {
            let (id, signature) = ks.sign(&v1, message).expect("sign with the head");
            assert!(id.version() >= last_head, "head went backwards");
            last_head = id.version();
            ks.verify(&id, message, &signature)
                .expect("signed by the version it names");
            let public_key = ks.public_key(&id).expect("public key");
            kms_core::ed25519::verify(&public_key, message, &signature)
                .expect("under that version's public key");
            signed.push((id, message, signature));
        }
        rotator.join().expect("rotator");
        verifier.join().expect("verifier");

        assert_eq!(check_attestation(&ks, &v1, v1_public_key), 3);
        ks.verify(&v1, b"old", &old_signature)
            .expect("v1 verifies after rotation");
        for (id, message, signature) in signed {
            ks.verify(&id, message, &signature)
                .expect("every retained version verifies");
        }
    });
}
