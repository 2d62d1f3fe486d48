//! [`Durable`]: a keystore's sealed records over a [`Storage`] (layouts in
//! `records.rs`).
//!
//! * **A write costs one record's worth:** creating a key writes its
//!   version 1, its head and the index (a count of keys); a rotation
//!   writes the new version and the key's head; a policy change the head.
//!   Trimming and destroying write the head and the retired record and
//!   remove the records they destroy (after which the file storage purges
//!   its database: a copy of the whole store). Each mutation is one
//!   atomic, durable [`Storage::commit`], made before memory changes; if
//!   it fails, the call fails and nothing changed in memory. A failed
//!   commit may still have landed (a storage cannot always tell), so after
//!   one the store refuses every further mutation until it is reopened,
//!   which reads what did land; a shared storage ([`Storage::is_shared`])
//!   reports what landed through its changes instead, so writes go on.
//! * **Sealed sequences:** each key has a sequence, +1 on every write to
//!   it, sealed into its head; each version is sealed with the sequence it
//!   was written at, and the index with its own. Each head also carries
//!   its creation ordinal; the heads' ordinals must be exactly
//!   `1..=count`. A record opens only under its own name and sequence, so
//!   on open a record moved to another name, replaced by an older copy,
//!   dropped (a version below the head, a key's head) or added (a version
//!   above the head, a record of no key) is refused
//!   ([`KmsError::StoreCorrupt`]), never silently loaded. Not detected
//!   locally: rolling one whole key back to an earlier authentic state
//!   (its head and newest versions together), dropping the newest keys
//!   together with an older copy of the index, or the whole store back to
//!   an earlier copy; that needs a sequence held outside the store.
//! * **Signing pointers:** one record per `(tenant, purpose)` that has
//!   one, naming the key that signs for it; written when the purpose
//!   gets its signing key (with the key, when the key is new: one commit;
//!   with the named key's head rewritten at its next sequence, when the
//!   key exists, so a shared store's commit compares that head too) and
//!   again, at the next sequence, only when that key is destroyed.
//!   On open each must name a key of the store, under the tenant and
//!   purpose of its own name; on refresh it may name a key not yet
//!   reported (a conflict's fetch reads only the groups the commit
//!   wrote), never one held under other names; it may not go back. They are not counted in the index: a pointer dropped (or
//!   replaced by its older copy) is not detected on open, and
//!   [`crate::Keystore::signing_key`] then names the purpose's first live
//!   key again.
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
    self, aad, decode_head, decode_index, decode_retired, decode_signing, encode_head,
    encode_index, encode_retired, encode_signing, encode_version, head_name, parse_name,
    parse_value, read_version, retired_name, signing_name, version_name, KeyState, Name,
    RetiredVersion, StoreId, StoredKey, StoredVersion, INDEX,
};
use super::KeyVersion;
use crate::bytes::Reader;
use crate::error::KmsError;
use crate::key_id::KeyId;
use crate::seal::{Keyring, SealError};
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
    /// The index's sequence.
    index: u64,
    /// Keys created (the index's count; the newest head's ordinal).
    count: u64,
    /// Each key's sequence and creation ordinal.
    keys: HashMap<Uuid, (u64, u64)>,
    /// Each signing pointer's name, its sequence, and the UUID of the key
    /// it names.
    signing: HashMap<String, (u64, Uuid)>,
    /// A commit failed: what landed is unknown until the store is reopened.
    failed: bool,
}

/// A record sealed at its next sequence, not yet committed: a key's head
/// ([`Durable::next_head`]; `S` the key's sequence and creation ordinal)
/// or a signing pointer ([`Durable::next_pointer`]; `S` its sequence).
struct NextRecord<S> {
    name: String,
    value: Vec<u8>,
    /// What [`Sequences`] holds for the record once it lands.
    seq: S,
}

/// A keystore's records in a storage, sealed under a keyring.
pub(crate) struct Durable {
    storage: Box<dyn Storage>,
    /// The store's id, bound into every record but the index.
    store: StoreId,
    keyring: Keyring,
    /// The mutation lock: held across a whole mutation.
    sequences: Mutex<Sequences>,
    /// How errors name the store: its directory, or the storage's `Debug`.
    label: String,
}

/// What a store holds, as loaded: its keys and its signing pointers.
#[derive(Default)]
pub(crate) struct Loaded {
    pub(crate) keys: Vec<StoredKey>,
    /// The key id (version 1) each signing pointer names.
    pub(crate) signing: Vec<KeyId>,
}

/// What [`Durable::open`] found.
pub(crate) enum Opened {
    /// A store (boxed: the variants' sizes differ), and what it holds.
    Store(Box<Durable>, Loaded),
    /// No store (no index record): the storage and keyring, handed back.
    Empty(Box<dyn Storage>, Keyring),
}

impl Opened {
    /// The store, where one was just written.
    ///
    /// # Errors
    /// [`KmsError::StoreCorrupt`] if there is none: the storage did not
    /// keep the commit that made it.
    pub(crate) fn written(self, label: &str) -> Result<(Durable, Loaded), KmsError> {
        match self {
            Opened::Store(durable, keys) => Ok((*durable, keys)),
            Opened::Empty(..) => Err(store_corrupt(
                label,
                "the storage holds no index after the commit that wrote it".to_owned(),
            )),
        }
    }
}

