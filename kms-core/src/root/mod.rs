//! The root of trust of a durable store: what holds or wraps its master
//! key ([`MasterKeyRoot`]).
//!
//! * A **file root** ([`FileRoot`]) is the master key itself, read by the
//!   embedder from where it keeps it (the gateway's `--master-key-file`).
//! * A **wrapping root** (a PKCS#11 token's AES key, in the `kms-pkcs11`
//!   crate; an AWS KMS key, in `kms-aws-kms`) never lets its key out: the
//!   store's 32-byte master key is generated when the store is created,
//!   wrapped by the root, and kept wrapped in the store beside the store's
//!   identity ([`StoreId`], 16 random bytes made at creation) and the kind
//!   of root it is under ([`RootRecord`]; in a directory store, the file
//!   [`ROOT_FILE`]). Each open unwraps it once into a buffer wiped on drop;
//!   it is never written anywhere in clear. This is the envelope of
//!   Vault's seal.
//!
//! Invariants:
//! * a store opens only under the kind of root it records; a store that
//!   records none (every store made before roots existed) is under a file
//!   root ([`KmsError::WrongRoot`] otherwise, naming the root expected);
//! * a wrapped master key is bound to its store's identity (the AEAD's
//!   associated data, or the KMS encryption context), so a wrapped
//!   key copied to another store's record does not unwrap there;
//! * master-key bytes live only in [`MasterKeyBytes`] (a fixed-size array,
//!   wiped on drop) until they become a [`crate::seal::SealKey`].

pub(crate) mod kind;
mod record;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use zeroize::Zeroizing;

use crate::error::KmsError;

pub use kind::RootKind;
pub(crate) use record::MAX_RECORD;
pub use record::{RootRecord, WrappedKey, ROOT_FILE};

/// A master key's 32 bytes, wiped on drop.
pub type MasterKeyBytes = Zeroizing<[u8; MASTER_KEY_LEN]>;

/// The length of a master key (bytes): a 256-bit XChaCha20-Poly1305 key.
pub const MASTER_KEY_LEN: usize = 32;

/// A store's identity: 16 random bytes made when the store is created,
/// written as 32 lower-case hex digits. A store that records no root has
/// none; it reads as all zeros ([`StoreId::NONE`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct StoreId([u8; 16]);

impl StoreId {
    /// The identity of a store made before roots were recorded.
    pub const NONE: StoreId = StoreId([0; 16]);

    /// A new random identity.
    ///
    /// # Errors
    /// [`KmsError::EntropyUnavailable`] if the OS random source fails.
    pub fn generate() -> Result<StoreId, KmsError> {
        let mut bytes = [0u8; 16];
        crate::random::fill(&mut bytes)?;
        Ok(StoreId(bytes))
    }

    /// The identity made of `bytes`.
    pub(crate) fn from_bytes(bytes: [u8; 16]) -> StoreId {
        StoreId(bytes)
    }

    /// The identity's 16 bytes: the associated data a root binds a wrapped
    /// key to.
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// The identity written as 32 hex digits, or `None` for anything else.
    pub fn from_hex(text: &str) -> Option<StoreId> {
        let mut bytes = [0u8; 16];
        hex::decode_to_slice(text, &mut bytes).ok()?;
        Some(StoreId(bytes))
    }
}

impl fmt::Display for StoreId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for StoreId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreId({self})")
    }
}

/// What holds or wraps a store's master key. Implemented by [`FileRoot`]
/// here, `kms_pkcs11::Pkcs11Root` and `kms_aws_kms::AwsKmsRoot`; used by
/// [`crate::Keystore::create_under`] and [`crate::Keystore::open_under`].
///
/// Calls block (a token or a network round trip); the keystore makes them
/// once per create or open.
pub trait MasterKeyRoot: fmt::Debug + Send + Sync {
    /// The kind of root, recorded in the store.
    fn kind(&self) -> RootKind;

    /// The root in words, for records and messages: the token and key
    /// labels, the KMS key and endpoint; never a secret (no PIN).
    fn describe(&self) -> String;

