//! The records of a durable store: their names, their sequence numbers,
//! the associated data that binds both, and their plaintext layouts
//! (every integer big-endian).
//!
//! ```text
//! record value  = u64 seq ‖ envelope (kms_core::seal), sealed under the
//!                 master key with associated data
//! AAD           = "kms.record.v1" ‖ 16-byte store id ‖ u8 name length ‖
//!                 name ‖ u64 seq   (the index's store id is all zeros: it
//!                 carries the id)
//!
//! index         (name "index"; seq counts the index's writes)
//!               16-byte store id (random, made with the store) ‖
//!               u64 key count
//! key head      (name "keys/<tenant>/<purpose>/<uuid>/head";
//!                seq = the key's sequence, +1 on every write to the key)
//!               u8 length ‖ key id (version 1) ‖ u32 head version ‖
//!               u64 ordinal (the key was the ordinal-th created: the
//!               heads' ordinals are exactly 1..=count) ‖ the key's state:
//!               u8 flags (1 enabled, 2 exportable, 4 destroyed,
//!               8 auto-rotates) ‖ u32 min_verify_version ‖
//!               u32 min_available_version ‖ u64 seconds ‖ u32 nanoseconds
//!               (auto_rotate_after; zeros when it does not).
//!               A head without the state (ending after the ordinal)
//!               reads as `KeyPolicy::legacy()`, nothing trimmed.
//! version N     (name "keys/<tenant>/<purpose>/<uuid>/v<N>";
//!                seq = the key's sequence when it was written; only for
//!                min_available_version <= N <= head, none once destroyed)
//!               32-byte seed (Ed25519's, or ML-DSA's ξ: the key id in
//!               the head names the algorithm) ‖ u64 seconds ‖ u32 nanoseconds since the
//!               epoch ‖ u8 origin (0 generated, 1 imported); if imported:
//!               u8 length ‖ source key id, u8 length ‖ sealing key `id@vN`
//! retired       (name "keys/<tenant>/<purpose>/<uuid>/retired"; seq = the
//!                key's sequence at its last trim or its destruction;
//!                present iff min_available_version > 1 or the key is
//!                destroyed)
//!               per trimmed version (1..min_available_version; every
//!               version 1..=head once destroyed), in order, the layout of
//!               a version with its public key where the seed was (the
//!               key's algorithm says its length: Ed25519 32 bytes,
//!               ML-DSA-44/65/87 1312/1952/2592)
//! signing pointer (name "signing/<tenant>:<purpose>"; seq +1 on every
//!                write: 1 when made, +1 when it moves off a destroyed
//!                key; never removed)
//!               u8 length ‖ key id (version 1) of the key that signs for
//!               the purpose: a key of the store with that tenant and
//!               purpose
//! ```
//!
//! Trimming removes the trimmed versions' records and writes the retired
//! record in the same commit; destroying removes every version record
//! left, writes the retired record with every version, and a head that
//! says so (the tombstone).
//!
//! Invariants: a record opens only under its own store, name and sequence
//! (a record moved to another name or from another store sealed under the
//! same master key, or an older copy of a record whose sequence has moved
//! on, fails to authenticate); every buffer that holds
//! a seed is allocated once at its final size and never grows (a `Vec`
//! that grows frees its old buffer unwiped, where `Zeroizing` cannot wipe
//! it; `tests/freed_seeds.rs` checks it).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use uuid::Uuid;
use zeroize::Zeroizing;

use crate::bytes::Reader;
use crate::error::KmsError;
use crate::key_id::KeyId;
use crate::keystore::{KeyPolicy, Origin};
use crate::seal::{Envelope, SealError};

/// Length of a version's seed, every algorithm's: Ed25519's (RFC 8032
/// §5.1.5) or ML-DSA's ξ (FIPS 204 Algorithm 6).
pub(crate) const SEED_LEN: usize = 32;
/// The index record's name.
pub(crate) const INDEX: &str = "index";
/// Prefix of every key's records.
const KEYS: &str = "keys/";
/// Prefix of the signing pointers.
const SIGNING: &str = "signing/";
/// Domain of the records' associated data.
const RECORD_AAD: &[u8] = b"kms.record.v1";

