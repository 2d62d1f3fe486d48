//! Sealed export and import of a key version (docs/DESIGN.md §3.1, §3.4). A private
//! key leaves the keystore only inside an envelope sealed under a
//! caller-supplied [`SealKey`]; there is no plaintext export.
//!
//! The envelope's associated data names the key's algorithm
//! ([`EXPORT_AAD`] for Ed25519, `kms.export.<alg>.v1` for the others, alg
//! as in a [`KeyId`]); its plaintext (wiped after use) is:
//!
//! ```text
//! 32-byte seed ‖ public key (the algorithm's length) ‖ u8 length ‖
//! source key id (text)
//! ```
//!
//! Import opens the envelope as each algorithm's in turn (the first that
//! authenticates says which), re-derives the public key from the seed and
//! requires it to equal the one carried; an Ed25519 key must also be
//! canonical, not of small order and torsion-free. The new key records
//! where it came from ([`Origin::Imported`]).

use std::time::SystemTime;

use super::records::SEED_LEN;
use super::{version_from_seed, Keystore, Origin};
use crate::bytes::Reader;
use crate::ed25519;
use crate::error::KmsError;
use crate::key_id::{Alg, KeyId};
use crate::seal::{Envelope, SealError, SealKey};

/// Associated data of an Ed25519 key's export envelope: it can be opened
/// as nothing else.
pub const EXPORT_AAD: &[u8] = b"kms.export.ed25519.v1";

/// Associated data of an export envelope of a key of `alg`.
fn export_aad(alg: Alg) -> Vec<u8> {
    match alg {
        Alg::Ed25519 => EXPORT_AAD.to_vec(),
        other => format!("kms.export.{other}.v1").into_bytes(),
    }
}

impl Keystore {
    /// Exports the version `key` names, sealed under `to`. The seed, its
    /// public key and `key`'s text form travel inside the envelope.
    ///
    /// # Errors
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`],
    /// [`KmsError::KeyDestroyed`], [`KmsError::NotExportable`] unless the
    /// key's policy is `exportable`, [`KmsError::VersionTrimmed`] for a
    /// trimmed version, or [`KmsError::Seal`] if sealing fails.
    pub fn export_sealed(&self, key: &KeyId, to: &SealKey) -> Result<Envelope, KmsError> {
        let record = self.record(key)?;
        let version = {
            let versions = record.versions();
            let version = crate::sync::Arc::clone(versions.get(key)?);
            if !versions.state.policy.exportable {
                return Err(KmsError::NotExportable {
                    key: key.to_string(),
                });
            }
            version
        };
        let Some(secret) = &version.secret else {
            return Err(KmsError::VersionTrimmed {
                key: key.to_string(),
                version: key.version(),
                min_available_version: record.versions().state.min_available_version,
            });
        };
        let source = key.to_string();
        let public = &version.info.public_key;
        let mut plaintext = zeroize::Zeroizing::new(Vec::with_capacity(
            SEED_LEN + public.len() + 1 + source.len(),
        ));
        plaintext.extend_from_slice(secret.seed());
        plaintext.extend_from_slice(public);
        // Key ids are at most ~230 bytes (two 64-byte names, a UUID).
        plaintext.push(u8::try_from(source.len()).unwrap_or(u8::MAX));
        plaintext.extend_from_slice(source.as_bytes());
        Ok(to.seal(&export_aad(key.alg()), &plaintext)?)
    }

    /// Imports the key version in `envelope` (from [`Keystore::export_sealed`]),
    /// sealed under `from`, as a new key of `tenant` and `purpose` whose
    /// version 1 is that secret. Durable stores write it before returning.
    ///
    /// # Errors
    /// [`KmsError::Seal`] if the envelope does not open under `from` as
    /// any algorithm's export (module docs); [`KmsError::InvalidArgument`] if its contents are
    /// malformed, or the public key carried does not match the seed;
    /// [`KmsError::InvalidSignature`] if an Ed25519 public key is not
    /// canonical, has small order or is not torsion-free;
    /// [`KmsError::InvalidKeyId`] for a bad tenant or purpose;
    /// [`KmsError::EntropyUnavailable`]; [`KmsError::AlgorithmNotBuilt`]
    /// for an ML-DSA key in a build without the `ml-dsa` feature.
    pub fn import_sealed(
        &self,
        tenant: &str,
        purpose: &str,
        from: &SealKey,
        envelope: &Envelope,
    ) -> Result<KeyId, KmsError> {
        let (alg, plaintext) = open_any(from, envelope)?;
        let malformed = |reason: &str| KmsError::InvalidArgument {
            what: "imported key",
            reason: reason.to_owned(),
        };
        let too_short = || malformed("the envelope is too short for a key");
        let mut r = Reader::new(&plaintext);
        let seed = zeroize::Zeroizing::new(r.take::<SEED_LEN>().ok_or_else(too_short)?);
        let public_key = r.slice(alg.public_key_len()).ok_or_else(too_short)?;
        let source = r
            .short_slice()
            .filter(|_| r.rest().is_empty())
            .and_then(|b| std::str::from_utf8(b).ok())
            .ok_or_else(|| malformed("the source key id does not decode"))?
            .to_owned();
        if let Ok(ed25519_public) = <[u8; 32]>::try_from(public_key) {
            if alg == Alg::Ed25519 {
                ed25519::decode_trusted_public_key(&ed25519_public)?;
            }
        }
        let version = version_from_seed(
            alg,
            1,
            &seed,
            SystemTime::now(),
            Origin::Imported {
                source,
                sealed_by: format!("{}@v{}", from.id(), from.version()),
            },
        )?;
        if version.info.public_key != public_key {
            return Err(malformed("the public key does not match the seed"));
        }
        let uuid = uuid::Builder::from_random_bytes(super::random_bytes()?).into_uuid();
        let id = KeyId::new(tenant, purpose, alg, uuid, 1)?;
        self.insert_new_key(id, version)
    }
}

/// Opens an export envelope as each algorithm's in turn ([`Alg::ALL`]):
/// the algorithm whose associated data authenticates it, and the
/// plaintext.
///
/// # Errors
/// The first algorithm's (Ed25519's) [`SealError`] if none opens it.
fn open_any(
    from: &SealKey,
    envelope: &Envelope,
) -> Result<(Alg, crate::seal::Plaintext), KmsError> {
    let mut first: Option<SealError> = None;
    for alg in Alg::ALL {
        match from.open(&export_aad(alg), envelope) {
            Ok(plaintext) => return Ok((alg, plaintext)),
            Err(e) => {
                first.get_or_insert(e);
            }
        }
    }
    Err(first.map_or_else(
        || KmsError::Internal {
            reason: "no algorithm to open an export with".to_owned(),
        },
        KmsError::from,
    ))
}