    /// Wraps `key`, the master key of the store `store`, bound to `store`.
    /// A file root holds the key itself and answers `Ok(None)`: there is
    /// nothing to record.
    ///
    /// # Errors
    /// [`KmsError::Root`] naming the root and what failed (a token or key
    /// not found, a PIN refused, an endpoint unreachable);
    /// [`KmsError::EntropyUnavailable`] if a random IV cannot be drawn; a
    /// file root answers [`KmsError::InvalidArgument`] for a key that is
    /// not its own.
    fn wrap(&self, store: &StoreId, key: &MasterKeyBytes) -> Result<Option<WrappedKey>, KmsError>;

    /// The master key of the store `store`, unwrapped from `wrapped` (what
    /// [`MasterKeyRoot::wrap`] made; `None` for a file root, which answers
    /// its own key).
    ///
    /// # Errors
    /// [`KmsError::Root`] naming the root and what failed, including a
    /// wrapped key this root cannot open (another token or KMS key,
    /// another store's identity, a damaged record) and a wrapping root
    /// given nothing to unwrap.
    fn unwrap(
        &self,
        store: &StoreId,
        wrapped: Option<&WrappedKey>,
    ) -> Result<MasterKeyBytes, KmsError>;

    /// Undoes a [`MasterKeyRoot::wrap`] of the store `store` whose record
    /// is known never to have been written: a root that put the key
    /// somewhere of its own (a new key file) removes it. A root that keeps
    /// nothing (a token or KMS key wraps without storing) does nothing,
    /// the default. Best effort: it reports no error.
    fn discard(&self, store: &StoreId) {
        let _ = store;
    }
}

/// A file root: the master key itself, as the embedder read it from its
/// file (the gateway's `--master-key-file`, 64 hex digits), or a new file
/// to write it to when a store moves to this root
/// ([`crate::Keystore::move_to_root`]).
pub struct FileRoot {
    held: Held,
    described: String,
}

enum Held {
    Key(MasterKeyBytes),
    /// The new file's path, and whether this root wrote it.
    NewFile(PathBuf, AtomicBool),
}

impl FileRoot {
    /// The root holding `key`; `described` names where it came from (the
    /// file's path), for messages.
    pub fn new(key: MasterKeyBytes, described: impl Into<String>) -> FileRoot {
        FileRoot {
            held: Held::Key(key),
            described: described.into(),
        }
    }

    /// The root that writes the master key it is given to the new file
    /// `path`: 64 lower-case hex digits and a newline, mode 0600 on Unix,
    /// fsynced with its directory. It never overwrites a file, and holds no
    /// key to open a store with until then. A write that fails removes the
    /// file it made, and so does [`MasterKeyRoot::discard`] (a move whose
    /// record was never written).
    pub fn new_file(path: impl Into<PathBuf>) -> FileRoot {
        let path = path.into();
        FileRoot {
            described: format!("master key file {}", path.display()),
            held: Held::NewFile(path, AtomicBool::new(false)),
        }
    }

    /// Writes `key` to the new file `path` (see [`FileRoot::new_file`]).
    fn write(path: &Path, key: &MasterKeyBytes) -> Result<(), KmsError> {
        use std::io::Write;
        let io = |what: &str, e: std::io::Error| KmsError::Io {
            kind: e.kind(),
            reason: format!("cannot {what} {}: {e}", path.display()),
        };
        let mut text = Zeroizing::new([0u8; 2 * MASTER_KEY_LEN + 1]);
        hex::encode_to_slice(key.as_slice(), &mut text[..2 * MASTER_KEY_LEN]).map_err(|e| {
            KmsError::Internal {
                reason: format!("hex: {e}"),
            }
        })?;
        text[2 * MASTER_KEY_LEN] = b'\n';
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = match options.open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(KmsError::InvalidArgument {
                    what: "master key file",
                    reason: format!("{} exists; refusing to overwrite it", path.display()),
                })
            }
            Err(e) => return Err(io("create", e)),
        };
        let parent = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        let written = file
            .write_all(text.as_slice())
            .and_then(|()| file.sync_all())
            .map_err(|e| io("write", e))
            .and_then(|()| {
                std::fs::File::open(parent)
                    .and_then(|dir| dir.sync_all())
                    .map_err(|e| io("fsync the directory of", e))
            });
        if written.is_err() {
            // The file this call created holds the key, perhaps in part:
            // it goes, so no key is left in clear by a move that failed.
            FileRoot::remove(path);
        }
        written
    }

    /// Removes the key file `path` this root wrote, and fsyncs its
    /// directory so the removal survives a power loss. Best effort: a
    /// failure leaves the file (the move's docs tell the operator to
    /// check for it).
    fn remove(path: &Path) {
        if std::fs::remove_file(path).is_ok() {
            let parent = match path.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => parent,
                _ => Path::new("."),
            };
            let _ = std::fs::File::open(parent).and_then(|dir| dir.sync_all());
        }
    }
}

