//! ML-DSA (FIPS 204) through aws-lc-rs (feature `ml-dsa`): a key made
//! from its 32-byte seed ξ (FIPS 204 Algorithm 6, `ML-DSA.KeyGen_internal`;
//! the seed is RFC 9964's `priv`), hedged signing with the empty context
//! (FIPS 204 Algorithm 2 with fresh randomness, its default; RFC 9964
//! requires the empty context), and verification (Algorithm 3) under a
//! public key in FIPS 204's encoding (`pkEncode`).
//!
//! Invariants:
//! * a public key is taken only at its parameter set's exact length
//!   ([`Alg::public_key_len`]): aws-lc-rs would also take an SPKI DER
//!   encoding, which no JOSE key or record of ours holds;
//! * the seed lives in one heap buffer, written there from the caller's
//!   reference and wiped on drop: moving a key moves only the pointer, so
//!   no stale copy of the seed is left on the stack for a later copy of a
//!   larger value to carry into the heap; the expanded private key lives
//!   inside aws-lc, whose `OPENSSL_free` wipes what it frees;
//! * `Debug` prints the parameter set and never the seed.

use std::fmt;

use aws_lc_rs::signature::{
    KeyPair, ParsedPublicKey, PqdsaKeyPair, PqdsaSigningAlgorithm, PqdsaVerificationAlgorithm,
    ML_DSA_44, ML_DSA_44_SIGNING, ML_DSA_65, ML_DSA_65_SIGNING, ML_DSA_87, ML_DSA_87_SIGNING,
};
use zeroize::Zeroize;

use crate::error::KmsError;
use crate::key_id::Alg;

/// An ML-DSA seed's length (bytes): ξ, FIPS 204 Algorithm 1.
pub const SEED_LEN: usize = 32;

/// aws-lc-rs's signing and verification algorithms for `alg`.
///
/// # Errors
/// [`KmsError::InvalidArgument`] for Ed25519, which is not ML-DSA.
fn algorithms(
    alg: Alg,
) -> Result<
    (
        &'static PqdsaSigningAlgorithm,
        &'static PqdsaVerificationAlgorithm,
    ),
    KmsError,
> {
    match alg {
        Alg::MlDsa44 => Ok((&ML_DSA_44_SIGNING, &ML_DSA_44)),
        Alg::MlDsa65 => Ok((&ML_DSA_65_SIGNING, &ML_DSA_65)),
        Alg::MlDsa87 => Ok((&ML_DSA_87_SIGNING, &ML_DSA_87)),
        Alg::Ed25519 => Err(KmsError::InvalidArgument {
            what: "algorithm",
            reason: format!("{alg} is not an ML-DSA parameter set"),
        }),
    }
}

/// An ML-DSA private key: its seed and the key pair expanded from it.
pub struct SigningKey {
    alg: Alg,
    /// Wiped by `Drop`.
    seed: Box<[u8; SEED_LEN]>,
    pair: PqdsaKeyPair,
}

impl Drop for SigningKey {
    fn drop(&mut self) {
        self.seed.zeroize();
    }
}

impl SigningKey {
    /// The key of parameter set `alg` whose seed is `seed` (FIPS 204
    /// Algorithm 6): the same seed always gives the same key.
    ///
    /// # Errors
    /// [`KmsError::InvalidArgument`] for Ed25519; [`KmsError::Internal`] if
    /// aws-lc refuses the seed (it takes every 32-byte seed).
    pub fn from_seed(alg: Alg, seed: &[u8; SEED_LEN]) -> Result<SigningKey, KmsError> {
        let (signing, _) = algorithms(alg)?;
        // Zeros moved to the heap, then the seed written there in place.
        let mut own = Box::new([0u8; SEED_LEN]);
        own.copy_from_slice(seed);
        let pair =
            PqdsaKeyPair::from_seed(signing, own.as_slice()).map_err(|e| KmsError::Internal {
                reason: format!("aws-lc-rs refused an {alg} seed: {e}"),
            })?;
        Ok(SigningKey {
            alg,
            seed: own,
            pair,
        })
    }

    /// The parameter set.
    pub fn alg(&self) -> Alg {
        self.alg
    }

    /// The 32-byte seed the key was made from (RFC 9964 `priv`).
    pub(crate) fn seed(&self) -> &[u8; SEED_LEN] {
        &self.seed
    }

    /// The public key, FIPS 204 `pkEncode` ([`Alg::public_key_len`]
    /// bytes).
    pub fn public_key(&self) -> &[u8] {
        self.pair.public_key().as_ref()
    }