impl Durable {
    /// The store's identity, as its index holds it.
    pub(crate) fn store_id(&self) -> StoreId {
        self.store
    }

    /// The records of a new store holding `keys` (none, or a migration's),
    /// sealed under the keyring's newest key: per key its versions at
    /// sequences `1..=n` and its head at `n`, ordinals in order, and the
    /// index at sequence 1.
    ///
    /// # Errors
    /// [`KmsError::Seal`] if sealing fails; [`KmsError::Internal`] for a
    /// key with more than 2^32 - 1 versions.
    pub(crate) fn initial_records(
        keyring: &Keyring,
        store: StoreId,
        keys: &[StoredKey],
    ) -> Result<Vec<(String, Vec<u8>)>, KmsError> {
        let seal = |name: &str, seq: u64, plaintext: &[u8]| {
            seal_with(keyring, &store, name, seq, plaintext)
        };
        let mut records = Vec::new();
        for (ordinal, key) in (1u64..).zip(keys) {
            let mut seq = 0;
            let first = key.state.min_available_version;
            for (version, v) in (first..).zip(&key.versions) {
                seq += 1;
                let name = version_name(&key.id, version);
                let plaintext = encode_version(&*v.seed, v.created_at, &v.origin)?;
                records.push((name.clone(), seal(&name, seq, &plaintext)?));
            }
            if !key.retired.is_empty() {
                seq += 1;
                let name = retired_name(&key.id);
                records.push((
                    name.clone(),
                    seal(&name, seq, &encode_retired(&key.retired)?)?,
                ));
            }
            let head =
                u32::try_from(key.retired.len() + key.versions.len()).map_err(|_| too_many())?;
            let name = head_name(&key.id);
            let value = seal(&name, seq, &encode_head(&key.id, head, ordinal, &key.state))?;
            records.push((name, value));
        }
        let count = keys.len() as u64;
        records.push((
            INDEX.to_owned(),
            seal(INDEX, 1, &encode_index(&store, count))?,
        ));
        Ok(records)
    }

