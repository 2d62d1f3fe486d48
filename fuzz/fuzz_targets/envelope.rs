//! Envelope parsing and opening: never panics; whatever parses serialises
//! back to the same bytes; nothing the fuzzer makes opens under a key it
//! does not know (only a real seal authenticates).
#![no_main]

use kms_core::seal::{Envelope, SealKey};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(envelope) = Envelope::from_bytes(data) else {
        return;
    };
    assert_eq!(envelope.to_bytes(), data);
    let key = SealKey::from_bytes(
        &envelope.header.key_id,
        envelope.header.key_version,
        &[7; 32],
    )
    .expect("a parsed header names a valid key");
    assert!(key.open(b"fuzz", &envelope).is_err());
});
