//! A version's key material by algorithm ([`Secret`], [`Public`]) and a
//! signature as its algorithm encodes it ([`Signature`]).
//!
//! Every algorithm's private key is a 32-byte seed: Ed25519's (RFC 8032
//! §5.1.5) or ML-DSA's ξ (FIPS 204 Algorithm 6), so the records and the
//! export envelope keep one seed whatever the key. ML-DSA needs the
//! `ml-dsa` feature; without it, a key of it is refused
//! ([`KmsError::AlgorithmNotBuilt`]) when made, loaded or imported.

use ed25519_dalek::{Signer as _, SigningKey};
use subtle::ConstantTimeEq;

use super::records::SEED_LEN;
use crate::ed25519;
use crate::error::KmsError;
use crate::key_id::Alg;

/// A version's secret: the algorithm's private key, made from its seed.
pub(crate) enum Secret {
    /// Zeroized on drop by ed25519-dalek (`zeroize` feature).
    Ed25519(SigningKey),
    /// The seed wiped on drop; aws-lc wipes the expanded key it frees.
    #[cfg(feature = "ml-dsa")]
    MlDsa(crate::ml_dsa::SigningKey),
}

/// A version's public key, decoded once when the version is made.
#[derive(Clone)]
pub(crate) enum Public {
    /// Decoded `A`: a keystore key's signatures never decode it again,
    /// single or in the actor's batches.
    Ed25519(ed25519::VerifyingKey),
    /// Parsed by aws-lc once.
    #[cfg(feature = "ml-dsa")]
    MlDsa(crate::ml_dsa::VerifyingKey),
}

/// A signature as its algorithm encodes it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Signature {
    /// 64 bytes, `R ‖ S` (RFC 8032 §5.1.6).
    Ed25519([u8; 64]),
    /// FIPS 204 `sigEncode`: [`Alg::signature_len`] bytes of `alg`.
    MlDsa {
        /// The parameter set.
        alg: Alg,
        /// The encoded signature.
        bytes: Vec<u8>,
    },
}

impl Signature {
    /// The signature's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Signature::Ed25519(bytes) => bytes,
            Signature::MlDsa { bytes, .. } => bytes,
        }
    }

    /// The algorithm that made it.
    pub fn alg(&self) -> Alg {
        match self {
            Signature::Ed25519(_) => Alg::Ed25519,
            Signature::MlDsa { alg, .. } => *alg,
        }
    }
}

/// The error for an algorithm this build lacks.
#[cfg(not(feature = "ml-dsa"))]
fn not_built(alg: Alg) -> KmsError {
    KmsError::AlgorithmNotBuilt { alg }
}

/// The key pair of algorithm `alg` made from `seed`, and its public key's
/// bytes ([`Alg::public_key_len`]).
///
/// # Errors
/// [`KmsError::AlgorithmNotBuilt`] for ML-DSA without the `ml-dsa`
/// feature; aws-lc's refusals ([`crate::ml_dsa::SigningKey::from_seed`]).
pub(crate) fn from_seed(
    alg: Alg,
    seed: &[u8; SEED_LEN],
) -> Result<(Secret, Public, Vec<u8>), KmsError> {
    match alg {
        Alg::Ed25519 => {
            let signing = SigningKey::from_bytes(seed);
            let public = signing.verifying_key();
            // A clamped seed's point has order ℓ (RFC 8032 §5.1.5): rules
            // 2–3 hold, so no second decoding.
            let decoded = ed25519::VerifyingKey::from_parts(public.to_bytes(), public.to_edwards());
            Ok((
                Secret::Ed25519(signing),
                Public::Ed25519(decoded),
                public.to_bytes().to_vec(),
            ))
        }
        #[cfg(feature = "ml-dsa")]
        _ => {
            let signing = crate::ml_dsa::SigningKey::from_seed(alg, seed)?;
            let bytes = signing.public_key().to_vec();
            let public = crate::ml_dsa::VerifyingKey::from_bytes(alg, &bytes)?;
            Ok((Secret::MlDsa(signing), Public::MlDsa(public), bytes))
        }
        #[cfg(not(feature = "ml-dsa"))]
        _ => Err(not_built(alg)),
    }
}

/// The public key of algorithm `alg` encoded as `bytes`, for a version
/// kept without its secret (an authentic record of this keystore's).
///
/// # Errors
/// [`KmsError::InvalidSignature`] for an Ed25519 key that does not decode
/// or has small order; [`KmsError::InvalidArgument`] for an ML-DSA key of
/// the wrong length; [`KmsError::AlgorithmNotBuilt`].
pub(crate) fn public_from_bytes(alg: Alg, bytes: &[u8]) -> Result<Public, KmsError> {
    match alg {
        Alg::Ed25519 => {
            let bytes: [u8; 32] = bytes.try_into().map_err(|_| KmsError::InvalidArgument {
                what: "Ed25519 public key",
                reason: format!("{} bytes, not 32", bytes.len()),
            })?;
            let point = ed25519::decode_trusted_public_key(&bytes)?;
            Ok(Public::Ed25519(ed25519::VerifyingKey::from_parts(
                bytes, point,
            )))
        }
        #[cfg(feature = "ml-dsa")]
        _ => Ok(Public::MlDsa(crate::ml_dsa::VerifyingKey::from_bytes(
            alg, bytes,
        )?)),
        #[cfg(not(feature = "ml-dsa"))]
        _ => Err(not_built(alg)),
    }
}

