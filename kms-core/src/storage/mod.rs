//! [`Storage`]: where a durable [`crate::Keystore`] keeps its sealed
//! records (`docs/ARCHITECTURE.md`, "The durable store").
//!
//! A storage holds named, opaque records and applies a batch of writes
//! atomically and durably. It never sees a secret in the clear: the
//! keystore seals every record (XChaCha20-Poly1305, `kms_core::seal`)
//! before it reaches the storage, binding the record's name and sequence
//! in the associated data, and checks on open that the records form one
//! whole store (no record dropped, swapped or added). So a storage needs
//! no trust beyond keeping what it acknowledged.
//!
//! The embedded default is a [redb](https://docs.rs/redb) database file
//! (`file.rs`), used by [`crate::Keystore::create`] and
//! [`crate::Keystore::open`]; others (a networked one) plug in with
//! [`crate::Keystore::create_with_storage`] and
//! [`crate::Keystore::open_with_storage`].
//!
//! Record names are UTF-8: `index`, and per key
//! `keys/<tenant>/<purpose>/<uuid>/head` and `…/v<N>`.

pub(crate) mod file;

use std::fmt;

use crate::error::KmsError;

pub(crate) use file::RedbStorage;
pub use file::PURGE_PENDING;

/// Registers the unit and help text of [`PURGE_PENDING`] with the
/// installed `metrics` recorder. The gauge itself appears, labelled with
/// the store's directory, when a durable store opens (0, or 1 while a
/// purge waits for a retry).
pub fn describe_metrics() {
    metrics::describe_gauge!(
        PURGE_PENDING,
        metrics::Unit::Count,
        "1 while a store's removed records may still be in its database file (a purge waits for a retry)"
    );
}

/// One write of a commit: store `value` under `name`, replacing any record
/// there, or (`value` = `None`) remove the record `name`, if there is one.
#[derive(Debug, Clone, Copy)]
pub struct RecordWrite<'a> {
    /// The record's name (at most 255 bytes of UTF-8).
    pub name: &'a str,
    /// The record's bytes: a sequence number and a sealed envelope,
    /// opaque to the storage; `None` removes the record.
    pub value: Option<&'a [u8]>,
}

/// Named records, written in atomic, durable batches. One keystore uses a
/// storage at a time; an implementation that can be reached by several
/// writers keeps the others out (the file storage holds an exclusive
/// lock) or serialises them itself.
pub trait Storage: Send + Sync + fmt::Debug {
    /// Every record, `(name, value)`, as of the last commit, in any order.
    ///
    /// # Errors
    /// [`KmsError::Io`] with the `std::io::ErrorKind` if reading fails;
    /// [`KmsError::StoreCorrupt`] if what is stored is not readable as
    /// records; [`KmsError::Internal`] for any other failure. A networked
    /// storage may also answer [`KmsError::Unavailable`] (no answer in
    /// time) and, on its first load, [`KmsError::InvalidConfig`] for a
    /// configuration it refuses once it sees the store (kms-etcd: a prefix
    /// that nests with another fleet's).
    fn load(&self) -> Result<Vec<(String, Vec<u8>)>, KmsError>;

    /// Applies every write in `writes` atomically and durably: once it
    /// returns `Ok`, all of them survive a crash; if it fails or the
    /// process dies first, the storage holds all of them or none. A record
    /// removed (a write whose `value` is `None`: a trimmed version, a
    /// destroyed key) must then no longer be readable from the storage's
    /// files either: at once, or, if that fails after the commit stood,
    /// as soon as the storage can (the file storage purges its database,
    /// retries after each commit and at open, and says so with the
    /// `kms_store_purge_pending` gauge; docs/SECURITY.md, "Destroyed
    /// keys"). Which
    /// one may be unknown after an error (a networked storage may time out
    /// after the write landed), so after a failed commit the keystore
    /// makes no further commit until it is reopened and has loaded what
    /// did land, unless the storage is shared ([`Storage::is_shared`]),
    /// whose changes say what landed.
    ///
    /// # Errors
    /// [`KmsError::Io`] with the `std::io::ErrorKind` if writing fails;
    /// [`KmsError::Internal`] for any other failure to make the writes
    /// durable.
    fn commit(&self, writes: &[RecordWrite<'_>]) -> Result<(), KmsError>;

    /// Whether keystores in other processes commit to this storage too (a
    /// fleet's shared store, such as the `kms-etcd` crate's). A shared
    /// storage:
    /// * commits a batch only if every record it writes or removes is
    ///   still as this storage last reported it (by [`Storage::load`],
    ///   [`Storage::changes`] or its own commits); otherwise it writes
    ///   nothing and answers [`KmsError::Conflict`], and the next
    ///   [`Storage::changes`] reports what changed;
    /// * may fail a commit whose outcome it cannot know (a deadline
    ///   passed: [`KmsError::Unavailable`]); what landed shows in
    ///   [`Storage::changes`], so the keystore goes on writing after one.
    ///
    /// Default `false`: one writer, and a failed commit stops the
    /// keystore's writes until it is reopened.
    fn is_shared(&self) -> bool {
        false
    }

    /// What other writers changed since the first [`Storage::load`] or the
    /// last call (a later `load` does not take what it finds from this
    /// report: the groups it found changed are reported too),
    /// as `(name, value)` records: for each group of records changed (the
    /// records whose names agree up to the last `/`; `index` is a group of
    /// its own; the signing pointers, `signing/…`, are one group), every
    /// record of the group, as of one state of the store no older than the
    /// group's state reported before. Different groups may be reported at
    /// different states, so a record may name a record of another group
    /// not yet reported. A record removed is absent from its group. The keystore calls it under its
    /// mutation lock, before each change and when the storage's owner asks
    /// ([`crate::Keystore::refresh`]). Default: nothing (one writer).
    ///
    /// # Errors
    /// As [`Storage::load`].
    fn changes(&self) -> Result<Vec<(String, Vec<u8>)>, KmsError> {
        Ok(Vec::new())
    }

    /// The store's root record (`kms_core::root::RootRecord`'s text):
    /// kept beside the records, not one of them (not sealed, never in
    /// [`Storage::load`] or [`Storage::changes`]); `None` if there is none.
    /// Default: `None` (a storage that keeps no root record; its stores
    /// are under a file root).
    ///
    /// # Errors
    /// As [`Storage::load`].
    fn root_record(&self) -> Result<Option<Vec<u8>>, KmsError> {
        Ok(None)
    }

    /// Replaces the root record with `text` if it is still `previous`
    /// (`None`: there is none), atomically and durably, as
    /// [`Storage::commit`] does.
    ///
    /// # Errors
    /// [`KmsError::Conflict`] if the record is no longer `previous`
    /// (another writer changed it; nothing written); the errors of
    /// [`Storage::commit`], which may come after the record landed (an
    /// answer lost): the keystore reads the record back before it treats
    /// the write as undone; by default [`KmsError::InvalidConfig`]: the
    /// storage keeps no root record.
    fn replace_root_record(&self, previous: Option<&[u8]>, text: &[u8]) -> Result<(), KmsError> {
        let _ = (previous, text);
        Err(KmsError::InvalidConfig {
            reason: format!("{self:?} keeps no root record"),
        })
    }
}
