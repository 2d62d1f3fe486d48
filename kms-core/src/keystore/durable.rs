//! [`Durable`]: a keystore's sealed records over a [`Storage`] (layouts in
//! `records.rs`).
//!
//! * **A write costs one record's worth:** creating a key writes its
//!   version 1, its head and the index; a rotation writes the new version
//!   and the key's head. Each mutation is one atomic, durable
//!   [`Storage::commit`], made before memory changes; if it fails, the
//!   call fails and nothing changed.
//! * **Sealed sequences:** each key has a sequence, +1 on every write to
//!   it, sealed into its head; each version is sealed with the sequence it
//!   was written at, and the index (the list of keys, written only when a
//!   key is created) with its own. A record opens only under its own name
//!   and sequence, so on open a record moved to another name, replaced by
//!   an older copy, dropped (a version below the head, a key's head, a key
//!   in the index) or added (a record of no key in the index, a version
//!   above the head) is refused ([`KmsError::StoreCorrupt`]), never
//!   silently loaded. Not detected locally: rolling one whole key back to
//!   an earlier authentic state (its head and its newest versions
//!   together), or the whole store back to an earlier copy; that needs a
//!   sequence held outside the store.
//! * **Master keys:** records are sealed under the keyring's newest key
//!   and open under the version their envelope names, so a store half
//!   re-sealed by [`Durable::rewrap`] (a crash midway) opens with the
//!   keyring, and finishing the rewrap is running it again.
//!
//! Lock order: [`Durable::begin`] (the mutation lock, which owns the
//! sequences) is taken before any keystore lock and held until memory is
//! updated, so the storage and memory see mutations in the same order.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use uuid::Uuid;
use zeroize::Zeroizing;

use super::records::{
    self, aad, decode_head, decode_index, encode_head, encode_index, encode_version, head_name,
    parse_value, read_version, version_name, Name, StoredKey, StoredVersion, INDEX,
};
use super::KeyVersion;
use crate::bytes::Reader;
use crate::error::KmsError;
use crate::key_id::KeyId;
use crate::seal::Keyring;
use crate::storage::{RecordWrite, Storage};

/// Records re-sealed per commit by [`Durable::rewrap`]: a crash loses at
/// most one batch of work, never a record.
const REWRAP_BATCH: usize = 64;

/// What [`crate::Keystore::rewrap`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rewrapped {
    /// Records in the store (counts).
    pub records: usize,
    /// Records re-sealed under the newest master key by this call; the
    /// rest already were.
    pub resealed: usize,
}

/// The sequences of the records as last committed.
pub(crate) struct Sequences {
    index: u64,
    keys: HashMap<Uuid, u64>,
}

/// A keystore's records in a storage, sealed under a keyring.
pub(crate) struct Durable {
    storage: Box<dyn Storage>,
    keyring: Keyring,
    /// The mutation lock: held across a whole mutation.
    sequences: Mutex<Sequences>,
    /// How errors name the store: its directory, or the storage's `Debug`.
    label: String,
}

/// What [`Durable::open`] found.
pub(crate) enum Opened {
    /// A store, and its keys.
    Store(Durable, Vec<StoredKey>),
    /// No store (no index record): the storage and keyring, handed back.
    Empty(Box<dyn Storage>, Keyring),
}

impl Durable {
    /// Starts a store in `storage`: commits an empty index.
    ///
    /// # Errors
    /// [`KmsError::StoreExists`] if `storage` already holds a store
    /// (nothing is written); the errors of [`Storage`];
    /// [`KmsError::Seal`] if sealing fails.
    pub(crate) fn create(
        storage: Box<dyn Storage>,
        keyring: Keyring,
        label: String,
    ) -> Result<Durable, KmsError> {
        if storage.load()?.iter().any(|(name, _)| name == INDEX) {
            return Err(KmsError::StoreExists { dir: label });
        }
        let durable = Durable {
            storage,
            keyring,
            sequences: Mutex::new(Sequences {
                index: 0,
                keys: HashMap::new(),
            }),
            label,
        };
        let value = durable.seal(INDEX, 1, &encode_index(std::iter::empty()))?;
        durable.storage.commit(&[RecordWrite {
            name: INDEX,
            value: &value,
        }])?;
        durable.begin().index = 1;
        Ok(durable)
    }

