//! [`Algorithm`]: the two `alg` values this crate accepts.

use crate::error::JoseError;

/// A JWS `alg` for Ed25519 signatures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Algorithm {
    /// `"EdDSA"` (RFC 8037 §3.1): the name most verifiers know today, and
    /// the default for issued tokens. RFC 9864 deprecates it because it
    /// does not name the curve; here it means Ed25519 only.
    #[default]
    EdDSA,
    /// `"Ed25519"` (RFC 9864 §2): the fully specified name.
    Ed25519,
}

impl Algorithm {
    /// The `alg` string.
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::EdDSA => "EdDSA",
            Algorithm::Ed25519 => "Ed25519",
        }
    }

    /// The algorithm an `alg` string names; the comparison is exact (RFC
    /// 7515 §4.1.1: case-sensitive).
    ///
    /// # Errors
    /// [`JoseError::UnsupportedAlg`] for anything else (`none`, `HS256`,
    /// `eddsa`, …).
    pub fn parse(alg: &str) -> Result<Self, JoseError> {
        match alg {
            "EdDSA" => Ok(Algorithm::EdDSA),
            "Ed25519" => Ok(Algorithm::Ed25519),
            // At most 32 characters of the sender's text, escaped: control
            // characters and quotes cannot reach a log line or a header as
            // they came.
            other => Err(JoseError::UnsupportedAlg {
                alg: other
                    .chars()
                    .take(32)
                    .collect::<String>()
                    .escape_debug()
                    .to_string(),
            }),
        }
    }
}

impl std::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `alg` string (feature `serde`).
#[cfg(feature = "serde")]
impl serde::Serialize for Algorithm {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// From the `alg` string, exactly as [`Algorithm::parse`] (feature `serde`).
#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Algorithm {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let alg = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Algorithm::parse(&alg).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_two_exact_names_are_accepted() {
        assert_eq!(Algorithm::parse("EdDSA"), Ok(Algorithm::EdDSA));
        assert_eq!(Algorithm::parse("Ed25519"), Ok(Algorithm::Ed25519));
        for refused in [
            "none", "HS256", "RS256", "ES256", "eddsa", "EDDSA", "ed25519", "Ed448", "",
        ] {
            assert!(
                matches!(
                    Algorithm::parse(refused),
                    Err(JoseError::UnsupportedAlg { .. })
                ),
                "{refused}"
            );
        }
    }

    #[test]
    fn a_refused_alg_is_kept_short_and_escaped() {
        let attack = format!("x\r\nSet-Cookie: a=b\u{0}{}", "y".repeat(100));
        let Err(JoseError::UnsupportedAlg { alg }) = Algorithm::parse(&attack) else {
            panic!("refused");
        };
        assert!(!alg.chars().any(char::is_control), "{alg:?}");
        assert!(alg.starts_with("x\\r\\nSet-Cookie"), "{alg}");
        assert!(alg.len() < 60, "{alg}");
    }
}
