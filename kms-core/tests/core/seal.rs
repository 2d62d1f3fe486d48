//! `kms_core::seal`: round trips, every header field and every ciphertext
//! byte tampered with (each a typed error, never a panic and never
//! plaintext), anti-rollback, and parser properties over arbitrary bytes.

use kms_core::seal::{AntiRollback, Envelope, SealError, SealKey, FORMAT_VERSION};
use kms_core::KmsError;
use proptest::prelude::*;

const AAD: &[u8] = b"kms:acme:tokens:ed25519:seed";

fn key() -> SealKey {
    SealKey::from_bytes("master", 3, &[7u8; 32]).expect("key")
}

#[test]
fn a_sealed_secret_opens_with_the_same_key_and_aad_only() {
    let k = key();
    let envelope = k
        .seal(AAD, b"32 bytes of secret seed material")
        .expect("seal");
    assert_eq!(envelope.header.format_version, FORMAT_VERSION);
    assert_eq!(
        (envelope.header.key_id.as_str(), envelope.header.key_version),
        ("master", 3)
    );
    assert_eq!(envelope.header.counter, 1);
    assert_eq!(
        &*k.open(AAD, &envelope).expect("open"),
        b"32 bytes of secret seed material"
    );
    assert_eq!(
        k.open(b"another context", &envelope).err(),
        Some(SealError::Authentication)
    );
    let same_name_other_bytes = SealKey::from_bytes("master", 3, &[8u8; 32]).expect("key");
    assert_eq!(
        same_name_other_bytes.open(AAD, &envelope).err(),
        Some(SealError::Authentication)
    );
    let other_version = SealKey::from_bytes("master", 4, &[7u8; 32]).expect("key");
    assert!(matches!(
        other_version.open(AAD, &envelope),
        Err(SealError::WrongKey { .. })
    ));
    // The byte form round-trips.
    let parsed = Envelope::from_bytes(&envelope.to_bytes()).expect("parse");
    assert_eq!(parsed, envelope);
}

#[test]
fn every_byte_of_an_envelope_flipped_is_a_typed_error() {
    let k = key();
    let secret = [0x5au8; 48];
    let bytes = k.seal(AAD, &secret).expect("seal").to_bytes();
    for i in 0..bytes.len() {
        for bit in [0x01u8, 0x80] {
            let mut tampered = bytes.clone();
            tampered[i] ^= bit;
            let result = Envelope::from_bytes(&tampered).and_then(|e| k.open(AAD, &e));
            assert!(result.is_err(), "byte {i} bit {bit:#x}: opened");
        }
    }
}

#[test]
fn each_header_field_altered_is_refused_with_the_right_error() {
    let k = key();
    let sealed = k.seal(AAD, b"secret").expect("seal");
    let with = |f: &dyn Fn(&mut Envelope)| {
        let mut e = sealed.clone();
        f(&mut e);
        k.open(AAD, &e).map(|p| p.to_vec())
    };
    assert_eq!(
        with(&|e| e.header.format_version = 2),
        Err(SealError::UnsupportedVersion(2))
    );
    assert!(matches!(
        with(&|e| e.header.key_id = "other".to_owned()),
        Err(SealError::WrongKey { .. })
    ));
    assert!(matches!(
        with(&|e| e.header.key_version = 2),
        Err(SealError::WrongKey { .. })
    ));
    assert_eq!(
        with(&|e| e.header.counter += 1),
        Err(SealError::Authentication)
    );
    assert_eq!(
        with(&|e| e.header.created_at -= 1),
        Err(SealError::Authentication)
    );
    assert_eq!(with(&|e| e.nonce[0] ^= 1), Err(SealError::Authentication));
    assert_eq!(
        with(&|e| e.ciphertext[0] ^= 1),
        Err(SealError::Authentication)
    );
    assert_eq!(
        with(&|e| {
            let last = e.ciphertext.len() - 1;
            e.ciphertext[last] ^= 1;
        }),
        Err(SealError::Authentication)
    );
    assert_eq!(
        with(&|e| e.ciphertext.truncate(10)),
        Err(SealError::Malformed { what: "tag" })
    );
    // In byte form the parser names the field.
    let bytes = sealed.to_bytes();
    let parse = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = bytes.clone();
        f(&mut b);
        Envelope::from_bytes(&b)
    };
    assert_eq!(
        parse(&|b| b[0] = b'X'),
        Err(SealError::Malformed { what: "magic" })
    );
    assert_eq!(parse(&|b| b[4] = 9), Err(SealError::UnsupportedVersion(9)));
    assert_eq!(
        parse(&|b| b[5] = 0),
        Err(SealError::Malformed { what: "key id" })
    );
    assert_eq!(
        parse(&|b| b[6] = b' '),
        Err(SealError::Malformed { what: "key id" })
    );
    assert_eq!(
        parse(&|b| b.truncate(20)),
        Err(SealError::Malformed { what: "counter" })
    );
}

