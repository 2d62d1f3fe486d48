//! [`CompactJws`]: a compact JWS (RFC 7515 §7.1) split, decoded and
//! checked, ready for its signature to be verified; and [`sign_compact`].
//!
//! Invariant: a `CompactJws` exists only for a token whose three parts
//! decoded strictly, whose header passed [`Header::parse`], and whose
//! signature's length fits its `alg` (64 bytes for Ed25519 and `ES256`,
//! 96 for `ES384`, 256 to 1024 for RSA, 2420, 3309 or 4627 for ML-DSA).
//! The signing input is the token's own first two
//! parts, byte for byte (RFC 7515 §5.2 step 8), never re-encoded.

use kms_core::ed25519::{self, BatchItem, VerifyingKey};
use serde::Serialize;

use crate::b64;
use crate::claims::Claims;
use crate::error::{JoseError, Part};
use crate::header::Header;
use crate::object;
use crate::public_key::PublicKey;
use crate::Algorithm;

/// Longest token accepted (bytes of the compact serialization itself, not
/// of an HTTP header line). Bounds the work an unauthenticated token can
/// cause before its signature is checked.
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// A parsed compact JWS; borrows the token it came from.
#[derive(Debug, Clone)]
pub struct CompactJws<'a> {
    header: Header,
    /// `BASE64URL(header) '.' BASE64URL(payload)`, a slice of the token.
    signing_input: &'a str,
    /// The payload, decoded.
    payload: Vec<u8>,
    signature: SignatureBytes,
}

/// A signature: Ed25519's fixed 64 bytes inline (the hot path allocates
/// nothing more), the others' on the heap.
#[derive(Debug, Clone)]
enum SignatureBytes {
    Ed25519([u8; 64]),
    Other(Vec<u8>),
}

/// The lengths (bytes) a signature under `alg` may have: RFC 8037 §3.1
/// (64), RFC 7518 §3.4 (`R ‖ S`, twice the coordinate length) and §3.3
/// (the modulus length; moduli of 2048 to 8192 bits), FIPS 204 Table 2
/// for ML-DSA (`kms_core::Alg::signature_len`).
fn signature_lengths(alg: Algorithm) -> std::ops::RangeInclusive<usize> {
    match alg {
        Algorithm::EdDSA | Algorithm::Ed25519 | Algorithm::ES256 => 64..=64,
        Algorithm::ES384 => 96..=96,
        Algorithm::RS256
        | Algorithm::RS384
        | Algorithm::RS512
        | Algorithm::PS256
        | Algorithm::PS384
        | Algorithm::PS512 => 256..=1024,
        Algorithm::MlDsa44 | Algorithm::MlDsa65 | Algorithm::MlDsa87 => {
            let len = alg.key_alg().map_or(0, |key_alg| key_alg.signature_len());
            len..=len
        }
    }
}

