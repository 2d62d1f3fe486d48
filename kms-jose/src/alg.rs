//! [`Algorithm`]: the JWS `alg` values this crate knows (RFC 7518 §3.1,
//! RFC 8037 §3.1, RFC 9864 §2).
//!
//! Invariant: [`Algorithm::parse`] accepts a name only when this build can
//! verify it: `EdDSA` and `Ed25519` always, the RSA and ECDSA names only
//! with the `rsa-ecdsa` feature, the ML-DSA names (RFC 9964 §2) only with
//! the `ml-dsa` feature. Keys of the KMS sign Ed25519 and ML-DSA
//! ([`Algorithm::key_alg`]).

use crate::error::JoseError;

/// A JWS `alg`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Algorithm {
    /// `"EdDSA"` (RFC 8037 §3.1): the name most verifiers know today, and
    /// the default for issued tokens. RFC 9864 deprecates it because it
    /// does not name the curve; here it means Ed25519 only.
    #[default]
    EdDSA,
    /// `"Ed25519"` (RFC 9864 §2): the fully specified name.
    Ed25519,
    /// `"RS256"`: RSASSA-PKCS1-v1_5 with SHA-256 (RFC 7518 §3.3).
    RS256,
    /// `"RS384"`: RSASSA-PKCS1-v1_5 with SHA-384 (RFC 7518 §3.3).
    RS384,
    /// `"RS512"`: RSASSA-PKCS1-v1_5 with SHA-512 (RFC 7518 §3.3).
    RS512,
    /// `"PS256"`: RSASSA-PSS with SHA-256, MGF1 with SHA-256, salt of 32
    /// bytes (RFC 7518 §3.5).
    PS256,
    /// `"PS384"`: RSASSA-PSS with SHA-384 (RFC 7518 §3.5).
    PS384,
    /// `"PS512"`: RSASSA-PSS with SHA-512 (RFC 7518 §3.5).
    PS512,
    /// `"ES256"`: ECDSA on P-256 with SHA-256, signature `R ‖ S` of 64
    /// bytes (RFC 7518 §3.4).
    ES256,
    /// `"ES384"`: ECDSA on P-384 with SHA-384, signature of 96 bytes (RFC
    /// 7518 §3.4).
    ES384,
    /// `"ML-DSA-44"` (RFC 9964 §2): ML-DSA-44 (FIPS 204), empty context,
    /// signature of 2420 bytes.
    MlDsa44,
    /// `"ML-DSA-65"` (RFC 9964 §2): signature of 3309 bytes.
    MlDsa65,
    /// `"ML-DSA-87"` (RFC 9964 §2): signature of 4627 bytes.
    MlDsa87,
}

/// Every algorithm, in declaration order.
const ALL: [Algorithm; 13] = [
    Algorithm::EdDSA,
    Algorithm::Ed25519,
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::MlDsa44,
    Algorithm::MlDsa65,
    Algorithm::MlDsa87,
];