impl fmt::Debug for FileRoot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileRoot")
            .field("described", &self.described)
            .finish_non_exhaustive()
    }
}

impl MasterKeyRoot for FileRoot {
    fn kind(&self) -> RootKind {
        RootKind::File
    }

    fn describe(&self) -> String {
        self.described.clone()
    }

    fn wrap(&self, _store: &StoreId, key: &MasterKeyBytes) -> Result<Option<WrappedKey>, KmsError> {
        use subtle::ConstantTimeEq;
        match &self.held {
            Held::Key(own) if bool::from(own.ct_eq(key.as_slice())) => Ok(None),
            Held::Key(_) => Err(KmsError::InvalidArgument {
                what: "master key",
                reason: format!("a file root holds its own key ({})", self.described),
            }),
            Held::NewFile(path, written) => {
                FileRoot::write(path, key)?;
                // Read only by `discard`, on this thread or after the
                // caller's own synchronisation: nothing to order with.
                written.store(true, Ordering::Relaxed);
                Ok(None)
            }
        }
    }

    fn unwrap(
        &self,
        _store: &StoreId,
        _wrapped: Option<&WrappedKey>,
    ) -> Result<MasterKeyBytes, KmsError> {
        match &self.held {
            Held::Key(key) => Ok(Zeroizing::new(**key)),
            Held::NewFile(..) => Err(KmsError::Root {
                root: self.described.clone(),
                reason: "a new key file holds no key until a store moves to it".to_owned(),
            }),
        }
    }

    fn discard(&self, _store: &StoreId) {
        if let Held::NewFile(path, written) = &self.held {
            // Ordering as in `wrap`.
            if written.swap(false, Ordering::Relaxed) {
                FileRoot::remove(path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_their_names() {
        for kind in [RootKind::File, RootKind::Pkcs11, RootKind::AwsKms] {
            assert_eq!(RootKind::from_name(kind.as_str()), Some(kind));
        }
        assert_eq!(RootKind::from_name("hsm"), None);
    }

    #[test]
    fn store_ids_are_random_and_read_back() {
        let (a, b) = (StoreId::generate().unwrap(), StoreId::generate().unwrap());
        assert_ne!(a, b);
        assert_eq!(StoreId::from_hex(&a.to_string()), Some(a));
        assert_eq!(StoreId::from_hex("00"), None);
    }

    #[test]
    fn a_file_root_wraps_only_its_own_key() {
        let root = FileRoot::new(Zeroizing::new([7; 32]), "mk");
        let id = StoreId::generate().unwrap();
        assert_eq!(root.wrap(&id, &Zeroizing::new([7; 32])).unwrap(), None);
        assert!(matches!(
            root.wrap(&id, &Zeroizing::new([8; 32])),
            Err(KmsError::InvalidArgument { .. })
        ));
        assert_eq!(*root.unwrap(&id, None).unwrap(), [7; 32]);
        assert!(!format!("{root:?}").contains('7'));
    }

    #[test]
    fn a_new_file_root_writes_its_file_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mk");
        let root = FileRoot::new_file(&path);
        let id = StoreId::generate().unwrap();
        assert!(matches!(root.unwrap(&id, None), Err(KmsError::Root { .. })));
        assert_eq!(root.wrap(&id, &Zeroizing::new([0xab; 32])).unwrap(), None);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{}\n", "ab".repeat(32))
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(matches!(
            root.wrap(&id, &Zeroizing::new([1; 32])),
            Err(KmsError::InvalidArgument { .. })
        ));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{}\n", "ab".repeat(32)),
            "never overwritten"
        );
    }
}
