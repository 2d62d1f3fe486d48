//! [`KmsError`]: the one error type of the KMS, shared by the keystore and
//! the actor (docs/DESIGN.md §3.5).
//!
//! Each variant has a stable machine code ([`KmsError::code`]) and says
//! whether retrying the same request may succeed ([`KmsError::is_retryable`]).

use thiserror::Error;

use crate::ed25519::SignatureError;
use crate::key_id::{Alg, KeyIdParseError};
use crate::root::kind::RootKind;
use crate::seal::SealError;

/// Everything a KMS operation can fail with.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum KmsError {
    /// The signature is invalid; the inner error names the rule it broke
    /// (docs/DESIGN.md §3.2). Not retryable.
    #[error("invalid signature: {0}")]
    InvalidSignature(#[from] SignatureError),
    /// A key id, tenant or purpose is malformed. Not retryable.
    #[error(transparent)]
    InvalidKeyId(#[from] KeyIdParseError),
    /// A token (a JWS or JWT) was refused: malformed, an `alg` or header
    /// that is not accepted, an unknown `kid`, a signature that does not
    /// verify, or claims that fail validation. Not retryable.
    #[error("invalid token ({code}): {reason}")]
    InvalidToken {
        /// The stable code of the reason (kms-jose's `JoseError::code`,
        /// e.g. `jose.expired`, or `jose.unknown_kid`; or, when the
        /// keystore's policy refuses the `kid`'s version, the KMS code
        /// `kms.version_disallowed` or `kms.key_destroyed`).
        code: &'static str,
        /// The reason, for people.
        reason: String,
    },
    /// No key with this UUID, tenant, purpose and algorithm exists. Not retryable.
    #[error("unknown key: {key}")]
    UnknownKey {
        /// The key id as given, in its text form.
        key: String,
    },
    /// The key exists but this version does not (it was never created).
    /// Not retryable.
    #[error("unknown version {version} of key {key} (head is v{head})")]
    UnknownVersion {
        /// The key id as given.
        key: String,
        /// The version asked for.
        version: u32,
        /// The key's newest version.
        head: u32,
    },
    /// An argument has the wrong length or shape, e.g. a 31-byte public key.
    /// Not retryable.
    #[error("invalid {what}: {reason}")]
    InvalidArgument {
        /// What was wrong (`"public key"`, `"signature"`, ...).
        what: &'static str,
        /// Why, in words.
        reason: String,
    },
    /// The key has reached the highest version number (4294967295). Not retryable.
    #[error("key {key} cannot be rotated further")]
    VersionsExhausted {
        /// The key id.
        key: String,
    },
    /// The key is disabled ([`crate::KeyPolicy::enabled`] is off): it does
    /// not sign; it still verifies. Not retryable until the policy is
    /// changed.
    #[error("key {key} is disabled; it does not sign")]
    KeyDisabled {
        /// The key id as given.
        key: String,
    },
    /// The key was destroyed ([`crate::Keystore::destroy`]): every
    /// operation on it is refused, for good. Not retryable.
    #[error("key {key} was destroyed")]
    KeyDestroyed {
        /// The key id as given.
        key: String,
    },
    /// The key's policy forbids exporting it
    /// ([`crate::KeyPolicy::exportable`] is off). Not retryable until the
    /// policy is changed.
    #[error("key {key} is not exportable")]
    NotExportable {
        /// The key id as given.
        key: String,
    },
    /// The version is below the key's
    /// [`crate::KeyPolicy::min_verify_version`]: signatures under it are
    /// refused (it is kept, not deleted, unless trimmed). Not retryable.
    #[error("version {version} of key {key} is below its min_verify_version {min_verify_version}")]
    VersionDisallowed {
        /// The key id as given.
        key: String,
        /// The version named.
        version: u32,
        /// The key's `min_verify_version`.
        min_verify_version: u32,
    },
    /// The version's secret was destroyed by [`crate::Keystore::trim`]:
    /// only its public key is kept (for attestation). Not retryable.
    #[error(
        "version {version} of key {key} was trimmed (versions below {min_available_version} are)"
    )]
    VersionTrimmed {
        /// The key id as given.
        key: String,
        /// The version named.
        version: u32,
        /// The key's lowest version that still has its secret.
        min_available_version: u32,
    },
    /// The operating system's random source failed. Retryable.
    #[error("the operating system's random source failed")]
    EntropyUnavailable,
    /// The request queue is full (the request topic rejected it). Retryable,
    /// after backing off.
    #[error("the KMS is overloaded; retry later")]
    Overloaded,
    /// The request was accepted and then lost before an answer (overwritten
    /// on a lagging queue). Retryable.
    #[error("the request was dropped before it was answered; retry")]
    Dropped,
    /// The KMS is shutting down and no longer takes or finishes this request.
    /// Not retryable on this instance.
    #[error("the KMS is shutting down")]
    ShuttingDown,
    /// An envelope could not be parsed, opened or accepted; the inner error
    /// says why. Not retryable.
    #[error(transparent)]
    Seal(SealError),
    /// The configuration given to the KMS is invalid. Not retryable.
    #[error("invalid configuration: {reason}")]
    InvalidConfig {
        /// What is wrong.
        reason: String,
    },
    /// [`crate::Keystore::open`] found no durable store in the directory.
    /// Not retryable: create one with [`crate::Keystore::create`].
    #[error("no keystore in {dir}")]
    StoreNotFound {
        /// The directory given.
        dir: String,
    },
    /// [`crate::Keystore::create`] found a durable store already in the
    /// directory, and left it as it was. Not retryable: open it with
    /// [`crate::Keystore::open`].
    #[error("a keystore already exists in {dir}")]
    StoreExists {
        /// The directory given.
        dir: String,
    },
    /// Another keystore, in this process or another, holds the durable
    /// store in the directory (a store has one writer). Not retryable: it
    /// stays refused until that keystore and its clones are dropped or its
    /// process exits.
    #[error("the keystore in {dir} is in use by another keystore")]
    StoreInUse {
        /// The directory given.
        dir: String,
    },
    /// The durable store's records do not form one whole store: a record
    /// does not authenticate under its name and sequence (altered, or
    /// moved from another name), does not decode, is missing, is out of
    /// sequence, or belongs to no key (see [`crate::Keystore::open`]).
    /// Nothing is loaded. Not retryable: restore the store from a backup.
    #[error("the keystore in {store} is damaged: {reason}")]
    StoreCorrupt {
        /// The store: its directory, or the storage's description.
        store: String,
        /// Which record, and what is wrong with it.
        reason: String,
    },
    /// Reading or writing the store's files failed; `kind` says how
    /// (`StorageFull`, `PermissionDenied`, …). Not retryable: a failed
    /// commit may or may not have landed, so after one the keystore makes
    /// no further write until it is reopened (later writes answer
    /// [`KmsError::Internal`]); fix the cause, then reopen the store.
    #[error("I/O error ({kind}): {reason}")]
    Io {
        /// The operating system's error kind (`PermissionDenied`,
        /// `StorageFull`, `NotFound`, …), to act on without parsing text.
        kind: std::io::ErrorKind,
        /// The operation, the path and the system's message.
        reason: String,
    },
    /// Another keystore sharing the store (a fleet node) changed the same
    /// record at the same time, `attempts` times in a row: each time the
    /// change was planned again on the other's result, and lost the race
    /// again. Nothing of this call was written. Retryable.
    #[error("conflict on record {record}: another writer changed it first ({attempts} attempts)")]
    Conflict {
        /// The record that changed under the write (`keys/<tenant>/<purpose>/<uuid>/head`, `index`).
        record: String,
        /// How many times the change was tried (counts).
        attempts: u32,
    },
    /// The shared store could not be reached, or did not answer within its
    /// deadline. A change may or may not have landed: the keystore learns
    /// which from the store, and a read after it shows it. Reads, signing
    /// and verification go on from memory. Retryable.
    #[error("the store {store} is unavailable: {reason}")]
    Unavailable {
        /// The store (its endpoints).
        store: String,
        /// What failed.
        reason: String,
    },
    /// The durable store records another kind of root of trust than the
    /// one it was opened under ([`crate::Keystore::open_under`]); nothing
    /// was read or changed. Not retryable: open it under the root it
    /// names.
    #[error("the keystore in {store} is under {expected} ({root}), not {given}")]
    WrongRoot {
        /// The store: its directory, or the storage's description.
        store: String,
        /// The kind of root the store records.
        expected: RootKind,
        /// The root the store records, in words (token and key labels).
        root: String,
        /// The kind of root it was opened under.
        given: RootKind,
    },
    /// The root of trust could not wrap or unwrap the master key: a token
    /// or key not found, a PIN refused, a module that does not load, or a
    /// wrapped key this root cannot open (another key's, another
    /// store's). Nothing was changed. Not retryable.
    #[error("master-key root {root}: {reason}")]
    Root {
        /// The root, in words ([`crate::root::MasterKeyRoot::describe`]);
        /// never a PIN.
        root: String,
        /// What failed.
        reason: String,
    },
    /// The key is of another algorithm than the call works with (an
    /// Ed25519 call such as [`crate::Keystore::sign`] on an ML-DSA key).
    /// Not retryable.
    #[error("key {key} is {alg}, not {wanted}")]
    WrongAlgorithm {
        /// The key (text form).
        key: String,
        /// The key's algorithm.
        alg: Alg,
        /// The algorithm the call works with.
        wanted: Alg,
    },
    /// The algorithm is not in this build (ML-DSA without kms-core's
    /// `ml-dsa` feature): its keys are neither created, imported nor
    /// loaded, so a store holding one is refused whole by every open, and
    /// a fleet node's refresh that brings one fails (the node then stops
    /// writing). Not retryable.
    #[error("{alg} is not in this build (kms-core's `ml-dsa` feature)")]
    AlgorithmNotBuilt {
        /// The algorithm.
        alg: Alg,
    },
    /// An ML-DSA signature does not verify under its key (FIPS 204
    /// Algorithm 3, empty context): of the wrong length, or rejected by
    /// aws-lc-rs, which does not say which check failed. Not retryable.
    #[error("invalid {alg} signature: {reason}")]
    InvalidMlDsaSignature {
        /// The key's algorithm.
        alg: Alg,
        /// What is wrong: its length, or that it does not verify.
        reason: &'static str,
    },
    /// A bug or an unexpected failure inside the KMS (e.g. a panic in a
    /// verify batch). Not retryable.
    #[error("internal error: {reason}")]
    Internal {
        /// What failed.
        reason: String,
    },
}

