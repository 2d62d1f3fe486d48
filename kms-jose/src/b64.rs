//! Strict base64url without padding (RFC 7515 §2, RFC 4648 §5), through
//! the `base64` crate's `URL_SAFE_NO_PAD` engine, which refuses padding,
//! characters outside the alphabet and non-zero trailing bits.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use crate::error::{JoseError, Part};

/// Decodes one part of a token.
///
/// # Errors
/// [`JoseError::Base64`] naming `part`.
pub(crate) fn decode(text: &str, part: Part) -> Result<Vec<u8>, JoseError> {
    URL_SAFE_NO_PAD
        .decode(text)
        .map_err(|_| JoseError::Base64(part))
}

/// Encodes bytes as base64url without padding.
pub(crate) fn encode(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_foreign_characters_and_trailing_bits_are_refused() {
        assert_eq!(decode("YQ", Part::Payload), Ok(b"a".to_vec()));
        for bad in ["YQ==", "YR", "Y+", "Y/", "Y Q", "YQ\n", "Y"] {
            assert_eq!(
                decode(bad, Part::Payload),
                Err(JoseError::Base64(Part::Payload)),
                "{bad:?}"
            );
        }
        assert_eq!(encode(b"\xfb\xff"), "-_8");
    }
}