impl Secret {
    /// The seed, borrowed: no copy of it is made (callers write it
    /// straight into a buffer wiped on drop).
    pub(crate) fn seed(&self) -> &[u8; SEED_LEN] {
        match self {
            Secret::Ed25519(key) => key.as_bytes(),
            #[cfg(feature = "ml-dsa")]
            Secret::MlDsa(key) => key.seed(),
        }
    }

    /// Whether the seed is `seed`, compared in constant time and in place
    /// (no copy).
    pub(crate) fn seed_is(&self, seed: &[u8; SEED_LEN]) -> bool {
        bool::from(self.seed().ct_eq(seed))
    }

    /// Signs `message`: Ed25519 (RFC 8032 §5.1.6), or ML-DSA hedged with
    /// the empty context (FIPS 204 Algorithm 2).
    ///
    /// # Errors
    /// [`KmsError::Internal`] if aws-lc fails to sign.
    pub(crate) fn sign(&self, message: &[u8]) -> Result<Signature, KmsError> {
        match self {
            Secret::Ed25519(key) => Ok(Signature::Ed25519(key.sign(message).to_bytes())),
            #[cfg(feature = "ml-dsa")]
            Secret::MlDsa(key) => Ok(Signature::MlDsa {
                alg: key.alg(),
                bytes: key.sign(message)?,
            }),
        }
    }
}

impl Public {
    /// The decoded Ed25519 key, if this is one.
    pub(crate) fn ed25519(&self) -> Option<ed25519::VerifyingKey> {
        match self {
            Public::Ed25519(key) => Some(*key),
            #[cfg(feature = "ml-dsa")]
            Public::MlDsa(_) => None,
        }
    }

    /// Verifies `signature` on `message`: Ed25519 under docs/DESIGN.md
    /// §3.2, ML-DSA under FIPS 204 Algorithm 3 with the empty context.
    ///
    /// # Errors
    /// [`KmsError::InvalidArgument`] for an Ed25519 signature of another
    /// length than 64 bytes; [`KmsError::InvalidSignature`] naming the
    /// Ed25519 rule broken; [`KmsError::InvalidMlDsaSignature`].
    pub(crate) fn verify(&self, message: &[u8], signature: &[u8]) -> Result<(), KmsError> {
        match self {
            Public::Ed25519(public) => {
                let signature: &[u8; 64] =
                    signature
                        .try_into()
                        .map_err(|_| KmsError::InvalidArgument {
                            what: "signature",
                            reason: format!(
                                "{} bytes; an Ed25519 signature has 64",
                                signature.len()
                            ),
                        })?;
                public.verify(message, signature).map_err(KmsError::from)
            }
            #[cfg(feature = "ml-dsa")]
            Public::MlDsa(public) => public.verify(message, signature),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A build without `ml-dsa` (`cargo test -p kms-core --lib`) refuses
    /// ML-DSA keys with a typed error, never a panic.
    #[cfg(not(feature = "ml-dsa"))]
    #[test]
    fn without_the_feature_ml_dsa_keys_are_refused_by_name() {
        for alg in [Alg::MlDsa44, Alg::MlDsa65, Alg::MlDsa87] {
            assert!(matches!(
                from_seed(alg, &[1; SEED_LEN]),
                Err(KmsError::AlgorithmNotBuilt { alg: a }) if a == alg
            ));
            assert!(matches!(
                public_from_bytes(alg, &vec![0; alg.public_key_len()]),
                Err(KmsError::AlgorithmNotBuilt { .. })
            ));
            let ks = crate::Keystore::new();
            assert!(matches!(
                ks.create_key("acme", "tokens", alg),
                Err(KmsError::AlgorithmNotBuilt { .. })
            ));
        }
    }

    #[test]
    fn ed25519_pairs_come_from_their_seed_in_every_build() -> Result<(), KmsError> {
        let (secret, public, bytes) = from_seed(Alg::Ed25519, &[1; SEED_LEN])?;
        assert_eq!(bytes.len(), 32);
        assert!(secret.seed_is(&[1; SEED_LEN]));
        assert!(!secret.seed_is(&[2; SEED_LEN]));
        let signature = secret.sign(b"m")?;
        public.verify(b"m", signature.as_bytes())?;
        assert!(matches!(
            public.verify(b"m", &signature.as_bytes()[1..]),
            Err(KmsError::InvalidArgument { .. })
        ));
        assert!(public_from_bytes(Alg::Ed25519, &bytes)?.ed25519().is_some());
        Ok(())
    }
}
