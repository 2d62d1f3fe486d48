//! [`KmsClient::verify_jwt`]: a bearer token checked against the keystore's
//! keys and the trusted external keys.
//!
//! A token's key is found by its `kid`, in exactly one place: a `kid` in
//! the `KeyId` text form (`kms:…`) names a keystore version, and is
//! accepted only if its key's tenant and purpose are among the
//! [`TokenKeys`] the caller accepts and its purpose is one of
//! `KmsConfig::token_purposes`, and then only under the `alg` the JWK Set
//! publishes it with (`KmsConfig::token_alg`); any other `kid` names a
//! trusted external JWK (decoded once, when its set was loaded), accepted
//! when the caller's [`TokenKeys`] accept trusted keys, and looked up by
//! (issuer, `kid`) as `trusted_keys.rs` says: when a set is bound to an
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
//! above a per-request jsonwebtoken server (`benches/http/issuer.sh`). A
//! keystore key's ML-DSA signature (`alg` its parameter set's name) is
//! verified the same way, alone on the caller's task, under the
//! keystore's verdict (its policy, its versions).
//! The claims are validated only after the signature verified, the
//! header's `typ` first (`Validation::typ`); the answer says which key
//! signed ([`JwtSigner`]). With the verified-token
//! cache on (`cache.rs`), a token that verified before, at the current
//! key-set generation, is answered from it: no parse, no signature (so no
//! `kms_ops_total{op="verify"}` count).
//!
//! A cached and a fresh check give the same verdict because they share
//! their two steps: [`admit`] (do the caller's [`TokenKeys`] and the token
//! purposes accept the key the token names; a fresh check before the
//! signature, a hit on the signer it recorded) and [`accept`] (the header's
//! `typ`, then the claims, under the bound issuer's own policy when it has
//! one; a fresh check after the signature, a hit on what it recorded).
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
use kms_core::{KeyId, KmsError};
use kms_jose::{Claims, CompactJws, JoseError, Validation, MAX_TOKEN_BYTES};

use crate::client::KmsClient;
use crate::dispatch::request::VerifyBy;
use crate::origin::Origin;
use crate::token::cache;
use crate::token::token_keys::TokenKeys;
use crate::token::tokens::Tokens;
use crate::token::trusted_keys::{Lookup, TrustedKeys};
use crate::token::verified::{JwtSigner, Verified, VerifiedJwt};

/// A refusal of the token itself.
pub(crate) fn invalid(e: JoseError) -> KmsError {
    KmsError::InvalidToken {
        code: e.code(),
        reason: e.to_string(),
    }
}

fn unknown_kid(kid: &str, why: &str) -> KmsError {
    KmsError::InvalidToken {
        code: "jose.unknown_kid",
        reason: format!("kid {:?} {why}", kid.chars().take(128).collect::<String>()),
    }
}

