//! Rule 4 of DESIGN §3.2, the cofactored equation, for one signature and for
//! a random linear combination of many.

use core::iter;

use curve25519_dalek::constants::ED25519_BASEPOINT_POINT;
use curve25519_dalek::edwards::EdwardsPoint;
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::{IsIdentity, VartimeMultiscalarMul};

use super::decode::Prepared;
use super::error::SignatureError;

/// Checks `[8]([s]B - [k]A - R) = 𝒪` for one prepared signature.
///
/// # Errors
/// [`SignatureError::Equation`] when it does not hold.
pub(crate) fn check_one(p: &Prepared) -> Result<(), SignatureError> {
    // [k](-A) + [s]B in one variable-time double-scalar multiplication.
    let sb_minus_ka = EdwardsPoint::vartime_double_scalar_mul_basepoint(&p.k, &(-p.a), &p.s);
    if (sb_minus_ka - p.r).mul_by_cofactor().is_identity() {
        Ok(())
    } else {
        Err(SignatureError::Equation)
    }
}

/// Checks the random linear combination
/// `[8]( [-Σ zᵢsᵢ]B + Σ [zᵢ]Rᵢ + Σ [zᵢkᵢ]Aᵢ ) = 𝒪` with one
/// `VartimeMultiscalarMul` call (curve25519-dalek).
///
/// `z` holds one independent coefficient per item (same length as `items`).
/// Every `[8](Rᵢ + [kᵢ]Aᵢ - [sᵢ]B)` lies in the prime-order subgroup, so if
/// any item fails its own cofactored equation the combination is the
/// identity with probability at most 2^-128 over the choice of the `zᵢ`;
/// if all items pass, the combination is the identity. Returns whether it
/// is.
pub(crate) fn combination_holds(items: &[Prepared], z: &[Scalar]) -> bool {
    debug_assert_eq!(items.len(), z.len());
    let b_coefficient = -items.iter().zip(z).map(|(p, z)| z * p.s).sum::<Scalar>();
    let scalars = iter::once(b_coefficient)
        .chain(z.iter().copied())
        .chain(items.iter().zip(z).map(|(p, z)| z * p.k));
    let points = iter::once(ED25519_BASEPOINT_POINT)
        .chain(items.iter().map(|p| p.r))
        .chain(items.iter().map(|p| p.a));
    EdwardsPoint::vartime_multiscalar_mul(scalars, points)
        .mul_by_cofactor()
        .is_identity()
}
