//! Random 128-bit coefficients for the batch equation (DESIGN §3.3).
//!
//! They come from the operating system's CSPRNG through `getrandom`, never
//! from the inputs, so whoever fills a batch cannot choose or predict them.

use curve25519_dalek::scalar::Scalar;

/// Bytes per coefficient: 128-bit coefficients bound the chance that an
/// invalid batch passes by 2^-128.
const COEFFICIENT_BYTES: usize = 16;

/// `n` independent uniformly random scalars in `[0, 2^128)`.
///
/// Returns `None` when the operating system's random source fails; the
/// caller then verifies each item on its own, which needs no randomness.
pub(crate) fn draw(n: usize) -> Option<Vec<Scalar>> {
    let mut bytes = vec![0u8; n * COEFFICIENT_BYTES];
    getrandom::fill(&mut bytes).ok()?;
    Some(
        bytes
            .chunks_exact(COEFFICIENT_BYTES)
            .map(|c| {
                let mut b = [0u8; COEFFICIENT_BYTES];
                b.copy_from_slice(c);
                Scalar::from(u128::from_le_bytes(b))
            })
            .collect(),
    )
}
