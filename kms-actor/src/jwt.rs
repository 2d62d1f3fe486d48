//! JWTs through the actor: [`KmsClient::sign_jwt`], [`KmsClient::verify_jwt`]
//! and [`KmsClient::jwks`], and the trusted external keys they find by
//! `kid` ([`TrustedKeys`]).
//!
//! A token's key is found by its `kid`, in exactly one place: a `kid` in
//! the `KeyId` text form (`kms:…`) names a keystore version, and is
//! accepted only if its key's tenant and purpose are among the
//! [`TokenKeys`] the caller accepts and its purpose is one of
//! `KmsConfig::token_purposes`, and then only under the `alg` the JWK Set
//! publishes it with (`KmsConfig::token_alg`); any other `kid` names a
//! trusted external JWK (decoded once, when its set was loaded), accepted
//! when the
//! caller's [`TokenKeys`] accept trusted keys. Loading refuses a trusted
//! `kid` in the `KeyId` form (it could name a version the keystore makes
//! later) and a `kid` twice. The signature is then verified on the same
//! path as [`KmsClient::verify`] (rule C on a quiet node, else a batch on a
//! combining caller's task or the pool), and the claims are validated only
//! after it verified; the answer says which key signed ([`JwtSigner`]).
//! With the verified-token cache on (`crate::token_cache`), a token that
//! verified before, at the current key-set generation, is answered from it:
//! no parse, no signature (so no `kms_ops_total{op="verify"}` count), its
//! signer and claims checked again.
//!
//! Every refusal of the token itself is [`KmsError::InvalidToken`] with
//! the reason's stable code, counted in `kms_token_refusals_total{code}`
//! and told at debug level (target `kms_actor::jwt`, the reason escaped); the KMS's own errors (`Overloaded`,
//! `ShuttingDown`, `Dropped`, `Internal`) pass through unchanged, so an
//! HTTP layer can answer 401 for the first and 503 for the others.

use std::collections::HashMap;
use std::time::SystemTime;

use bytes::Bytes;
use kms_core::{KeyId, Keystore, KmsError};
use kms_jose::{
    claims_json, finish_compact, signing_input, Algorithm, Claims, CompactJws, Header, JoseError,
    Jwk, JwkSet, TrustedJwk, TrustedJwkSet, Validation, MAX_TOKEN_BYTES,
};
use serde::Serialize;

use crate::client::KmsClient;
use crate::request::{Op, VerifyBy};
use crate::token_cache;
use crate::token_keys::TokenKeys;

/// Trusted external keys by `kid`.
#[derive(Debug, Default)]
pub(crate) struct TrustedKeys {
    by_kid: HashMap<String, TrustedJwk>,
}

impl TrustedKeys {
    /// The keys of `sets`, checked: no `kid` twice, none in the `KeyId`
    /// text form (the keystore's namespace). Keys a set skipped are logged
    /// (`warn`, target `kms_actor::jwt`, with the request `topic`).
    ///
    /// # Errors
    /// [`KmsError::InvalidConfig`] naming the `kid`.
    pub(crate) fn load(sets: &[TrustedJwkSet], topic: &str) -> Result<Self, KmsError> {
        let mut by_kid = HashMap::new();
        for set in sets {
            for skipped in &set.skipped {
                tracing::warn!(
                    target: "kms_actor::jwt",
                    topic,
                    kid = skipped.kid.as_deref().unwrap_or(""),
                    reason = skipped.reason.as_str(),
                    "a key of a trusted JWK Set was skipped"
                );
            }
            for key in &set.keys {
                let kid = key.kid.chars().take(128).collect::<String>();
                if key.kid.parse::<KeyId>().is_ok() {
                    return Err(KmsError::InvalidConfig {
                        reason: format!(
                            "trusted kid {kid:?} has the form of a keystore key id, which only the keystore names"
                        ),
                    });
                }
                if by_kid.insert(key.kid.clone(), key.clone()).is_some() {
                    return Err(KmsError::InvalidConfig {
                        reason: format!(
                            "kid {kid:?} appears more than once among the trusted JWK Sets"
                        ),
                    });
                }
            }
        }
        Ok(TrustedKeys { by_kid })
    }

