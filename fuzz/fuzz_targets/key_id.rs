//! `KeyId` parsing: never panics; whatever parses prints back to the same
//! text and parses again to the same id.
#![no_main]

use kms_core::KeyId;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(id) = text.parse::<KeyId>() {
        let printed = id.to_string();
        assert_eq!(printed.parse::<KeyId>().ok(), Some(id));
    }
});
