//! Tokens the keystore issues: [`KmsClient::sign_jwt`] (signed by
//! `sign::sign` on the actor's task; an ML-DSA key's on its caller's task
//! while the verify pool is idle, else on the pool) and the JWK Set that
//! verifies them, [`KmsClient::jwks`]. A token's `kid` is its key
//! version's `KeyId` text form and its `alg` the actor's `token_alg` (an
//! ML-DSA key's: its parameter set's name), so `verify.rs` finds the key
//! again from the `kid` alone.

use std::time::Instant;

use kms_core::{Alg, KeyId, KmsError};
use kms_jose::{claims_json, Algorithm, Jwk, JwkSet};
use serde::Serialize;

use crate::client::KmsClient;
use crate::dispatch::request::Op;

impl KmsClient {
    /// Issues a JWT: `claims` (any `Serialize` that is a JSON object with
    /// unique names) signed by the head version of `key`'s key, `kid` the
    /// head's `KeyId` text form, `alg` the actor's `token_alg` for an
    /// Ed25519 key and the parameter set's name for an ML-DSA key. An
    /// ML-DSA token (hundreds of µs) is signed on this task when the verify
    /// pool is idle and no other caller is signing on its own
    /// (`KmsConfig::sign_on_caller_when_idle`), else on the pool; an
    /// Ed25519 token on the actor's task. The claims are signed as given
    /// (add `exp`, `iat` yourself).
    ///
    /// # Errors
    /// [`KmsError::InvalidArgument`] if `claims` is not a JSON object with
    /// unique names, or `key`'s purpose is not one of
    /// `KmsConfig::token_purposes` (its tokens would not verify);
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`],
    /// [`KmsError::KeyDisabled`] or [`KmsError::KeyDestroyed`] as the key's
    /// policy says; [`KmsError::AlgorithmNotBuilt`] for an ML-DSA key when
    /// kms-jose lacks its `ml-dsa` feature; [`KmsError::Internal`] if
    /// signing on this task panicked; or one of the errors listed on
    /// [`KmsClient`].
    pub async fn sign_jwt<C: Serialize + ?Sized>(
        &self,
        key: &KeyId,
        claims: &C,
    ) -> Result<String, KmsError> {
        if !self.tokens().is_token_purpose(key.purpose()) {
            return Err(KmsError::InvalidArgument {
                what: "key",
                reason: format!("purpose `{}` is not a token purpose", key.purpose()),
            });
        }
        let claims = claims_json(claims).map_err(|e| KmsError::InvalidArgument {
            what: "claims",
            reason: e.to_string(),
        })?;
        let alg = self.tokens().alg();
        if key.alg().is_ml_dsa() && !self.shutting_down() {
            if let Some(answer) = self.sign_if_idle(Instant::now(), key, alg, &claims) {
                // Not a tokio resource: spend the cooperative budget by
                // hand, so a task looping on signatures still yields.
                tokio::task::coop::consume_budget().await;
                return answer;
            }
        }
        let key = key.clone();
        self.call(|reply| Op::SignJwt {
            key,
            alg,
            claims,
            reply,
        })
        .await
    }

    /// The JWK Set of `key`'s key: every version that verifies (from the
    /// key's `min_verify_version` to its head; none once it is destroyed),
    /// `kid` its `KeyId` text form. An Ed25519 key's JWKs are `OKP` with
    /// `alg` the actor's `token_alg` (so changing `token_alg` relabels every
    /// version: verifiers that enforce a JWK's `alg` then refuse tokens
    /// issued under the old one until they expire); an ML-DSA key's are
    /// `AKP` (RFC 9964 §4) with `alg` its parameter set's name.
    ///
    /// # Errors
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`], or one of
    /// the errors listed on [`KmsClient`]; [`KmsError::WrongAlgorithm`] or
    /// [`KmsError::Internal`] for a version whose public key is not of its
    /// algorithm's length (an authentic store never holds one).
    pub async fn jwks(&self, key: &KeyId) -> Result<JwkSet, KmsError> {
        let attestation = match self.attest(key).await {
            Ok(attestation) => attestation,
            Err(KmsError::KeyDestroyed { .. }) => return Ok(JwkSet { keys: Vec::new() }),
            Err(e) => return Err(e),
        };
        let alg = self.tokens().alg();
        let head = &attestation.head;
        let min = attestation.policy.min_verify_version;
        let keys =
            attestation
                .versions
                .iter()
                .filter(|v| v.version >= min)
                .map(|v| {
                    let id = KeyId::new(
                        head.tenant(),
                        head.purpose(),
                        head.alg(),
                        head.uuid(),
                        v.version,
                    )?;
                    if let Some(ml_dsa) = Algorithm::for_ml_dsa_key(id.alg()) {
                        return Jwk::ml_dsa(&id.to_string(), &v.public_key, ml_dsa).map_err(|e| {
                            KmsError::Internal {
                                reason: format!("the keystore's key {id}: {e}"),
                            }
                        });
                    }
                    let public: &[u8; 32] = v.public_key.as_slice().try_into().map_err(|_| {
                        KmsError::WrongAlgorithm {
                            key: id.to_string(),
                            alg: id.alg(),
                            wanted: Alg::Ed25519,
                        }
                    })?;
                    Ok(Jwk::public(&id.to_string(), public, alg))
                })
                .collect::<Result<_, KmsError>>()?;
        Ok(JwkSet { keys })
    }
}
