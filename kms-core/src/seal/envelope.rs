//! The envelope's byte format and its parser. Every field is checked before
//! anything is decrypted; the parser never panics (fuzzed, and a proptest
//! property in `tests/core/seal.rs`).
//!
//! ```text
//! offset        size  field
//! 0             4     magic "KMSE"
//! 4             1     format version (1)
//! 5             1     key id length L, 1..=64
//! 6             L     sealing key id, bytes of [A-Za-z0-9._:-]
//! 6+L           4     sealing key version, u32 big-endian, ≥ 1
//! 10+L          8     counter, u64 big-endian, ≥ 1
//! 18+L          8     creation time, seconds since the Unix epoch, u64 BE
//! 26+L          24    XChaCha20 nonce
//! 50+L          n+16  ciphertext ‖ Poly1305 tag
//! ```
//!
//! Bytes `0..26+L` are the header, bound into the AEAD's associated data.

use super::error::SealError;
use crate::bytes::Reader;
use crate::key_id::is_name_byte;

/// The magic at the start of every envelope.
pub const MAGIC: [u8; 4] = *b"KMSE";
/// The format version this build writes and reads.
pub const FORMAT_VERSION: u8 = 1;
/// Longest sealing key id, in bytes.
pub const MAX_KEY_ID_LEN: usize = 64;
/// XChaCha20 nonce length, bytes (192 bits).
pub const NONCE_LEN: usize = 24;
/// Poly1305 tag length, bytes.
pub const TAG_LEN: usize = 16;

/// The authenticated header of an envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Format version; [`FORMAT_VERSION`].
    pub format_version: u8,
    /// The sealing key's id.
    pub key_id: String,
    /// The sealing key's version (≥ 1).
    pub key_version: u32,
    /// The sealing key's counter when this envelope was sealed (≥ 1);
    /// strictly increasing per key, so an anti-rollback policy can reject
    /// older envelopes.
    pub counter: u64,
    /// Creation time, seconds since the Unix epoch.
    pub created_at: u64,
}

/// A sealed secret: header, nonce, and ciphertext with its tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// The authenticated header.
    pub header: Header,
    /// The random 24-byte nonce.
    pub nonce: [u8; NONCE_LEN],
    /// Ciphertext followed by the 16-byte tag.
    pub ciphertext: Vec<u8>,
}

/// Whether `id` is a valid sealing key id: 1..=64 bytes of `[A-Za-z0-9._:-]`.
pub fn valid_key_id(id: &str) -> bool {
    (1..=MAX_KEY_ID_LEN).contains(&id.len()) && id.bytes().all(|b| is_name_byte(b) || b == b':')
}

impl Header {
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&MAGIC);
        out.push(self.format_version);
        // Sealing checks the id (1..=64 bytes) before a header is built.
        out.push(self.key_id.len() as u8);
        out.extend_from_slice(self.key_id.as_bytes());
        out.extend_from_slice(&self.key_version.to_be_bytes());
        out.extend_from_slice(&self.counter.to_be_bytes());
        out.extend_from_slice(&self.created_at.to_be_bytes());
    }
}

impl Envelope {
    /// The envelope's bytes, in the format above.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(26 + self.header.key_id.len() + NONCE_LEN + self.ciphertext.len());
        self.header.write(&mut out);
        out.extend_from_slice(&self.nonce);
        out.extend_from_slice(&self.ciphertext);
        out
    }

    /// Parses an envelope. Checks every field; decrypts nothing.
    ///
    /// # Errors
    /// [`SealError::Malformed`] naming the field for a short input, a wrong
    /// magic, a key id of bad length or characters, a version or counter of
    /// 0, or a ciphertext shorter than the tag;
    /// [`SealError::UnsupportedVersion`] for a format version other than
    /// [`FORMAT_VERSION`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Envelope, SealError> {
        let malformed = |what| SealError::Malformed { what };
        let mut r = Reader::new(bytes);
        if r.take::<4>().ok_or(malformed("magic"))? != MAGIC {
            return Err(malformed("magic"));
        }
        let [format_version] = r.take::<1>().ok_or(malformed("format version"))?;
        if format_version != FORMAT_VERSION {
            return Err(SealError::UnsupportedVersion(format_version));
        }
        let key_id = r
            .short_slice()
            .and_then(|id| std::str::from_utf8(id).ok())
            .filter(|id| valid_key_id(id))
            .ok_or(malformed("key id"))?
            .to_owned();
        let key_version = r
            .u32()
            .filter(|&v| v != 0)
            .ok_or(malformed("key version"))?;
        let counter = r.u64().filter(|&c| c != 0).ok_or(malformed("counter"))?;
        let created_at = r.u64().ok_or(malformed("creation time"))?;
        let nonce = r.take::<NONCE_LEN>().ok_or(malformed("nonce"))?;
        let ciphertext = r.rest();
        if ciphertext.len() < TAG_LEN {
            return Err(malformed("tag"));
        }
        Ok(Envelope {
            header: Header {
                format_version,
                key_id,
                key_version,
                counter,
                created_at,
            },
            nonce,
            ciphertext: ciphertext.to_vec(),
        })
    }
}