impl<'a> CompactJws<'a> {
    /// Splits and decodes a compact JWS, and checks its header.
    ///
    /// # Errors
    /// [`JoseError::TokenTooLong`] over [`MAX_TOKEN_BYTES`];
    /// [`JoseError::Malformed`] if it is not three parts separated by
    /// `.`; [`JoseError::Base64`] naming the part that is not strict
    /// base64url; [`JoseError::SignatureLength`]; any error of
    /// [`Header::parse`].
    pub fn parse(token: &'a str) -> Result<Self, JoseError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(JoseError::TokenTooLong {
                len: token.len(),
                max: MAX_TOKEN_BYTES,
            });
        }
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(JoseError::Malformed {
                reason: "not three parts separated by `.`",
            });
        };
        if header.is_empty() {
            return Err(JoseError::Malformed {
                reason: "empty header",
            });
        }
        // Checked before decoding: a header longer than the limit cannot
        // decode to one within it (4 characters carry 3 bytes).
        if header.len() / 4 * 3 > crate::MAX_HEADER_BYTES {
            return Err(JoseError::HeaderTooLong {
                len: header.len() / 4 * 3,
                max: crate::MAX_HEADER_BYTES,
            });
        }
        let header_json = b64::decode(header, Part::Header)?;
        let header_parsed = Header::parse(&header_json)?;
        let alg = header_parsed.alg();
        // Checked before decoding too (4 characters carry 3 bytes; the
        // margin leaves a wrongly padded one to the decoder, which names
        // it): an oversized signature is not decoded.
        if signature.len() > signature_lengths(alg).end() * 4 / 3 + 4 {
            return Err(JoseError::SignatureLength {
                len: signature.len() / 4 * 3,
                alg: alg.as_str(),
            });
        }
        let signature_bytes = b64::decode(signature, Part::Signature)?;
        if !signature_lengths(alg).contains(&signature_bytes.len()) {
            return Err(JoseError::SignatureLength {
                len: signature_bytes.len(),
                alg: alg.as_str(),
            });
        }
        let signature = match <[u8; 64]>::try_from(signature_bytes.as_slice()) {
            Ok(bytes) if alg.is_ed25519() => SignatureBytes::Ed25519(bytes),
            _ => SignatureBytes::Other(signature_bytes),
        };
        let payload_bytes = b64::decode(payload, Part::Payload)?;
        Ok(CompactJws {
            header: header_parsed,
            signing_input: &token[..header.len() + 1 + payload.len()],
            payload: payload_bytes,
            signature,
        })
    }

    /// The checked JOSE header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The JWS signing input (RFC 7515 §5.2 step 8): the message the
    /// signature covers.
    pub fn signing_input(&self) -> &'a [u8] {
        self.signing_input.as_bytes()
    }

    /// The decoded payload.
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// The decoded signature (its length fits the `alg`: module docs).
    pub fn signature(&self) -> &[u8] {
        match &self.signature {
            SignatureBytes::Ed25519(bytes) => bytes,
            SignatureBytes::Other(bytes) => bytes,
        }
    }

    /// The 64-byte Ed25519 signature `R ‖ s`, when the `alg` is `EdDSA`
    /// or `Ed25519`.
    pub fn ed25519_signature(&self) -> Option<&[u8; 64]> {
        match &self.signature {
            SignatureBytes::Ed25519(bytes) => Some(bytes),
            SignatureBytes::Other(_) => None,
        }
    }

    /// The item to put in a batch: under `key`, the signing input and the
    /// signature; `None` when the `alg` is not Ed25519's.
    pub fn batch_item<'k>(&'k self, key: &'k VerifyingKey) -> Option<BatchItem<'k>> {
        self.ed25519_signature()
            .map(|signature| BatchItem::with_verifying_key(key, self.signing_input(), signature))
    }

    /// Verifies the signature under the Ed25519 `key` alone, with the rule
    /// of `kms_core::ed25519` (the same verdict a batch gives).
    ///
    /// # Errors
    /// [`JoseError::AlgMismatch`] when the `alg` is not Ed25519's;
    /// [`JoseError::Signature`] naming the rule that failed.
    pub fn verify(&self, key: &VerifyingKey) -> Result<(), JoseError> {
        let signature = self.ed25519_signature().ok_or(JoseError::AlgMismatch {
            expected: "EdDSA or Ed25519",
            got: self.header.alg().as_str(),
        })?;
        key.verify(self.signing_input(), signature)
            .map_err(JoseError::Signature)
    }

    /// Verifies the signature under a trusted key of any type, under the
    /// token's `alg` ([`PublicKey::verify`]).
    ///
    /// # Errors
    /// Those of [`PublicKey::verify`].
    pub fn verify_with(&self, key: &PublicKey) -> Result<(), JoseError> {
        key.verify(self.header.alg(), self.signing_input(), self.signature())
    }

    /// The payload as a JWT claims set (RFC 7519 §7.2 step 10): a JSON
    /// object with unique member names. Call it after the signature has
    /// verified.
    ///
    /// # Errors
    /// [`JoseError::NotAnObject`] or [`JoseError::Duplicate`] for the
    /// payload.
    pub fn claims(&self) -> Result<Claims, JoseError> {
        object::parse(&self.payload, Part::Payload).map(Claims::from_map)
    }
}

/// Issues a compact JWS: `header`, `payload` serialized as JSON, signed by
/// `sign` over the signing input (the KMS's signer, or any Ed25519 key's).
///
/// # Errors
/// [`JoseError::NotAnObject`] if `payload` does not serialize to a JSON
/// object.
pub fn sign_compact<P: Serialize + ?Sized>(
    header: &Header,
    payload: &P,
    sign: impl FnOnce(&[u8]) -> [u8; 64],
) -> Result<String, JoseError> {
    let input = signing_input(header, &claims_json(payload)?);
    let signature = sign(input.as_bytes());
    Ok(finish_compact(input, &signature))
}

/// `payload` serialized as a JSON object: the claims of a token to issue.
///
/// # Errors
/// [`JoseError::NotAnObject`] if it does not serialize to a JSON object,
/// [`JoseError::Duplicate`] if it writes a member name twice.
pub fn claims_json<P: Serialize + ?Sized>(payload: &P) -> Result<Vec<u8>, JoseError> {
    let json = serde_json::to_vec(payload).map_err(|e| JoseError::NotAnObject {
        part: Part::Payload,
        reason: e.to_string(),
    })?;
    // One object with unique names, as a verifier will demand (a custom
    // `Serialize` can write a name twice).
    object::parse(&json, Part::Payload)?;
    Ok(json)
}