    /// Starts an empty store in `storage` (one commit) and opens it.
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
        let records = Durable::initial_records(&keyring, StoreId::generate()?, &[])?;
        commit_all(storage.as_ref(), &records, &[])?;
        let (durable, _) = Durable::open(storage, keyring, label.clone())?.written(&label)?;
        Ok(durable)
    }

    /// Opens the store in `storage`, or starts an empty one with identity
    /// `store` there if it holds none; if another writer of a shared storage started one
    /// meanwhile (the start's commit answers [`KmsError::Conflict`]),
    /// opens that one.
    ///
    /// # Errors
    /// As [`Durable::open`] and [`Durable::create`].
    pub(crate) fn open_or_create(
        storage: Box<dyn Storage>,
        keyring: Keyring,
        store: StoreId,
        label: String,
    ) -> Result<(Durable, Loaded), KmsError> {
        match Durable::open(storage, keyring, label.clone())? {
            Opened::Store(durable, keys) => Ok((*durable, keys)),
            Opened::Empty(storage, keyring) => {
                let records = Durable::initial_records(&keyring, store, &[])?;
                match commit_all(storage.as_ref(), &records, &[]) {
                    Ok(()) | Err(KmsError::Conflict { .. }) => {}
                    Err(e) => return Err(e),
                }
                Durable::open(storage, keyring, label.clone())?.written(&label)
            }
        }
    }

    /// Loads and checks the store in `storage` (module docs).
    ///
    /// # Errors
    /// [`KmsError::Seal`] if a record is sealed under a key the keyring
    /// lacks (`WrongKey`: a wrong master key, or a keyring without the
    /// version an unfinished rewrap still needs), or the index does not
    /// authenticate (`Authentication`: a wrong master key, or a damaged
    /// index); [`KmsError::StoreCorrupt`] if any other record does not
    /// open, does not decode, is missing, out of sequence or left over;
    /// the errors of [`Storage::load`].
    pub(crate) fn open(
        storage: Box<dyn Storage>,
        keyring: Keyring,
        label: String,
    ) -> Result<Opened, KmsError> {
        let mut loaded: HashMap<String, Vec<u8>> = storage.load()?.into_iter().collect();
        let Some(index) = loaded.remove(INDEX) else {
            return Ok(Opened::Empty(storage, keyring));
        };
        let mut loader = Loader {
            keyring: &keyring,
            label: &label,
            counters: HashMap::new(),
        };
        let (index_seq, index) = loader.open(&StoreId::NONE, INDEX, &index)?;
        let (store, count) = decode_index(&index)
            .ok_or_else(|| loader.corrupt("the index does not decode".into()))?;
        let head_names = head_names(&loaded);
        let mut sequences = Sequences {
            index: index_seq,
            count,
            keys: HashMap::with_capacity(head_names.len()),
            signing: HashMap::new(),
            failed: false,
        };
        // Keys by ordinal, so they load in creation order.
        let mut keys: Vec<(u64, StoredKey)> = Vec::with_capacity(head_names.len());
        for name in head_names {
            let (key, key_seq, ordinal) = loader.load_key(&store, &mut loaded, &name, count)?;
            sequences.keys.insert(key.id.uuid(), (key_seq, ordinal));
            keys.push((ordinal, key));
        }
        let signing =
            loader.load_signing(&store, &mut loaded, Some(&sequences.keys), &HashMap::new())?;
        sequences.signing.extend(pointer_seqs(&signing));
        let corrupt = |reason: String| loader.corrupt(reason);
        keys.sort_unstable_by_key(|(ordinal, _)| *ordinal);
        // Ordinals in 1..=count, sorted: all there, once each, iff they
        // are exactly 1, 2, ..., count.
        if let Some(gap) = (1u64..).zip(&keys).find(|(want, (got, _))| want != got) {
            return Err(corrupt(format!(
                "no key, or two, has creation ordinal {}",
                gap.0
            )));
        }
        if keys.len() as u64 != count {
            return Err(corrupt(format!(
                "the index counts {count} keys; {} have a head",
                keys.len()
            )));
        }
        if let Some(name) = loaded.keys().next() {
            let what = match parse_name(name) {
                Some(Name::Version(..) | Name::Head(_) | Name::Retired(_)) => {
                    "belongs to no version of a key"
                }
                _ => "is not a record of this format",
            };
            return Err(corrupt(format!("record {name} {what}")));
        }
        let counters = loader.counters;
        let keyring = keyring.continue_counters(|v| counters.get(&v).copied().unwrap_or(0));
        Ok(Opened::Store(
            Box::new(Durable {
                storage,
                store,
                keyring,
                sequences: Mutex::new(sequences),
                label,
            }),
            Loaded {
                keys: keys.into_iter().map(|(_, key)| key).collect(),
                signing: signing.into_iter().map(|(id, _)| id).collect(),
            },
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
        seal_with(&self.keyring, &self.store, name, seq, plaintext)
    }

    /// Commits `records`, `(name, value)` pairs, and removes the records
    /// named in `removes`; after a failure, refuses to (module docs).
    fn commit<N: AsRef<str>, V: AsRef<[u8]>>(
        &self,
        sequences: &mut Sequences,
        records: &[(N, V)],
        removes: &[String],
    ) -> Result<(), KmsError> {
        if sequences.failed {
            return Err(self.refused());
        }
        let committed = commit_all(self.storage.as_ref(), records, removes);
        // A shared storage reports what landed through `changes`, so only
        // a storage with one writer stops here.
        sequences.failed = committed.is_err() && !self.storage.is_shared();
        committed
    }

    /// Whether other keystores commit to the storage too
    /// ([`Storage::is_shared`]).
    pub(crate) fn is_shared(&self) -> bool {
        self.storage.is_shared()
    }

    /// Reads what other writers changed ([`Storage::changes`]) and returns
    /// the keys they changed, each whole, checked as on open; the
    /// sequences follow. A key's sequence, its ordinal and the index's may
    /// not go back. Call with `sequences` from [`Durable::begin`] and
    /// apply the keys in memory before releasing it. If the changes do not
    /// load, the store refuses further writes until it is reopened: its
    /// storage has moved on, and memory could not follow.
    ///
    /// # Errors
    /// [`KmsError::StoreCorrupt`] if a changed record does not open, does
    /// not decode, is out of sequence, goes back, or belongs to no key;
    /// [`KmsError::Seal`] as on open; the errors of [`Storage::changes`];
    /// [`KmsError::Internal`] after an earlier failure.
    pub(crate) fn refresh(&self, sequences: &mut Sequences) -> Result<Loaded, KmsError> {
        if sequences.failed {
            return Err(self.refused());
        }
        let changes = self.storage.changes()?;
        if changes.is_empty() {
            return Ok(Loaded::default());
        }
        let loaded = self.load_changes(sequences, changes);
        sequences.failed = loaded.is_err();
        loaded
    }

    fn load_changes(
        &self,
        sequences: &mut Sequences,
        changes: Vec<(String, Vec<u8>)>,
    ) -> Result<Loaded, KmsError> {
        let mut loaded: HashMap<String, Vec<u8>> = changes.into_iter().collect();
        let mut loader = Loader {
            keyring: &self.keyring,
            label: &self.label,
            counters: HashMap::new(),
        };
        let (mut index_seq, mut count) = (sequences.index, sequences.count);
        if let Some(bytes) = loaded.remove(INDEX) {
            let (seq, index) = loader.open(&StoreId::NONE, INDEX, &bytes)?;
            let (_, n) = decode_index(&index)
                .filter(|(store, _)| *store == self.store)
                .ok_or_else(|| loader.corrupt("the index does not decode".into()))?;
            if seq < index_seq || n < count {
                return Err(loader.corrupt(format!(
                    "the index went back (sequence {seq} after {index_seq}, {n} keys after {count})"
                )));
            }
            (index_seq, count) = (seq, n);
        }
        let head_names = head_names(&loaded);
        let mut keys = Vec::with_capacity(head_names.len());
        let mut seqs = Vec::with_capacity(head_names.len());
        for name in head_names {
            let (key, seq, ordinal) = loader.load_key(&self.store, &mut loaded, &name, count)?;
            if let Some(&(known, known_ordinal)) = sequences.keys.get(&key.id.uuid()) {
                if seq < known || ordinal != known_ordinal {
                    return Err(loader.corrupt(format!(
                        "key {} went back (sequence {seq} after {known}, ordinal {ordinal} after {known_ordinal})",
                        key.id
                    )));
                }
            }
            seqs.push((key.id.uuid(), (seq, ordinal)));
            keys.push(key);
        }
        // A pointer may come before the key it names: a conflict's fetch
        // reads the groups the commit wrote, not the other writer's key.
        let signing = loader.load_signing(&self.store, &mut loaded, None, &sequences.signing)?;
        if let Some(name) = loaded.keys().next() {
            return Err(loader.corrupt(format!("changed record {name} belongs to no key")));
        }
        sequences.index = index_seq;
        sequences.count = count;
        sequences.keys.extend(seqs);
        sequences.signing.extend(pointer_seqs(&signing));
        Ok(Loaded {
            keys,
            signing: signing.into_iter().map(|(id, _)| id).collect(),
        })
    }

    /// Reads the whole store, so that a shared storage's next
    /// [`Storage::changes`] reports every group that differs from what it
    /// reported before (a record that came before the records it names).
    /// Call with the mutation lock held.
    ///
    /// # Errors
    /// The errors of [`Storage::load`].
    pub(crate) fn resync(&self) -> Result<(), KmsError> {
        self.storage.load().map(drop)
    }

    /// [`KmsError::StoreCorrupt`] for this store, for `reason`.
    pub(crate) fn corrupt(&self, reason: String) -> KmsError {
        store_corrupt(&self.label, reason)
    }

    /// Refuses further writes until the store is reopened: memory could
    /// not take what [`Durable::refresh`] loaded.
    pub(crate) fn stop_writes(sequences: &mut Sequences) {
        sequences.failed = true;
    }

    /// The error of a store that refuses writes until it is reopened.
    fn refused(&self) -> KmsError {
        KmsError::Internal {
            reason: format!(
                "keystore: an earlier write to {} failed; reopen the store to go on",
                self.label
            ),
        }
    }

    /// Writes a new key `id` whose version 1 is `version`, and the index's
    /// new count; with `signing`, the signing pointer of its tenant and
    /// purpose, naming it, in the same commit. Call with `sequences` from
    /// [`Durable::begin`].
    ///
    /// # Errors
    /// The errors of [`Storage::commit`]; [`KmsError::Seal`];
    /// [`KmsError::Internal`] after an earlier failed commit.
    pub(crate) fn add_key(
        &self,
        sequences: &mut Sequences,
        id: &KeyId,
        version: &KeyVersion,
        signing: bool,
    ) -> Result<(), KmsError> {
        let index_seq = next(sequences.index)?;
        let ordinal = next(sequences.count)?;
        let v1 = version_name(id, 1);
        let head = head_name(id);
        let mut pointer = signing
            .then(|| self.next_pointer(sequences, id))
            .transpose()?;
        let mut records = vec![
            (v1.as_str(), self.seal(&v1, 1, &plaintext_of(version)?)?),
            (
                head.as_str(),
                self.seal(&head, 1, &encode_head(id, 1, ordinal, &KeyState::new()))?,
            ),
            (
                INDEX,
                self.seal(INDEX, index_seq, &encode_index(&self.store, ordinal))?,
            ),
        ];
        if let Some(pointer) = &mut pointer {
            records.push((pointer.name.as_str(), std::mem::take(&mut pointer.value)));
        }
        self.commit(sequences, &records, &[])?;
        sequences.index = index_seq;
        sequences.count = ordinal;
        sequences.keys.insert(id.uuid(), (1, ordinal));
        if let Some(pointer) = pointer {
            sequences
                .signing
                .insert(pointer.name, (pointer.seq, id.uuid()));
        }
        Ok(())
    }

    /// Writes the signing pointer of key `id`'s tenant and purpose, naming
    /// `id` (a key of the store), at its next sequence, together with the
    /// key's head (version `head`, `state`, as memory holds them) at the
    /// key's next sequence: on a shared store the commit then lands only
    /// if neither changed since this keystore saw them, so a pointer never
    /// names a key another node has just destroyed or moved on. Call with
    /// `sequences` from [`Durable::begin`].
    ///
    /// # Errors
    /// As [`Durable::add_version`].
    pub(crate) fn add_signing(
        &self,
        sequences: &mut Sequences,
        id: &KeyId,
        head: u32,
        state: &KeyState,
    ) -> Result<(), KmsError> {
        let pointer = self.next_pointer(sequences, id)?;
        let next_head = self.next_head(sequences, id, head, state)?;
        self.commit(
            sequences,
            &[
                (pointer.name.as_str(), pointer.value),
                (next_head.name.as_str(), next_head.value),
            ],
            &[],
        )?;
        sequences
            .signing
            .insert(pointer.name, (pointer.seq, id.uuid()));
        sequences.keys.insert(id.uuid(), next_head.seq);
        Ok(())
    }

    /// Writes `version` as the new head of key `id`, whose state is
    /// `state`. Call with `sequences` from [`Durable::begin`].
    ///
    /// # Errors
    /// The errors of [`Storage::commit`]; [`KmsError::Seal`];
    /// [`KmsError::Internal`] if the key is not in the store, or after an
    /// earlier failed commit.
    pub(crate) fn add_version(
        &self,
        sequences: &mut Sequences,
        id: &KeyId,
        version: &KeyVersion,
        state: &KeyState,
    ) -> Result<(), KmsError> {
        let name = version_name(id, version.info.version);
        let plaintext = plaintext_of(version)?;
        self.update_key(
            sequences,
            id,
            version.info.version,
            state,
            Some((&name, &plaintext)),
            &[],
        )
    }

    /// Writes key `id`'s head (at version `head`) with its new `state`:
    /// a policy change. Call with `sequences` from [`Durable::begin`].
    ///
    /// # Errors
    /// As [`Durable::add_version`].
    pub(crate) fn write_state(
        &self,
        sequences: &mut Sequences,
        id: &KeyId,
        head: u32,
        state: &KeyState,
    ) -> Result<(), KmsError> {
        self.update_key(sequences, id, head, state, None, &[])
    }

    /// Retires versions of key `id` (head `head`), for a trim or a
    /// destroy: the records of the versions in `removed` are removed, and
    /// `retired` (the public parts of every version retired so far: those
    /// below `state.min_available_version`, or all once `state.destroyed`)
    /// is written as the retired record, with the key's new head
    /// (`state`), in one commit. Call with `sequences` from
    /// [`Durable::begin`].
    ///
    /// # Errors
    /// As [`Durable::add_version`].
    pub(crate) fn retire(
        &self,
        sequences: &mut Sequences,
        id: &KeyId,
        head: u32,
        state: &KeyState,
        removed: std::ops::RangeInclusive<u32>,
        retired: &[RetiredVersion],
    ) -> Result<(), KmsError> {
        let removes: Vec<String> = removed.map(|v| version_name(id, v)).collect();
        let name = retired_name(id);
        let plaintext = encode_retired(retired)?;
        self.update_key(
            sequences,
            id,
            head,
            state,
            Some((&name, &plaintext)),
            &removes,
        )
    }

    /// One write to key `id`: its head (version `head`, `state`) and `put`
    /// (a record's name and plaintext), if any, at the key's next
    /// sequence, and `removes` removed, in one commit.
    fn update_key(
        &self,
        sequences: &mut Sequences,
        id: &KeyId,
        head: u32,
        state: &KeyState,
        put: Option<(&str, &[u8])>,
        removes: &[String],
    ) -> Result<(), KmsError> {
        let next_head = self.next_head(sequences, id, head, state)?;
        let mut records = Vec::with_capacity(2);
        if let Some((name, plaintext)) = put {
            records.push((name, self.seal(name, next_head.seq.0, plaintext)?));
        }
        records.push((next_head.name.as_str(), next_head.value));
        self.commit(sequences, &records, removes)?;
        sequences.keys.insert(id.uuid(), next_head.seq);
        Ok(())
    }

    /// Key `id`'s head record (version `head`, `state`) sealed at the
    /// key's next sequence.
    ///
    /// # Errors
    /// [`KmsError::Internal`] if the key is not in the store or its
    /// sequence is exhausted; [`KmsError::Seal`].
    fn next_head(
        &self,
        sequences: &Sequences,
        id: &KeyId,
        head: u32,
        state: &KeyState,
    ) -> Result<NextRecord<(u64, u64)>, KmsError> {
        let (seq, ordinal) =
            sequences
                .keys
                .get(&id.uuid())
                .copied()
                .ok_or_else(|| KmsError::Internal {
                    reason: format!("keystore: key {id} is not in the store"),
                })?;
        let seq = next(seq)?;
        let name = head_name(id);
        let value = self.seal(&name, seq, &encode_head(id, head, ordinal, state))?;
        Ok(NextRecord {
            name,
            value,
            seq: (seq, ordinal),
        })
    }

    /// The signing pointer of key `id`'s tenant and purpose, naming `id`,
    /// sealed at the pointer's next sequence.
    ///
    /// # Errors
    /// [`KmsError::Internal`] if the pointer's sequence is exhausted;
    /// [`KmsError::Seal`].
    fn next_pointer(&self, sequences: &Sequences, id: &KeyId) -> Result<NextRecord<u64>, KmsError> {
        let name = signing_name(id);
        let seq = next(sequences.signing.get(&name).map_or(0, |(seq, _)| *seq))?;
        let value = self.seal(&name, seq, &encode_signing(id))?;
        Ok(NextRecord { name, value, seq })
    }

    /// Re-seals every record not sealed under the keyring's newest key,
    /// [`REWRAP_BATCH`] records per commit, the index last; names and
    /// sequences stay, so a crash midway leaves a store that opens with
    /// the keyring. Call with the mutation lock held.
    ///
    /// # Errors
    /// [`KmsError::StoreCorrupt`] if a record does not open; the errors of
    /// [`Storage`]; [`KmsError::Seal`]; [`KmsError::Internal`] after an
    /// earlier failed commit.
    pub(crate) fn rewrap(&self, sequences: &mut Sequences) -> Result<Rewrapped, KmsError> {
        let newest = self.keyring.newest().version();
        let loaded = self.storage.load()?;
        let records = loaded.len();
        let mut resealed = 0;
        let mut stale: Vec<&(String, Vec<u8>)> = loaded
            .iter()
            .filter(|(_, bytes)| {
                parse_value(bytes).map_or(true, |(_, e)| e.header.key_version != newest)
            })
            .collect();
        // The index last: until the rewrap is done, the store does not
        // open with the newest key alone, and says so as `WrongKey`.
        stale.sort_by_key(|(name, _)| name == INDEX);
        for batch in stale.chunks(REWRAP_BATCH) {
            let mut resealed_batch = Vec::with_capacity(batch.len());
            for (name, bytes) in batch {
                let corrupt = |e: &dyn std::fmt::Display| {
                    self.corrupt(format!("record {name} does not open: {e}"))
                };
                let (seq, envelope) = parse_value(bytes).map_err(|e| corrupt(&e))?;
                let plaintext = self
                    .keyring
                    .open(&aad(&self.store, name, seq), &envelope)
                    .map_err(|e| corrupt(&e))?;
                resealed_batch.push((name.as_str(), self.seal(name, seq, &plaintext)?));
            }
            self.commit(sequences, &resealed_batch, &[])?;
            resealed += batch.len();
        }
        Ok(Rewrapped { records, resealed })
    }
}

/// Opens and checks records: what [`Durable::open`] does for a whole store
/// and [`Durable::refresh`] for the keys another writer changed.
struct Loader<'a> {
    keyring: &'a Keyring,
    /// How errors name the store.
    label: &'a str,
    /// The newest envelope counter seen per master-key version, to
    /// continue from.
    counters: HashMap<u32, u64>,
}

