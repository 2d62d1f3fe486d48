//! Sealed export and import: a key moves between keystores only as an
//! envelope; import checks the key (canonical, torsion-free public key that
//! matches the seed) and records where it came from, durably.

use curve25519_dalek::constants::{ED25519_BASEPOINT_POINT, EIGHT_TORSION};
use curve25519_dalek::scalar::Scalar;
use kms_core::ed25519::{Component, SignatureError};
use kms_core::seal::{SealError, SealKey};
use kms_core::{KeyId, Keystore, KmsError, Origin, EXPORT_AAD};

/// Turns `key`'s `exportable` on (off for new keys).
fn exportable(ks: &Keystore, key: &KeyId) {
    let mut policy = ks.policy(key).expect("policy");
    policy.exportable = true;
    ks.set_policy(key, policy).expect("set policy");
}

fn transport() -> SealKey {
    SealKey::from_bytes("transport", 2, &[5u8; 32]).expect("key")
}

#[test]
fn an_exported_key_imports_with_the_same_public_key_and_its_origin() {
    let source = Keystore::new();
    let key = source.create_ed25519("acme", "tokens").expect("create");
    exportable(&source, &key);
    let v2 = source.rotate(&key).expect("rotate");
    let (_, signature) = source.sign(&v2, b"signed at the source").expect("sign");
    let envelope = source.export_sealed(&v2, &transport()).expect("export");

    let dir = tempfile::tempdir().expect("temp dir");
    let master = || SealKey::from_bytes("master", 1, &[1u8; 32]).expect("key");
    let imported = {
        let target = Keystore::create(dir.path(), master()).expect("store");
        target
            .import_sealed("globex", "tokens", &transport(), &envelope)
            .expect("import")
    };
    let target = Keystore::open(dir.path(), master()).expect("reopen");
    assert_eq!(
        target.public_key(&imported).expect("pk"),
        source.public_key(&v2).expect("pk")
    );
    target
        .verify(&imported, b"signed at the source", &signature)
        .expect("the same key verifies");
    let attestation = target.attest(&imported).expect("attest");
    assert_eq!(
        attestation.versions[0].origin,
        Origin::Imported {
            source: v2.to_string(),
            sealed_by: "transport@v2".to_owned()
        },
        "the origin survives a reopen"
    );
    assert_eq!(
        source.attest(&key).expect("attest").versions[0].origin,
        Origin::Generated
    );
    let (head, s) = target.sign(&imported, b"signed here").expect("sign");
    source.verify(&v2, b"signed here", &s).expect("same secret");
    assert_eq!(head.version(), 1);
}

#[test]
fn a_wrong_transport_key_or_a_bad_key_inside_is_refused() {
    let source = Keystore::new();
    let key = source.create_ed25519("acme", "tokens").expect("create");
    exportable(&source, &key);
    let envelope = source.export_sealed(&key, &transport()).expect("export");
    let target = Keystore::new();
    let other_bytes = SealKey::from_bytes("transport", 2, &[6u8; 32]).expect("key");
    assert_eq!(
        target
            .import_sealed("acme", "t", &other_bytes, &envelope)
            .err(),
        Some(KmsError::Seal(SealError::Authentication))
    );
    // An envelope sealed for another purpose does not open as an export.
    let stray = transport()
        .seal(b"something else", &[0u8; 80])
        .expect("seal");
    assert_eq!(
        target
            .import_sealed("acme", "t", &transport(), &stray)
            .err(),
        Some(KmsError::Seal(SealError::Authentication))
    );

    let seed = [3u8; 32];
    let honest = ed25519_dalek::SigningKey::from_bytes(&seed)
        .verifying_key()
        .to_edwards();
    let crafted = |public_key: [u8; 32]| {
        let mut plaintext = seed.to_vec();
        plaintext.extend_from_slice(&public_key);
        plaintext.push(4);
        plaintext.extend_from_slice(b"evil");
        let envelope = transport().seal(EXPORT_AAD, &plaintext).expect("seal");
        target.import_sealed("acme", "t", &transport(), &envelope)
    };
    // The honest key plus a torsion component: canonical, not small order,
    // not torsion-free.
    let with_torsion = (honest + EIGHT_TORSION[1]).compress().to_bytes();
    assert_eq!(
        crafted(with_torsion).err(),
        Some(KmsError::InvalidSignature(SignatureError::SmallOrder(
            Component::PublicKey
        )))
    );
    assert_eq!(
        crafted(EIGHT_TORSION[2].compress().to_bytes()).err(),
        Some(KmsError::InvalidSignature(SignatureError::SmallOrder(
            Component::PublicKey
        )))
    );
    let mut non_canonical = [0xffu8; 32];
    non_canonical[31] = 0x7f;
    assert!(matches!(
        crafted(non_canonical),
        Err(KmsError::InvalidSignature(
            SignatureError::NonCanonicalPoint(Component::PublicKey)
        ))
    ));
    let someone_else = (ED25519_BASEPOINT_POINT * Scalar::from(7u64))
        .compress()
        .to_bytes();
    assert!(matches!(
        crafted(someone_else),
        Err(KmsError::InvalidArgument { .. })
    ));
    assert!(
        crafted(honest.compress().to_bytes()).is_ok(),
        "the honest key imports"
    );
    let short = transport().seal(EXPORT_AAD, &[0u8; 10]).expect("seal");
    assert!(matches!(
        target.import_sealed("acme", "t", &transport(), &short),
        Err(KmsError::InvalidArgument { .. })
    ));
}