impl KmsError {
    /// A stable machine-readable code, e.g. `"kms.overloaded"`. Codes never
    /// change meaning; new variants get new codes.
    pub fn code(&self) -> &'static str {
        match self {
            KmsError::InvalidSignature(_) => "kms.invalid_signature",
            KmsError::InvalidKeyId(_) => "kms.invalid_key_id",
            KmsError::InvalidToken { .. } => "kms.invalid_token",
            KmsError::UnknownKey { .. } => "kms.unknown_key",
            KmsError::UnknownVersion { .. } => "kms.unknown_version",
            KmsError::InvalidArgument { .. } => "kms.invalid_argument",
            KmsError::VersionsExhausted { .. } => "kms.versions_exhausted",
            KmsError::KeyDisabled { .. } => "kms.key_disabled",
            KmsError::KeyDestroyed { .. } => "kms.key_destroyed",
            KmsError::NotExportable { .. } => "kms.not_exportable",
            KmsError::VersionDisallowed { .. } => "kms.version_disallowed",
            KmsError::VersionTrimmed { .. } => "kms.version_trimmed",
            KmsError::EntropyUnavailable => "kms.entropy_unavailable",
            KmsError::Overloaded => "kms.overloaded",
            KmsError::Dropped => "kms.dropped",
            KmsError::ShuttingDown => "kms.shutting_down",
            KmsError::InvalidConfig { .. } => "kms.invalid_config",
            KmsError::Seal(_) => "kms.seal",
            KmsError::StoreNotFound { .. } => "kms.store_not_found",
            KmsError::StoreExists { .. } => "kms.store_exists",
            KmsError::StoreInUse { .. } => "kms.store_in_use",
            KmsError::StoreCorrupt { .. } => "kms.store_corrupt",
            KmsError::Io { .. } => "kms.io",
            KmsError::Conflict { .. } => "kms.conflict",
            KmsError::Unavailable { .. } => "kms.unavailable",
            KmsError::WrongRoot { .. } => "kms.wrong_root",
            KmsError::Root { .. } => "kms.root",
            KmsError::WrongAlgorithm { .. } => "kms.wrong_algorithm",
            KmsError::AlgorithmNotBuilt { .. } => "kms.algorithm_not_built",
            KmsError::InvalidMlDsaSignature { .. } => "kms.invalid_ml_dsa_signature",
            KmsError::Internal { .. } => "kms.internal",
        }
    }

    /// Whether the same request may succeed if sent again later:
    /// [`KmsError::Overloaded`], [`KmsError::Dropped`], an unavailable
    /// random source, and a shared store's [`KmsError::Conflict`] and
    /// [`KmsError::Unavailable`]. Tower's retry layer can use it through
    /// `kms_actor::RetryPolicy` (feature `tower`).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            KmsError::EntropyUnavailable
                | KmsError::Overloaded
                | KmsError::Dropped
                | KmsError::Conflict { .. }
                | KmsError::Unavailable { .. }
                | KmsError::Seal(SealError::EntropyUnavailable)
        )
    }
}

impl From<SealError> for KmsError {
    /// [`SealError::InvalidKey`] becomes [`KmsError::InvalidArgument`]
    /// (bad input, like every other invalid argument),
    /// [`SealError::EntropyUnavailable`] becomes
    /// [`KmsError::EntropyUnavailable`] (one code for one cause, retryable);
    /// every other [`SealError`] becomes [`KmsError::Seal`].
    fn from(e: SealError) -> Self {
        match e {
            SealError::InvalidKey { what, reason } => KmsError::InvalidArgument { what, reason },
            SealError::EntropyUnavailable => KmsError::EntropyUnavailable,
            other => KmsError::Seal(other),
        }
    }
}

impl From<crate::random::EntropyUnavailable> for KmsError {
    fn from(_: crate::random::EntropyUnavailable) -> Self {
        KmsError::EntropyUnavailable
    }
}

/// A tower load-shed layer's refusal (its service was not ready) is
/// [`KmsError::Overloaded`]: retryable, as the KMS's own refusals are
/// (feature `tower`).
#[cfg(feature = "tower")]
impl From<tower::load_shed::error::Overloaded> for KmsError {
    fn from(_: tower::load_shed::error::Overloaded) -> Self {
        KmsError::Overloaded
    }
}
