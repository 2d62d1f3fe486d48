//! Rule 4 of docs/DESIGN.md §3.2, the cofactored equation, for one signature and for
//! a random linear combination of many, with one `A` term per distinct key.

use core::iter;

use curve25519_dalek::constants::ED25519_BASEPOINT_POINT;
use curve25519_dalek::edwards::EdwardsPoint;
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::{Identity, IsIdentity, VartimeMultiscalarMul};

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

/// curve25519-dalek 5's `vartime_multiscalar_mul` uses Straus below this
/// many points and Pippenger from it (`EdwardsPoint::optional_multiscalar_mul`
/// in its edwards.rs).
pub(crate) const DALEK_PIPPENGER_FROM: usize = 190;

/// Sums of this many points or more (and fewer than
/// [`DALEK_PIPPENGER_FROM`]) are padded with identity points under zero
/// coefficients up to [`DALEK_PIPPENGER_FROM`], so that they run as
/// Pippenger. Measured with the AVX-512 IFMA backend (docs/PERFORMANCE.md):
/// Straus costs 469 µs for 160 points and 520 µs for 189, Pippenger on the
/// same sums padded to 190 costs 267 µs and 291 µs; at 128 points Straus
/// still wins (212 µs against 246 µs). Measured, Straus's cost per point
/// grows with the number of points, so the linear
/// Straus cost in `policy.rs`, fitted below 128 points, is not used above
/// this threshold. A term `[0]𝒪` is `𝒪`, so padding leaves the sum
/// unchanged.
pub(crate) const PAD_TO_PIPPENGER_FROM: usize = 144;

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

/// The random linear combination
/// `[8]( [-Σ zᵢsᵢ]B + Σ_A [Σ_{i under A} zᵢkᵢ]A + Σ [zᵢ]Rᵢ )`, computed with
/// one `VartimeMultiscalarMul` call (curve25519-dalek): `1 + (distinct keys
/// among entries) + entries.len()` points. Items under the same key share
/// one `A` term, as in ed25519-zebra's `batch::Verifier`.
///
/// `keys` is the key table `Entry::key` indexes into, and `z` holds one
/// coefficient per entry. The result is `Σ zᵢ·Eᵢ` with
/// `Eᵢ = [8](Rᵢ + [kᵢ]Aᵢ - [sᵢ]B)`, each `Eᵢ` in the prime-order subgroup
/// and the identity exactly when item `i` passes its own cofactored
/// equation. So the combination is linear in `z`: the combination of a
/// part of `entries` is the whole one less that of the rest, and with
/// independent random `zᵢ`, if any item fails, the result is the identity
/// with probability at most 2^-128 (`coefficients.rs`).
pub(crate) fn combination(keys: &[EdwardsPoint], entries: &[Entry], z: &[Scalar]) -> EdwardsPoint {
    debug_assert_eq!(entries.len(), z.len());
    let mut b_coefficient = Scalar::ZERO;
    // a_sums[key] accumulates Σ zᵢkᵢ; `used` lists each key once, in order
    // of first use, so only keys present in `entries` enter the sum.
    let mut a_sums: Vec<Option<Scalar>> = vec![None; keys.len()];
    let mut used: Vec<usize> = Vec::new();
    for (e, z) in entries.iter().zip(z) {
        b_coefficient -= z * e.terms.s;
        let zk = z * e.terms.k;
        match &mut a_sums[e.key] {
            Some(sum) => *sum += zk,
            slot @ None => {
                *slot = Some(zk);
                used.push(e.key);
            }
        }
    }
    let terms = 1 + used.len() + entries.len();
    let padding = if (PAD_TO_PIPPENGER_FROM..DALEK_PIPPENGER_FROM).contains(&terms) {
        DALEK_PIPPENGER_FROM - terms
    } else {
        0
    };
    let identity = EdwardsPoint::identity();
    let scalars = iter::once(b_coefficient)
        .chain(used.iter().map(|&k| a_sums[k].unwrap_or(Scalar::ZERO)))
        .chain(z.iter().copied())
        .chain(iter::repeat_n(Scalar::ZERO, padding));
    let points = iter::once(&ED25519_BASEPOINT_POINT)
        .chain(used.iter().map(|&k| &keys[k]))
        .chain(entries.iter().map(|e| &e.terms.r))
        .chain(iter::repeat_n(&identity, padding));
    EdwardsPoint::vartime_multiscalar_mul(scalars, points).mul_by_cofactor()
}