impl Loader<'_> {
    fn corrupt(&self, reason: String) -> KmsError {
        store_corrupt(self.label, reason)
    }

    /// Opens record `name` of store `store` (`bytes`: its sequence and
    /// envelope); returns its sequence and plaintext.
    ///
    /// # Errors
    /// [`KmsError::Seal`] for the index's failure, or a master-key version
    /// the keyring lacks; [`KmsError::StoreCorrupt`] for any other record
    /// that does not parse or open.
    fn open(
        &mut self,
        store: &StoreId,
        name: &str,
        bytes: &[u8],
    ) -> Result<(u64, crate::seal::Plaintext), KmsError> {
        let (seq, envelope) = parse_value(bytes)
            .map_err(|e| self.corrupt(format!("record {name} does not parse: {e}")))?;
        let header = &envelope.header;
        let newest = self.counters.entry(header.key_version).or_default();
        *newest = (*newest).max(header.counter);
        match self.keyring.open(&aad(store, name, seq), &envelope) {
            Ok(plaintext) => Ok((seq, plaintext)),
            // The index's failure is the master key's.
            Err(e) if name == INDEX => Err(KmsError::Seal(e)),
            // A version of the master key the keyring lacks: the
            // keyring's fault (an unfinished rewrap), not the record's.
            // Another key id, in a store whose index opened, is damage.
            Err(e @ SealError::WrongKey { .. }) if header.key_id == self.keyring.newest().id() => {
                Err(KmsError::Seal(e))
            }
            Err(e) => Err(self.corrupt(format!("record {name} does not open: {e}"))),
        }
    }

    /// Loads the key whose head is record `name`, taking its records out
    /// of `loaded`, in a store of `count` keys; returns it with its
    /// sequence and creation ordinal.
    ///
    /// # Errors
    /// As [`Loader::open`]; [`KmsError::StoreCorrupt`] if the head does
    /// not decode, breaks the state's invariants, or a record the head
    /// names is missing, out of sequence or does not decode.
    fn load_key(
        &mut self,
        store: &StoreId,
        loaded: &mut HashMap<String, Vec<u8>>,
        name: &str,
        count: u64,
    ) -> Result<(StoredKey, u64, u64), KmsError> {
        let bytes = loaded.remove(name).unwrap_or_default();
        let (key_seq, head) = self.open(store, name, &bytes)?;
        let (id, head, ordinal, state) = match decode_head(&head) {
            Some((id, head, ordinal, state)) if head >= 1 && head_name(&id) == name => {
                (id, head, ordinal, state)
            }
            _ => return Err(self.corrupt(format!("record {name} does not decode"))),
        };
        if !(1..=count).contains(&ordinal) {
            return Err(self.corrupt(format!(
                "key {id} has creation ordinal {ordinal}, but the index counts {count} keys"
            )));
        }
        let policy = &state.policy;
        if !(1 <= state.min_available_version
            && state.min_available_version <= policy.min_verify_version
            && policy.min_verify_version <= head)
        {
            return Err(self.corrupt(format!(
                "key {id} has min_available_version {}, min_verify_version {} and head {head}",
                state.min_available_version, policy.min_verify_version
            )));
        }
        // A destroyed key (a tombstone) keeps only its retired record,
        // with every version; a version record left over is refused by the
        // caller.
        let first = if state.destroyed {
            head.checked_add(1).ok_or_else(too_many)?
        } else {
            state.min_available_version
        };
        let retired = if first > 1 {
            let name = retired_name(&id);
            let bytes = loaded.remove(&name).ok_or_else(|| {
                self.corrupt(format!(
                    "the record of key {id}'s trimmed versions (below v{first}) is missing"
                ))
            })?;
            let (seq, plaintext) = self.open(store, &name, &bytes)?;
            if seq > key_seq {
                return Err(self.corrupt(format!(
                    "record {name} is out of sequence (written at {seq}, key at {key_seq})"
                )));
            }
            let count = usize::try_from(first - 1).map_err(|_| too_many())?;
            decode_retired(&plaintext, count, id.alg().public_key_len())
                .ok_or_else(|| self.corrupt(format!("record {name} does not decode")))?
        } else {
            Vec::new()
        };
        // Sized once, never grown: it holds seeds. An authentic head has a
        // record for each version; one that claims more runs out of
        // records before it outgrows the buffer.
        let capacity = usize::try_from(u64::from(head) + 1 - u64::from(first))
            .map_or(usize::MAX, |h| h.min(loaded.len()));
        let mut versions: Vec<StoredVersion> = Vec::with_capacity(capacity);
        let mut previous = 0;
        for version in first..=head {
            let name = version_name(&id, version);
            let bytes = loaded.remove(&name).ok_or_else(|| {
                self.corrupt(format!(
                    "version {version} of key {id} (head v{head}) is missing"
                ))
            })?;
            let (seq, plaintext) = self.open(store, &name, &bytes)?;
            if seq <= previous || seq > key_seq {
                return Err(self.corrupt(format!(
                    "record {name} is out of sequence (written at {seq}, after {previous}, key at {key_seq})"
                )));
            }
            previous = seq;
            let mut r = Reader::new(&plaintext);
            let stored = read_version(&mut r)
                .filter(|_| r.rest().is_empty())
                .ok_or_else(|| self.corrupt(format!("record {name} does not decode")))?;
            if versions.len() == versions.capacity() {
                return Err(self.corrupt(format!("key {id} has more versions than records")));
            }
            versions.push(stored);
        }
        Ok((
            StoredKey {
                id,
                state,
                retired,
                versions,
            },
            key_seq,
            ordinal,
        ))
    }

    /// Loads the signing pointers among `loaded`'s records, taking them
    /// out; returns the key id each names, with the pointer's sequence.
    /// `keys` are the store's keys (their sequences, by UUID), where the
    /// load is whole (an open); `known` the pointers already loaded.
    /// Whether a held key has the pointer's names is checked where memory
    /// takes the pointers (`Keystore::apply_stored`), on open and refresh
    /// alike.
    ///
    /// # Errors
    /// As [`Loader::open`]; [`KmsError::StoreCorrupt`] if a pointer does
    /// not decode, is not under the tenant and purpose of its own name,
    /// (given `keys`) names a key the store does not hold, went back (a
    /// lower sequence than known), or names another key at the same
    /// sequence.
    fn load_signing(
        &mut self,
        store: &StoreId,
        loaded: &mut HashMap<String, Vec<u8>>,
        keys: Option<&HashMap<Uuid, (u64, u64)>>,
        known: &HashMap<String, (u64, Uuid)>,
    ) -> Result<Vec<(KeyId, u64)>, KmsError> {
        let names: Vec<String> = loaded
            .keys()
            .filter(|name| matches!(parse_name(name), Some(Name::Signing(..))))
            .cloned()
            .collect();
        let mut signing = Vec::with_capacity(names.len());
        for name in names {
            let bytes = loaded.remove(&name).unwrap_or_default();
            let (seq, plaintext) = self.open(store, &name, &bytes)?;
            let id = decode_signing(&plaintext)
                .filter(|id| seq >= 1 && signing_name(id) == name)
                .ok_or_else(|| self.corrupt(format!("record {name} does not decode")))?;
            if keys.is_some_and(|keys| !keys.contains_key(&id.uuid())) {
                return Err(self.corrupt(format!(
                    "record {name} names key {id}, which the store does not hold"
                )));
            }
            if let Some(&(known_seq, uuid)) = known.get(&name) {
                if seq < known_seq || (seq == known_seq && uuid != id.uuid()) {
                    return Err(self.corrupt(format!(
                        "record {name} went back (sequence {seq} after {known_seq})"
                    )));
                }
            }
            signing.push((id, seq));
        }
        Ok(signing)
    }
}