    /// Signs `message` (FIPS 204 Algorithm 2, hedged, empty context):
    /// [`Alg::signature_len`] bytes, different on every call.
    ///
    /// # Errors
    /// [`KmsError::Internal`] if aws-lc fails to sign (its random source
    /// included).
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, KmsError> {
        let mut signature = vec![0u8; self.alg.signature_len()];
        let len = self
            .pair
            .sign(message, &mut signature)
            .map_err(|_| KmsError::Internal {
                reason: format!("aws-lc-rs failed to sign with an {} key", self.alg),
            })?;
        signature.truncate(len);
        Ok(signature)
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("alg", &self.alg)
            .finish_non_exhaustive()
    }
}

/// An ML-DSA public key, parsed once to verify many signatures. Two keys
/// are equal when their parameter sets and encodings are.
#[derive(Clone)]
pub struct VerifyingKey {
    alg: Alg,
    bytes: Box<[u8]>,
    parsed: ParsedPublicKey,
}

impl PartialEq for VerifyingKey {
    fn eq(&self, other: &Self) -> bool {
        self.alg == other.alg && self.bytes == other.bytes
    }
}

impl Eq for VerifyingKey {}

impl VerifyingKey {
    /// The public key of parameter set `alg` encoded as `bytes` (FIPS 204
    /// `pkEncode`).
    ///
    /// # Errors
    /// [`KmsError::InvalidArgument`] for Ed25519, and for bytes of another
    /// length than
    /// [`Alg::public_key_len`], or that aws-lc does not take as a key.
    pub fn from_bytes(alg: Alg, bytes: &[u8]) -> Result<VerifyingKey, KmsError> {
        let (_, verification) = algorithms(alg)?;
        let refused = |reason: String| KmsError::InvalidArgument {
            what: "ML-DSA public key",
            reason,
        };
        if bytes.len() != alg.public_key_len() {
            return Err(refused(format!(
                "{} bytes; an {alg} public key has {}",
                bytes.len(),
                alg.public_key_len()
            )));
        }
        let parsed = ParsedPublicKey::new(verification, bytes)
            .map_err(|e| refused(format!("aws-lc-rs refused it: {e}")))?;
        Ok(VerifyingKey {
            alg,
            bytes: bytes.into(),
            parsed,
        })
    }

    /// The parameter set.
    pub fn alg(&self) -> Alg {
        self.alg
    }

    /// The key's encoding (FIPS 204 `pkEncode`, [`Alg::public_key_len`]
    /// bytes).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Verifies `signature` on `message` (FIPS 204 Algorithm 3, empty
    /// context).
    ///
    /// # Errors
    /// [`KmsError::InvalidMlDsaSignature`] for a signature of another
    /// length than [`Alg::signature_len`], or one that does not verify.
    pub fn verify(&self, message: &[u8], signature: &[u8]) -> Result<(), KmsError> {
        if signature.len() != self.alg.signature_len() {
            return Err(KmsError::InvalidMlDsaSignature {
                alg: self.alg,
                reason: "its length is not the parameter set's",
            });
        }
        self.parsed
            .verify_sig(message, signature)
            .map_err(|_| KmsError::InvalidMlDsaSignature {
                alg: self.alg,
                reason: "it does not verify under the key",
            })
    }
}

impl fmt::Debug for VerifyingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifyingKey")
            .field("alg", &self.alg)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_one_key_and_signatures_verify_only_under_it() -> Result<(), KmsError> {
        for alg in [Alg::MlDsa44, Alg::MlDsa65, Alg::MlDsa87] {
            let key = SigningKey::from_seed(alg, &[7; 32])?;
            assert_eq!(key.public_key().len(), alg.public_key_len());
            assert_eq!(
                SigningKey::from_seed(alg, &[7; 32])?.public_key(),
                key.public_key()
            );
            let (a, b) = (key.sign(b"m")?, key.sign(b"m")?);
            assert_eq!(a.len(), alg.signature_len());
            assert_ne!(a, b, "hedged: fresh randomness each time");
            let public = VerifyingKey::from_bytes(alg, key.public_key())?;
            public.verify(b"m", &a)?;
            public.verify(b"m", &b)?;
            assert!(matches!(
                public.verify(b"n", &a),
                Err(KmsError::InvalidMlDsaSignature { .. })
            ));
            assert!(matches!(
                public.verify(b"m", &a[1..]),
                Err(KmsError::InvalidMlDsaSignature { .. })
            ));
            let other = SigningKey::from_seed(alg, &[8; 32])?;
            assert!(VerifyingKey::from_bytes(alg, other.public_key())?
                .verify(b"m", &a)
                .is_err());
            assert!(matches!(
                VerifyingKey::from_bytes(alg, &key.public_key()[1..]),
                Err(KmsError::InvalidArgument { .. })
            ));
            assert_eq!(
                format!("{key:?}"),
                format!("SigningKey {{ alg: {alg:?}, .. }}")
            );
        }
        assert!(SigningKey::from_seed(Alg::Ed25519, &[7; 32]).is_err());
        Ok(())
    }
}