/// The JWS signing input (RFC 7515 §5.1 step 5):
/// `BASE64URL(header) '.' BASE64URL(payload)`.
pub fn signing_input(header: &Header, payload: &[u8]) -> String {
    let mut input = b64::encode(header.to_json().as_bytes());
    input.push('.');
    input.push_str(&b64::encode(payload));
    input
}

/// The compact serialization: the signing input, `.`, and the signature
/// in base64url (Ed25519's 64 bytes, or an ML-DSA signature).
pub fn finish_compact(mut signing_input: String, signature: &[u8]) -> String {
    signing_input.push('.');
    signing_input.push_str(&b64::encode(signature));
    signing_input
}

/// [`ed25519::verify`] of a parsed token under raw key bytes: for callers
/// that hold a key as bytes.
///
/// # Errors
/// [`JoseError::AlgMismatch`] when the token's `alg` is not Ed25519's;
/// [`JoseError::Signature`] naming the rule that failed (including rules
/// on the key itself).
pub fn verify_with_public_key(
    jws: &CompactJws<'_>,
    public_key: &[u8; 32],
) -> Result<(), JoseError> {
    let signature = jws.ed25519_signature().ok_or(JoseError::AlgMismatch {
        expected: "EdDSA or Ed25519",
        got: jws.header().alg().as_str(),
    })?;
    ed25519::verify(public_key, jws.signing_input(), signature).map_err(JoseError::Signature)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::{Signer, SigningKey};

    fn key() -> (SigningKey, VerifyingKey) {
        let signing = SigningKey::from_bytes(&[3; 32]);
        let public = VerifyingKey::from_bytes(&signing.verifying_key().to_bytes()).expect("key");
        (signing, public)
    }

    fn token(signing: &SigningKey, alg: Algorithm) -> String {
        let header = Header::new(alg, Some("k1".to_owned()));
        sign_compact(&header, &serde_json::json!({"sub": "alice"}), |input| {
            signing.sign(input).to_bytes()
        })
        .expect("sign")
    }

    #[test]
    fn a_token_round_trips_under_both_algs() {
        let (signing, public) = key();
        for alg in [Algorithm::EdDSA, Algorithm::Ed25519] {
            let token = token(&signing, alg);
            let jws = CompactJws::parse(&token).expect("parse");
            assert_eq!(jws.header().alg(), alg);
            assert_eq!(jws.verify(&public), Ok(()));
            assert_eq!(verify_with_public_key(&jws, public.as_bytes()), Ok(()));
            assert_eq!(
                jws.claims().expect("claims").get("sub"),
                Some(&"alice".into())
            );
            assert_eq!(
                ed25519::verify_batch(&[jws.batch_item(&public).expect("ed25519")]),
                vec![Ok(())]
            );
        }
    }

    #[test]
    fn a_tampered_or_malformed_token_is_refused() {
        let (signing, public) = key();
        let token = token(&signing, Algorithm::EdDSA);
        let (head, sig) = token.rsplit_once('.').expect("three parts");
        let (header, _) = head.split_once('.').expect("three parts");
        let forged = format!("{header}.{}.{sig}", b64::encode(br#"{"sub":"mallory"}"#));
        let jws = CompactJws::parse(&forged).expect("parses");
        assert!(matches!(jws.verify(&public), Err(JoseError::Signature(_))));
        for (bad, code) in [
            (head.to_owned(), "jose.malformed"),
            (format!("{token}.x"), "jose.malformed"),
            (
                format!(".{}", &token[token.find('.').expect("dot") + 1..]),
                "jose.malformed",
            ),
            (
                format!("{head}.{}", &sig[..sig.len() - 2]),
                "jose.signature_length",
            ),
            (format!("{head}.{sig}=="), "jose.base64"),
            (format!("{header}.e30=.{sig}"), "jose.base64"),
            ("a".repeat(MAX_TOKEN_BYTES + 1), "jose.token_too_long"),
        ] {
            assert_eq!(
                CompactJws::parse(&bad).map(|_| ()).map_err(|e| e.code()),
                Err(code),
                "{bad}"
            );
        }
    }

    #[test]
    fn claims_must_be_one_object() {
        let (signing, _) = key();
        let header = Header::new(Algorithm::EdDSA, None);
        assert!(sign_compact(&header, &[1, 2], |i| signing.sign(i).to_bytes()).is_err());
        let dup = format!(
            "{}.{}.{}",
            b64::encode(header.to_json().as_bytes()),
            b64::encode(br#"{"sub":"a","sub":"b"}"#),
            b64::encode(&[0; 64])
        );
        let jws = CompactJws::parse(&dup).expect("parses");
        assert!(matches!(
            jws.claims(),
            Err(JoseError::Duplicate {
                part: Part::Payload,
                ..
            })
        ));
    }
}
