//! Sealed export and import of a key version (docs/DESIGN.md §3.1, §3.4). A private
//! key leaves the keystore only inside an envelope sealed under a
//! caller-supplied [`SealKey`]; there is no plaintext export.
//!
//! The envelope's associated data is [`EXPORT_AAD`]; its plaintext (wiped
//! after use) is:
//!
//! ```text
//! 32-byte seed ‖ 32-byte public key ‖ u8 length ‖ source key id (text)
//! ```
//!
//! Import re-derives the public key from the seed, requires it to equal the
//! one carried, and requires that key to be canonical, not of small order
//! and torsion-free; the new key records where it came from
//! ([`Origin::Imported`]).

use std::time::SystemTime;

use super::{version_from_seed, Keystore, Origin};
use crate::bytes::Reader;
use crate::ed25519;
use crate::error::KmsError;
use crate::key_id::{Alg, KeyId};
use crate::seal::{Envelope, SealKey};

/// Associated data of an export envelope: it can be opened as nothing else.
pub const EXPORT_AAD: &[u8] = b"kms.export.ed25519.v1";

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
        let Some(signing_key) = &version.signing_key else {
            return Err(KmsError::VersionTrimmed {
                key: key.to_string(),
                version: key.version(),
                min_available_version: record.versions().state.min_available_version,
            });
        };
        let source = key.to_string();
        let mut plaintext = zeroize::Zeroizing::new(Vec::with_capacity(65 + source.len()));
        plaintext.extend_from_slice(&signing_key.to_bytes());
        plaintext.extend_from_slice(&version.info.public_key);
        // Key ids are at most ~230 bytes (two 64-byte names, a UUID).
        plaintext.push(u8::try_from(source.len()).unwrap_or(u8::MAX));
        plaintext.extend_from_slice(source.as_bytes());
        Ok(to.seal(EXPORT_AAD, &plaintext)?)
    }

    /// Imports the key version in `envelope` (from [`Keystore::export_sealed`]),
    /// sealed under `from`, as a new key of `tenant` and `purpose` whose
    /// version 1 is that secret. Durable stores write it before returning.
    ///
    /// # Errors
    /// [`KmsError::Seal`] if the envelope does not open under `from` with
    /// [`EXPORT_AAD`]; [`KmsError::InvalidArgument`] if its contents are
    /// malformed, or the public key carried does not match the seed;
    /// [`KmsError::InvalidSignature`] if that public key is not canonical,
    /// has small order or is not torsion-free; [`KmsError::InvalidKeyId`]
    /// for a bad tenant or purpose; [`KmsError::EntropyUnavailable`].
    pub fn import_sealed(
        &self,
        tenant: &str,
        purpose: &str,
        from: &SealKey,
        envelope: &Envelope,
    ) -> Result<KeyId, KmsError> {
        let plaintext = from.open(EXPORT_AAD, envelope)?;
        let malformed = |reason: &str| KmsError::InvalidArgument {
            what: "imported key",
            reason: reason.to_owned(),
        };
        let mut r = Reader::new(&plaintext);
        let seed = zeroize::Zeroizing::new(
            r.take::<32>()
                .ok_or_else(|| malformed("the envelope is too short for a key"))?,
        );
        let public_key = r
            .take::<32>()
            .ok_or_else(|| malformed("the envelope is too short for a key"))?;
        let source = r
            .short_slice()
            .filter(|_| r.rest().is_empty())
            .and_then(|b| std::str::from_utf8(b).ok())
            .ok_or_else(|| malformed("the source key id does not decode"))?
            .to_owned();
        ed25519::decode_trusted_public_key(&public_key)?;
        let version = version_from_seed(
            1,
            &seed,
            SystemTime::now(),
            Origin::Imported {
                source,
                sealed_by: format!("{}@v{}", from.id(), from.version()),
            },
        );
        if version.info.public_key != public_key {
            return Err(malformed("the public key does not match the seed"));
        }
        let uuid = uuid::Builder::from_random_bytes(super::random_bytes()?).into_uuid();
        let id = KeyId::new(tenant, purpose, Alg::Ed25519, uuid, 1)?;
        self.insert_new_key(id, version)
    }
}
