//! A token signed with the keystore's head version of a key and audited
//! ([`sign`]), wherever it is signed (the actor's task, the verify pool, a
//! caller's task), and the `alg` a key's tokens carry ([`token_alg`]).
//! Depends on nothing of the actor's but the audit, so every place that
//! signs can use it.

use kms_core::{Alg, KeyId, Keystore, KmsError};
use kms_jose::{finish_compact, signing_input, Algorithm, Header};

use crate::audit;

/// Signs a JWT with the head of `key`'s key and emits its audit event
/// (`sign`, the head that signed, by `principal`); returns the compact
/// JWS. An Ed25519 key signs under `alg` (the actor's `token_alg`), on the
/// actor's task; an ML-DSA key under its parameter set's name (RFC 9964
/// §2), on its caller's task (`CallerSide::sign_if_idle`) or on the pool
/// (`ops.rs`: hundreds of µs).
///
/// # Errors
/// The keystore's ([`Keystore::sign_message_naming_head`]);
/// [`KmsError::AlgorithmNotBuilt`] for an ML-DSA key when kms-jose lacks
/// its `ml-dsa` feature (its tokens would not verify).
pub(crate) fn sign(
    keystore: &Keystore,
    key: &KeyId,
    alg: Algorithm,
    claims: &[u8],
    principal: Option<&str>,
) -> Result<String, KmsError> {
    let result = signed(keystore, key, alg, claims);
    audit::key_op("sign", key, principal, &result, |(head, _)| Some(head), "");
    result.map(|(_, token)| token)
}

/// [`sign`] without the audit: the head that signed and the token.
fn signed(
    keystore: &Keystore,
    key: &KeyId,
    alg: Algorithm,
    claims: &[u8],
) -> Result<(KeyId, String), KmsError> {
    let alg = token_alg(key.alg(), alg);
    // A build whose kms-jose lacks `ml-dsa` would issue tokens it cannot
    // verify: refused instead.
    if !alg.is_supported() {
        return Err(KmsError::AlgorithmNotBuilt { alg: key.alg() });
    }
    let (head, input, signature) = keystore.sign_message_naming_head(key, |head| {
        signing_input(&Header::new(alg, Some(head.to_string())), claims).into_bytes()
    })?;
    let input = String::from_utf8(input).map_err(|_| KmsError::Internal {
        reason: "a JWS signing input was not text".to_owned(),
    })?;
    Ok((head, finish_compact(input, signature.as_bytes())))
}

/// The `alg` of tokens a key of algorithm `key_alg` signs: an ML-DSA
/// key's parameter set's name; for Ed25519, `ed25519_alg` (the actor's
/// `token_alg`).
pub(crate) fn token_alg(key_alg: Alg, ed25519_alg: Algorithm) -> Algorithm {
    Algorithm::for_ml_dsa_key(key_alg).unwrap_or(ed25519_alg)
}
