//! Format 1 of the durable store, read only to migrate it (`durable.rs`):
//! one file, `keystore.kms`, holding one envelope (associated data
//! `kms.keystore.v1`) whose plaintext is a snapshot of every key and
//! version (every integer big-endian):
//!
//! ```text
//! u32 key count
//! per key:   u8 id length, id (text form of version 1), u32 version count
//! per version: the layout of a version record (`records.rs`)
//! ```
//!
//! Invariant: every buffer that holds a seed is allocated once at its
//! final size and never grows (see `records.rs`).

use std::path::Path;

use crate::bytes::Reader;
use crate::error::KmsError;
use crate::key_id::KeyId;
use crate::keystore::records::{read_version, KeyState, StoredKey, SEED_LEN};
use crate::keystore::KeyPolicy;
use crate::seal::{Envelope, Keyring};

/// Format 1's file name inside the store's directory.
pub(crate) const LEGACY_FILE: &str = "keystore.kms";
/// Associated data of format 1's envelope.
const STORE_AAD: &[u8] = b"kms.keystore.v1";

/// A format-1 store's keys, and the master-key version and counter its
/// envelope was sealed with.
pub(crate) struct Legacy {
    pub(crate) keys: Vec<StoredKey>,
    pub(crate) sealed_by: u32,
    pub(crate) counter: u64,
}

/// Reads and authenticates the format-1 store in `dir`.
///
/// # Errors
/// [`KmsError::Seal`] if the file is not an envelope, is sealed under a
/// key the keyring lacks (`WrongKey`) or does not authenticate;
/// [`KmsError::StoreCorrupt`] for a snapshot that does not decode;
/// [`KmsError::Io`] for I/O errors.
pub(crate) fn read(dir: &Path, keyring: &Keyring, label: &str) -> Result<Legacy, KmsError> {
    let path = dir.join(LEGACY_FILE);
    let bytes = std::fs::read(&path).map_err(|e| KmsError::Io {
        kind: e.kind(),
        reason: format!("keystore: cannot read {}: {e}", path.display()),
    })?;
    let envelope = Envelope::from_bytes(&bytes)?;
    let plaintext = keyring.open(STORE_AAD, &envelope)?;
    Ok(Legacy {
        keys: decode(&plaintext).map_err(|e| KmsError::StoreCorrupt {
            store: label.to_owned(),
            reason: format!(
                "the old store's file {LEGACY_FILE}: {}",
                match e {
                    KmsError::Internal { reason } => reason,
                    e => e.to_string(),
                }
            ),
        })?,
        sealed_by: envelope.header.key_version,
        counter: envelope.header.counter,
    })
}

/// Fewest bytes a version takes (a generated one).
const MIN_VERSION_LEN: usize = SEED_LEN + 8 + 4 + 1;
/// Fewest bytes a key takes: an id length, a version count, one version.
const MIN_KEY_LEN: usize = 1 + 4 + MIN_VERSION_LEN;

/// `count` items, but no more than `rest` bytes can hold at `min_len`
/// bytes each: a count read from the snapshot never allocates more than
/// the snapshot could describe.
fn at_most(count: u32, rest: usize, min_len: usize) -> usize {
    usize::try_from(count)
        .map_or(usize::MAX, |c| c)
        .min(rest / min_len)
}

/// Reads a snapshot (module docs). Every version's buffer is allocated
/// once (see [`at_most`]).
fn decode(bytes: &[u8]) -> Result<Vec<StoredKey>, KmsError> {
    let bad = |what: &str| KmsError::Internal {
        reason: format!("keystore: the snapshot's {what} does not decode"),
    };
    let mut r = Reader::new(bytes);
    let text = |r: &mut Reader<'_>, what: &str| {
        r.short_slice()
            .and_then(|b| std::str::from_utf8(b).ok())
            .map(str::to_owned)
            .ok_or_else(|| bad(what))
    };
    let count = r.u32().ok_or_else(|| bad("key count"))?;
    let mut keys = Vec::with_capacity(at_most(count, r.len(), MIN_KEY_LEN));
    for _ in 0..count {
        let id: KeyId = text(&mut r, "key id")?.parse().map_err(|_| bad("key id"))?;
        let versions = r.u32().ok_or_else(|| bad("version count"))?;
        // Sized once, never grown: it holds seeds. A valid snapshot has
        // room for every version it counts; one that claims more runs out
        // of bytes before it outgrows the buffer.
        let mut stored = Vec::with_capacity(at_most(versions, r.len(), MIN_VERSION_LEN));
        for _ in 0..versions {
            stored.push(read_version(&mut r).ok_or_else(|| bad("version"))?);
        }
        keys.push(StoredKey {
            id,
            state: KeyState {
                policy: KeyPolicy::legacy(),
                ..KeyState::new()
            },
            retired: Vec::new(),
            versions: stored,
        });
    }
    if !r.rest().is_empty() {
        return Err(bad("length"));
    }
    Ok(keys)
}