    /// How many keys are trusted.
    pub(crate) fn len(&self) -> usize {
        self.by_kid.len()
    }
}

/// Signs a JWT with the head of `key`'s key (on the actor's task);
/// returns the head's id and the compact JWS.
pub(crate) fn sign(
    keystore: &Keystore,
    key: &KeyId,
    alg: Algorithm,
    claims: &[u8],
) -> Result<(KeyId, String), KmsError> {
    let (head, input, signature) = keystore.sign_naming_head(key, |head| {
        signing_input(&Header::new(alg, Some(head.to_string())), claims).into_bytes()
    })?;
    let input = String::from_utf8(input).map_err(|_| KmsError::Internal {
        reason: "a JWS signing input was not text".to_owned(),
    })?;
    Ok((head, finish_compact(input, &signature)))
}

/// A refusal of the token itself.
fn invalid(e: JoseError) -> KmsError {
    KmsError::InvalidToken {
        code: e.code(),
        reason: e.to_string(),
    }
}

/// Why a token naming a trusted key is refused when the caller's
/// `TokenKeys` accept none (completes "kid … ").
const TRUSTED_NOT_ACCEPTED: &str = "is not a key this verifier accepts";

fn unknown_kid(kid: &str, why: &str) -> KmsError {
    KmsError::InvalidToken {
        code: "jose.unknown_kid",
        reason: format!("kid {:?} {why}", kid.chars().take(128).collect::<String>()),
    }
}

/// Which key signed a verified token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwtSigner {
    /// A keystore version (the token's `kid`).
    Key(KeyId),
    /// A trusted external JWK, by its `kid`.
    Trusted(String),
}

/// A token that verified: its claims, validated, and who signed it.
#[derive(Debug, Clone, PartialEq)]
pub struct VerifiedJwt {
    /// The claims.
    pub claims: Claims,
    /// The key that signed it.
    pub signer: JwtSigner,
}

