//! `KeyId` text form: `Display` and `FromStr` round-trip over generated ids,
//! and arbitrary text never panics the parser.

use kms_core::{Alg, KeyId};
use proptest::prelude::*;

proptest! {
    #[test]
    fn display_and_parse_round_trip(
        tenant in "[A-Za-z0-9._-]{1,64}",
        purpose in "[A-Za-z0-9._-]{1,64}",
        uuid in any::<u128>(),
        version in 1u32..,
    ) {
        let id = KeyId::new(&tenant, &purpose, Alg::Ed25519, uuid::Uuid::from_u128(uuid), version)
            .expect("valid fields");
        let text = id.to_string();
        prop_assert_eq!(text.parse::<KeyId>(), Ok(id));
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,120}") {
        let _ = text.parse::<KeyId>();
    }

    #[test]
    fn mutated_ids_fail_or_round_trip(pos in 0usize..70, byte in any::<u8>()) {
        let mut text = "kms:acme:tokens:ed25519:67e55044-10b1-426f-9247-bb680e5fe0c8:v3".as_bytes().to_vec();
        let i = pos % text.len();
        text[i] = byte;
        if let Ok(s) = String::from_utf8(text) {
            if let Ok(id) = s.parse::<KeyId>() {
                prop_assert_eq!(id.to_string(), s);
            }
        }
    }
}