/// A store's random id ([`crate::root::StoreId`]), bound into every
/// record but the index.
pub(crate) use crate::root::StoreId;

/// One version as stored: seed, creation time, origin.
pub(crate) struct StoredVersion {
    pub(crate) seed: Zeroizing<[u8; SEED_LEN]>,
    pub(crate) created_at: SystemTime,
    pub(crate) origin: Origin,
}

/// A trimmed version as stored: what is public about it.
pub(crate) struct RetiredVersion {
    /// [`crate::Alg::public_key_len`] bytes of the key's algorithm.
    pub(crate) public_key: Vec<u8>,
    pub(crate) created_at: SystemTime,
    pub(crate) origin: Origin,
}

/// A key's lifecycle state, sealed into its head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyState {
    pub(crate) policy: KeyPolicy,
    /// Versions below it are trimmed (no secret); 1 when none is.
    pub(crate) min_available_version: u32,
    /// Destroyed: no version record is left.
    pub(crate) destroyed: bool,
}

impl KeyState {
    /// The state of a newly created key.
    pub(crate) fn new() -> Self {
        KeyState {
            policy: KeyPolicy::default(),
            min_available_version: 1,
            destroyed: false,
        }
    }
}

/// One key as stored: its id (version 1), state, trimmed versions
/// `1..min_available_version` and versions `min_available_version..=head`,
/// each in order (both empty once destroyed).
pub(crate) struct StoredKey {
    pub(crate) id: KeyId,
    pub(crate) state: KeyState,
    pub(crate) retired: Vec<RetiredVersion>,
    pub(crate) versions: Vec<StoredVersion>,
}

/// What a record's name says it is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Name {
    Index,
    Head(Uuid),
    Retired(Uuid),
    Version(Uuid, u32),
    /// A signing pointer, `(tenant, purpose)`.
    Signing(String, String),
}

/// The name of `key`'s head record.
pub(crate) fn head_name(key: &KeyId) -> String {
    format!("{}/head", key_prefix(key))
}

/// The name of `key`'s retired record.
pub(crate) fn retired_name(key: &KeyId) -> String {
    format!("{}/retired", key_prefix(key))
}

/// The name of version `version` of `key`.
pub(crate) fn version_name(key: &KeyId, version: u32) -> String {
    format!("{}/v{version}", key_prefix(key))
}

/// The name of the signing pointer of `key`'s tenant and purpose.
pub(crate) fn signing_name(key: &KeyId) -> String {
    format!("{SIGNING}{}:{}", key.tenant(), key.purpose())
}

fn key_prefix(key: &KeyId) -> String {
    format!("{KEYS}{}/{}/{}", key.tenant(), key.purpose(), key.uuid())
}

/// Parses a record name; `None` for a name this format never writes.
pub(crate) fn parse_name(name: &str) -> Option<Name> {
    if name == INDEX {
        return Some(Name::Index);
    }
    if let Some(pointer) = name.strip_prefix(SIGNING) {
        let (tenant, purpose) = pointer.split_once(':')?;
        return Some(Name::Signing(tenant.to_owned(), purpose.to_owned()));
    }
    let mut parts = name.strip_prefix(KEYS)?.split('/');
    let (_tenant, _purpose) = (parts.next()?, parts.next()?);
    let uuid: Uuid = parts.next()?.parse().ok()?;
    let last = parts.next()?;
    if parts.next().is_some() {
        return None;
    }
    match last {
        "head" => return Some(Name::Head(uuid)),
        "retired" => return Some(Name::Retired(uuid)),
        _ => {}
    }
    let version: u32 = last.strip_prefix('v')?.parse().ok()?;
    Some(Name::Version(uuid, version))
}

