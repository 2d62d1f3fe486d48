//! JWTs through the actor: [`KmsClient::sign_jwt`], [`KmsClient::verify_jwt`]
//! and [`KmsClient::jwks`].
//!
//! A token's key is found by its `kid`, in exactly one place: a `kid` in
//! the `KeyId` text form (`kms:…`) names a keystore version, and is
//! accepted only if its key's tenant and purpose are among the
//! [`TokenKeys`] the caller accepts and its purpose is one of
//! `KmsConfig::token_purposes`, and then only under the `alg` the JWK Set
//! publishes it with (`KmsConfig::token_alg`); any other `kid` names a
//! trusted external JWK (decoded once, when its set was loaded), accepted
//! when the caller's [`TokenKeys`] accept trusted keys, and looked up by
//! (issuer, `kid`) as `crate::trusted_keys` says: when a set is bound to an
//! issuer, the token's `iss` is read first, only to choose the keys. The
//! key's type decides the algorithm (RFC 8725 §3.1, `kms_jose::PublicKey`).
//!
//! An Ed25519 signature is then verified on the same path as
//! [`KmsClient::verify`] (the caller path on a quiet node, else a batch on a
//! combining caller's task or the pool). An RSA or ECDSA signature (a trusted
//! key of those types, feature `rsa-ecdsa` of kms-jose) cannot join a batch:
//! it is verified alone, on the caller's task, as a per-request verifier
//! would (some tens of µs; it spends one unit of tokio's cooperative budget
//! and counts as a `verify` op): a hop to the pool would add a hand-off to
//! each 20–50 µs verification, and on the caller's task it runs at or
//! above a per-request jsonwebtoken server (`benches/http/issuer.sh`). The claims are validated only after the
//! signature verified, the header's `typ` first (`Validation::typ`); the
//! answer says which key signed ([`JwtSigner`]). With the verified-token
//! cache on (`crate::token_cache`), a token that verified before, at the
//! current key-set generation, is answered from it: no parse, no signature
//! (so no `kms_ops_total{op="verify"}` count), its signer, `typ` and claims
//! checked again.
//!
//! Every refusal of the token itself is [`KmsError::InvalidToken`] with the
//! reason's stable code, counted in `kms_token_refusals_total{code}` and told
//! at debug level (target `kms_actor::jwt`, the reason escaped); the KMS's
//! own errors (`Overloaded`, `ShuttingDown`, `Dropped`, `Internal`) pass
//! through unchanged, so an HTTP layer can answer 401 for the first and 503
//! for the others.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use bytes::Bytes;
use kms_core::{KeyId, Keystore, KmsError};
use kms_jose::{
    claims_json, finish_compact, signing_input, Algorithm, Claims, CompactJws, Header, JoseError,
    Jwk, JwkSet, Validation, MAX_TOKEN_BYTES,
};
use serde::Serialize;

use crate::client::KmsClient;
use crate::request::{Op, VerifyBy};
use crate::token_cache;
use crate::token_keys::TokenKeys;
use crate::trusted_keys::Lookup;

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

/// A token whose signature verified, checked against `validation`: its
/// header's `typ`, then its claims (`early_claims` if they were read to
/// choose its key, else parsed now).
fn validated(
    jws: &CompactJws<'_>,
    early_claims: Option<Claims>,
    validation: &Validation,
    signer: JwtSigner,
) -> Result<token_cache::Verified, KmsError> {
    let typ = jws.header().typ();
    validation.check_typ(typ).map_err(invalid)?;
    let claims = match early_claims {
        Some(claims) => claims,
        None => jws.claims().map_err(invalid)?,
    };
    validation
        .validate(&claims, SystemTime::now())
        .map_err(invalid)?;
    Ok(token_cache::Verified {
        jwt: VerifiedJwt { claims, signer },
        typ: typ.map(Box::from),
    })
}

