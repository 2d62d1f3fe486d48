//! [`VerifyingKey`]: a public key decoded and checked once, and
//! [`BatchItem`], one signature to check in a batch under either form of
//! key.
//!
//! Invariant: a `VerifyingKey`'s point is the point its 32 bytes encode,
//! and those bytes passed rules 2–3 of the module docs (canonical, not of
//! small order); so verifying under it never decodes `A` again.

use std::fmt;

use curve25519_dalek::edwards::EdwardsPoint;

use super::decode::decode_public_key;
use super::error::SignatureError;

/// An Ed25519 public key (RFC 8032 §5.1.5 encoding, 32 bytes) decoded to
/// its point and checked against rules 2–3: what the keystore holds for
/// each key version ([`crate::Keystore::verifying_key`]), so a verification
/// under a keystore key, single or in a batch, skips decoding `A`.
#[derive(Clone, Copy)]
pub struct VerifyingKey {
    bytes: [u8; 32],
    point: EdwardsPoint,
}

impl VerifyingKey {
    /// Decodes and checks a 32-byte public key.
    ///
    /// # Errors
    /// [`SignatureError::NonCanonicalPoint`] or
    /// [`SignatureError::UndecodablePoint`] for an encoding rule 2 refuses,
    /// [`SignatureError::SmallOrder`] for a point of small order (rule 3);
    /// each names [`super::Component::PublicKey`].
    pub fn from_bytes(bytes: &[u8; 32]) -> Result<Self, SignatureError> {
        decode_public_key(bytes).map(|point| VerifyingKey {
            bytes: *bytes,
            point,
        })
    }

    /// A key whose `point` was decoded from `bytes` and checked already
    /// (the keystore's, from ed25519-dalek's own key type).
    pub(crate) fn from_parts(bytes: [u8; 32], point: EdwardsPoint) -> Self {
        debug_assert_eq!(point.compress().as_bytes(), &bytes);
        VerifyingKey { bytes, point }
    }

    /// The key's 32-byte encoding.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.bytes
    }

    /// The decoded point `A`.
    pub(crate) fn point(&self) -> &EdwardsPoint {
        &self.point
    }

    /// Verifies a 64-byte `signature` on `message` under this key, as
    /// [`super::verify`] would under its bytes.
    ///
    /// # Errors
    /// The first rule that fails on `s` or `R`, or the equation, as a
    /// [`SignatureError`].
    pub fn verify(&self, message: &[u8], signature: &[u8; 64]) -> Result<(), SignatureError> {
        super::verify_with_point(&self.point, &self.bytes, message, signature)
    }
}

impl fmt::Debug for VerifyingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("VerifyingKey").field(&self.bytes).finish()
    }
}

impl PartialEq for VerifyingKey {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for VerifyingKey {}

/// One signature to check in a batch: a public key (raw 32 bytes, or a
/// [`VerifyingKey`] decoded already), the message (any length) and the
/// signature (64 bytes: `R ‖ s`), all borrowed.
#[derive(Debug, Clone, Copy)]
pub struct BatchItem<'a> {
    key: ItemKey<'a>,
    message: &'a [u8],
    signature: &'a [u8; 64],
}

/// The two forms of public key an item may carry.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ItemKey<'a> {
    /// Raw bytes: decoded and checked here (or found in the key cache).
    Bytes(&'a [u8; 32]),
    /// Decoded and checked already.
    Verifying(&'a VerifyingKey),
}

impl<'a> BatchItem<'a> {
    /// An item under a raw 32-byte public key, as a caller holds it.
    pub fn new(public_key: &'a [u8; 32], message: &'a [u8], signature: &'a [u8; 64]) -> Self {
        BatchItem {
            key: ItemKey::Bytes(public_key),
            message,
            signature,
        }
    }

    /// An item under a key decoded already: its point is used as is.
    pub fn with_verifying_key(
        key: &'a VerifyingKey,
        message: &'a [u8],
        signature: &'a [u8; 64],
    ) -> Self {
        BatchItem {
            key: ItemKey::Verifying(key),
            message,
            signature,
        }
    }

    /// The public key's 32 bytes.
    pub fn public_key(&self) -> &'a [u8; 32] {
        match self.key {
            ItemKey::Bytes(bytes) => bytes,
            ItemKey::Verifying(key) => &key.bytes,
        }
    }

    /// The signed message.
    pub fn message(&self) -> &'a [u8] {
        self.message
    }

    /// The signature `R ‖ s`.
    pub fn signature(&self) -> &'a [u8; 64] {
        self.signature
    }

    /// The key in the form it was given.
    pub(crate) fn key(&self) -> ItemKey<'a> {
        self.key
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ed25519::Component;

    #[test]
    fn from_bytes_applies_rules_2_and_3_to_the_key() {
        // The identity (y = 1) has small order; y = p is not canonical.
        let mut identity = [0u8; 32];
        identity[0] = 1;
        assert_eq!(
            VerifyingKey::from_bytes(&identity),
            Err(SignatureError::SmallOrder(Component::PublicKey))
        );
        let mut y_is_p = [0xff; 32];
        y_is_p[0] = 0xed;
        y_is_p[31] = 0x7f;
        assert_eq!(
            VerifyingKey::from_bytes(&y_is_p),
            Err(SignatureError::NonCanonicalPoint(Component::PublicKey))
        );
        let key = ed25519_dalek::SigningKey::from_bytes(&[9; 32]).verifying_key();
        let decoded = VerifyingKey::from_bytes(key.as_bytes()).expect("a valid key");
        assert_eq!(decoded.as_bytes(), key.as_bytes());
        assert_eq!(decoded.point().compress().as_bytes(), key.as_bytes());
    }
}
