//! [`PublicKey`]: a trusted JWK's verification key, decoded and checked
//! once, when its set loads.
//!
//! Invariant: the key's type decides which algorithms it verifies (RFC
//! 8725 §3.1), whatever a token's header says: an Ed25519 key (`OKP`,
//! RFC 8037 §2) only `EdDSA` and `Ed25519`; an RSA key (RFC 7518 §6.3)
//! only `RS256`…`PS512`; an EC key (RFC 7518 §6.2) only the `ES*` of its
//! curve; an ML-DSA key (`AKP`, RFC 9964 §4) only its own parameter set's
//! name. RSA and EC keys exist only with the `rsa-ecdsa` feature, ML-DSA
//! keys only with `ml-dsa`, and their arithmetic is aws-lc-rs's.

use std::fmt;

use kms_core::ed25519::VerifyingKey;

use crate::alg::Algorithm;
use crate::error::JoseError;

/// A verification key of a trusted JWK.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey(Inner);

#[derive(Clone, PartialEq, Eq)]
enum Inner {
    Ed25519(VerifyingKey),
    #[cfg(feature = "rsa-ecdsa")]
    Rsa(Box<crate::aws_lc::RsaKey>),
    #[cfg(feature = "rsa-ecdsa")]
    Ec(Box<crate::aws_lc::EcKey>),
    #[cfg(feature = "ml-dsa")]
    MlDsa(Box<kms_core::ml_dsa::VerifyingKey>),
}

impl PublicKey {
    /// An Ed25519 key.
    pub fn ed25519(key: VerifyingKey) -> Self {
        PublicKey(Inner::Ed25519(key))
    }

    #[cfg(feature = "rsa-ecdsa")]
    pub(crate) fn rsa(key: crate::aws_lc::RsaKey) -> Self {
        PublicKey(Inner::Rsa(Box::new(key)))
    }

    #[cfg(feature = "rsa-ecdsa")]
    pub(crate) fn ec(key: crate::aws_lc::EcKey) -> Self {
        PublicKey(Inner::Ec(Box::new(key)))
    }

    /// An ML-DSA key (feature `ml-dsa`): it verifies only its parameter
    /// set's `alg`.
    #[cfg(feature = "ml-dsa")]
    pub fn ml_dsa(key: kms_core::ml_dsa::VerifyingKey) -> Self {
        PublicKey(Inner::MlDsa(Box::new(key)))
    }

    /// The Ed25519 key, if this is one: what a batch verifies.
    pub fn as_ed25519(&self) -> Option<&VerifyingKey> {
        match &self.0 {
            Inner::Ed25519(key) => Some(key),
            #[cfg(any(feature = "rsa-ecdsa", feature = "ml-dsa"))]
            _ => None,
        }
    }

    /// What this key verifies, for messages: `EdDSA or Ed25519`,
    /// `RS256..PS512`, `ES256`, `ES384` or an `ML-DSA-*` name.
    pub fn algorithms(&self) -> &'static str {
        match &self.0 {
            Inner::Ed25519(_) => "EdDSA or Ed25519",
            #[cfg(feature = "rsa-ecdsa")]
            Inner::Rsa(_) => "RS256..PS512",
            #[cfg(feature = "rsa-ecdsa")]
            Inner::Ec(key) => key.alg().as_str(),
            #[cfg(feature = "ml-dsa")]
            Inner::MlDsa(key) => {
                Algorithm::for_ml_dsa_key(key.alg()).map_or("ML-DSA", Algorithm::as_str)
            }
        }
    }

    /// Whether this key's type verifies `alg` (module docs).
    pub fn verifies(&self, alg: Algorithm) -> bool {
        match &self.0 {
            Inner::Ed25519(_) => alg.is_ed25519(),
            #[cfg(feature = "rsa-ecdsa")]
            Inner::Rsa(_) => crate::aws_lc::RsaKey::verifies(alg),
            #[cfg(feature = "rsa-ecdsa")]
            Inner::Ec(key) => key.alg() == alg,
            #[cfg(feature = "ml-dsa")]
            Inner::MlDsa(key) => alg.is_ml_dsa() && alg.key_alg() == Some(key.alg()),
        }
    }

    /// Checks that this key's type verifies `alg`.
    ///
    /// # Errors
    /// [`JoseError::AlgMismatch`] when it does not.
    pub fn check_alg(&self, alg: Algorithm) -> Result<(), JoseError> {
        if self.verifies(alg) {
            Ok(())
        } else {
            Err(JoseError::AlgMismatch {
                expected: self.algorithms(),
                got: alg.as_str(),
            })
        }
    }

    /// Verifies `signature` over `message` under `alg`, one signature at a
    /// time (Ed25519 under the rule of `kms_core::ed25519`, the others by
    /// aws-lc-rs). An RSA signature costs some tens of µs, an ECDSA one
    /// some tens to hundreds: call it off an async runtime's workers.
    ///
    /// # Errors
    /// [`JoseError::AlgMismatch`] when the key's type does not verify
    /// `alg`; [`JoseError::SignatureLength`] for an Ed25519 or ML-DSA
    /// signature not of its algorithm's length; [`JoseError::Signature`]
    /// (Ed25519, naming the rule) or [`JoseError::SignatureRejected`] (the
    /// others) when it does not verify. An ML-DSA signature costs tens to
    /// a few hundred µs.
    pub fn verify(
        &self,
        alg: Algorithm,
        message: &[u8],
        signature: &[u8],
    ) -> Result<(), JoseError> {
        self.check_alg(alg)?;
        match &self.0 {
            Inner::Ed25519(key) => {
                let signature: &[u8; 64] =
                    signature
                        .try_into()
                        .map_err(|_| JoseError::SignatureLength {
                            len: signature.len(),
                            alg: alg.as_str(),
                        })?;
                key.verify(message, signature).map_err(JoseError::Signature)
            }
            #[cfg(feature = "rsa-ecdsa")]
            Inner::Rsa(key) => key.verify(alg, message, signature),
            #[cfg(feature = "rsa-ecdsa")]
            Inner::Ec(key) => key.verify(message, signature),
            #[cfg(feature = "ml-dsa")]
            Inner::MlDsa(key) => {
                if signature.len() != key.alg().signature_len() {
                    return Err(JoseError::SignatureLength {
                        len: signature.len(),
                        alg: alg.as_str(),
                    });
                }
                key.verify(message, signature)
                    .map_err(|_| JoseError::SignatureRejected { alg: alg.as_str() })
            }
        }
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Inner::Ed25519(key) => f.debug_tuple("Ed25519").field(key).finish(),
            #[cfg(feature = "rsa-ecdsa")]
            Inner::Rsa(key) => fmt::Debug::fmt(key, f),
            #[cfg(feature = "rsa-ecdsa")]
            Inner::Ec(key) => fmt::Debug::fmt(key, f),
            #[cfg(feature = "ml-dsa")]
            Inner::MlDsa(key) => fmt::Debug::fmt(key, f),
        }
    }
}
