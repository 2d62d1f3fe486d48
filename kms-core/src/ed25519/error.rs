//! [`SignatureError`]: which rule of the verification criteria a signature broke.

use thiserror::Error;

/// The part of a signature or key that a [`SignatureError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Component {
    /// The public key `A` (32 bytes).
    PublicKey,
    /// The commitment `R`: the first 32 bytes of the signature.
    R,
}

impl core::fmt::Display for Component {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Component::PublicKey => "public key A",
            Component::R => "signature R",
        })
    }
}

/// Why a signature is invalid under the criteria of docs/DESIGN.md §3.2.
///
/// The checks run in rule order (1: `s`, 2: encodings of `A` then `R`,
/// 3: small order of `A` then `R`, 4: the equation), and the first rule that
/// fails is reported. Single and batch verification report the same variant
/// for the same input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Error)]
#[non_exhaustive]
pub enum SignatureError {
    /// Rule 1: the scalar `s` (signature bytes 32..64, little-endian) is not
    /// below the group order ℓ = 2^252 + 27742317777372353535851937790883648493
    /// (RFC 8032 §5.1.7 step 1).
    #[error("non-canonical scalar s: s >= l (RFC 8032 section 5.1.7)")]
    NonCanonicalScalar,
    /// Rule 2: the encoding is not canonical: `y >= p` (p = 2^255 - 19), or
    /// `x = 0` encoded with the sign bit set (RFC 8032 §5.1.3).
    #[error("non-canonical encoding of {0}")]
    NonCanonicalPoint(Component),
    /// Rule 2: `y` is canonical but no curve point has it (RFC 8032 §5.1.3
    /// step 3 finds no square root).
    #[error("{0} does not decode to a curve point")]
    UndecodablePoint(Component),
    /// Rule 3: the point has small order (`[8]P` is the identity).
    #[error("{0} has small order")]
    SmallOrder(Component),
    /// Rule 4: the cofactored equation `[8][s]B = [8]R + [8][k]A` does not hold.
    #[error("the cofactored verification equation does not hold")]
    Equation,
}

impl SignatureError {
    /// A stable machine-readable code, e.g. `"sig.small_order_r"`.
    pub fn code(&self) -> &'static str {
        match self {
            SignatureError::NonCanonicalScalar => "sig.non_canonical_s",
            SignatureError::NonCanonicalPoint(Component::PublicKey) => "sig.non_canonical_a",
            SignatureError::NonCanonicalPoint(Component::R) => "sig.non_canonical_r",
            SignatureError::UndecodablePoint(Component::PublicKey) => "sig.undecodable_a",
            SignatureError::UndecodablePoint(Component::R) => "sig.undecodable_r",
            SignatureError::SmallOrder(Component::PublicKey) => "sig.small_order_a",
            SignatureError::SmallOrder(Component::R) => "sig.small_order_r",
            SignatureError::Equation => "sig.equation",
        }
    }
}
