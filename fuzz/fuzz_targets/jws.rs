//! The compact JWS parser and its header (kms-jose): never panics on any
//! text; whatever parses keeps its parts (the signing input is the text
//! before the last dot) and is canonical (its signature part is exactly
//! the strict base64url of the 64 signature bytes, so no second spelling
//! of a token parses), and its claims, when they parse, go through
//! `Validation` without a panic. Verifying under RFC 8032 TEST 1's key
//! (which signed the seeds) never panics.
#![no_main]

use std::time::{Duration, UNIX_EPOCH};

use base64::Engine;
use kms_jose::{CompactJws, Validation};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(jws) = CompactJws::parse(text) else {
        return;
    };
    let input = jws.signing_input();
    assert!(text.as_bytes().starts_with(input));
    assert_eq!(text.as_bytes().get(input.len()), Some(&b'.'));
    let _ = jws.header().kid();
    let _ = jws.header().alg();
    let key = kms_core::ed25519::VerifyingKey::from_bytes(&[
        0xd7, 0x5a, 0x98, 0x01, 0x82, 0xb1, 0x0a, 0xb7, 0xd5, 0x4b, 0xfe, 0xd3, 0xc9, 0x64, 0x07,
        0x3a, 0x0e, 0xe1, 0x72, 0xf3, 0xda, 0xa6, 0x23, 0x25, 0xaf, 0x02, 0x1a, 0x68, 0xf7, 0x07,
        0x51, 0x1a,
    ])
    .expect("RFC 8032 TEST 1's public key");
    let signature = &text[input.len() + 1..];
    assert_eq!(
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(jws.signature()),
        signature
    );
    let _ = jws.verify(&key);
    if let Ok(claims) = jws.claims() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let _ = Validation::default().validate(&claims, now);
    }
});