impl Algorithm {
    /// The `alg` string.
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::EdDSA => "EdDSA",
            Algorithm::Ed25519 => "Ed25519",
            Algorithm::RS256 => "RS256",
            Algorithm::RS384 => "RS384",
            Algorithm::RS512 => "RS512",
            Algorithm::PS256 => "PS256",
            Algorithm::PS384 => "PS384",
            Algorithm::PS512 => "PS512",
            Algorithm::ES256 => "ES256",
            Algorithm::ES384 => "ES384",
            Algorithm::MlDsa44 => "ML-DSA-44",
            Algorithm::MlDsa65 => "ML-DSA-65",
            Algorithm::MlDsa87 => "ML-DSA-87",
        }
    }

    /// Whether this is one of the two names of Ed25519 (`EdDSA`,
    /// `Ed25519`): the only algorithms this crate signs with, and the ones
    /// a batch verifies.
    pub fn is_ed25519(self) -> bool {
        matches!(self, Algorithm::EdDSA | Algorithm::Ed25519)
    }

    /// Whether this is one of the ML-DSA names (RFC 9964 §2).
    pub fn is_ml_dsa(self) -> bool {
        matches!(
            self,
            Algorithm::MlDsa44 | Algorithm::MlDsa65 | Algorithm::MlDsa87
        )
    }

    /// The algorithm of the KMS's keys that signs tokens under this `alg`:
    /// Ed25519 for `EdDSA` and `Ed25519`, the ML-DSA parameter set of the
    /// same name; `None` for the identity providers' algorithms, which
    /// the KMS only verifies.
    pub fn key_alg(self) -> Option<kms_core::Alg> {
        match self {
            Algorithm::EdDSA | Algorithm::Ed25519 => Some(kms_core::Alg::Ed25519),
            Algorithm::MlDsa44 => Some(kms_core::Alg::MlDsa44),
            Algorithm::MlDsa65 => Some(kms_core::Alg::MlDsa65),
            Algorithm::MlDsa87 => Some(kms_core::Alg::MlDsa87),
            _ => None,
        }
    }

    /// The `alg` of tokens signed by a KMS key of algorithm `alg`: for an
    /// ML-DSA key, the name of its parameter set; for Ed25519, `None`
    /// (it signs under `EdDSA` or `Ed25519`, the caller's choice).
    pub fn for_ml_dsa_key(alg: kms_core::Alg) -> Option<Algorithm> {
        ALL.into_iter()
            .find(|known| known.is_ml_dsa() && known.key_alg() == Some(alg))
    }

    /// Whether this build verifies it: the Ed25519 names always, the RSA
    /// and ECDSA ones with the `rsa-ecdsa` feature, the ML-DSA ones with
    /// the `ml-dsa` feature.
    pub fn is_supported(self) -> bool {
        /// Which optional families this build has.
        const ML_DSA: bool = cfg!(feature = "ml-dsa");
        const RSA_ECDSA: bool = cfg!(feature = "rsa-ecdsa");
        let family_built = if self.is_ml_dsa() { ML_DSA } else { RSA_ECDSA };
        self.is_ed25519() || family_built
    }

    /// The algorithm an `alg` string names; the comparison is exact (RFC
    /// 7515 §4.1.1: case-sensitive).
    ///
    /// # Errors
    /// [`JoseError::UnsupportedAlg`] for anything else (`none`, `HS256`,
    /// `eddsa`, …), for the RSA and ECDSA names in a build without the
    /// `rsa-ecdsa` feature, and for the ML-DSA names without `ml-dsa`.
    pub fn parse(alg: &str) -> Result<Self, JoseError> {
        match ALL
            .iter()
            .find(|known| known.as_str() == alg && known.is_supported())
        {
            Some(known) => Ok(*known),
            // At most 32 characters of the sender's text, escaped: control
            // characters and quotes cannot reach a log line or a header as
            // they came.
            None => Err(JoseError::UnsupportedAlg {
                alg: alg
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
    fn only_exact_names_this_build_verifies_are_accepted() {
        assert_eq!(Algorithm::parse("EdDSA"), Ok(Algorithm::EdDSA));
        assert_eq!(Algorithm::parse("Ed25519"), Ok(Algorithm::Ed25519));
        for alg in ALL {
            assert_eq!(
                Algorithm::parse(alg.as_str()).is_ok(),
                alg.is_supported(),
                "{alg}"
            );
        }
        assert_eq!(
            Algorithm::parse("RS256").is_ok(),
            cfg!(feature = "rsa-ecdsa")
        );
        assert_eq!(
            Algorithm::parse("ML-DSA-65").is_ok(),
            cfg!(feature = "ml-dsa")
        );
        for alg in [
            kms_core::Alg::MlDsa44,
            kms_core::Alg::MlDsa65,
            kms_core::Alg::MlDsa87,
        ] {
            let named = Algorithm::for_ml_dsa_key(alg).expect("a name");
            assert_eq!(named.key_alg(), Some(alg));
            assert_eq!(named.as_str(), alg.as_str().to_uppercase());
        }
        assert_eq!(Algorithm::for_ml_dsa_key(kms_core::Alg::Ed25519), None);
        for refused in [
            "none",
            "HS256",
            "HS384",
            "HS512",
            "ES512",
            "ES256K",
            "rs256",
            "eddsa",
            "EDDSA",
            "ed25519",
            "Ed448",
            "",
            "ml-dsa-65",
            "ML-DSA-65 ",
            "HASH-ML-DSA-65",
        ] {
            assert!(
                matches!(
                    Algorithm::parse(refused),
                    Err(JoseError::UnsupportedAlg { .. })
                ),
                "{refused}"
            );
        }
        assert!(ALL.iter().filter(|a| a.is_ed25519()).count() == 2);
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
