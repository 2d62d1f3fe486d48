//! Serialize/Deserialize (feature `serde`): a [`KeyId`] and an [`Alg`] as
//! their text forms (`"kms:acme:tokens:ed25519:<uuid>:v3"`, `"ed25519"`),
//! public keys as 64 lowercase hex characters, everything else as serde
//! derives it. Deserializing checks what parsing checks: a key id that
//! `KeyId::from_str` refuses is refused with its message.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::key_id::{Alg, KeyId};

impl Serialize for KeyId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for KeyId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(Parsed::<KeyId>::new("a key id `kms:…:v<N>`"))
    }
}

impl Serialize for Alg {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Alg {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct AlgVisitor;
        impl Visitor<'_> for AlgVisitor {
            type Value = Alg;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an algorithm name (`ed25519`)")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Alg, E> {
                match v {
                    "ed25519" => Ok(Alg::Ed25519),
                    _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
                }
            }
        }
        deserializer.deserialize_str(AlgVisitor)
    }
}

/// A visitor that parses a string with `T::from_str`.
struct Parsed<T> {
    expecting: &'static str,
    _t: std::marker::PhantomData<T>,
}

impl<T> Parsed<T> {
    fn new(expecting: &'static str) -> Self {
        Parsed {
            expecting,
            _t: std::marker::PhantomData,
        }
    }
}

impl<T: FromStr> Visitor<'_> for Parsed<T>
where
    T::Err: fmt::Display,
{
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expecting)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        v.parse().map_err(E::custom)
    }
}

/// A 32-byte public key as 64 lowercase hex characters
/// (`#[serde(with = "crate::serde_impls::hex32")]`).
pub(crate) mod hex32 {
    use std::fmt::Write as _;

    use serde::{de, Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(bytes: &[u8; 32], s: S) -> Result<S::Ok, S::Error> {
        let mut text = String::with_capacity(64);
        for b in bytes {
            // Writing to a String cannot fail.
            let _ = write!(text, "{b:02x}");
        }
        s.serialize_str(&text)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 32], D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        let invalid = || de::Error::custom("a public key must be 64 lowercase hex characters");
        if text.len() != 64 {
            return Err(invalid());
        }
        let mut out = [0u8; 32];
        for (o, pair) in out.iter_mut().zip(text.as_bytes().chunks_exact(2)) {
            let nibble = |c: u8| match c {
                b'0'..=b'9' => Some(c - b'0'),
                b'a'..=b'f' => Some(c - b'a' + 10),
                _ => None,
            };
            *o = match (nibble(pair[0]), nibble(pair[1])) {
                (Some(hi), Some(lo)) => hi << 4 | lo,
                _ => return Err(invalid()),
            };
        }
        Ok(out)
    }
}
