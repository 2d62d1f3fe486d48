//! RSA and ECDSA verification keys (feature `rsa-ecdsa`): decoded from a
//! JWK's members once, each parsed by aws-lc-rs into the form it verifies
//! with (`ParsedPublicKey`), so a verification parses nothing.
//!
//! Invariants: an RSA modulus has 2048 to 8192 bits (RFC 7518 §3.3 asks
//! for at least 2048; aws-lc-rs's `RSA_*_2048_8192_*` parameters verify
//! that range), and an RSA key holds one parsed key per algorithm it may
//! verify; an EC key's point is on its curve (P-256 or P-384), its
//! coordinates the curve's full length (RFC 7518 §6.2.1.2).

use std::fmt;

use aws_lc_rs::signature::{
    self, EcdsaVerificationAlgorithm, ParsedPublicKey, RsaParameters, RsaPublicKeyComponents,
};

use crate::alg::Algorithm;
use crate::error::JoseError;

/// Fewest bits of an RSA modulus accepted (RFC 7518 §3.3, §3.5).
pub const MIN_RSA_BITS: usize = 2048;
/// Most bits of an RSA modulus accepted (aws-lc-rs's verification range).
pub const MAX_RSA_BITS: usize = 8192;

/// The RSA algorithms and aws-lc-rs's parameters for each (RFC 7518 §3.3:
/// PKCS #1 v1.5; §3.5: PSS with MGF1 of the same hash and a salt as long
/// as the hash).
const RSA_ALGS: [(Algorithm, &RsaParameters); 6] = [
    (Algorithm::RS256, &signature::RSA_PKCS1_2048_8192_SHA256),
    (Algorithm::RS384, &signature::RSA_PKCS1_2048_8192_SHA384),
    (Algorithm::RS512, &signature::RSA_PKCS1_2048_8192_SHA512),
    (Algorithm::PS256, &signature::RSA_PSS_2048_8192_SHA256),
    (Algorithm::PS384, &signature::RSA_PSS_2048_8192_SHA384),
    (Algorithm::PS512, &signature::RSA_PSS_2048_8192_SHA512),
];

/// Why a JWK's key material is not used.
#[derive(Debug)]
pub(crate) enum Unusable {
    /// Well formed, but must not be used (an RSA modulus outside 2048 to
    /// 8192 bits): the key is skipped.
    Weak(String),
    /// Malformed: the key cannot be a key of its type.
    Invalid(String),
}

/// An RSA public key.
#[derive(Clone)]
pub(crate) struct RsaKey {
    /// The modulus, big-endian, without leading zeros.
    n: Vec<u8>,
    /// The public exponent, big-endian, without leading zeros.
    e: Vec<u8>,
    /// One parsed key per algorithm this key may verify.
    parsed: Vec<(Algorithm, ParsedPublicKey)>,
}

