//! Serialize/Deserialize (feature `serde`): a [`KeyId`] and an [`Alg`] as
//! their text forms (`"kms:acme:tokens:ed25519:<uuid>:v3"`, `"ed25519"`),
//! public keys as 64 hex characters (written lowercase), everything else as
//! serde derives it. Deserializing checks what parsing checks: a key id
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
        match &*Cow::<'de, str>::deserialize(deserializer)? {
            "ed25519" => Ok(Alg::Ed25519),
            other => Err(de::Error::invalid_value(
                Unexpected::Str(other),
                &"an algorithm name (`ed25519`)",
            )),
        }
    }
}

/// A 32-byte public key as 64 hex characters, through the `hex` crate
/// (`#[serde(with = "crate::serde_impls::hex32")]`).
pub(crate) mod hex32 {
    use std::borrow::Cow;

    use serde::{de, Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(bytes: &[u8; 32], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hex::encode(bytes))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 32], D::Error> {
        let text = Cow::<'de, str>::deserialize(d)?;
        let mut out = [0u8; 32];
        hex::decode_to_slice(&*text, &mut out).map_err(|e| {
            de::Error::custom(format!("a public key must be 64 hex characters ({e})"))
        })?;
        Ok(out)
    }
}
