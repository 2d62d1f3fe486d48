//! [`TrustedKeys`]: the trusted external keys, held by (issuer, `kid`).
//!
//! Invariants:
//! * a set bound to an issuer (`TrustedJwkSet::issuer`) speaks for that
//!   issuer only: its keys verify a token only when the token's `iss` is
//!   exactly that issuer, and a token whose `iss` names a bound issuer is
//!   verified only against that issuer's keys, never an unbound one nor a
//!   keystore key (`verify.rs` refuses those). Two issuers may use the same
//!   `kid` for different keys;
//! * unbound sets' keys verify tokens of any other `iss` (or none);
//! * a `kid` appears at most once among the unbound sets and at most once
//!   per issuer, and never in the `KeyId` text form (the keystore's
//!   namespace: a trusted key could otherwise answer for a version the
//!   keystore makes later).
//!
//! The `iss` that selects the keys is read before the signature is checked,
//! so it is only a selector: every claim, `iss` included, is validated
//! after the signature verified.

use std::collections::{HashMap, HashSet};

use kms_core::{KeyId, KmsError};
use kms_jose::{TrustedJwk, TrustedJwkSet, Validation};

/// The trusted external keys (module docs).
#[derive(Debug, Default, Clone)]
pub(crate) struct TrustedKeys {
    unbound: HashMap<String, TrustedJwk>,
    by_issuer: HashMap<String, HashMap<String, TrustedJwk>>,
    /// Issuers whose keys come through `IssuerKeys::replace` (a remote
    /// `jwks_uri`), not from the configured sets: a reload of those keeps
    /// them.
    remote: HashSet<String>,
    /// Per-issuer claims policies (`IssuerKeys::set_validation`), which
    /// replace the call's `Validation` for that issuer's tokens; a reload
    /// of the configured sets keeps them.
    policies: HashMap<String, Validation>,
}

/// Where a token's key was looked for and what was found.
pub(crate) enum Lookup<'a> {
    /// The key, and the issuer it is bound to (`None`: unbound).
    Found(&'a TrustedJwk, Option<&'a str>),
    /// The token's `iss` names a bound issuer that has no such `kid`.
    NotOfIssuer,
    /// No unbound key has the `kid`.
    Unknown,
}

impl TrustedKeys {
    /// The keys of `sets`, checked (module docs). Keys a set skipped are
    /// logged (`warn`, target `kms_actor::jwt`, with the request `topic`
    /// and the set's issuer).
    ///
    /// # Errors
    /// [`KmsError::InvalidConfig`] naming the `kid` (and issuer).
    pub(crate) fn load(sets: &[TrustedJwkSet], topic: &str) -> Result<Self, KmsError> {
        let mut keys = TrustedKeys::default();
        for set in sets {
            keys.add(set, topic, false)?;
        }
        Ok(keys)
    }

    /// These keys with `set`'s keys for `issuer` replaced: the other
    /// issuers' and the unbound keys stay.
    ///
    /// # Errors
    /// As [`TrustedKeys::load`].
    pub(crate) fn replacing_issuer(
        &self,
        issuer: &str,
        set: &TrustedJwkSet,
        topic: &str,
    ) -> Result<Self, KmsError> {
        let mut keys = self.clone();
        if keys.by_issuer.contains_key(issuer) && !keys.remote.contains(issuer) {
            return Err(KmsError::InvalidConfig {
                reason: format!(
                    "issuer {:?} has configured JWK Sets; its keys are not replaced from elsewhere",
                    issuer.chars().take(128).collect::<String>()
                ),
            });
        }
        keys.by_issuer.remove(issuer);
        keys.remote.insert(issuer.to_owned());
        let bound = TrustedJwkSet {
            issuer: Some(issuer.to_owned()),
            ..set.clone()
        };
        keys.add(&bound, topic, true)?;
        Ok(keys)
    }

    /// `self` (configured sets, just loaded) with the remote issuers'
    /// keys of `old` carried over: what a reload of the configured sets
    /// leaves alone.
    ///
    /// # Errors
    /// [`KmsError::InvalidConfig`] when a configured set is bound to an
    /// issuer whose keys are remote.
    pub(crate) fn keeping_remote(mut self, old: &TrustedKeys) -> Result<Self, KmsError> {
        for issuer in &old.remote {
            if self.by_issuer.contains_key(issuer) {
                return Err(KmsError::InvalidConfig {
                    reason: format!(
                        "a configured JWK Set is bound to issuer {:?}, whose keys come from its jwks_uri",
                        issuer.chars().take(128).collect::<String>()
                    ),
                });
            }
            if let Some(keys) = old.by_issuer.get(issuer) {
                self.by_issuer.insert(issuer.clone(), keys.clone());
            }
            self.remote.insert(issuer.clone());
        }
        self.policies.clone_from(&old.policies);
        Ok(self)
    }