impl RsaKey {
    /// The key of modulus `n` and exponent `e` (big-endian; leading zero
    /// bytes are dropped: RFC 7518 §6.3.1.1 forbids them, some encoders
    /// write one), for `alg` if given, else for every RSA algorithm.
    pub(crate) fn new(n: &[u8], e: &[u8], alg: Option<Algorithm>) -> Result<Self, Unusable> {
        let n = strip_zeros(n);
        let e = strip_zeros(e);
        let bits = match n.first() {
            Some(first) => n.len() * 8 - first.leading_zeros() as usize,
            None => 0,
        };
        if !(MIN_RSA_BITS..=MAX_RSA_BITS).contains(&bits) {
            return Err(Unusable::Weak(format!(
                "an RSA modulus of {bits} bits (accepted: {MIN_RSA_BITS} to {MAX_RSA_BITS})"
            )));
        }
        let components = RsaPublicKeyComponents { n, e };
        let parsed = RSA_ALGS
            .iter()
            .filter(|(each, _)| alg.is_none_or(|alg| alg == *each))
            .map(|(each, params)| {
                components
                    .to_parsed_public_key(params)
                    .map(|key| (*each, key))
                    .map_err(|e| Unusable::Invalid(format!("not a usable RSA key: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RsaKey {
            n: n.to_vec(),
            e: e.to_vec(),
            parsed,
        })
    }

    /// Whether `alg` is an RSA algorithm.
    pub(crate) fn verifies(alg: Algorithm) -> bool {
        RSA_ALGS.iter().any(|(each, _)| *each == alg)
    }

    pub(crate) fn verify(
        &self,
        alg: Algorithm,
        message: &[u8],
        signature: &[u8],
    ) -> Result<(), JoseError> {
        let (_, key) =
            self.parsed
                .iter()
                .find(|(each, _)| *each == alg)
                .ok_or(JoseError::AlgMismatch {
                    expected: self
                        .parsed
                        .first()
                        .map_or("RS256..PS512", |(a, _)| a.as_str()),
                    got: alg.as_str(),
                })?;
        key.verify_sig(message, signature)
            .map_err(|_| JoseError::SignatureRejected { alg: alg.as_str() })
    }
}

impl PartialEq for RsaKey {
    fn eq(&self, other: &Self) -> bool {
        let algs = |key: &RsaKey| key.parsed.iter().map(|(a, _)| *a).collect::<Vec<_>>();
        self.n == other.n && self.e == other.e && algs(self) == algs(other)
    }
}

impl Eq for RsaKey {}

impl fmt::Debug for RsaKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rsa")
            .field("bits", &(self.n.len() * 8))
            .field(
                "algs",
                &self
                    .parsed
                    .iter()
                    .map(|(a, _)| a.as_str())
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// An EC public key on P-256 (for `ES256`) or P-384 (for `ES384`).
#[derive(Clone)]
pub(crate) struct EcKey {
    alg: Algorithm,
    /// The uncompressed point `04 ‖ x ‖ y` (SEC 1 §2.3.3).
    point: Vec<u8>,
    parsed: ParsedPublicKey,
}

impl EcKey {
    /// The curves this build verifies, by JWK `crv` (RFC 7518 §6.2.1.1),
    /// with their algorithm and coordinate length (bytes).
    pub(crate) fn curve(crv: &str) -> Option<(Algorithm, usize)> {
        match crv {
            "P-256" => Some((Algorithm::ES256, 32)),
            "P-384" => Some((Algorithm::ES384, 48)),
            _ => None,
        }
    }

    /// The key of coordinates `x` and `y` on the curve of `alg` (`ES256`
    /// or `ES384`, from [`EcKey::curve`]).
    pub(crate) fn new(alg: Algorithm, x: &[u8], y: &[u8]) -> Result<Self, Unusable> {
        let (verification, len): (&'static EcdsaVerificationAlgorithm, usize) = match alg {
            Algorithm::ES256 => (&signature::ECDSA_P256_SHA256_FIXED, 32),
            Algorithm::ES384 => (&signature::ECDSA_P384_SHA384_FIXED, 48),
            _ => return Err(Unusable::Invalid(format!("{alg} is not an ECDSA alg"))),
        };
        if x.len() != len || y.len() != len {
            return Err(Unusable::Invalid(format!(
                "`x` and `y` of {} and {} bytes, the curve's are {len}",
                x.len(),
                y.len()
            )));
        }
        let mut point = Vec::with_capacity(1 + 2 * len);
        point.push(4);
        point.extend_from_slice(x);
        point.extend_from_slice(y);
        let parsed = ParsedPublicKey::new(verification, &point)
            .map_err(|e| Unusable::Invalid(format!("not a point of the curve: {e}")))?;
        Ok(EcKey { alg, point, parsed })
    }

    /// `ES256` or `ES384`.
    pub(crate) fn alg(&self) -> Algorithm {
        self.alg
    }

    pub(crate) fn verify(&self, message: &[u8], signature: &[u8]) -> Result<(), JoseError> {
        self.parsed
            .verify_sig(message, signature)
            .map_err(|_| JoseError::SignatureRejected {
                alg: self.alg.as_str(),
            })
    }
}

impl PartialEq for EcKey {
    fn eq(&self, other: &Self) -> bool {
        self.alg == other.alg && self.point == other.point
    }
}

impl Eq for EcKey {}

impl fmt::Debug for EcKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ec")
            .field("alg", &self.alg.as_str())
            .finish_non_exhaustive()
    }
}

fn strip_zeros(bytes: &[u8]) -> &[u8] {
    let first = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len());
    &bytes[first..]
}