#[test]
fn anti_rollback_rejects_an_older_envelope_of_the_same_key_id() {
    let k = key();
    let (first, second, third) = (
        k.seal(AAD, b"v1").expect("seal"),
        k.seal(AAD, b"v2").expect("seal"),
        k.seal(AAD, b"v3").expect("seal"),
    );
    assert_eq!(
        [
            first.header.counter,
            second.header.counter,
            third.header.counter
        ],
        [1, 2, 3]
    );
    let policy = AntiRollback::new();
    assert_eq!(&*policy.open(&k, AAD, &second).expect("open"), b"v2");
    assert_eq!(
        policy.open(&k, AAD, &first).err(),
        Some(SealError::Rollback {
            key_id: "master".to_owned(),
            key_version: 3,
            counter: 1,
            newest: 2
        })
    );
    assert!(
        policy.open(&k, AAD, &second).is_ok(),
        "the same envelope again"
    );
    assert!(policy.open(&k, AAD, &third).is_ok());
    assert_eq!(policy.newest("master", 3), 3);
    // A forged counter is not recorded: authentication comes first.
    let mut forged = third.clone();
    forged.header.counter = 1000;
    assert_eq!(
        policy.open(&k, AAD, &forged).err(),
        Some(SealError::Authentication)
    );
    assert_eq!(policy.newest("master", 3), 3);
    // A key restored from storage continues its count.
    let restored = SealKey::from_bytes("master", 3, &[7u8; 32])
        .expect("key")
        .with_counter(3);
    assert_eq!(restored.seal(AAD, b"v4").expect("seal").header.counter, 4);
    // At the end of the count the key stays exhausted; it never wraps to
    // reuse counter 1.
    let ending = SealKey::from_bytes("master", 3, &[7u8; 32])
        .expect("key")
        .with_counter(u64::MAX - 1);
    assert_eq!(
        ending.seal(AAD, b"last").expect("seal").header.counter,
        u64::MAX
    );
    for _ in 0..2 {
        assert_eq!(
            ending.seal(AAD, b"more").err(),
            Some(SealError::CounterExhausted)
        );
    }
    assert!(KmsError::from(SealError::EntropyUnavailable).is_retryable());
    assert_eq!(
        KmsError::from(SealError::EntropyUnavailable),
        KmsError::EntropyUnavailable
    );
    assert!(!KmsError::from(SealError::Authentication).is_retryable());
}

#[test]
fn anti_rollback_counts_each_version_of_a_sealing_key_on_its_own() {
    let v1 = SealKey::from_bytes("svc", 1, &[1u8; 32]).expect("key");
    let v2 = SealKey::from_bytes("svc", 2, &[2u8; 32]).expect("key");
    let policy = AntiRollback::new();
    let old: Vec<Envelope> = (0..3)
        .map(|_| v1.seal(AAD, b"under v1").expect("seal"))
        .collect();
    for envelope in &old {
        policy.open(&v1, AAD, envelope).expect("open v1");
    }
    // A new version's counter starts again at 1: not a rollback of v1's.
    let first_of_v2 = v2.seal(AAD, b"under v2").expect("seal");
    assert_eq!(first_of_v2.header.counter, 1);
    assert_eq!(
        &*policy
            .open(&v2, AAD, &first_of_v2)
            .expect("v2's first envelope"),
        b"under v2"
    );
    // Each version keeps its own newest: v1's older envelopes are still
    // refused.
    assert!(matches!(
        policy.open(&v1, AAD, &old[0]),
        Err(SealError::Rollback {
            key_version: 1,
            counter: 1,
            newest: 3,
            ..
        })
    ));
    assert_eq!((policy.newest("svc", 1), policy.newest("svc", 2)), (3, 1));
    // Seeding one version leaves the other alone.
    policy.accept_at_least("svc", 2, 10);
    assert_eq!((policy.newest("svc", 1), policy.newest("svc", 2)), (3, 10));
    assert!(matches!(
        policy.open(&v2, AAD, &first_of_v2),
        Err(SealError::Rollback {
            key_version: 2,
            counter: 1,
            newest: 10,
            ..
        })
    ));
}

#[test]
fn bad_key_ids_and_versions_are_typed_errors_and_debug_hides_the_key() {
    for id in ["", "has space", &"x".repeat(65)] {
        let e = SealKey::from_bytes(id, 1, &[0; 32]).err();
        assert!(matches!(e, Some(SealError::InvalidKey { .. })));
        assert!(matches!(
            e.map(KmsError::from),
            Some(KmsError::InvalidArgument { .. })
        ));
    }
    assert!(SealKey::from_bytes("k", 0, &[0; 32]).is_err());
    let k = SealKey::from_bytes("k", 1, &[0xab; 32]).expect("key");
    let shown = format!("{k:?}");
    assert!(shown.contains("\"k\"") && !shown.contains("171") && !shown.contains("ab"));
    let generated = SealKey::generate("fresh").expect("generate");
    let e = generated.seal(b"", b"").expect("empty secret");
    assert!(generated.open(b"", &e).expect("open").is_empty());
    assert_eq!(KmsError::from(SealError::Authentication).code(), "kms.seal");
}

proptest! {
    #[test]
    fn the_parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = Envelope::from_bytes(&bytes);
    }

    #[test]
    fn the_parser_never_panics_near_a_valid_envelope(
        cut in 0usize..120,
        flips in proptest::collection::vec((0usize..120, any::<u8>()), 0..4),
    ) {
        let mut bytes = key().seal(AAD, b"secret").expect("seal").to_bytes();
        for (at, x) in flips {
            if let Some(b) = bytes.get_mut(at) {
                *b ^= x;
            }
        }
        bytes.truncate(cut);
        if let Ok(e) = Envelope::from_bytes(&bytes) {
            prop_assert_eq!(Envelope::from_bytes(&e.to_bytes()), Ok(e));
        }
    }

    #[test]
    fn sealed_secrets_round_trip(secret in proptest::collection::vec(any::<u8>(), 0..300),
                                 aad in proptest::collection::vec(any::<u8>(), 0..40)) {
        let k = key();
        let e = Envelope::from_bytes(&k.seal(&aad, &secret).expect("seal").to_bytes()).expect("parse");
        prop_assert_eq!(&*k.open(&aad, &e).expect("open"), &secret[..]);
    }
}
