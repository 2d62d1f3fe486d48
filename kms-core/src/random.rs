//! The operating system's random source (`getrandom`), failing with
//! [`KmsError::EntropyUnavailable`] instead of panicking.

use crate::error::KmsError;

/// Fills `bytes` from the OS random source.
///
/// # Errors
/// [`KmsError::EntropyUnavailable`] if the source fails.
pub(crate) fn fill(bytes: &mut [u8]) -> Result<(), KmsError> {
    getrandom::fill(bytes).map_err(|_| KmsError::EntropyUnavailable)
}
