//! Sealing (docs/DESIGN.md §3.4): secrets at rest and in transit are XChaCha20-
//! Poly1305 envelopes under a [`SealKey`].
//!
//! * **AEAD:** XChaCha20-Poly1305 from the `chacha20poly1305` crate
//!   (draft-irtf-cfrg-xchacha: HChaCha20 subkey + the RFC 8439 §2.8 AEAD).
//! * **Nonces:** 192 bits, random for every envelope, from the OS random
//!   source (`getrandom`, which is what the crate's `Generate` draws from,
//!   but failing with a typed error where `Generate` panics). At 2^-96 collision odds after 2^48
//!   envelopes per key, random nonces need no state and survive restarts.
//! * **Header:** format version, sealing key id and version, a counter and
//!   the creation time ([`Header`]) are authenticated: the AEAD's associated
//!   data is `len(aad) as u64 BE ‖ aad ‖ header`, so the caller's `aad` and
//!   the header are bound together and cannot be shifted into each other.
//! * **Counter:** each [`SealKey`] numbers its envelopes 1, 2, 3, …; an
//!   [`AntiRollback`] policy rejects an envelope whose counter is below the
//!   newest it has accepted for that key id and version.
//!
//! Invariants: key bytes live only inside the cipher, which zeroizes itself
//! on drop (`zeroize` feature), and are never printed; [`SealKey::open`]
//! returns a [`Plaintext`], wiped on drop (so is a failed open's buffer);
//! nothing is returned from a failed open.

mod envelope;
mod error;
mod keyring;
mod plaintext;
mod rollback;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use chacha20poly1305::aead::{AeadInOut, KeyInit};
use chacha20poly1305::{Tag, XChaCha20Poly1305, XNonce};
use zeroize::Zeroizing;

pub use envelope::{
    valid_key_id, Envelope, Header, FORMAT_VERSION, MAGIC, MAX_KEY_ID_LEN, NONCE_LEN, TAG_LEN,
};
pub use error::SealError;
pub use keyring::Keyring;
pub use plaintext::Plaintext;
pub use rollback::AntiRollback;

/// Largest plaintext, and largest caller AAD, one envelope takes: 64 MiB.
pub const MAX_PLAINTEXT: usize = 64 << 20;

/// Length of a sealing key, bytes (256 bits).
pub const SEAL_KEY_LEN: usize = 32;

/// A named, versioned 256-bit sealing key and its envelope counter.
///
/// `Debug` shows the id, version and counter only. The key bytes are
/// zeroized when the key drops.
pub struct SealKey {
    id: String,
    version: u32,
    cipher: XChaCha20Poly1305,
    /// The last counter used; the next envelope gets this + 1.
    /// `Relaxed`: it only has to hand out distinct, increasing numbers, which
    /// the read-modify-write guarantees on its own; it orders no other data.
    counter: AtomicU64,
}

