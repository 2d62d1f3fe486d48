//! [`SealError`]: why an envelope could not be parsed, opened or accepted.

use thiserror::Error;

/// Everything sealing and opening can fail with. Only
/// [`SealError::EntropyUnavailable`] is retryable: otherwise the same
/// envelope and key give the same answer.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SealError {
    /// The envelope's bytes are not an envelope: too short, a wrong magic,
    /// a bad length or key id. `what` names the field.
    #[error("malformed envelope: {what}")]
    Malformed {
        /// The field that could not be read.
        what: &'static str,
    },
    /// The envelope's format version is not one this build reads (it reads
    /// [`super::FORMAT_VERSION`]).
    #[error("unsupported envelope format version {0}")]
    UnsupportedVersion(u8),
    /// The envelope names another sealing key (id or version) than the one
    /// given to open it.
    #[error("envelope sealed under {envelope}, not {key}")]
    WrongKey {
        /// `id@vN` in the envelope's header.
        envelope: String,
        /// `id@vN` of the key given.
        key: String,
    },
    /// The tag does not verify: the ciphertext, nonce, header or caller's
    /// associated data was altered, or the key bytes are not the sealing
    /// key's.
    #[error("envelope authentication failed")]
    Authentication,
    /// The envelope authenticates but its counter is below the newest one
    /// already seen for its sealing key id and version: an older envelope
    /// replayed.
    #[error(
        "rolled back: counter {counter} is below {newest}, the newest seen for {key_id}@v{key_version}"
    )]
    Rollback {
        /// The sealing key id.
        key_id: String,
        /// The sealing key version.
        key_version: u32,
        /// The envelope's counter.
        counter: u64,
        /// The newest counter seen for that id and version.
        newest: u64,
    },
    /// The plaintext or associated data is larger than an envelope carries
    /// ([`super::MAX_PLAINTEXT`] bytes).
    #[error("too large to seal: {len} bytes")]
    TooLarge {
        /// The length given, in bytes.
        len: usize,
    },
    /// The operating system's random source failed (drawing a nonce, or a
    /// new sealing key's bytes).
    /// Retryable ([`crate::KmsError::is_retryable`]).
    #[error("the operating system's random source failed")]
    EntropyUnavailable,
    /// The sealing key's counter reached `u64::MAX`.
    #[error("the sealing key's counter is exhausted")]
    CounterExhausted,
    /// A sealing key or keyring was built from invalid parts: `what` names
    /// the part (`"sealing key id"`, `"sealing key version"`,
    /// `"keyring"`), `reason` says what is wrong. Becomes
    /// [`crate::KmsError::InvalidArgument`] when converted.
    #[error("invalid {what}: {reason}")]
    InvalidKey {
        /// The part that is invalid.
        what: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

impl From<crate::random::EntropyUnavailable> for SealError {
    fn from(_: crate::random::EntropyUnavailable) -> Self {
        SealError::EntropyUnavailable
    }
}