    /// Starts a store in `storage` holding `keys` (a migration), in one
    /// commit.
    ///
    /// # Errors
    /// As [`Durable::create`].
    pub(crate) fn import(
        storage: Box<dyn Storage>,
        keyring: Keyring,
        label: String,
        keys: &[StoredKey],
    ) -> Result<Durable, KmsError> {
        let durable = Durable {
            storage,
            keyring,
            sequences: Mutex::new(Sequences {
                index: 0,
                keys: HashMap::new(),
            }),
            label,
        };
        let mut records: Vec<(String, Vec<u8>)> = Vec::new();
        for key in keys {
            let mut seq = 0;
            for (i, v) in key.versions.iter().enumerate() {
                seq += 1;
                let version = u32::try_from(i + 1).map_err(|_| too_many())?;
                let name = version_name(&key.id, version);
                let plaintext = encode_version(&v.seed, v.created_at, &v.origin)?;
                records.push((name.clone(), durable.seal(&name, seq, &plaintext)?));
            }
            let head = u32::try_from(key.versions.len()).map_err(|_| too_many())?;
            let name = head_name(&key.id);
            records.push((
                name.clone(),
                durable.seal(&name, seq, &encode_head(&key.id, head))?,
            ));
        }
        let index = encode_index(keys.iter().map(|k| &k.id));
        records.push((INDEX.to_owned(), durable.seal(INDEX, 1, &index)?));
        let writes: Vec<RecordWrite<'_>> = records
            .iter()
            .map(|(name, value)| RecordWrite { name, value })
            .collect();
        durable.storage.commit(&writes)?;
        {
            let mut sequences = durable.begin();
            sequences.index = 1;
            for key in keys {
                sequences
                    .keys
                    .insert(key.id.uuid(), key.versions.len() as u64);
            }
        }
        Ok(durable)
    }

