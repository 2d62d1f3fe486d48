//! Ed25519 verification under the criteria of docs/DESIGN.md §3.2, one rule for
//! single and batch verification.
//!
//! A signature `(R, s)` on message `M` under public key `A` is valid iff
//! 1. `s < ℓ` (RFC 8032 §5.1.7),
//! 2. `A` and `R` are canonical encodings of curve points (`y < p`; `x = 0`
//!    with the sign bit set is rejected; RFC 8032 §5.1.3),
//! 3. neither `A` nor `R` has small order (`[8]P ≠ 𝒪`),
//! 4. `[8][s]B = [8]R + [8][k]A` with `k = SHA-512(R ‖ A ‖ M) mod ℓ`.
//!
//! Invariant: [`verify_batch`]`(items)[i] == `[`verify`]`(items[i])` for
//! every `i`, whatever shares the batch.
//!
//! ```
//! use kms_core::ed25519::{verify, verify_batch, BatchItem, SignatureError};
//! // RFC 8032 §7.1 TEST 1 (empty message).
//! let pk: [u8; 32] = *b"\xd7\x5a\x98\x01\x82\xb1\x0a\xb7\xd5\x4b\xfe\xd3\xc9\x64\x07\x3a\
//!                       \x0e\xe1\x72\xf3\xda\xa6\x23\x25\xaf\x02\x1a\x68\xf7\x07\x51\x1a";
//! let sig: [u8; 64] = *b"\xe5\x56\x43\x00\xc3\x60\xac\x72\x90\x86\xe2\xcc\x80\x6e\x82\x8a\
//!                       \x84\x87\x7f\x1e\xb8\xe5\xd9\x74\xd8\x73\xe0\x65\x22\x49\x01\x55\
//!                       \x5f\xb8\x82\x15\x90\xa3\x3b\xac\xc6\x1e\x39\x70\x1c\xf9\xb4\x6b\
//!                       \xd2\x5b\xf5\xf0\x59\x5b\xbe\x24\x65\x51\x41\x43\x8e\x7a\x10\x0b";
//! assert_eq!(verify(&pk, b"", &sig), Ok(()));
//! let items = [
//!     BatchItem::new(&pk, b"", &sig),
//!     BatchItem::new(&pk, b"tampered", &sig),
//! ];
//! assert_eq!(verify_batch(&items), vec![Ok(()), Err(SignatureError::Equation)]);
//! ```

mod backend;
mod batch;
mod coefficients;
mod decode;
mod equation;
mod error;
mod key_cache;
mod policy;
mod search;
mod verifying_key;

pub use backend::{curve_backend, missed_curve_backend, CurveBackend};
pub use error::{Component, SignatureError};
pub use key_cache::KEY_CACHE_CAPACITY;
pub use policy::expected_cost_per_signature_us;
pub use verifying_key::{BatchItem, VerifyingKey};

pub(crate) use decode::decode_trusted_public_key;

use crate::KmsError;

/// `kms_bisections_total` (counter, through the `metrics` facade): how many
/// times [`verify_batch`] split a failed combination in two to find its
/// invalid items. A rising rate means forged or corrupt signatures are
/// arriving mixed with valid ones.
pub const BISECTIONS_TOTAL: &str = "kms_bisections_total";

/// `kms_weighted_searches_total{outcome}` (counter, through the `metrics`
/// facade): how many times [`verify_batch`] looked for the one invalid
/// item of a failed combination with a second, weighted combination
/// (docs/DESIGN.md §3.3). `outcome` is `one` (found: no bisection) or
/// `several` (more than one invalid item: bisection followed).
pub const WEIGHTED_SEARCHES_TOTAL: &str = "kms_weighted_searches_total";

/// Registers the unit and help text of [`BISECTIONS_TOTAL`] and
/// [`WEIGHTED_SEARCHES_TOTAL`] with the installed `metrics` recorder, and
/// the counters themselves at 0, so a scrape shows them before the first
/// failed combination.
pub fn describe_metrics() {
    metrics::describe_counter!(
        BISECTIONS_TOTAL,
        metrics::Unit::Count,
        "Failed batch combinations split in two to find their invalid items"
    );
    metrics::counter!(BISECTIONS_TOTAL).increment(0);
    metrics::describe_counter!(
        WEIGHTED_SEARCHES_TOTAL,
        metrics::Unit::Count,
        "Failed batch combinations searched for their one invalid item by a weighted combination"
    );
    for outcome in ["one", "several"] {
        metrics::counter!(WEIGHTED_SEARCHES_TOTAL, "outcome" => outcome).increment(0);
    }
}

/// Length of an Ed25519 public key, in bytes (RFC 8032 §5.1.5).
pub const PUBLIC_KEY_LENGTH: usize = 32;