/// The associated data that binds a record to its store, name and
/// sequence (the index to its name and sequence: it holds the store id).
pub(crate) fn aad(store: &StoreId, name: &str, seq: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(RECORD_AAD.len() + 16 + 1 + name.len() + 8);
    out.extend_from_slice(RECORD_AAD);
    out.extend_from_slice(if name == INDEX {
        &[0; 16]
    } else {
        store.as_bytes()
    });
    // Names are at most ~240 bytes: two 64-byte names, a UUID, a version.
    out.push(u8::try_from(name.len()).unwrap_or(u8::MAX));
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(&seq.to_be_bytes());
    out
}

/// A record's bytes: `seq` then the envelope.
pub(crate) fn value(seq: u64, envelope: &Envelope) -> Vec<u8> {
    let bytes = envelope.to_bytes();
    let mut out = Vec::with_capacity(8 + bytes.len());
    out.extend_from_slice(&seq.to_be_bytes());
    out.extend_from_slice(&bytes);
    out
}

/// Splits a record's bytes into its sequence and envelope.
///
/// # Errors
/// [`SealError::Malformed`] if the bytes are too short or the envelope
/// does not parse.
pub(crate) fn parse_value(bytes: &[u8]) -> Result<(u64, Envelope), SealError> {
    let mut r = Reader::new(bytes);
    let seq = r.u64().ok_or(SealError::Malformed {
        what: "record sequence",
    })?;
    Ok((seq, Envelope::from_bytes(r.rest())?))
}

/// Bytes of one version's plaintext, whose key (a seed, or a retired
/// version's public key) has `key_len` bytes.
fn version_len(key_len: usize, origin: &Origin) -> usize {
    key_len
        + 8
        + 4
        + 1
        + match origin {
            Origin::Generated => 0,
            Origin::Imported { source, sealed_by } => 2 + source.len() + sealed_by.len(),
        }
}

/// A version's plaintext (module docs), allocated once at its exact size.
///
/// # Errors
/// [`KmsError::Internal`] if an import's texts exceed 255 bytes.
pub(crate) fn encode_version(
    key: &[u8],
    created_at: SystemTime,
    origin: &Origin,
) -> Result<Zeroizing<Vec<u8>>, KmsError> {
    let len = version_len(key.len(), origin);
    let mut out = Zeroizing::new(Vec::with_capacity(len));
    out.extend_from_slice(key);
    let since = created_at.duration_since(UNIX_EPOCH).unwrap_or_default();
    out.extend_from_slice(&since.as_secs().to_be_bytes());
    out.extend_from_slice(&since.subsec_nanos().to_be_bytes());
    match origin {
        Origin::Generated => out.push(0),
        Origin::Imported { source, sealed_by } => {
            out.push(1);
            for text in [source, sealed_by] {
                out.push(u8::try_from(text.len()).map_err(|_| KmsError::Internal {
                    reason: "keystore: an import's source is longer than 255 bytes".to_owned(),
                })?);
                out.extend_from_slice(text.as_bytes());
            }
        }
    }
    debug_assert_eq!(out.len(), len, "a version's size is exact");
    Ok(out)
}

/// Reads one version's plaintext off `r` (module docs); `None` if it does
/// not decode. Shared with the format-1 snapshot (`legacy.rs`), which
/// lays versions out the same way.
pub(crate) fn read_version(r: &mut Reader<'_>) -> Option<StoredVersion> {
    let seed = Zeroizing::new(r.take::<SEED_LEN>()?);
    let (created_at, origin) = read_tail(r)?;
    Some(StoredVersion {
        seed,
        created_at,
        origin,
    })
}

