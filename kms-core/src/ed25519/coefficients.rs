//! Random 128-bit coefficients for the batch equation (docs/DESIGN.md §3.3).
//!
//! They come from a CSPRNG the inputs cannot influence, so whoever fills a
//! batch cannot choose or predict them: ChaCha12 (`rand::rngs::StdRng`, the
//! generator behind rand's `ThreadRng`), one per thread, seeded from the
//! operating system's random source (`getrandom` through
//! `rand::rngs::SysRng`). Before each draw, a generator that has produced
//! [`RESEED_AFTER_BYTES`] or more is replaced by a freshly seeded one (one
//! draw is at most 64 KiB: 4096 coefficients of 16 bytes). Drawing in user
//! space costs about 1 µs per 256 coefficients instead of a 10 µs system
//! call.
//!
//! As with `ThreadRng`, a process that forks keeps its generators' state in
//! the child; this library starts no processes, and a host that forks after
//! verifying gets coefficients the parent also drew, still unknown to
//! whoever filled the batch.

use std::cell::RefCell;

use curve25519_dalek::scalar::Scalar;
use rand::rngs::{StdRng, SysRng};
use rand::{Rng, SeedableRng};

/// Bytes per coefficient: 128-bit coefficients bound the chance that an
/// invalid batch passes by 2^-128.
const COEFFICIENT_BYTES: usize = 16;

/// Output after which a thread's generator is reseeded from the operating
/// system (64 KiB, rand's `ThreadRng` policy).
pub(crate) const RESEED_AFTER_BYTES: usize = 64 * 1024;

/// A thread's generator and the bytes it produced since its seeding.
struct Generator {
    rng: StdRng,
    produced: usize,
}

thread_local! {
    static GENERATOR: RefCell<Option<Generator>> = const { RefCell::new(None) };
}

/// `n` independent uniformly random scalars in `[0, 2^128)`.
///
/// Returns `None` when the operating system's random source fails when the
/// generator needs (re)seeding, or when called while the thread's locals
/// are being destroyed; the caller then verifies each item on its own,
/// which needs no randomness.
pub(crate) fn draw(n: usize) -> Option<Vec<Scalar>> {
    let mut bytes = vec![0u8; n * COEFFICIENT_BYTES];
    GENERATOR
        .try_with(|cell| {
            let mut slot = cell.borrow_mut();
            let fresh = match slot.take() {
                Some(g) if g.produced < RESEED_AFTER_BYTES => g,
                _ => Generator {
                    rng: StdRng::try_from_rng(&mut SysRng).ok()?,
                    produced: 0,
                },
            };
            let g = slot.insert(fresh);
            g.rng.fill_bytes(&mut bytes);
            g.produced += bytes.len();
            Some(())
        })
        .ok()??;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coefficients_are_128_bit_and_differ_across_draws() {
        let a = draw(64).expect("OS random source");
        let b = draw(64).expect("OS random source");
        assert_eq!(a.len(), 64);
        assert!(a.iter().all(|z| z.as_bytes()[16..].iter().all(|&x| x == 0)));
        assert_ne!(a, b);
    }

    #[test]
    fn the_generator_keeps_working_across_reseeds() {
        for _ in 0..(2 * RESEED_AFTER_BYTES / (256 * COEFFICIENT_BYTES) + 1) {
            assert_eq!(draw(256).map(|z| z.len()), Some(256));
        }
    }
}
