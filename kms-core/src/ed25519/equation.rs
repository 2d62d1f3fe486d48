//! Rule 4 of DESIGN §3.2, the cofactored equation, for one signature and for
//! a random linear combination of many, with one `A` term per distinct key.

use core::iter;

use curve25519_dalek::constants::ED25519_BASEPOINT_POINT;
use curve25519_dalek::edwards::EdwardsPoint;
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::{IsIdentity, VartimeMultiscalarMul};

use super::error::SignatureError;

/// The parts of a signature the equation needs, after rules 1–3.
#[derive(Clone, Copy)]
pub(crate) struct Terms {
    /// The commitment `R`, canonical and not of small order.
    pub r: EdwardsPoint,
    /// `s < ℓ`.
    pub s: Scalar,
    /// The challenge `k = SHA-512(R ‖ A ‖ M) mod ℓ`.
    pub k: Scalar,
}

/// A batch entry: its terms and the number of its public key in the batch's
/// key table.
#[derive(Clone, Copy)]
pub(crate) struct Entry {
    /// Index of this item in the caller's batch (where its verdict goes).
    pub position: usize,
    /// Index of its public key `A` in the key table.
    pub key: usize,
    /// `R`, `s`, `k`.
    pub terms: Terms,
}

/// Checks `[8]([s]B - [k]A - R) = 𝒪` for one signature.
///
/// # Errors
/// [`SignatureError::Equation`] when it does not hold.
pub(crate) fn check_one(a: &EdwardsPoint, t: &Terms) -> Result<(), SignatureError> {
    // [k](-A) + [s]B in one variable-time double-scalar multiplication.
    let sb_minus_ka = EdwardsPoint::vartime_double_scalar_mul_basepoint(&t.k, &(-a), &t.s);
    if (sb_minus_ka - t.r).mul_by_cofactor().is_identity() {
        Ok(())
    } else {
        Err(SignatureError::Equation)
    }
}

/// Checks the random linear combination
/// `[8]( [-Σ zᵢsᵢ]B + Σ_A [Σ_{i under A} zᵢkᵢ]A + Σ [zᵢ]Rᵢ ) = 𝒪` with one
/// `VartimeMultiscalarMul` call (curve25519-dalek): `1 + (distinct keys) +
/// entries.len()` points. Items under the same key share one `A` term, as in
/// ed25519-zebra's `batch::Verifier`.
///
/// `entries` must be sorted by `key` (so each key's items are one run) and
/// `z` holds one independent coefficient per entry. Every
/// `[8](Rᵢ + [kᵢ]Aᵢ - [sᵢ]B)` lies in the prime-order subgroup, so if any
/// item fails its own cofactored equation the combination is the identity
/// with probability at most 2^-128 over the choice of the `zᵢ`; if all items
/// pass, it is the identity. Returns whether it is.
pub(crate) fn combination_holds(keys: &[EdwardsPoint], entries: &[Entry], z: &[Scalar]) -> bool {
    debug_assert_eq!(entries.len(), z.len());
    debug_assert!(entries.windows(2).all(|w| w[0].key <= w[1].key));
    let mut b_coefficient = Scalar::ZERO;
    let mut a_keys: Vec<usize> = Vec::new();
    let mut a_coefficients: Vec<Scalar> = Vec::new();
    for (e, z) in entries.iter().zip(z) {
        b_coefficient -= z * e.terms.s;
        let zk = z * e.terms.k;
        match (a_keys.last(), a_coefficients.last_mut()) {
            (Some(&key), Some(sum)) if key == e.key => *sum += zk,
            _ => {
                a_keys.push(e.key);
                a_coefficients.push(zk);
            }
        }
    }
    let scalars = iter::once(&b_coefficient)
        .chain(a_coefficients.iter())
        .chain(z.iter());
    let points = iter::once(&ED25519_BASEPOINT_POINT)
        .chain(a_keys.iter().map(|&k| &keys[k]))
        .chain(entries.iter().map(|e| &e.terms.r));
    EdwardsPoint::vartime_multiscalar_mul(scalars, points)
        .mul_by_cofactor()
        .is_identity()
}