impl KmsClient {
    /// Issues a JWT: `claims` (any `Serialize` that is a JSON object with
    /// unique names) signed by the head version of `key`'s key, `kid` the
    /// head's `KeyId` text form, `alg` the actor's `token_alg`. The claims
    /// are signed as given (add `exp`, `iat` yourself).
    ///
    /// # Errors
    /// [`KmsError::InvalidArgument`] if `claims` is not a JSON object with
    /// unique names, or `key`'s purpose is not one of
    /// `KmsConfig::token_purposes` (its tokens would not verify);
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`], or one of
    /// the errors listed on [`KmsClient`].
    pub async fn sign_jwt<C: Serialize + ?Sized>(
        &self,
        key: &KeyId,
        claims: &C,
    ) -> Result<String, KmsError> {
        if !self
            .shared()
            .token_purposes
            .iter()
            .any(|p| p == key.purpose())
        {
            return Err(KmsError::InvalidArgument {
                what: "key",
                reason: format!("purpose `{}` is not a token purpose", key.purpose()),
            });
        }
        let claims = claims_json(claims).map_err(|e| KmsError::InvalidArgument {
            what: "claims",
            reason: e.to_string(),
        })?;
        let (key, alg) = (key.clone(), self.shared().token_alg);
        self.call(|reply| Op::SignJwt {
            key,
            alg,
            claims,
            reply,
        })
        .await
    }

    /// Verifies a compact JWS/JWT (at most 8 KiB) and returns its claims,
    /// once they pass `validation`, with the key that signed it, which
    /// must be one of `keys`. The key is found by the token's `kid`
    /// (module docs); the signature takes the path of
    /// [`KmsClient::verify`], unless the verified-token cache
    /// ([`crate::KmsConfig::token_cache`]) holds the token from a
    /// verification at the current key-set generation: then its signer and
    /// claims are checked again and nothing is parsed or verified.
    ///
    /// # Errors
    /// [`KmsError::InvalidToken`] for every refusal of the token (its
    /// `code` says why: `jose.malformed`, `jose.unsupported_alg`,
    /// `jose.missing_kid`, `jose.unknown_kid` (also for a key `keys` does
    /// not accept), `jose.alg_mismatch`,
    /// `jose.invalid_signature`, `jose.expired`, …, and
    /// `kms.version_disallowed` for a keystore version below its key's
    /// `min_verify_version`, `kms.key_destroyed` for a destroyed key's);
    /// or one of the errors listed on [`KmsClient`].
    pub async fn verify_jwt(
        &self,
        token: &str,
        keys: &TokenKeys,
        validation: &Validation,
    ) -> Result<VerifiedJwt, KmsError> {
        let verified = self.check_jwt(token, keys, validation).await;
        if let Err(KmsError::InvalidToken { code, reason }) = &verified {
            self.refused(code, reason);
        }
        verified
    }

    /// Counts a token refusal by its code and tells why at debug level
    /// (never louder: a flood of bad tokens must not flood the logs). The
    /// reason is a `&str` field, which `tracing` writes escaped.
    fn refused(&self, code: &'static str, reason: &str) {
        let topic = self.shared().topic.clone();
        metrics::counter!(crate::metrics::TOKEN_REFUSALS_TOTAL, "topic" => topic, "code" => code)
            .increment(1);
        tracing::debug!(
            target: "kms_actor::jwt",
            topic = self.shared().topic.as_str(),
            code,
            reason,
            "token refused"
        );
    }

    /// [`KmsClient::verify_jwt`] without the accounting of refusals: from
    /// the verified-token cache when it holds the token at the current
    /// key-set generation, else in full (and then cached if it verified
    /// and the key set did not change meanwhile).
    async fn check_jwt(
        &self,
        token: &str,
        keys: &TokenKeys,
        validation: &Validation,
    ) -> Result<VerifiedJwt, KmsError> {
        let shared = self.shared();
        // An oversized token is refused by the parser before anything is
        // hashed or counted.
        let cache = match &shared.token_cache {
            Some(cache) if token.len() <= MAX_TOKEN_BYTES => cache,
            _ => return self.check_jwt_in_full(token, keys, validation).await,
        };
        // Admitted as every call is, when it starts: once shutdown began,
        // nothing is answered from memory either.
        if self.shutting_down() {
            return Err(KmsError::ShuttingDown);
        }
        // Read before anything is looked up (token_cache.rs): what is
        // computed from here on is tagged with it.
        let generation = shared.generation.get();
        let key = token_cache::key(token);
        if let Some(entry) = cache.get(&key, generation, &shared.counters) {
            // The checks a fresh verification makes after the signature,
            // in its order.
            self.check_signer(&entry.signer, keys)?;
            validation
                .validate(&entry.claims, SystemTime::now())
                .map_err(invalid)?;
            return Ok(VerifiedJwt {
                claims: entry.claims.clone(),
                signer: entry.signer.clone(),
            });
        }
        let verified = self.check_jwt_in_full(token, keys, validation).await?;
        // A verdict computed before a change of the key set is stored
        // only if no change happened since (its tag would make it unused
        // anyway; this spares the space).
        if shared.generation.get() == generation {
            cache.insert(
                key,
                generation,
                verified.claims.clone(),
                verified.signer.clone(),
            );
        }
        Ok(verified)
    }

    /// Whether `keys` (and the token purposes) accept `signer`, as
    /// [`KmsClient::check_jwt_in_full`] decides from the `kid`.
    ///
    /// # Errors
    /// `jose.unknown_kid` when they do not.
    fn check_signer(&self, signer: &JwtSigner, keys: &TokenKeys) -> Result<(), KmsError> {
        let why = match signer {
            JwtSigner::Key(id) => self.keystore_refusal(id, keys),
            JwtSigner::Trusted(_) => (!keys.accepts_trusted()).then_some(TRUSTED_NOT_ACCEPTED),
        };
        match (why, signer) {
            (None, _) => Ok(()),
            (Some(why), JwtSigner::Key(id)) => Err(unknown_kid(&id.to_string(), why)),
            (Some(why), JwtSigner::Trusted(kid)) => Err(unknown_kid(kid, why)),
        }
    }

    /// Why a token naming the keystore key `id` is refused before its
    /// signature is checked, if it is: its purpose is not one of
    /// `KmsConfig::token_purposes`, or `keys` do not accept its tenant and
    /// purpose. The text completes "kid … ".
    fn keystore_refusal(&self, id: &KeyId, keys: &TokenKeys) -> Option<&'static str> {
        if !self
            .shared()
            .token_purposes
            .iter()
            .any(|p| p == id.purpose())
        {
            Some("names a key whose purpose is not a token purpose")
        } else if !keys.accepts_keystore(id.tenant(), id.purpose()) {
            Some("names a key this verifier does not accept")
        } else {
            None
        }
    }

    /// Parses, finds the key, verifies the signature, validates the
    /// claims: a token checked in full.
    async fn check_jwt_in_full(
        &self,
        token: &str,
        keys: &TokenKeys,
        validation: &Validation,
    ) -> Result<VerifiedJwt, KmsError> {
        let jws = CompactJws::parse(token).map_err(invalid)?;
        let header = jws.header();
        let Some(kid) = header.kid() else {
            return Err(KmsError::InvalidToken {
                code: "jose.missing_kid",
                reason: "the token has no kid".to_owned(),
            });
        };
        let (by, signer) = match kid.parse::<KeyId>() {
            Ok(id) => {
                if let Some(why) = self.keystore_refusal(&id, keys) {
                    return Err(unknown_kid(kid, why));
                }
                // A keystore key verifies the alg the JWK Set publishes it
                // with (`token_alg`), as a verifier that enforces a JWK's
                // `alg` does.
                let published = self.shared().token_alg;
                if header.alg() != published {
                    return Err(invalid(JoseError::AlgMismatch {
                        expected: published.as_str(),
                        got: header.alg().as_str(),
                    }));
                }
                (VerifyBy::Key(id.clone()), JwtSigner::Key(id))
            }
            Err(_) if !keys.accepts_trusted() => {
                return Err(unknown_kid(kid, TRUSTED_NOT_ACCEPTED));
            }
            Err(_) => {
                let trusted = self
                    .shared()
                    .trusted
                    .read()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .by_kid
                    .get(kid)
                    .cloned()
                    .ok_or_else(|| unknown_kid(kid, "is not a trusted key"))?;
                trusted.check_alg(header.alg()).map_err(invalid)?;
                (
                    VerifyBy::Verifying(trusted.key),
                    JwtSigner::Trusted(trusted.kid),
                )
            }
        };
        let message = Bytes::copy_from_slice(jws.signing_input());
        match self.verify_by(by, message, *jws.signature()).await {
            Ok(()) => {}
            Err(KmsError::InvalidSignature(e)) => return Err(invalid(JoseError::Signature(e))),
            Err(KmsError::UnknownKey { .. } | KmsError::UnknownVersion { .. }) => {
                return Err(unknown_kid(kid, "is not a version in the keystore"))
            }
            // The keystore's policy refuses the version: a refusal of the
            // token, under the KMS error's own code.
            Err(e @ (KmsError::VersionDisallowed { .. } | KmsError::KeyDestroyed { .. })) => {
                return Err(KmsError::InvalidToken {
                    code: e.code(),
                    reason: e.to_string(),
                })
            }
            Err(e) => return Err(e),
        }
        let claims = jws.claims().map_err(invalid)?;
        validation
            .validate(&claims, SystemTime::now())
            .map_err(invalid)?;
        Ok(VerifiedJwt { claims, signer })
    }

    /// The JWK Set of `key`'s key: every version that verifies (from the
    /// key's `min_verify_version` to its head; none once it is destroyed),
    /// `kid` its
    /// `KeyId` text form, `alg` the actor's `token_alg` (so changing
    /// `token_alg` relabels every version: verifiers that enforce a JWK's
    /// `alg` then refuse tokens issued under the old one until they
    /// expire).
    ///
    /// # Errors
    /// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`], or one of
    /// the errors listed on [`KmsClient`].
    pub async fn jwks(&self, key: &KeyId) -> Result<JwkSet, KmsError> {
        let attestation = match self.attest(key).await {
            Ok(attestation) => attestation,
            Err(KmsError::KeyDestroyed { .. }) => return Ok(JwkSet { keys: Vec::new() }),
            Err(e) => return Err(e),
        };
        let alg = self.shared().token_alg;
        let head = &attestation.head;
        let min = attestation.policy.min_verify_version;
        let keys = attestation
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
                Ok(Jwk::public(&id.to_string(), &v.public_key, alg))
            })
            .collect::<Result<_, KmsError>>()?;
        Ok(JwkSet { keys })
    }
}
