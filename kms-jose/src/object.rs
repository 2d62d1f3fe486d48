//! A JSON object whose member names are unique: serde_json keeps the last
//! of two equal names, so the check is made while parsing (after escapes
//! are decoded, so `"al\u0067"` and `"alg"` are the same name).

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Value};

use crate::error::{JoseError, Part};

/// Parses `bytes` as a JSON object with unique member names. Nested
/// objects are not checked: callers that give meaning to a nested
/// object's members (a JWK Set's keys) parse each one with this too.
///
/// # Errors
/// [`JoseError::Duplicate`] naming the first repeated name, or
/// [`JoseError::NotAnObject`] for anything that is not one JSON object.
pub(crate) fn parse(bytes: &[u8], part: Part) -> Result<Map<String, Value>, JoseError> {
    let mut duplicate = None;
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let parsed = deserializer
        .deserialize_map(UniqueObject {
            duplicate: &mut duplicate,
        })
        .and_then(|map| deserializer.end().map(|()| map));
    parsed.map_err(|e| match duplicate {
        // The name is the sender's text: bounded and escaped before it
        // reaches an error message or a log.
        Some(name) => JoseError::Duplicate {
            part,
            name: format!("{:?}", name.chars().take(64).collect::<String>()),
        },
        None => JoseError::NotAnObject {
            part,
            reason: e.to_string(),
        },
    })
}

/// Collects an object's members; on a repeated name, records it in
/// `duplicate` and fails.
struct UniqueObject<'a> {
    duplicate: &'a mut Option<String>,
}

impl<'de> Visitor<'de> for UniqueObject<'_> {
    type Value = Map<String, Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
        // The map itself tells a repeated name (one lookup per member): no
        // second set of names, which cost an allocation and a hash per
        // member on every token.
        let mut map = Map::new();
        while let Some(name) = access.next_key::<String>()? {
            match map.entry(name) {
                Entry::Vacant(slot) => {
                    slot.insert(access.next_value::<Value>()?);
                }
                Entry::Occupied(taken) => {
                    let name = taken.key().clone();
                    let error = de::Error::custom(format_args!("duplicate member `{name}`"));
                    *self.duplicate = Some(name);
                    return Err(error);
                }
            }
        }
        Ok(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_refused_even_when_escaped() {
        assert!(parse(br#"{"alg":"EdDSA","kid":"a"}"#, Part::Header).is_ok());
        assert_eq!(
            parse(br#"{"alg":"EdDSA","al\u0067":"none"}"#, Part::Header),
            Err(JoseError::Duplicate {
                part: Part::Header,
                name: "\"alg\"".to_owned()
            })
        );
        for not_object in [&b"[1]"[..], b"\"x\"", b"{", b"{} {}", b"", b"null"] {
            assert!(
                matches!(
                    parse(not_object, Part::Payload),
                    Err(JoseError::NotAnObject { .. })
                ),
                "{not_object:?}"
            );
        }
    }
}
