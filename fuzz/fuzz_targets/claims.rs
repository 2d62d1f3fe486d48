//! JWT claims (kms-jose `Claims::from_json`, the strict object parser the
//! admin face mints with) and `Validation`: never panic on any bytes; a
//! parsed claims set has unique names and validates, or not, without a
//! panic, under defaults and under an issuer and audience.
#![no_main]

use std::time::{Duration, UNIX_EPOCH};

use kms_jose::{Claims, Validation};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(claims) = Claims::from_json(data) else {
        return;
    };
    let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let _ = Validation::default().validate(&claims, now);
    let mut strict = Validation::default();
    strict.issuers = vec!["https://issuer.example".to_owned()];
    strict.audiences = vec!["api".to_owned()];
    strict.required = vec!["sub".to_owned()];
    let _ = strict.validate(&claims, now);
    // What serde_json writes of it parses again with the same member names
    // (values may differ in a float's last digit: serde_json does not
    // round-trip every float).
    let text = serde_json::to_vec(claims.as_map()).expect("a map serializes");
    let again = Claims::from_json(&text).expect("what serialized parses");
    assert!(again.as_map().keys().eq(claims.as_map().keys()));
});
