//! Rules 1–3 of docs/DESIGN.md §3.2: canonical decoding and the small-order check,
//! plus the challenge hash `k`. Everything here is shared by single and batch
//! verification so that both apply exactly the same rule.

use std::sync::LazyLock;

use curve25519_dalek::constants::EIGHT_TORSION;
use curve25519_dalek::edwards::{CompressedEdwardsY, EdwardsPoint};
use curve25519_dalek::scalar::Scalar;
use sha2::{Digest, Sha512};

use super::equation::Terms;
use super::error::{Component, SignatureError};
use super::key_cache;

/// A signature that passed rules 1–3, ready for the equation (rule 4).
#[derive(Clone, Copy)]
pub(crate) struct Prepared {
    /// The public key `A`, canonical and not of small order.
    pub a: EdwardsPoint,
    /// `R`, `s` and the challenge `k = SHA-512(R ‖ A ‖ M) mod ℓ`
    /// (RFC 8032 §5.1.7 step 2).
    pub terms: Terms,
}

/// Applies rules 1–3 and computes `k`. A public key found in the key cache
/// passed rules 2–3 before and is not decoded again.
///
/// # Errors
/// The first failing rule, in the order documented on [`SignatureError`]:
/// `s`, then the encodings of `A` and `R`, then the orders of `A` and `R`.
pub(crate) fn prepare(
    public_key: &[u8; 32],
    message: &[u8],
    signature: &[u8; 64],
) -> Result<Prepared, SignatureError> {
    let (r_bytes, s_bytes) = split(signature);
    let s = canonical_scalar(s_bytes)?;
    let (a, a_small) = match key_cache::get(public_key) {
        Some(a) => (a, false),
        None => {
            let a = decode_point(public_key, Component::PublicKey)?;
            let small = has_small_order(public_key);
            if !small {
                key_cache::insert(*public_key, a);
            }
            (a, small)
        }
    };
    let terms = commitment_terms(public_key, message, &r_bytes, s, a_small)?;
    Ok(Prepared { a, terms })
}

/// Rules 1–3 on `s` and `R`, and `k`, for a public key already known to
/// pass rules 2–3 (earlier in the same batch, or a keystore key).
///
/// # Errors
/// As [`prepare`], for the rules on `s` and `R`.
pub(crate) fn prepare_terms(
    public_key: &[u8; 32],
    message: &[u8],
    signature: &[u8; 64],
) -> Result<Terms, SignatureError> {
    let (r_bytes, s_bytes) = split(signature);
    let s = canonical_scalar(s_bytes)?;
    commitment_terms(public_key, message, &r_bytes, s, false)
}

/// The rest of rules 2–3 once `s` and the encoding of `A` have passed: the
/// encoding of `R`, then the order of `A` (`a_small`, already known), then
/// the order of `R`; and `k`.
fn commitment_terms(
    public_key: &[u8; 32],
    message: &[u8],
    r_bytes: &[u8; 32],
    s: Scalar,
    a_small: bool,
) -> Result<Terms, SignatureError> {
    let r = decode_point(r_bytes, Component::R)?;
    if a_small {
        return Err(SignatureError::SmallOrder(Component::PublicKey));
    }
    if has_small_order(r_bytes) {
        return Err(SignatureError::SmallOrder(Component::R));
    }
    let k = challenge(r_bytes, public_key, message);
    Ok(Terms { r, s, k })
}

/// Rule 1: `s < ℓ` (RFC 8032 §5.1.7).
fn canonical_scalar(s_bytes: [u8; 32]) -> Result<Scalar, SignatureError> {
    Option::<Scalar>::from(Scalar::from_canonical_bytes(s_bytes))
        .ok_or(SignatureError::NonCanonicalScalar)
}

/// The canonical encodings of the eight points of small order
/// (curve25519-dalek's `EIGHT_TORSION`, compressed).
static SMALL_ORDER_ENCODINGS: LazyLock<[[u8; 32]; 8]> =
    LazyLock::new(|| EIGHT_TORSION.map(|t| t.compress().to_bytes()));

/// Rule 3 on an encoding that passed rule 2: whether the point has small
/// order (`[8]P = 𝒪`).
///
/// Every point has exactly one canonical encoding and rule 2 admits only
/// canonical ones, so a canonical encoding names a point of small order iff
/// it is one of the eight in [`SMALL_ORDER_ENCODINGS`]. Comparing bytes
/// replaces three point doublings per point (`EdwardsPoint::is_small_order`);
/// a unit test checks the two agree.
fn has_small_order(canonical: &[u8; 32]) -> bool {
    SMALL_ORDER_ENCODINGS.contains(canonical)
}

/// Splits a 64-byte signature into `R` (bytes 0..32) and `s` (bytes 32..64).
fn split(signature: &[u8; 64]) -> ([u8; 32], [u8; 32]) {
    let mut r = [0u8; 32];
    let mut s = [0u8; 32];
    r.copy_from_slice(&signature[..32]);
    s.copy_from_slice(&signature[32..]);
    (r, s)
}

/// The challenge `SHA-512(R ‖ A ‖ M) mod ℓ` (RFC 8032 §5.1.7 step 2).
fn challenge(r: &[u8; 32], a: &[u8; 32], message: &[u8]) -> Scalar {
    let mut h = Sha512::new();
    h.update(r);
    h.update(a);
    h.update(message);
    let wide: [u8; 64] = h.finalize().into();
    Scalar::from_bytes_mod_order_wide(&wide)
}