/// Reads what follows a version's key: its creation time and origin.
fn read_tail(r: &mut Reader<'_>) -> Option<(SystemTime, Origin)> {
    let created_at = r
        .u64()
        .zip(r.u32())
        .filter(|&(_, nanos)| nanos < 1_000_000_000)
        .and_then(|(secs, nanos)| UNIX_EPOCH.checked_add(Duration::new(secs, nanos)))?;
    let [tag] = r.take::<1>()?;
    let mut text = || {
        r.short_slice()
            .and_then(|b| std::str::from_utf8(b).ok())
            .map(str::to_owned)
    };
    let origin = match tag {
        0 => Origin::Generated,
        1 => {
            let source = text()?;
            let sealed_by = text()?;
            Origin::Imported { source, sealed_by }
        }
        _ => return None,
    };
    Some((created_at, origin))
}

/// Bytes of a head's state (module docs).
const STATE_LEN: usize = 1 + 4 + 4 + 8 + 4;
const ENABLED: u8 = 1;
const EXPORTABLE: u8 = 2;
const DESTROYED: u8 = 4;
const AUTO_ROTATES: u8 = 8;

/// A key head's plaintext: its id (version 1), head version, creation
/// ordinal and state.
pub(crate) fn encode_head(key: &KeyId, head: u32, ordinal: u64, state: &KeyState) -> Vec<u8> {
    let id = key.with_version(1).to_string();
    let mut out = Vec::with_capacity(1 + id.len() + 4 + 8 + STATE_LEN);
    out.push(u8::try_from(id.len()).unwrap_or(u8::MAX));
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(&head.to_be_bytes());
    out.extend_from_slice(&ordinal.to_be_bytes());
    let policy = &state.policy;
    let flags = [
        (policy.enabled, ENABLED),
        (policy.exportable, EXPORTABLE),
        (state.destroyed, DESTROYED),
        (policy.auto_rotate_after.is_some(), AUTO_ROTATES),
    ]
    .iter()
    .filter(|(on, _)| *on)
    .fold(0, |flags, (_, bit)| flags | bit);
    out.push(flags);
    out.extend_from_slice(&policy.min_verify_version.to_be_bytes());
    out.extend_from_slice(&state.min_available_version.to_be_bytes());
    let after = policy.auto_rotate_after.unwrap_or_default();
    out.extend_from_slice(&after.as_secs().to_be_bytes());
    out.extend_from_slice(&after.subsec_nanos().to_be_bytes());
    out
}

/// Reads a key head's plaintext: `(id, head version, ordinal, state)`;
/// `None` if it does not decode.
pub(crate) fn decode_head(bytes: &[u8]) -> Option<(KeyId, u32, u64, KeyState)> {
    let mut r = Reader::new(bytes);
    let id = read_key_id(&mut r)?;
    let head = r.u32()?;
    let ordinal = r.u64()?;
    if r.len() == 0 {
        let state = KeyState {
            policy: KeyPolicy::legacy(),
            ..KeyState::new()
        };
        return Some((id, head, ordinal, state));
    }
    let [flags] = r.take::<1>()?;
    let min_verify_version = r.u32()?;
    let min_available_version = r.u32()?;
    let (secs, nanos) = (r.u64()?, r.u32()?);
    if flags & !(ENABLED | EXPORTABLE | DESTROYED | AUTO_ROTATES) != 0
        || nanos >= 1_000_000_000
        || !r.rest().is_empty()
    {
        return None;
    }
    let policy = KeyPolicy {
        min_verify_version,
        enabled: flags & ENABLED != 0,
        exportable: flags & EXPORTABLE != 0,
        auto_rotate_after: (flags & AUTO_ROTATES != 0).then(|| Duration::new(secs, nanos)),
    };
    let state = KeyState {
        policy,
        min_available_version,
        destroyed: flags & DESTROYED != 0,
    };
    Some((id, head, ordinal, state))
}

/// The retired record's plaintext: each trimmed version's layout, in
/// order (module docs).
///
/// # Errors
/// [`KmsError::Internal`] if an import's texts exceed 255 bytes.
pub(crate) fn encode_retired(retired: &[RetiredVersion]) -> Result<Vec<u8>, KmsError> {
    let len = retired
        .iter()
        .map(|v| version_len(v.public_key.len(), &v.origin))
        .sum();
    let mut out = Vec::with_capacity(len);
    for v in retired {
        out.extend_from_slice(&encode_version(&v.public_key, v.created_at, &v.origin)?);
    }
    Ok(out)
}

