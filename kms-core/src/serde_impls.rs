//! Serialize/Deserialize (feature `serde`): a [`KeyId`] and an [`Alg`] as
//! their text forms (`"kms:acme:tokens:ed25519:<uuid>:v3"`, `"ed25519"`),
//! public keys as hex (written lowercase; read only at an algorithm's
//! length), everything else as serde derives it. Deserializing checks what parsing checks: a key id
//! that `KeyId::from_str` refuses is refused with its message.

use std::borrow::Cow;

use serde::de::{self, Unexpected};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::key_id::{Alg, KeyId};

impl Serialize for KeyId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for KeyId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Cow::<'de, str>::deserialize(deserializer)?
            .parse()
            .map_err(de::Error::custom)
    }
}

impl Serialize for Alg {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Alg {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = Cow::<'de, str>::deserialize(deserializer)?;
        Alg::from_name(&name).ok_or_else(|| {
            de::Error::invalid_value(
                Unexpected::Str(&name),
                &"an algorithm name (`ed25519`, `ml-dsa-44`, `ml-dsa-65`, `ml-dsa-87`)",
            )
        })
    }
}

/// A public key as lower-case hex, two characters a byte, through the
/// `hex` crate (`#[serde(with = "crate::serde_impls::hex_bytes")]`).
pub(crate) mod hex_bytes {
    use std::borrow::Cow;

    use serde::{de, Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hex::encode(bytes))
    }

    /// A public key of one of the algorithms' lengths
    /// ([`super::Alg::public_key_len`]).
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = Cow::<'de, str>::deserialize(d)?;
        let bytes = hex::decode(&*text)
            .map_err(|e| de::Error::custom(format!("a public key must be hex ({e})")))?;
        if !super::Alg::ALL
            .iter()
            .any(|alg| alg.public_key_len() == bytes.len())
        {
            return Err(de::Error::custom(format!(
                "a public key of {} bytes is no algorithm's (32, 1312, 1952 or 2592)",
                bytes.len()
            )));
        }
        Ok(bytes)
    }
}