    /// These keys with `issuer`'s claims policy set (`None`: removed).
    pub(crate) fn with_policy(&self, issuer: &str, policy: Option<Validation>) -> Self {
        let mut keys = self.clone();
        match policy {
            Some(policy) => keys.policies.insert(issuer.to_owned(), policy),
            None => keys.policies.remove(issuer),
        };
        keys
    }

    /// `issuer`'s claims policy, if it has one.
    pub(crate) fn policy(&self, issuer: &str) -> Option<&Validation> {
        self.policies.get(issuer)
    }

    /// Adds `set`'s keys. A configured set (`remote` false) has its skipped
    /// keys logged here, and a `kid` in the `KeyId` form refuses it; a
    /// remote one was logged by whoever fetched it, and such a `kid` is
    /// skipped (the provider's mistake must not take its other keys down).
    fn add(&mut self, set: &TrustedJwkSet, topic: &str, remote: bool) -> Result<(), KmsError> {
        let issuer = set.issuer.as_deref();
        for skipped in set.skipped.iter().filter(|_| !remote) {
            tracing::warn!(
                target: "kms_actor::jwt",
                topic,
                issuer = issuer.unwrap_or(""),
                kid = skipped.kid.as_deref().unwrap_or(""),
                reason = skipped.reason.as_str(),
                "a key of a trusted JWK Set was skipped"
            );
        }
        let map = match issuer {
            Some(issuer) => self.by_issuer.entry(issuer.to_owned()).or_default(),
            None => &mut self.unbound,
        };
        for key in &set.keys {
            let kid = key.kid.chars().take(128).collect::<String>();
            if key.kid.parse::<KeyId>().is_ok() && remote {
                tracing::warn!(
                    target: "kms_actor::jwt",
                    topic,
                    issuer = issuer.unwrap_or(""),
                    kid = kid.as_str(),
                    "a fetched key with a kid in the keystore's form was skipped"
                );
                continue;
            }
            if key.kid.parse::<KeyId>().is_ok() {
                return Err(KmsError::InvalidConfig {
                    reason: format!(
                        "trusted kid {kid:?} has the form of a keystore key id, which only the keystore names"
                    ),
                });
            }
            if map.insert(key.kid.clone(), key.clone()).is_some() {
                return Err(KmsError::InvalidConfig {
                    reason: match issuer {
                        Some(issuer) => format!(
                            "kid {kid:?} appears more than once among the JWK Sets of issuer {:?}",
                            issuer.chars().take(128).collect::<String>()
                        ),
                        None => format!(
                            "kid {kid:?} appears more than once among the unbound trusted JWK Sets"
                        ),
                    },
                });
            }
        }
        Ok(())
    }

    /// Whether any set is bound to an issuer (a token's `iss` is then read
    /// before its key is chosen).
    pub(crate) fn has_issuers(&self) -> bool {
        !self.by_issuer.is_empty()
    }

    /// Whether `iss` is a bound issuer (its tokens verify only under its
    /// keys: neither an unbound key nor the keystore speaks for it).
    pub(crate) fn is_bound(&self, iss: &str) -> bool {
        self.by_issuer.contains_key(iss)
    }

    /// The key for a token naming `kid`, whose (unverified) `iss` is `iss`.
    pub(crate) fn find(&self, iss: Option<&str>, kid: &str) -> Lookup<'_> {
        if let Some((issuer, keys)) = iss.and_then(|iss| self.by_issuer.get_key_value(iss)) {
            return match keys.get(kid) {
                Some(key) => Lookup::Found(key, Some(issuer.as_str())),
                None => Lookup::NotOfIssuer,
            };
        }
        match self.unbound.get(kid) {
            Some(key) => Lookup::Found(key, None),
            None => Lookup::Unknown,
        }
    }

    /// How many keys are trusted.
    pub(crate) fn len(&self) -> usize {
        self.unbound.len() + self.by_issuer.values().map(HashMap::len).sum::<usize>()
    }
}