/// The sequences of loaded signing pointers, by name.
fn pointer_seqs(signing: &[(KeyId, u64)]) -> impl Iterator<Item = (String, (u64, Uuid))> + '_ {
    signing
        .iter()
        .map(|(id, seq)| (signing_name(id), (*seq, id.uuid())))
}

/// The names of the key heads among `loaded`'s records.
fn head_names(loaded: &HashMap<String, Vec<u8>>) -> Vec<String> {
    loaded
        .keys()
        .filter(|name| matches!(parse_name(name), Some(Name::Head(_))))
        .cloned()
        .collect()
}

/// Commits every `(name, value)` pair of `records` and removes every
/// record named in `removes`, in one commit: the one place records become
/// [`RecordWrite`]s.
pub(crate) fn commit_all<N: AsRef<str>, V: AsRef<[u8]>>(
    storage: &dyn Storage,
    records: &[(N, V)],
    removes: &[String],
) -> Result<(), KmsError> {
    let writes: Vec<RecordWrite<'_>> = records
        .iter()
        .map(|(name, value)| RecordWrite {
            name: name.as_ref(),
            value: Some(value.as_ref()),
        })
        .chain(removes.iter().map(|name| RecordWrite { name, value: None }))
        .collect();
    storage.commit(&writes)
}

