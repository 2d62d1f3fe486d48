//! The weighted search for a single invalid item in a failed combination
//! (docs/DESIGN.md §3.3): one more multiscalar multiplication instead of a
//! bisection.
//!
//! A combination of `n` entries with coefficients `zᵢ` is `S = Σ zᵢ·Eᵢ`
//! (`equation::combination`). When it fails and exactly one entry `j` is
//! invalid, `S = zⱼ·Eⱼ`, and the same entries with weighted coefficients
//! `(i + 1)·zᵢ` sum to `T = (j + 1)·zⱼ·Eⱼ = [j + 1]S`: comparing `T` with
//! `S, [2]S, …, [n]S` names `j`, at the cost of one combination and `n`
//! point additions. Whatever the entries, `T = [j + 1]S` means that the
//! combination `Σ (i − j)·zᵢ·Eᵢ` of the other entries is the identity: a
//! random combination of them (each `(i − j)·zᵢ` is as unpredictable as
//! `zᵢ`, since `0 < |i − j| < ℓ`) that holds, so they are valid but with
//! probability at most 2^-128 per candidate `j`. With two or more invalid
//! entries no `j` matches (but with that probability), and the caller
//! falls back to bisection. The entry named is still checked by its own
//! equation before it is reported invalid (`batch.rs`).

use curve25519_dalek::edwards::EdwardsPoint;
use curve25519_dalek::scalar::Scalar;

use super::equation::{combination, Entry};

/// The index in `entries` of the one invalid entry, if exactly one is,
/// given `sum`, their combination under `z` (not the identity). `None`
/// when no index fits: two or more entries are invalid.
pub(crate) fn locate_one(
    keys: &[EdwardsPoint],
    entries: &[Entry],
    z: &[Scalar],
    sum: &EdwardsPoint,
) -> Option<usize> {
    debug_assert_eq!(entries.len(), z.len());
    let weighted: Vec<Scalar> = z
        .iter()
        .zip(1u64..)
        .map(|(z, weight)| Scalar::from(weight) * z)
        .collect();
    let target = combination(keys, entries, &weighted);
    let mut multiple = *sum;
    for j in 0..entries.len() {
        if multiple == target {
            return Some(j);
        }
        multiple += sum;
    }
    None
}