impl fmt::Debug for SealKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SealKey")
            .field("id", &self.id)
            .field("version", &self.version)
            .field("counter", &self.counter.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl SealKey {
    /// A fresh random key `id` version 1, counter at 0.
    ///
    /// # Errors
    /// [`SealError::InvalidKey`] if `id` is not 1–64 bytes of
    /// `[A-Za-z0-9._:-]`; [`SealError::EntropyUnavailable`] if the OS
    /// random source fails. (Converted to [`crate::KmsError`]:
    /// `InvalidArgument` and `Seal(EntropyUnavailable)`.)
    pub fn generate(id: &str) -> Result<SealKey, SealError> {
        let mut bytes = Zeroizing::new([0u8; SEAL_KEY_LEN]);
        crate::random::fill(&mut *bytes)?;
        SealKey::from_bytes(id, 1, &bytes)
    }

    /// A key from its 32 bytes, as given (the caller keeps and wipes its
    /// copy; this one is zeroized on drop). The counter starts at 0; see
    /// [`SealKey::with_counter`].
    ///
    /// # Errors
    /// [`SealError::InvalidKey`] if `id` is invalid or `version` is 0
    /// (converted to [`crate::KmsError::InvalidArgument`]).
    pub fn from_bytes(
        id: &str,
        version: u32,
        bytes: &[u8; SEAL_KEY_LEN],
    ) -> Result<SealKey, SealError> {
        if !valid_key_id(id) {
            return Err(SealError::InvalidKey {
                what: "sealing key id",
                reason: "must be 1-64 bytes of [A-Za-z0-9._:-]".to_owned(),
            });
        }
        if version == 0 {
            return Err(SealError::InvalidKey {
                what: "sealing key version",
                reason: "versions start at 1".to_owned(),
            });
        }
        Ok(SealKey {
            id: id.to_owned(),
            version,
            cipher: XChaCha20Poly1305::new(&(*bytes).into()),
            counter: AtomicU64::new(0),
        })
    }

    /// The same key continuing its count after `counter`: the next
    /// envelope gets `counter + 1`. For a key restored from storage, pass
    /// the newest counter it ever sealed with.
    pub fn with_counter(self, counter: u64) -> SealKey {
        self.counter.store(counter, Ordering::Relaxed);
        self
    }

    /// The key's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The key's version (≥ 1).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The counter of the newest envelope sealed (0 before the first).
    pub fn counter(&self) -> u64 {
        self.counter.load(Ordering::Relaxed)
    }

    /// Seals `plaintext`, binding `aad` (the caller's context, e.g. what the
    /// secret is) and the header.
    ///
    /// # Errors
    /// [`SealError::TooLarge`] above [`MAX_PLAINTEXT`] bytes of plaintext or
    /// of `aad`; [`SealError::CounterExhausted`] after 2^64 − 1 envelopes;
    /// [`SealError::EntropyUnavailable`] if the OS random source fails.
    pub fn seal(&self, aad: &[u8], plaintext: &[u8]) -> Result<Envelope, SealError> {
        for len in [plaintext.len(), aad.len()] {
            if len > MAX_PLAINTEXT {
                return Err(SealError::TooLarge { len });
            }
        }
        // `fetch_update` with `checked_add`: at `u64::MAX` the counter stays
        // exhausted instead of wrapping to 0 and reusing counters.
        let counter = self
            .counter
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| c.checked_add(1))
            .map_err(|_| SealError::CounterExhausted)?
            + 1;
        let header = Header {
            format_version: FORMAT_VERSION,
            key_id: self.id.clone(),
            key_version: self.version,
            counter,
            created_at: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        };
        let mut nonce = [0u8; NONCE_LEN];
        crate::random::fill(&mut nonce)?;
        let nonce = XNonce::from(nonce);
        let mut ciphertext = Vec::with_capacity(plaintext.len() + TAG_LEN);
        ciphertext.extend_from_slice(plaintext);
        let tag = self
            .cipher
            .encrypt_inout_detached(
                &nonce,
                &associated_data(aad, &header),
                ciphertext.as_mut_slice().into(),
            )
            // The only failure is a message beyond the AEAD's limit
            // (~256 GiB), which MAX_PLAINTEXT excludes.
            .map_err(|_| SealError::TooLarge {
                len: plaintext.len(),
            })?;
        ciphertext.extend_from_slice(&tag);
        Ok(Envelope {
            header,
            nonce: nonce.into(),
            ciphertext,
        })
    }

    /// Opens `envelope` sealed under this key with the same `aad`.
    ///
    /// # Errors
    /// [`SealError::UnsupportedVersion`] for another format version;
    /// [`SealError::WrongKey`] if the header names another key id or
    /// version; [`SealError::Malformed`] if the ciphertext is shorter than
    /// the tag; [`SealError::Authentication`] if anything authenticated
    /// was altered or `aad` differs.
    pub fn open(&self, aad: &[u8], envelope: &Envelope) -> Result<Plaintext, SealError> {
        let header = &envelope.header;
        if header.format_version != FORMAT_VERSION {
            return Err(SealError::UnsupportedVersion(header.format_version));
        }
        if header.key_id != self.id || header.key_version != self.version {
            return Err(SealError::WrongKey {
                envelope: format!("{}@v{}", header.key_id, header.key_version),
                key: format!("{}@v{}", self.id, self.version),
            });
        }
        let split = envelope
            .ciphertext
            .len()
            .checked_sub(TAG_LEN)
            .ok_or(SealError::Malformed { what: "tag" })?;
        let (body, tag) = envelope.ciphertext.split_at(split);
        let tag = Tag::try_from(tag).map_err(|_| SealError::Malformed { what: "tag" })?;
        let mut plaintext = body.to_vec();
        let opened = self.cipher.decrypt_inout_detached(
            &envelope.nonce.into(),
            &associated_data(aad, header),
            plaintext.as_mut_slice().into(),
            &tag,
        );
        // Wrapped first, so the buffer is wiped on either path.
        let plaintext = Plaintext::new(plaintext);
        opened.map_err(|_| SealError::Authentication)?;
        Ok(plaintext)
    }
}

/// The AEAD's associated data: `len(aad) as u64 BE ‖ aad ‖ header bytes`.
fn associated_data(aad: &[u8], header: &Header) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + aad.len() + 26 + header.key_id.len());
    out.extend_from_slice(&(aad.len() as u64).to_be_bytes());
    out.extend_from_slice(aad);
    header.write(&mut out);
    out
}