/// `plaintext` sealed under the keyring's newest key as record `name` at
/// `seq` of store `store`, as the record's bytes.
fn seal_with(
    keyring: &Keyring,
    store: &StoreId,
    name: &str,
    seq: u64,
    plaintext: &[u8],
) -> Result<Vec<u8>, KmsError> {
    let envelope = keyring.newest().seal(&aad(store, name, seq), plaintext)?;
    Ok(records::value(seq, &envelope))
}

/// A version's record plaintext; the seed copy is wiped on drop.
///
/// # Errors
/// [`KmsError::Internal`] for a version without its secret (never
/// written as a version record), or an import's texts over 255 bytes.
fn plaintext_of(version: &KeyVersion) -> Result<Zeroizing<Vec<u8>>, KmsError> {
    let key = version.secret.as_ref().ok_or_else(|| KmsError::Internal {
        reason: format!("keystore: version {} has no secret", version.info.version),
    })?;
    encode_version(key.seed(), version.info.created_at, &version.info.origin)
}

/// `n + 1`, or an error at the end of `u64`.
fn next(n: u64) -> Result<u64, KmsError> {
    n.checked_add(1).ok_or_else(|| KmsError::Internal {
        reason: "keystore: a record sequence is exhausted".to_owned(),
    })
}

/// [`KmsError::StoreCorrupt`] for the store errors name `label`.
fn store_corrupt(label: &str, reason: String) -> KmsError {
    KmsError::StoreCorrupt {
        store: label.to_owned(),
        reason,
    }
}