    /// Loads and checks the store in `storage` (module docs).
    ///
    /// # Errors
    /// [`KmsError::Seal`] if the index is sealed under a key the keyring
    /// lacks (`WrongKey`) or does not authenticate under it
    /// (`Authentication`: a wrong master key, or a damaged index);
    /// [`KmsError::StoreCorrupt`] if any other record does not open, does
    /// not decode, is missing, out of order or left over; the errors of
    /// [`Storage::load`].
    pub(crate) fn open(
        storage: Box<dyn Storage>,
        keyring: Keyring,
        label: String,
    ) -> Result<Opened, KmsError> {
        let mut loaded: HashMap<String, Vec<u8>> = storage.load()?.into_iter().collect();
        let Some(index) = loaded.remove(INDEX) else {
            return Ok(Opened::Empty(storage, keyring));
        };
        let corrupt = |reason: String| KmsError::StoreCorrupt {
            store: label.clone(),
            reason,
        };
        // The newest counter seen per master-key version, to continue.
        let mut counters: HashMap<u32, u64> = HashMap::new();
        let mut open = |name: &str, bytes: &[u8]| {
            let (seq, envelope) = parse_value(bytes)?;
            let header = &envelope.header;
            let newest = counters.entry(header.key_version).or_default();
            *newest = (*newest).max(header.counter);
            keyring
                .open(&aad(name, seq), &envelope)
                .map(|plaintext| (seq, plaintext))
        };
        // The index's errors are the master key's: passed on as they are.
        let (index_seq, index) = open(INDEX, &index)?;
        let ids =
            decode_index(&index).ok_or_else(|| corrupt("the index does not decode".into()))?;
        let mut sequences = Sequences {
            index: index_seq,
            keys: HashMap::with_capacity(ids.len()),
        };
        let mut keys = Vec::with_capacity(ids.len());
        for id in ids {
            let name = head_name(&id);
            let bytes = loaded.remove(&name).ok_or_else(|| {
                corrupt(format!("key {id} is in the index but its head is missing"))
            })?;
            let (key_seq, head) = open(&name, &bytes)
                .map_err(|e| corrupt(format!("record {name} does not open: {e}")))?;
            let head = match decode_head(&head) {
                Some((head_id, head)) if head_id == id && head >= 1 => head,
                _ => return Err(corrupt(format!("record {name} does not decode"))),
            };
            if sequences.keys.insert(id.uuid(), key_seq).is_some() {
                return Err(corrupt(format!("key {id} is in the index twice")));
            }
            // Sized once, never grown: it holds seeds. An authentic head
            // has a record for each version; one that claims more runs out
            // of records before it outgrows the buffer.
            let capacity = usize::try_from(head).map_or(usize::MAX, |h| h.min(loaded.len()));
            let mut versions: Vec<StoredVersion> = Vec::with_capacity(capacity);
            let mut previous = 0;
            for version in 1..=head {
                let name = version_name(&id, version);
                let bytes = loaded.remove(&name).ok_or_else(|| {
                    corrupt(format!(
                        "version {version} of key {id} (head v{head}) is missing"
                    ))
                })?;
                let (seq, plaintext) = open(&name, &bytes)
                    .map_err(|e| corrupt(format!("record {name} does not open: {e}")))?;
                if seq <= previous || seq > key_seq {
                    return Err(corrupt(format!(
                        "record {name} is out of sequence (written at {seq}, after {previous}, key at {key_seq})"
                    )));
                }
                previous = seq;
                let mut r = Reader::new(&plaintext);
                let stored = read_version(&mut r)
                    .filter(|_| r.rest().is_empty())
                    .ok_or_else(|| corrupt(format!("record {name} does not decode")))?;
                if versions.len() == versions.capacity() {
                    return Err(corrupt(format!("key {id} has more versions than records")));
                }
                versions.push(stored);
            }
            keys.push(StoredKey { id, versions });
        }
        if let Some(name) = loaded.keys().next() {
            let what = match records::parse_name(name) {
                Some(Name::Version(..) | Name::Head(_)) => {
                    "belongs to no version of a key in the index"
                }
                _ => "is not a record of this format",
            };
            return Err(corrupt(format!("record {name} {what}")));
        }
        let keyring = keyring.continue_counters(|v| counters.get(&v).copied().unwrap_or(0));
        Ok(Opened::Store(
            Durable {
                storage,
                keyring,
                sequences: Mutex::new(sequences),
                label,
            },
            keys,
        ))
    }

    /// Takes the mutation lock. A poisoned lock still holds the sequences
    /// of the last commit: they change only after a commit succeeds.
    pub(crate) fn begin(&self) -> MutexGuard<'_, Sequences> {
        self.sequences
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// `plaintext` sealed as record `name` at `seq`, as the record's bytes.
    fn seal(&self, name: &str, seq: u64, plaintext: &[u8]) -> Result<Vec<u8>, KmsError> {
        let envelope = self.keyring.newest().seal(&aad(name, seq), plaintext)?;
        Ok(records::value(seq, &envelope))
    }

    /// Writes a new key `id` whose version 1 is `version`, and the index
    /// listing `all` (every key, the new one included). Call with
    /// `sequences` from [`Durable::begin`].
    ///
    /// # Errors
    /// The errors of [`Storage::commit`]; [`KmsError::Seal`].
    pub(crate) fn add_key(
        &self,
        sequences: &mut Sequences,
        id: &KeyId,
        version: &KeyVersion,
        all: &[KeyId],
    ) -> Result<(), KmsError> {
        let index_seq = sequences.index + 1;
        let v1 = version_name(id, 1);
        let head = head_name(id);
        let values = [
            self.seal(&v1, 1, &plaintext_of(version)?)?,
            self.seal(&head, 1, &encode_head(id, 1))?,
            self.seal(INDEX, index_seq, &encode_index(all.iter()))?,
        ];
        self.storage.commit(&[
            RecordWrite {
                name: &v1,
                value: &values[0],
            },
            RecordWrite {
                name: &head,
                value: &values[1],
            },
            RecordWrite {
                name: INDEX,
                value: &values[2],
            },
        ])?;
        sequences.index = index_seq;
        sequences.keys.insert(id.uuid(), 1);
        Ok(())
    }