/// Decodes a point per RFC 8032 §5.1.3, rejecting non-canonical encodings.
///
/// curve25519-dalek's `decompress` reduces `y` mod p and ignores the sign bit
/// when `x = 0`; both are non-canonical encodings that §5.1.3 rejects, so
/// they are checked here on the bytes before decompressing.
///
/// # Errors
/// [`SignatureError::NonCanonicalPoint`] or [`SignatureError::UndecodablePoint`].
fn decode_point(bytes: &[u8; 32], which: Component) -> Result<EdwardsPoint, SignatureError> {
    if !y_is_canonical(bytes) || x_zero_with_sign_bit(bytes) {
        return Err(SignatureError::NonCanonicalPoint(which));
    }
    CompressedEdwardsY(*bytes)
        .decompress()
        .ok_or(SignatureError::UndecodablePoint(which))
}

/// Rules 2–3 on a public key alone: canonical, decodable, not of small
/// order ([`super::VerifyingKey::from_bytes`]).
///
/// # Errors
/// [`SignatureError::NonCanonicalPoint`], [`SignatureError::UndecodablePoint`]
/// or [`SignatureError::SmallOrder`], each for the public key.
pub(crate) fn decode_public_key(bytes: &[u8; 32]) -> Result<EdwardsPoint, SignatureError> {
    let point = decode_point(bytes, Component::PublicKey)?;
    if has_small_order(bytes) {
        return Err(SignatureError::SmallOrder(Component::PublicKey));
    }
    Ok(point)
}

/// Decodes a public key that is to be trusted with a secret (an imported
/// key): canonical (RFC 8032 §5.1.3), not of small order, and torsion-free
/// (`[ℓ]A = 𝒪`), as docs/DESIGN.md §3.1 requires of imported keys.
///
/// # Errors
/// [`SignatureError::NonCanonicalPoint`], [`SignatureError::UndecodablePoint`]
/// or [`SignatureError::SmallOrder`] for `A`; a point with a torsion
/// component is refused as [`SignatureError::SmallOrder`] too (its torsion
/// part has small order).
pub(crate) fn decode_trusted_public_key(bytes: &[u8; 32]) -> Result<EdwardsPoint, SignatureError> {
    let point = decode_point(bytes, Component::PublicKey)?;
    if has_small_order(bytes) || !point.is_torsion_free() {
        return Err(SignatureError::SmallOrder(Component::PublicKey));
    }
    Ok(point)
}

/// Whether the 255-bit little-endian `y` (sign bit masked off) is below
/// p = 2^255 - 19. The only values ≥ p are `p..=2^255-1`: bytes 1..31 all
/// `0xff`, byte 31 `0x7f` after masking, and byte 0 ≥ `0xed`.
fn y_is_canonical(bytes: &[u8; 32]) -> bool {
    let high_all_ones = bytes[31] & 0x7f == 0x7f && bytes[1..31].iter().all(|&b| b == 0xff);
    !(high_all_ones && bytes[0] >= 0xed)
}

/// Whether the encoding sets the sign bit on a point with `x = 0`. On
/// edwards25519, `x = 0` exactly when `y = 1` or `y = p - 1`
/// (from `-x² + y² = 1 + d x² y²`).
fn x_zero_with_sign_bit(bytes: &[u8; 32]) -> bool {
    const Y_ONE: [u8; 32] = {
        let mut b = [0u8; 32];
        b[0] = 1;
        b
    };
    const Y_MINUS_ONE: [u8; 32] = {
        let mut b = [0xffu8; 32];
        b[0] = 0xec;
        b[31] = 0x7f;
        b
    };
    if bytes[31] & 0x80 == 0 {
        return false;
    }
    let mut y = *bytes;
    y[31] &= 0x7f;
    y == Y_ONE || y == Y_MINUS_ONE
}

#[cfg(test)]
mod tests {
    use super::*;
    use curve25519_dalek::constants::ED25519_BASEPOINT_POINT;

    #[test]
    fn y_equal_to_p_is_non_canonical() {
        let mut p = [0xffu8; 32];
        p[0] = 0xed;
        p[31] = 0x7f;
        assert_eq!(
            decode_point(&p, Component::R).err(),
            Some(SignatureError::NonCanonicalPoint(Component::R))
        );
        let mut below = p;
        below[0] = 0xec; // p - 1: canonical, y = -1, the point of order 2
        assert!(decode_point(&below, Component::R).is_ok());
    }

    #[test]
    fn identity_with_sign_bit_is_non_canonical() {
        let mut one = [0u8; 32];
        one[0] = 1;
        assert!(decode_point(&one, Component::PublicKey).is_ok());
        one[31] = 0x80;
        assert_eq!(
            decode_point(&one, Component::PublicKey).err(),
            Some(SignatureError::NonCanonicalPoint(Component::PublicKey))
        );
    }

    #[test]
    fn small_order_by_bytes_agrees_with_the_point() {
        use curve25519_dalek::scalar::Scalar;
        let mut distinct = SMALL_ORDER_ENCODINGS.to_vec();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 8);
        for t in EIGHT_TORSION {
            let bytes = t.compress().to_bytes();
            let p = decode_point(&bytes, Component::R).expect("canonical");
            assert!(p.is_small_order());
            assert!(has_small_order(&bytes));
            // A prime-order point plus torsion is not small order.
            let q = ED25519_BASEPOINT_POINT * Scalar::from(5u64) + t;
            let q_bytes = q.compress().to_bytes();
            assert!(!q.is_small_order());
            assert!(!has_small_order(&q_bytes));
        }
    }

    #[test]
    fn basepoint_round_trips() {
        let b = ED25519_BASEPOINT_POINT.compress().to_bytes();
        assert_eq!(
            decode_point(&b, Component::PublicKey).map(|p| p.compress().to_bytes()),
            Ok(b)
        );
    }
}
