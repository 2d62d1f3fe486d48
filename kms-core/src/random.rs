//! The operating system's random source (`getrandom`), failing with
//! [`EntropyUnavailable`] instead of panicking. Every random byte kms-core
//! draws outside the batch coefficients (`ed25519/coefficients.rs`) comes
//! through [`fill`]; the error converts into `KmsError::EntropyUnavailable`
//! and `SealError::EntropyUnavailable`, so this module depends on neither.

/// The OS random source failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EntropyUnavailable;

/// Fills `bytes` from the OS random source.
///
/// # Errors
/// [`EntropyUnavailable`] if the source fails.
pub(crate) fn fill(bytes: &mut [u8]) -> Result<(), EntropyUnavailable> {
    getrandom::fill(bytes).map_err(|_| EntropyUnavailable)
}
