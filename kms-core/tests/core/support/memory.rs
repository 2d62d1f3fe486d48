//! Records in memory, as the tests' in-memory `Storage` implementations
//! keep them: a name-ordered map from record name to bytes.

use std::collections::BTreeMap;

use kms_core::storage::RecordWrite;

/// Record name → bytes.
pub type Records = BTreeMap<String, Vec<u8>>;

/// Applies one commit's `writes` to `records`, in order: a value writes
/// the record, `None` deletes it.
pub fn apply(records: &mut Records, writes: &[RecordWrite<'_>]) {
    for w in writes {
        match w.value {
            Some(value) => records.insert(w.name.to_owned(), value.to_vec()),
            None => records.remove(w.name),
        };
    }
}