fn too_many() -> KmsError {
    KmsError::Internal {
        reason: "keystore: too many versions to store".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    //! A damaged signing pointer: one naming a key of another purpose,
    //! which only a writer holding the master key can make, so it is made
    //! here, with the store's own sealing. The test returns its errors
    //! (`?`) rather than unwrapping them.

    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

    use super::{encode_signing, signing_name};
    use crate::key_id::{Alg, KeyId};
    use crate::seal::SealKey;
    use crate::storage::{RecordWrite, Storage};
    use crate::{Keystore, KmsError};

    type Map = BTreeMap<String, Vec<u8>>;

    /// Records in memory; when `shared`, `changes` reports what
    /// [`Records::arrive`] queued (what another writer would have written).
    #[derive(Debug, Clone, Default)]
    struct Records {
        records: Arc<Mutex<Map>>,
        queued: Arc<Mutex<Map>>,
        shared: bool,
    }

    /// A test's lock: a panicking holder fails the test anyway.
    fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
        mutex.lock().unwrap_or_else(PoisonError::into_inner)
    }

    impl Records {
        fn arrive(&self, name: String, value: Vec<u8>) {
            lock(&self.records).insert(name.clone(), value.clone());
            lock(&self.queued).insert(name, value);
        }

        fn snapshot(&self) -> Map {
            lock(&self.records).clone()
        }
    }

    impl Storage for Records {
        fn load(&self) -> Result<Vec<(String, Vec<u8>)>, KmsError> {
            Ok(self.snapshot().into_iter().collect())
        }

        fn commit(&self, writes: &[RecordWrite<'_>]) -> Result<(), KmsError> {
            let mut records = lock(&self.records);
            for w in writes {
                match w.value {
                    Some(value) => records.insert(w.name.to_owned(), value.to_vec()),
                    None => records.remove(w.name),
                };
            }
            Ok(())
        }

        fn is_shared(&self) -> bool {
            self.shared
        }

        fn changes(&self) -> Result<Vec<(String, Vec<u8>)>, KmsError> {
            Ok(std::mem::take(&mut *lock(&self.queued))
                .into_iter()
                .collect())
        }
    }

    fn master() -> Result<SealKey, KmsError> {
        Ok(SealKey::from_bytes("master", 1, &[1; 32])?)
    }

    /// The `tokens` pointer, sealed at `seq`, naming `other`'s UUID under
    /// the `tokens` purpose.
    fn forged(ks: &Keystore, other: &KeyId, seq: u64) -> Result<(String, Vec<u8>), KmsError> {
        let id = KeyId::new("acme", "tokens", Alg::Ed25519, other.uuid(), 1)?;
        let durable = ks.durable.as_deref().ok_or(KmsError::Internal {
            reason: "the test's keystore is durable".to_owned(),
        })?;
        let name = signing_name(&id);
        let value = durable.seal(&name, seq, &encode_signing(&id))?;
        Ok((name, value))
    }

    fn assert_corrupt(answer: Result<impl std::fmt::Debug, KmsError>, says: &str) {
        match answer {
            Err(KmsError::StoreCorrupt { reason, .. }) => {
                assert!(reason.contains(says), "{reason}");
            }
            other => panic!("expected StoreCorrupt ({says}), got {other:?}"),
        }
    }

    #[test]
    fn a_pointer_naming_a_key_of_another_purpose_is_store_corrupt() -> Result<(), KmsError> {
        let storage = Records {
            shared: true,
            ..Records::default()
        };
        let ks = Keystore::create_with_storage(Box::new(storage.clone()), master()?)?;
        let tokens = ks.signing_key("acme", "tokens")?;
        let mail = ks.create_ed25519("acme", "mail")?;
        ks.destroy(&tokens)?;

        let before = storage.snapshot();
        // On a shared store the pointer arrives with a refresh, which
        // refuses it (no later state mends it): StoreCorrupt, not a
        // Conflict retried, and nothing applied.
        let (name, value) = forged(&ks, &mail, 2)?;
        storage.arrive(name, value);
        assert_corrupt(ks.signing_key("acme", "tokens"), "under other names");
        drop(ks);

        // On open, the pointer is checked against the keys loaded; the
        // records as they were before it open.
        let open = |records: Map| -> Result<Keystore, KmsError> {
            let storage = Records {
                records: Arc::new(Mutex::new(records)),
                ..Records::default()
            };
            Keystore::open_with_storage(Box::new(storage), master()?.into())
        };
        assert_corrupt(open(storage.snapshot()), "under other names");
        let reopened = open(before)?;
        assert!(reopened.key_ids().contains(&mail));
        Ok(())
    }
}