/// The key a token names by its `kid`, as admission sees it.
#[derive(Debug, Clone, Copy)]
enum Named<'a> {
    /// A keystore version (a `kid` in the `KeyId` text form).
    Keystore(&'a KeyId),
    /// A trusted external key (any other `kid`).
    Trusted(&'a str),
}

impl<'a> Named<'a> {
    fn of(signer: &'a JwtSigner) -> Self {
        match signer {
            JwtSigner::Key(id) => Named::Keystore(id),
            JwtSigner::Trusted { kid, .. } => Named::Trusted(kid),
        }
    }
}

/// Admission: whether `keys` and the token purposes accept the key a token
/// names, before its signature is checked (and on a cache hit, the signer
/// it recorded).
///
/// # Errors
/// `jose.unknown_kid`: a keystore key whose purpose is not a token purpose
/// or whose tenant and purpose `keys` do not accept, or a trusted key when
/// `keys` accept none.
fn admit(tokens: &Tokens, named: Named<'_>, keys: &TokenKeys) -> Result<(), KmsError> {
    let why = match named {
        Named::Keystore(id) if !tokens.is_token_purpose(id.purpose()) => {
            Some("names a key whose purpose is not a token purpose")
        }
        Named::Keystore(id) if !keys.accepts_keystore(id.tenant(), id.purpose()) => {
            Some("names a key this verifier does not accept")
        }
        Named::Trusted(_) if !keys.accepts_trusted() => Some("is not a key this verifier accepts"),
        Named::Keystore(_) | Named::Trusted(_) => None,
    };
    match (why, named) {
        (None, _) => Ok(()),
        (Some(why), Named::Keystore(id)) => Err(unknown_kid(&id.to_string(), why)),
        (Some(why), Named::Trusted(kid)) => Err(unknown_kid(kid, why)),
    }
}

/// The checks after the signature: the header's `typ`, then the claims
/// (`claims` gives them: parsed now, or as recorded) against the clock,
/// under `signer`'s bound issuer's own policy when it has one (from
/// `trusted`, asked only then), else `validation`. Returns the claims.
///
/// # Errors
/// [`KmsError::InvalidToken`] with the failed check's code.
fn accept<C: std::borrow::Borrow<Claims>>(
    trusted: impl FnOnce() -> Arc<TrustedKeys>,
    signer: &JwtSigner,
    validation: &Validation,
    typ: Option<&str>,
    claims: impl FnOnce() -> Result<C, KmsError>,
) -> Result<C, KmsError> {
    let issuers;
    let validation = match signer {
        JwtSigner::Trusted {
            issuer: Some(issuer),
            ..
        } => {
            issuers = trusted();
            issuers.policy(issuer).unwrap_or(validation)
        }
        _ => validation,
    };
    validation.check_typ(typ).map_err(invalid)?;
    let claims = claims()?;
    validation
        .validate(claims.borrow(), SystemTime::now())
        .map_err(invalid)?;
    Ok(claims)
}

impl KmsClient {
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
        self.verify_jwt_from(token, keys, validation, None).await
    }

    /// [`KmsClient::verify_jwt`] for a request from `origin`, if given
    /// (`crate::KmsClient::for_origin`).
    pub(crate) async fn verify_jwt_from(
        &self,
        token: &str,
        keys: &TokenKeys,
        validation: &Validation,
        origin: Option<Origin>,
    ) -> Result<VerifiedJwt, KmsError> {
        let verified = self.check_jwt(token, keys, validation, origin).await;
        if let Err(KmsError::InvalidToken { code, reason }) = &verified {
            self.refused(code, reason);
        }
        verified
    }

    /// Counts a token refusal by its code and tells why at debug level
    /// (never louder: a flood of bad tokens must not flood the logs). The
    /// reason is a `&str` field, which `tracing` writes escaped.
    fn refused(&self, code: &'static str, reason: &str) {
        let topic = self.tokens().topic();
        let label = topic.to_owned();
        metrics::counter!(crate::metrics::TOKEN_REFUSALS_TOTAL, "topic" => label, "code" => code)
            .increment(1);
        tracing::debug!(
            target: "kms_actor::jwt",
            topic,
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
        origin: Option<Origin>,
    ) -> Result<VerifiedJwt, KmsError> {
        let tokens = self.tokens();
        // An oversized token is refused by the parser before anything is
        // hashed or counted.
        let cache = match tokens.cache() {
            Some(cache) if token.len() <= MAX_TOKEN_BYTES => cache,
            _ => {
                return self
                    .check_jwt_in_full(token, keys, validation, origin)
                    .await
                    .map(|verified| verified.jwt)
            }
        };
        // Admitted as every call is, when it starts: once shutdown began,
        // nothing is answered from memory either.
        if self.shutting_down() {
            return Err(KmsError::ShuttingDown);
        }
        // Read before anything is looked up (cache.rs): what is computed
        // from here on is tagged with it.
        let generation = tokens.generation();
        let key = cache::key(token);
        if let Some(entry) = cache.get(&key, generation, self.counters()) {
            admit(tokens, Named::of(&entry.signer), keys)?;
            accept(
                || tokens.trusted(),
                &entry.signer,
                validation,
                entry.typ.as_deref(),
                || Ok(&entry.claims),
            )?;
            return Ok(VerifiedJwt {
                claims: entry.claims.clone(),
                signer: entry.signer.clone(),
                cached: true,
            });
        }
        let verified = self
            .check_jwt_in_full(token, keys, validation, origin)
            .await?;
        // A verdict computed before a change of the key set is stored
        // only if no change happened since (its tag would make it unused
        // anyway; this spares the space).
        let jwt = verified.jwt.clone();
        if tokens.generation() == generation {
            cache.insert(key, generation, verified);
        }
        Ok(jwt)
    }

    /// Parses, admits the key, verifies the signature, accepts the
    /// claims: a token checked in full.
    /// One signature that no batch takes, verified by `verify` on this
    /// task (module docs): refused once the actor is shutting down, timed
    /// and counted as a `verify` op, one unit of tokio's budget spent.
    async fn verify_here(
        &self,
        verify: impl FnOnce() -> Result<(), KmsError>,
    ) -> Result<(), KmsError> {
        let started = Instant::now();
        let verdict = if self.shutting_down() {
            Err(KmsError::ShuttingDown)
        } else {
            verify()
        };
        tokio::task::coop::consume_budget().await;
        self.record_verify(started, verdict)
    }

    async fn check_jwt_in_full(
        &self,
        token: &str,
        keys: &TokenKeys,
        validation: &Validation,
        origin: Option<Origin>,
    ) -> Result<Verified, KmsError> {
        let tokens = self.tokens();
        let jws = CompactJws::parse(token).map_err(invalid)?;
        let header = jws.header();
        let Some(kid) = header.kid() else {
            return Err(KmsError::InvalidToken {
                code: "jose.missing_kid",
                reason: "the token has no kid".to_owned(),
            });
        };
        let keystore_key = kid.parse::<KeyId>().ok();
        let named = match &keystore_key {
            Some(id) => Named::Keystore(id),
            None => Named::Trusted(kid),
        };
        admit(tokens, named, keys)?;
        // When a set is bound to an issuer, the token's unverified `iss` is
        // read first, only to choose the keys (trusted_keys.rs); every
        // claim is validated after the signature, as without.
        let mut trusted = tokens.trusted();
        let early_claims = if trusted.has_issuers() {
            Some(jws.claims().map_err(invalid)?)
        } else {
            None
        };
        let iss = early_claims
            .as_ref()
            .and_then(|claims| claims.get("iss"))
            .and_then(serde_json::Value::as_str);
        let (by, signer) = match keystore_key {
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
                // with (`token_alg`; an ML-DSA key's own), as a verifier
                // that enforces a JWK's `alg` does.
                let published = crate::token::sign::token_alg(id.alg(), tokens.alg());
                if header.alg() != published {
                    return Err(invalid(JoseError::AlgMismatch {
                        expected: published.as_str(),
                        got: header.alg().as_str(),
                    }));
                }
                if id.alg().is_ml_dsa() {
                    // ML-DSA: one signature, on this task, as RSA and ECDSA
                    // (module docs).
                    let verdict = self
                        .verify_here(|| {
                            self.verify_alone(&id, jws.signing_input(), jws.signature())
                        })
                        .await;
                    signature_verdict(verdict, kid, header.alg())?;
                    return finish(&jws, early_claims, &trusted, validation, JwtSigner::Key(id));
                }
                (VerifyBy::Key(id.clone()), JwtSigner::Key(id))
            }
            None => {
                // A kid its issuer's keys lack: whoever keeps that issuer's
                // keys may refetch them (its own bounds: one fetch in
                // flight, a cooldown, a timeout); then one more look.
                if !matches!(trusted.find(iss, kid), Lookup::Found(..)) {
                    if let (Some(iss), Some(refetch)) = (iss, tokens.refetcher()) {
                        refetch.refetch(iss, kid).await;
                        trusted = tokens.trusted();
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
                let signer = JwtSigner::Trusted {
                    issuer: issuer.map(str::to_owned),
                    kid: key.kid.clone(),
                };
                let Some(ed25519) = key.key.as_ed25519() else {
                    // RSA, ECDSA and ML-DSA: one signature, on this task
                    // (module docs).
                    self.verify_here(|| jws.verify_with(&key.key).map_err(invalid))
                        .await?;
                    return finish(&jws, early_claims, &trusted, validation, signer);
                };
                (VerifyBy::Verifying(*ed25519), signer)
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
        let verdict = self.verify_by(by, message, *signature, origin).await;
        signature_verdict(verdict, kid, header.alg())?;
        finish(&jws, early_claims, &trusted, validation, signer)
    }
}

/// A signature's verdict under the key a token names (the keystore's, or
/// a trusted Ed25519 one through the batch path), as the token's: a refused signature, an unknown version or
/// one the keystore's policy refuses is a refusal of the token
/// ([`KmsError::InvalidToken`]); the KMS's own errors pass through.
fn signature_verdict(
    verdict: Result<(), KmsError>,
    kid: &str,
    alg: kms_jose::Algorithm,
) -> Result<(), KmsError> {
    match verdict {
        Ok(()) => Ok(()),
        Err(KmsError::InvalidSignature(e)) => Err(invalid(JoseError::Signature(e))),
        Err(KmsError::InvalidMlDsaSignature { .. }) => {
            Err(invalid(JoseError::SignatureRejected { alg: alg.as_str() }))
        }
        Err(KmsError::UnknownKey { .. } | KmsError::UnknownVersion { .. }) => {
            Err(unknown_kid(kid, "is not a version in the keystore"))
        }
        // The keystore's policy refuses the version: a refusal of the
        // token, under the KMS error's own code.
        Err(e @ (KmsError::VersionDisallowed { .. } | KmsError::KeyDestroyed { .. })) => {
            Err(KmsError::InvalidToken {
                code: e.code(),
                reason: e.to_string(),
            })
        }
        Err(e) => Err(e),
    }
}

/// A token whose signature verified, accepted ([`accept`]): its claims are
/// `early_claims` if they were read to choose its key, else parsed now.
fn finish(
    jws: &CompactJws<'_>,
    early_claims: Option<Claims>,
    trusted: &Arc<TrustedKeys>,
    validation: &Validation,
    signer: JwtSigner,
) -> Result<Verified, KmsError> {
    let typ = jws.header().typ();
    let claims = accept(
        || Arc::clone(trusted),
        &signer,
        validation,
        typ,
        || match early_claims {
            Some(claims) => Ok(claims),
            None => jws.claims().map_err(invalid),
        },
    )?;
    Ok(Verified {
        jwt: VerifiedJwt {
            claims,
            signer,
            cached: false,
        },
        typ: typ.map(Box::from),
    })
}

#[cfg(test)]
mod tests {
    use kms_core::Keystore;

    use super::*;
    use crate::config::KmsConfig;

    fn tokens() -> Tokens {
        // The default token purposes: `tokens` alone.
        let config = KmsConfig::default();
        let trusted = TrustedKeys::load(&[], &config.request_topic).expect("no sets");
        Tokens::new(&config, trusted, Keystore::new().key_set_generation())
    }

    /// The one admission both paths make, as a table: the key named, the
    /// keys the caller accepts, and whether it is admitted.
    #[test]
    fn admission_by_the_named_key_and_the_accepted_keys() {
        let keystore = Keystore::new();
        let acme = keystore.create_ed25519("acme", "tokens").expect("key");
        let beta = keystore.create_ed25519("beta", "tokens").expect("key");
        let signing = keystore.create_ed25519("acme", "signing").expect("key");
        let tokens = tokens();
        let acme_keys = TokenKeys::keystore("acme", "tokens");
        let cases: [(&str, Named<'_>, &TokenKeys, bool); 7] = [
            (
                "an accepted keystore key",
                Named::Keystore(&acme),
                &acme_keys,
                true,
            ),
            (
                "another tenant's key",
                Named::Keystore(&beta),
                &acme_keys,
                false,
            ),
            (
                "a purpose that is not a token purpose, even if accepted",
                Named::Keystore(&signing),
                &TokenKeys::keystore("acme", "signing"),
                false,
            ),
            (
                "a trusted key, trusted keys accepted",
                Named::Trusted("k1"),
                &acme_keys,
                true,
            ),
            (
                "a trusted key, trusted keys not accepted",
                Named::Trusted("k1"),
                &acme_keys.clone().without_trusted(),
                false,
            ),
            (
                "a keystore key, trusted keys only",
                Named::Keystore(&acme),
                &TokenKeys::trusted_only(),
                false,
            ),
            (
                "a keystore key, trusted keys not accepted",
                Named::Keystore(&acme),
                &acme_keys.clone().without_trusted(),
                true,
            ),
        ];
        for (case, named, keys, admitted) in cases {
            let verdict = admit(&tokens, named, keys);
            assert_eq!(verdict.is_ok(), admitted, "{case}: {verdict:?}");
            if let Err(e) = verdict {
                assert!(
                    matches!(
                        e,
                        KmsError::InvalidToken {
                            code: "jose.unknown_kid",
                            ..
                        }
                    ),
                    "{case}: {e:?}"
                );
            }
        }
    }

    /// A cache hit admits by the signer it recorded exactly as a fresh
    /// check admits by the `kid`.
    #[test]
    fn a_recorded_signer_names_the_key_its_kid_named() {
        let keystore = Keystore::new();
        let acme = keystore.create_ed25519("acme", "tokens").expect("key");
        let tokens = tokens();
        let keys = TokenKeys::keystore("beta", "tokens");
        let recorded = JwtSigner::Key(acme.clone());
        let fresh = admit(&tokens, Named::Keystore(&acme), &keys);
        let cached = admit(&tokens, Named::of(&recorded), &keys);
        assert_eq!(format!("{fresh:?}"), format!("{cached:?}"));
        let recorded = JwtSigner::Trusted {
            issuer: Some("https://idp.example".to_owned()),
            kid: "k1".to_owned(),
        };
        let keys = TokenKeys::keystore("acme", "tokens").without_trusted();
        let fresh = admit(&tokens, Named::Trusted("k1"), &keys);
        let cached = admit(&tokens, Named::of(&recorded), &keys);
        assert!(fresh.is_err());
        assert_eq!(format!("{fresh:?}"), format!("{cached:?}"));
    }
}
