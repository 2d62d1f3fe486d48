//! The durable store's snapshot: every key and version, as the plaintext
//! sealed in `keystore.kms` (every integer big-endian):
//!
//! ```text
//! u32 key count
//! per key:   u8 id length, id (text form of version 1), u32 version count
//! per version: 32-byte seed, u64 seconds and u32 nanoseconds since the
//!              epoch, u8 origin (0 generated, 1 imported); if imported:
//!              u8 length + source key id, u8 length + sealing key `id@vN`
//! ```
//!
//! Invariant: every buffer that holds a seed (the snapshot, each key's
//! list of versions) is allocated once at its final size and never grows:
//! a `Vec` that grows frees its old buffer with the bytes still in it,
//! where `Zeroizing` cannot wipe them. `tests/freed_seeds.rs` checks it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zeroize::Zeroizing;

use crate::bytes::Reader;
use crate::error::KmsError;
use crate::key_id::KeyId;
use crate::keystore::Origin;

/// Length of a version's seed (RFC 8032 §5.1.5).
const SEED_LEN: usize = 32;

/// One version as stored: seed, creation time, origin.
pub(crate) struct StoredVersion {
    pub(crate) seed: Zeroizing<[u8; SEED_LEN]>,
    pub(crate) created_at: SystemTime,
    pub(crate) origin: Origin,
}

/// One key as stored.
pub(crate) struct StoredKey {
    pub(crate) id: KeyId,
    pub(crate) versions: Vec<StoredVersion>,
}

/// Bytes of one version in the snapshot: seed, seconds, nanoseconds,
/// origin tag, and an import's two length-prefixed texts.
fn version_len(v: &StoredVersion) -> usize {
    SEED_LEN
        + 8
        + 4
        + 1
        + match &v.origin {
            Origin::Generated => 0,
            Origin::Imported { source, sealed_by } => 2 + source.len() + sealed_by.len(),
        }
}

/// The snapshot of `keys` (module docs), in a buffer allocated once at its
/// exact size: it holds seeds, and a `Vec` that grows frees its old buffer
/// unwiped.
pub(crate) fn encode(keys: &[StoredKey]) -> Result<Zeroizing<Vec<u8>>, KmsError> {
    let too_many = || KmsError::Internal {
        reason: "keystore: too many keys or versions to store".to_owned(),
    };
    let ids: Vec<String> = keys.iter().map(|k| k.id.to_string()).collect();
    let len = ids
        .iter()
        .zip(keys)
        .map(|(id, k)| 1 + id.len() + 4 + k.versions.iter().map(version_len).sum::<usize>())
        .sum::<usize>()
        + 4;
    let mut out = Zeroizing::new(Vec::with_capacity(len));
    out.extend_from_slice(
        &u32::try_from(keys.len())
            .map_err(|_| too_many())?
            .to_be_bytes(),
    );
    for (key, id) in keys.iter().zip(&ids) {
        out.push(u8::try_from(id.len()).map_err(|_| too_many())?);
        out.extend_from_slice(id.as_bytes());
        out.extend_from_slice(
            &u32::try_from(key.versions.len())
                .map_err(|_| too_many())?
                .to_be_bytes(),
        );
        for v in &key.versions {
            out.extend_from_slice(&*v.seed);
            let since = v.created_at.duration_since(UNIX_EPOCH).unwrap_or_default();
            out.extend_from_slice(&since.as_secs().to_be_bytes());
            out.extend_from_slice(&since.subsec_nanos().to_be_bytes());
            match &v.origin {
                Origin::Generated => out.push(0),
                Origin::Imported { source, sealed_by } => {
                    out.push(1);
                    for text in [source, sealed_by] {
                        out.push(u8::try_from(text.len()).map_err(|_| too_many())?);
                        out.extend_from_slice(text.as_bytes());
                    }
                }
            }
        }
    }
    debug_assert_eq!(out.len(), len, "the snapshot's size is exact");
    Ok(out)
}

/// Fewest bytes a version takes in the snapshot (a generated one).
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
pub(crate) fn decode(bytes: &[u8]) -> Result<Vec<StoredKey>, KmsError> {
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
            let seed = Zeroizing::new(r.take::<SEED_LEN>().ok_or_else(|| bad("seed"))?);
            let created_at = r
                .u64()
                .zip(r.u32())
                .filter(|&(_, nanos)| nanos < 1_000_000_000)
                .and_then(|(secs, nanos)| UNIX_EPOCH.checked_add(Duration::new(secs, nanos)))
                .ok_or_else(|| bad("creation time"))?;
            let origin = match r.take::<1>().ok_or_else(|| bad("origin"))? {
                [0] => Origin::Generated,
                [1] => Origin::Imported {
                    source: text(&mut r, "import source")?,
                    sealed_by: text(&mut r, "import sealing key")?,
                },
                _ => return Err(bad("origin")),
            };
            stored.push(StoredVersion {
                seed,
                created_at,
                origin,
            });
        }
        keys.push(StoredKey {
            id,
            versions: stored,
        });
    }
    if !r.rest().is_empty() {
        return Err(bad("length"));
    }
    Ok(keys)
}