/// Which key signed a verified token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwtSigner {
    /// A keystore version (the token's `kid`).
    Key(KeyId),
    /// A trusted external JWK.
    Trusted {
        /// The issuer its set is bound to; `None`: an unbound set's key.
        issuer: Option<String>,
        /// Its `kid`.
        kid: String,
    },
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
            _ => {
                return self
                    .check_jwt_in_full(token, keys, validation)
                    .await
                    .map(|verified| verified.jwt)
            }
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
            // A bound issuer's own claims policy replaces the call's.
            let trusted;
            let validation = match &entry.signer {
                JwtSigner::Trusted {
                    issuer: Some(issuer),
                    ..
                } => {
                    trusted = self.trusted_keys();
                    trusted.policy(issuer).unwrap_or(validation)
                }
                _ => validation,
            };
            validation
                .check_typ(entry.typ.as_deref())
                .map_err(invalid)?;
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
        let jwt = verified.jwt.clone();
        if shared.generation.get() == generation {
            cache.insert(key, generation, verified);
        }
        Ok(jwt)
    }

    /// Whether `keys` (and the token purposes) accept `signer`, as
    /// [`KmsClient::check_jwt_in_full`] decides from the `kid`.
    ///
    /// # Errors
    /// `jose.unknown_kid` when they do not.
    fn check_signer(&self, signer: &JwtSigner, keys: &TokenKeys) -> Result<(), KmsError> {
        let why = match signer {
            JwtSigner::Key(id) => self.keystore_refusal(id, keys),
            JwtSigner::Trusted { .. } => (!keys.accepts_trusted()).then_some(TRUSTED_NOT_ACCEPTED),
        };
        match (why, signer) {
            (None, _) => Ok(()),
            (Some(why), JwtSigner::Key(id)) => Err(unknown_kid(&id.to_string(), why)),
            (Some(why), JwtSigner::Trusted { kid, .. }) => Err(unknown_kid(kid, why)),
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

    /// The trusted keys now (a reload swaps the pointer).
    fn trusted_keys(&self) -> Arc<crate::trusted_keys::TrustedKeys> {
        Arc::clone(
            &self
                .shared()
                .trusted
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// Parses, finds the key, verifies the signature, validates the
    /// claims: a token checked in full.
    async fn check_jwt_in_full(
        &self,
        token: &str,
        keys: &TokenKeys,
        validation: &Validation,
    ) -> Result<token_cache::Verified, KmsError> {
        let jws = CompactJws::parse(token).map_err(invalid)?;
        let header = jws.header();
        let Some(kid) = header.kid() else {
            return Err(KmsError::InvalidToken {
                code: "jose.missing_kid",
                reason: "the token has no kid".to_owned(),
            });
        };
        let keystore_key = kid.parse::<KeyId>().ok();
        match &keystore_key {
            Some(id) => {
                if let Some(why) = self.keystore_refusal(id, keys) {
                    return Err(unknown_kid(kid, why));
                }
            }
            None if !keys.accepts_trusted() => return Err(unknown_kid(kid, TRUSTED_NOT_ACCEPTED)),
            None => {}
        }
        // When a set is bound to an issuer, the token's unverified `iss` is
        // read first, only to choose the keys (trusted_keys.rs); every
        // claim is validated after the signature, as without.
        let mut trusted = self.trusted_keys();
        let early_claims = if trusted.has_issuers() {
            Some(jws.claims().map_err(invalid)?)
        } else {
            None
        };
        let iss = early_claims
            .as_ref()
            .and_then(|claims| claims.get("iss"))
            .and_then(serde_json::Value::as_str);
        // A bound issuer's own claims policy, which replaces `validation`
        // for its tokens (`IssuerKeys::set_validation`).
        let (by, signer, policy) = match keystore_key {
            Some(id) => {
                // A bound issuer's tokens verify only under its keys: a
                // keystore key does not speak for it.
                if iss.is_some_and(|iss| trusted.is_bound(iss)) {
                    return Err(unknown_kid(
                        kid,
                        "is a keystore key, which does not speak for the token's issuer",
                    ));
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
                (VerifyBy::Key(id.clone()), JwtSigner::Key(id), None)
            }
            None => {
                // A kid its issuer's keys lack: whoever keeps that issuer's
                // keys may refetch them (its own bounds: one fetch in
                // flight, a cooldown, a timeout); then one more look.
                if !matches!(trusted.find(iss, kid), Lookup::Found(..)) {
                    let refetch = self
                        .shared()
                        .refetch
                        .read()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .clone();
                    if let (Some(iss), Some(refetch)) = (iss, refetch) {
                        refetch.refetch(iss, kid).await;
                        trusted = self.trusted_keys();
                    }
                }
                let (key, issuer) = match trusted.find(iss, kid) {
                    Lookup::Found(key, issuer) => (key, issuer),
                    Lookup::NotOfIssuer => {
                        return Err(unknown_kid(kid, "is not a key of the token's issuer"))
                    }
                    Lookup::Unknown => return Err(unknown_kid(kid, "is not a trusted key")),
                };
                key.check_alg(header.alg()).map_err(invalid)?;
                let policy = issuer.and_then(|issuer| trusted.policy(issuer)).cloned();
                let signer = JwtSigner::Trusted {
                    issuer: issuer.map(str::to_owned),
                    kid: key.kid.clone(),
                };
                let Some(ed25519) = key.key.as_ed25519() else {
                    // RSA and ECDSA: one signature, on this task (module
                    // docs).
                    let started = Instant::now();
                    let verdict = if self.shutting_down() {
                        Err(KmsError::ShuttingDown)
                    } else {
                        jws.verify_with(&key.key).map_err(invalid)
                    };
                    tokio::task::coop::consume_budget().await;
                    self.record_verify(started, verdict)?;
                    let validation = policy.as_ref().unwrap_or(validation);
                    return validated(&jws, early_claims, validation, signer);
                };
                (VerifyBy::Verifying(*ed25519), signer, policy)
            }
        };
        let Some(signature) = jws.ed25519_signature() else {
            // Unreachable: both arms above checked an Ed25519 alg, whose
            // signature the parser holds as 64 bytes.
            return Err(invalid(JoseError::AlgMismatch {
                expected: "EdDSA or Ed25519",
                got: header.alg().as_str(),
            }));
        };
        let message = Bytes::copy_from_slice(jws.signing_input());
        match self.verify_by(by, message, *signature).await {
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
        validated(
            &jws,
            early_claims,
            policy.as_ref().unwrap_or(validation),
            signer,
        )
    }

    /// The JWK Set of `key`'s key: every version that verifies (from the
    /// key's `min_verify_version` to its head; none once it is destroyed),
    /// `kid` its `KeyId` text form, `alg` the actor's `token_alg` (so
    /// changing `token_alg` relabels every version: verifiers that enforce a
    /// JWK's `alg` then refuse tokens issued under the old one until they
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