    /// Writes `version` as the new head of key `id`. Call with `sequences`
    /// from [`Durable::begin`].
    ///
    /// # Errors
    /// The errors of [`Storage::commit`]; [`KmsError::Seal`];
    /// [`KmsError::Internal`] if the key is not in the store.
    pub(crate) fn add_version(
        &self,
        sequences: &mut Sequences,
        id: &KeyId,
        version: &KeyVersion,
    ) -> Result<(), KmsError> {
        let seq = sequences
            .keys
            .get(&id.uuid())
            .copied()
            .ok_or_else(|| KmsError::Internal {
                reason: format!("keystore: key {id} is not in the store"),
            })?
            + 1;
        let name = version_name(id, version.info.version);
        let head = head_name(id);
        let values = [
            self.seal(&name, seq, &plaintext_of(version)?)?,
            self.seal(&head, seq, &encode_head(id, version.info.version))?,
        ];
        self.storage.commit(&[
            RecordWrite {
                name: &name,
                value: &values[0],
            },
            RecordWrite {
                name: &head,
                value: &values[1],
            },
        ])?;
        sequences.keys.insert(id.uuid(), seq);
        Ok(())
    }

    /// Re-seals every record not sealed under the keyring's newest key,
    /// [`REWRAP_BATCH`] records per commit; names and sequences stay, so a
    /// crash midway leaves a store that opens with the keyring. Call with
    /// the mutation lock held.
    ///
    /// # Errors
    /// [`KmsError::StoreCorrupt`] if a record does not open; the errors of
    /// [`Storage`]; [`KmsError::Seal`].
    pub(crate) fn rewrap(&self, _sequences: &mut Sequences) -> Result<Rewrapped, KmsError> {
        let newest = self.keyring.newest().version();
        let loaded = self.storage.load()?;
        let records = loaded.len();
        let mut resealed = 0;
        let stale: Vec<&(String, Vec<u8>)> = loaded
            .iter()
            .filter(|(_, bytes)| {
                parse_value(bytes).map_or(true, |(_, e)| e.header.key_version != newest)
            })
            .collect();
        for batch in stale.chunks(REWRAP_BATCH) {
            let mut values = Vec::with_capacity(batch.len());
            for (name, bytes) in batch {
                let corrupt = |e: &dyn std::fmt::Display| KmsError::StoreCorrupt {
                    store: self.label.clone(),
                    reason: format!("record {name} does not open: {e}"),
                };
                let (seq, envelope) = parse_value(bytes).map_err(|e| corrupt(&e))?;
                let plaintext = self
                    .keyring
                    .open(&aad(name, seq), &envelope)
                    .map_err(|e| corrupt(&e))?;
                values.push(self.seal(name, seq, &plaintext)?);
            }
            let writes: Vec<RecordWrite<'_>> = batch
                .iter()
                .zip(&values)
                .map(|((name, _), value)| RecordWrite { name, value })
                .collect();
            self.storage.commit(&writes)?;
            resealed += batch.len();
        }
        Ok(Rewrapped { records, resealed })
    }
}

/// A version's record plaintext; the seed copy is wiped on drop.
fn plaintext_of(version: &KeyVersion) -> Result<Zeroizing<Vec<u8>>, KmsError> {
    let seed = Zeroizing::new(version.signing_key.to_bytes());
    encode_version(&seed, version.info.created_at, &version.info.origin)
}

fn too_many() -> KmsError {
    KmsError::Internal {
        reason: "keystore: too many versions to store".to_owned(),
    }
}