/// Reads the retired record's plaintext: `count` trimmed versions whose
/// public keys have `public_len` bytes; `None` if it does not decode.
pub(crate) fn decode_retired(
    bytes: &[u8],
    count: usize,
    public_len: usize,
) -> Option<Vec<RetiredVersion>> {
    let mut r = Reader::new(bytes);
    let mut retired = Vec::with_capacity(count.min(bytes.len() / public_len.max(1)));
    for _ in 0..count {
        let public_key = r.slice(public_len)?.to_vec();
        let (created_at, origin) = read_tail(&mut r)?;
        retired.push(RetiredVersion {
            public_key,
            created_at,
            origin,
        });
    }
    r.rest().is_empty().then_some(retired)
}

/// The index's plaintext: the store id and the number of keys.
pub(crate) fn encode_index(store: &StoreId, count: u64) -> [u8; 24] {
    let mut out = [0; 24];
    out[..16].copy_from_slice(store.as_bytes());
    out[16..].copy_from_slice(&count.to_be_bytes());
    out
}

/// Reads the index's plaintext: `(store id, count)`; `None` if it does
/// not decode.
pub(crate) fn decode_index(bytes: &[u8]) -> Option<(StoreId, u64)> {
    let mut r = Reader::new(bytes);
    let store = r.take::<16>()?;
    let count = r.u64()?;
    r.rest()
        .is_empty()
        .then_some((StoreId::from_bytes(store), count))
}

/// A signing pointer's plaintext: the id of version 1 of `key`.
pub(crate) fn encode_signing(key: &KeyId) -> Vec<u8> {
    let id = key.with_version(1).to_string();
    let mut out = Vec::with_capacity(1 + id.len());
    out.push(u8::try_from(id.len()).unwrap_or(u8::MAX));
    out.extend_from_slice(id.as_bytes());
    out
}

/// Reads a signing pointer's plaintext: the key id (version 1); `None` if
/// it does not decode.
pub(crate) fn decode_signing(bytes: &[u8]) -> Option<KeyId> {
    let mut r = Reader::new(bytes);
    let id = read_key_id(&mut r)?;
    (r.rest().is_empty() && id.version() == 1).then_some(id)
}

fn read_key_id(r: &mut Reader<'_>) -> Option<KeyId> {
    std::str::from_utf8(r.short_slice()?).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::{parse_name, Name};

    #[test]
    fn names_round_trip() {
        let key: crate::KeyId = "kms:acme:tokens:ed25519:5b769b61-0f38-4885-a628-8294ae7737e8:v3"
            .parse()
            .expect("key id");
        assert_eq!(
            parse_name(&super::version_name(&key, 7)),
            Some(Name::Version(key.uuid(), 7))
        );
        assert_eq!(
            parse_name(&super::head_name(&key)),
            Some(Name::Head(key.uuid()))
        );
        assert_eq!(
            parse_name(&super::retired_name(&key)),
            Some(Name::Retired(key.uuid()))
        );
        assert_eq!(parse_name("index"), Some(Name::Index));
        assert_eq!(
            parse_name(&super::signing_name(&key)),
            Some(Name::Signing("acme".into(), "tokens".into()))
        );
        let pointer = super::encode_signing(&key);
        assert_eq!(super::decode_signing(&pointer), Some(key.with_version(1)));
        assert_eq!(super::decode_signing(&pointer[..pointer.len() - 1]), None);
        for stray in [
            "signing/acme-tokens",
            "keys/a/b/not-a-uuid/head",
            "keys/a/b",
            "other",
            "keys/a/b/5b769b61-0f38-4885-a628-8294ae7737e8/v",
        ] {
            assert_eq!(parse_name(stray), None, "{stray}");
        }
    }
}
