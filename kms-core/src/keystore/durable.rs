//! The durable keystore's file: one envelope sealed under the master key,
//! holding a snapshot of every key and version, replaced atomically on each
//! mutation.
//!
//! Write protocol (each mutation is durable when it returns): write
//! `keystore.kms.tmp`, fsync it, rename it over `keystore.kms`, fsync the
//! directory. A crash leaves either the old file or the new one, never a
//! mix; a stale `.tmp` is ignored and overwritten. Opening reads and
//! authenticates the file and writes nothing, so a wrong master key
//! changes nothing on disk.
//!
//! Snapshot plaintext (in a `Zeroizing` buffer; every integer big-endian):
//!
//! ```text
//! u32 key count
//! per key:   u8 id length, id (text form of version 1), u32 version count
//! per version: 32-byte seed, u64 seconds and u32 nanoseconds since the
//!              epoch, u8 origin (0 generated, 1 imported); if imported:
//!              u8 length + source key id, u8 length + sealing key `id@vN`
//! ```

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zeroize::Zeroizing;

use crate::bytes::Reader;
use crate::error::KmsError;
use crate::key_id::KeyId;
use crate::keystore::Origin;
use crate::seal::{Envelope, SealKey};

/// The store's file name inside its directory.
pub const STORE_FILE: &str = "keystore.kms";
const TMP_FILE: &str = "keystore.kms.tmp";
/// Associated data of the store's envelope.
const STORE_AAD: &[u8] = b"kms.keystore.v1";

/// One version as stored: seed, creation time, origin.
pub(crate) struct StoredVersion {
    pub(crate) seed: Zeroizing<[u8; 32]>,
    pub(crate) created_at: SystemTime,
    pub(crate) origin: Origin,
}

/// One key as stored.
pub(crate) struct StoredKey {
    pub(crate) id: KeyId,
    pub(crate) versions: Vec<StoredVersion>,
}

/// Where the store lives and the key it is sealed under. `lock` serialises
/// mutations: it is taken before any keystore lock and released after the
/// in-memory update, so the file and memory change in the same order.
pub(crate) struct Durable {
    dir: PathBuf,
    master: SealKey,
    pub(crate) lock: Mutex<()>,
}

impl Durable {
    /// Opens the store in `dir` (creating the directory and an empty store
    /// if there is none) and returns its keys.
    ///
    /// # Errors
    /// [`KmsError::Seal`] if the file is not an envelope, is sealed under
    /// another key (`WrongKey`), or does not authenticate under `master`
    /// (`Authentication`: a wrong master key or a corrupt file);
    /// [`KmsError::Internal`] for I/O errors or a snapshot that does not
    /// decode.
    pub(crate) fn open(dir: &Path, master: SealKey) -> Result<(Durable, Vec<StoredKey>), KmsError> {
        fs::create_dir_all(dir).map_err(|e| io("create the store directory", dir, &e))?;
        let path = dir.join(STORE_FILE);
        let (keys, master, fresh) = match fs::read(&path) {
            Ok(bytes) => {
                let envelope = Envelope::from_bytes(&bytes)?;
                let plaintext = master.open(STORE_AAD, &envelope)?;
                let keys = decode(&plaintext)?;
                // Continue the count, so each write has a newer counter.
                let counter = envelope.header.counter.max(master.counter());
                (keys, master.with_counter(counter), false)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Vec::new(), master, true),
            Err(e) => return Err(io("read the store", &path, &e)),
        };
        let durable = Durable {
            dir: dir.to_owned(),
            master,
            lock: Mutex::new(()),
        };
        if fresh {
            durable.write(&[])?;
        }
        Ok((durable, keys))
    }

    /// Replaces the store with `keys`, durably (see the module docs).
    /// Call with `lock` held.
    ///
    /// # Errors
    /// [`KmsError::Internal`] for I/O errors (nothing in memory must change
    /// then); [`KmsError::Seal`] if sealing fails.
    pub(crate) fn write(&self, keys: &[StoredKey]) -> Result<(), KmsError> {
        let plaintext = encode(keys)?;
        let envelope = self.master.seal(STORE_AAD, &plaintext)?;
        let tmp = self.dir.join(TMP_FILE);
        let path = self.dir.join(STORE_FILE);
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(|e| io("create", &tmp, &e))?;
        file.write_all(&envelope.to_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| io("write and fsync", &tmp, &e))?;
        drop(file);
        fs::rename(&tmp, &path).map_err(|e| io("rename over", &path, &e))?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io("fsync the directory", &self.dir, &e))?;
        Ok(())
    }
}

fn io(what: &str, path: &Path, e: &std::io::Error) -> KmsError {
    KmsError::Internal {
        reason: format!("keystore: cannot {what} {}: {e}", path.display()),
    }
}

fn encode(keys: &[StoredKey]) -> Result<Zeroizing<Vec<u8>>, KmsError> {
    let too_many = || KmsError::Internal {
        reason: "keystore: too many keys or versions to store".to_owned(),
    };
    let mut out = Zeroizing::new(Vec::with_capacity(
        4 + keys
            .iter()
            .map(|k| 96 + 44 * k.versions.len())
            .sum::<usize>(),
    ));
    out.extend_from_slice(
        &u32::try_from(keys.len())
            .map_err(|_| too_many())?
            .to_be_bytes(),
    );
    for key in keys {
        let id = key.id.to_string();
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
    Ok(out)
}

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
    let mut keys = Vec::new();
    for _ in 0..count {
        let id: KeyId = text(&mut r, "key id")?.parse().map_err(|_| bad("key id"))?;
        let versions = r.u32().ok_or_else(|| bad("version count"))?;
        let mut stored = Vec::new();
        for _ in 0..versions {
            let seed = Zeroizing::new(r.take::<32>().ok_or_else(|| bad("seed"))?);
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