/// Length of an Ed25519 signature `R ‖ s`, in bytes (RFC 8032 §5.1.6).
pub const SIGNATURE_LENGTH: usize = 64;

/// Views `bytes` (from the wire, a file, a header) as a 32-byte public key.
///
/// # Errors
/// [`KmsError::InvalidArgument`] with `what = "public key"` when `bytes` is
/// not exactly [`PUBLIC_KEY_LENGTH`] bytes long.
pub fn public_key_from_slice(bytes: &[u8]) -> Result<&[u8; PUBLIC_KEY_LENGTH], KmsError> {
    bytes
        .try_into()
        .map_err(|_| length_error("public key", PUBLIC_KEY_LENGTH, bytes.len()))
}

/// Views `bytes` as a 64-byte signature.
///
/// # Errors
/// [`KmsError::InvalidArgument`] with `what = "signature"` when `bytes` is
/// not exactly [`SIGNATURE_LENGTH`] bytes long.
pub fn signature_from_slice(bytes: &[u8]) -> Result<&[u8; SIGNATURE_LENGTH], KmsError> {
    bytes
        .try_into()
        .map_err(|_| length_error("signature", SIGNATURE_LENGTH, bytes.len()))
}

fn length_error(what: &'static str, expected: usize, actual: usize) -> KmsError {
    KmsError::InvalidArgument {
        what,
        reason: format!("expected {expected} bytes, got {actual}"),
    }
}

/// Verifies one signature under the criteria of docs/DESIGN.md §3.2.
///
/// # Errors
/// The first rule that fails, as a [`SignatureError`].
pub fn verify(
    public_key: &[u8; 32],
    message: &[u8],
    signature: &[u8; 64],
) -> Result<(), SignatureError> {
    let prepared = decode::prepare(public_key, message, signature)?;
    equation::check_one(&prepared.a, &prepared.terms)
}

/// As [`verify`], for a public key whose point is already decoded and known
/// to pass rules 2–3 (a keystore key): skips decoding `A`. `a` must be the
/// point `public_key` encodes.
pub(crate) fn verify_with_point(
    a: &curve25519_dalek::edwards::EdwardsPoint,
    public_key: &[u8; 32],
    message: &[u8],
    signature: &[u8; 64],
) -> Result<(), SignatureError> {
    debug_assert_eq!(a.compress().as_bytes(), public_key);
    let terms = decode::prepare_terms(public_key, message, signature)?;
    equation::check_one(a, &terms)
}

/// [`verify`] of one batch item, under its decoded key if it has one.
fn verify_item(item: &BatchItem<'_>) -> Result<(), SignatureError> {
    match item.key() {
        verifying_key::ItemKey::Bytes(bytes) => verify(bytes, item.message(), item.signature()),
        verifying_key::ItemKey::Verifying(key) => key.verify(item.message(), item.signature()),
    }
}

/// Verifies many signatures at once; one verdict per item, in order, and
/// verdict `i` equals [`verify`]`(items[i])`.
///
/// How (docs/DESIGN.md §3.3):
/// * Items failing rules 1–3 get their verdict without entering the
///   equation. An item built with [`BatchItem::with_verifying_key`] uses
///   its key's point as is; raw public keys that passed rules 2–3 before
///   come from a bounded process-wide cache ([`KEY_CACHE_CAPACITY`] keys)
///   instead of being decoded again.
/// * The rest are checked together as one random linear combination of
///   their cofactored equations, with independent 128-bit coefficients from
///   a per-thread ChaCha12 generator seeded from the operating system's
///   random source, in one multiscalar multiplication of
///   `1 + (distinct keys) + n` points: items under the same key share one
///   `A` term.
/// * A failed combination finds exactly which items are invalid, by
///   bisection or by checking each item, whichever the cost model expects
///   to be cheaper given how often items have been failing lately. When
///   failures are frequent the batch is checked as several smaller
///   combinations, down to one equation per item, so forged signatures cost
///   their neighbours little.
/// * Everything runs on the calling thread: this function never splits a
///   batch across threads, whichever thread or pool it is called on.
///   Splitting is the caller's choice (the actor splits a batch into
///   chunks for idle pool threads); verdicts do not depend on how a batch
///   is split.
/// * If the random source is unavailable, each item is checked on its own
///   (same verdicts, no randomness needed).
///
/// A batch of one item costs what [`verify`] costs.
pub fn verify_batch(items: &[BatchItem<'_>]) -> Vec<Result<(), SignatureError>> {
    let mut out = vec![Ok(()); items.len()];
    match items {
        [] => {}
        [one] => out[0] = verify_item(one),
        _ => batch::verify_chunk(items, &mut out, policy::plan(items.len())),
    }
    out
}
