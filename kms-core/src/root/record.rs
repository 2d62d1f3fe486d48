//! [`RootRecord`]: what a store keeps in clear about its root, and its
//! text form.
//!
//! ```text
//! kms-store-root 1
//! store 5f0c…(32 hex digits)
//! kind pkcs11
//! root PKCS#11 key "kms-master" in token "kms" (/usr/lib/softhsm/libsofthsm2.so)
//! mechanism CKM_AES_GCM
//! wrapped 3a9f…(hex)
//! ```
//!
//! One `name value` pair per line, in this order; `mechanism` and
//! `wrapped` only for a wrapping root. Nothing in it is secret: the
//! wrapped key opens only inside the root.

use super::{RootKind, StoreId};
use crate::error::KmsError;

/// The record's file in a directory store, beside `keystore.redb`.
pub const ROOT_FILE: &str = "keystore.root";

/// The first line of every record (the format's name and version).
const MAGIC: &str = "kms-store-root 1";

/// The largest record read (bytes): a wrapped key is under 1 KiB.
pub(crate) const MAX_RECORD: u64 = 16 * 1024;

/// The master key wrapped by a root.
#[derive(Clone, PartialEq, Eq)]
pub struct WrappedKey {
    /// How it was wrapped, in the root's own terms (`CKM_AES_GCM`): a
    /// root refuses to unwrap a mechanism it does not use. Visible ASCII.
    pub mechanism: String,
    /// The wrapped bytes, as the root lays them out (PKCS#11: the 12-byte
    /// IV, the ciphertext, the 16-byte tag).
    pub bytes: Vec<u8>,
}

impl std::fmt::Debug for WrappedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WrappedKey")
            .field("mechanism", &self.mechanism)
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

/// What a store records about its root: its identity, the kind of root,
/// the root in words (for messages), and the wrapped master key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootRecord {
    /// The store's identity.
    pub store: StoreId,
    /// The kind of root the store is under.
    pub kind: RootKind,
    /// The root in words ([`super::MasterKeyRoot::describe`]), one line.
    pub root: String,
    /// The wrapped master key; `None` under a file root.
    pub wrapped: Option<WrappedKey>,
}

impl RootRecord {
    /// What a store without a record is under: a file root, no identity.
    pub fn unrecorded() -> RootRecord {
        RootRecord {
            store: StoreId::NONE,
            kind: RootKind::File,
            root: RootKind::File.to_string(),
            wrapped: None,
        }
    }

    /// The record's text form (module docs).
    pub fn to_text(&self) -> String {
        let root: String = self
            .root
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        let mut text = format!(
            "{MAGIC}\nstore {}\nkind {}\nroot {root}\n",
            self.store,
            self.kind.as_str()
        );
        if let Some(wrapped) = &self.wrapped {
            text.push_str(&format!(
                "mechanism {}\nwrapped {}\n",
                wrapped.mechanism,
                hex::encode(&wrapped.bytes)
            ));
        }
        text
    }

    /// Reads a record's text form.
    ///
    /// # Errors
    /// [`KmsError::StoreCorrupt`] (with `store` as given) naming what is
    /// wrong: not UTF-8, another first line, a line missing or out of
    /// order, an unknown kind, a bad identity or hex, `mechanism` and
    /// `wrapped` present under a file root or absent under another.
    pub fn from_text(text: &[u8], store: &str) -> Result<RootRecord, KmsError> {
        let corrupt = |reason: &str| KmsError::StoreCorrupt {
            store: store.to_owned(),
            reason: format!("{ROOT_FILE}: {reason}"),
        };
        let text = std::str::from_utf8(text).map_err(|_| corrupt("not UTF-8"))?;
        let mut lines = text.lines();
        if lines.next() != Some(MAGIC) {
            return Err(corrupt(&format!("the first line is not `{MAGIC}`")));
        }
        let mut field = |name: &str| -> Result<Option<&str>, KmsError> {
            match lines.next() {
                None => Ok(None),
                Some(line) => match line.split_once(' ') {
                    Some((key, value)) if key == name => Ok(Some(value)),
                    _ => Err(corrupt(&format!("expected the line `{name} …`"))),
                },
            }
        };
        let id = field("store")?.ok_or_else(|| corrupt("no `store` line"))?;
        let id = StoreId::from_hex(id).ok_or_else(|| corrupt("`store` is not 32 hex digits"))?;
        let kind = field("kind")?.ok_or_else(|| corrupt("no `kind` line"))?;
        let kind = RootKind::from_name(kind)
            .ok_or_else(|| corrupt(&format!("unknown kind of root `{kind}`")))?;
        let root = field("root")?.ok_or_else(|| corrupt("no `root` line"))?;
        let root = root.to_owned();
        let wrapped = match field("mechanism")? {
            None => None,
            Some(mechanism) => {
                let bytes = field("wrapped")?.ok_or_else(|| corrupt("no `wrapped` line"))?;
                let bytes = hex::decode(bytes).map_err(|_| corrupt("`wrapped` is not hex"))?;
                Some(WrappedKey {
                    mechanism: mechanism.to_owned(),
                    bytes,
                })
            }
        };
        if field("end")?.is_some() {
            return Err(corrupt("lines after `wrapped`"));
        }
        match (kind, &wrapped) {
            (RootKind::File, Some(_)) => Err(corrupt("a file root with a wrapped key")),
            (RootKind::File, None) | (_, Some(_)) => Ok(RootRecord {
                store: id,
                kind,
                root,
                wrapped,
            }),
            (_, None) => Err(corrupt("no wrapped key")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrapped() -> RootRecord {
        RootRecord {
            store: StoreId::generate().unwrap(),
            kind: RootKind::Pkcs11,
            root: "PKCS#11 key \"k\" in token \"t\"".into(),
            wrapped: Some(WrappedKey {
                mechanism: "CKM_AES_GCM".into(),
                bytes: vec![1, 2, 250],
            }),
        }
    }

    #[test]
    fn records_round_trip() {
        let file = RootRecord {
            wrapped: None,
            kind: RootKind::File,
            ..wrapped()
        };
        for record in [wrapped(), file] {
            let text = record.to_text();
            assert_eq!(RootRecord::from_text(text.as_bytes(), "s").unwrap(), record);
        }
    }

    #[test]
    fn a_damaged_record_is_refused_by_name() {
        let text = wrapped().to_text();
        let cases = [
            text.replace("kms-store-root 1", "kms-store-root 2"),
            text.replace("kind pkcs11", "kind hsm"),
            text.replace("store ", "store 0"),
            text.replace("wrapped ", "wrapped x"),
            text.replace("kind pkcs11", "kind file"),
            text.lines().take(4).collect::<Vec<_>>().join("\n"),
            format!("{text}extra line\n"),
            text.replace("root ", "rot "),
        ];
        for case in cases {
            assert!(
                matches!(
                    RootRecord::from_text(case.as_bytes(), "s"),
                    Err(KmsError::StoreCorrupt { .. })
                ),
                "{case}"
            );
        }
    }

    #[test]
    fn control_characters_in_the_description_stay_on_one_line() {
        let record = RootRecord {
            root: "a\nkind file".into(),
            ..wrapped()
        };
        let back = RootRecord::from_text(record.to_text().as_bytes(), "s").unwrap();
        assert_eq!(back.root, "a kind file");
    }
}
