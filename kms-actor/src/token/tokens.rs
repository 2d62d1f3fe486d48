//! [`Tokens`]: the state token verification owns, one per actor: the
//! trusted external keys, who refetches an issuer's keys, the
//! verified-token cache, and the `alg` and purposes of keystore tokens.
//! Shared by the actor's clients (`verify.rs`, `issue.rs`), its handle
//! (reloads) and [`crate::IssuerKeys`].
//!
//! Invariants:
//! * The trusted keys are replaced whole, under the write lock, and the
//!   key-set generation is advanced after the swap (after the lock is
//!   released): a verification sees the old keys or the new, and a
//!   verdict computed from the old is never used from the cache once the
//!   swap is visible (`cache.rs`).
//! * A claims policy (`IssuerKeys::set_validation`) changes no verdict of
//!   a signature, so it does not advance the generation: the cache
//!   applies the policy in force on every hit.

use std::sync::{Arc, PoisonError, RwLock};

use kms_core::{KeySetGeneration, KmsError};
use kms_jose::{Algorithm, TrustedJwkSet, Validation};

use crate::config::KmsConfig;
use crate::token::cache::TokenCache;
use crate::token::refetch::JwksRefetch;
use crate::token::trusted_keys::TrustedKeys;

/// See the module docs.
pub(crate) struct Tokens {
    /// Trusted external keys by (issuer, `kid`), replaced whole.
    trusted: RwLock<Arc<TrustedKeys>>,
    /// Asked to refetch an issuer's keys on an unknown `kid`
    /// (`IssuerKeys::set_refetch`); read only on that path.
    refetch: RwLock<Option<Arc<dyn JwksRefetch>>>,
    /// The keystore's key-set generation, which a reload of `trusted`
    /// also advances.
    generation: KeySetGeneration,
    /// Tokens that verified (`KmsConfig::token_cache`); `None`: off.
    cache: Option<TokenCache>,
    /// The `alg` of issued tokens and published JWKs.
    alg: Algorithm,
    /// Purposes of keystore keys that issue and verify tokens.
    purposes: Vec<String>,
    /// The request topic's name (the `topic` label of token metrics).
    topic: String,
}

impl Tokens {
    /// The token state of an actor configured by `config`, trusting
    /// `trusted` (`TrustedKeys::load` of `config.trusted_jwks`), whose
    /// keystore counts changes in `generation`. Registers the
    /// verified-token cache's metrics.
    pub(crate) fn new(
        config: &KmsConfig,
        trusted: TrustedKeys,
        generation: KeySetGeneration,
    ) -> Self {
        let topic = config.request_topic.as_str();
        Tokens {
            trusted: RwLock::new(Arc::new(trusted)),
            refetch: RwLock::new(None),
            generation,
            cache: TokenCache::new(config.token_cache, config.token_cache_bytes, topic),
            alg: config.token_alg,
            purposes: config.token_purposes.clone(),
            topic: topic.to_owned(),
        }
    }

    /// The trusted keys now (a reload swaps the pointer).
    pub(crate) fn trusted(&self) -> Arc<TrustedKeys> {
        Arc::clone(&self.trusted.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Who refetches an issuer's keys, if anyone does.
    pub(crate) fn refetcher(&self) -> Option<Arc<dyn JwksRefetch>> {
        self.refetch
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The verified-token cache, when on.
    pub(crate) fn cache(&self) -> Option<&TokenCache> {
        self.cache.as_ref()
    }

    /// The key-set generation now (`kms_core::KeySetGeneration::get`).
    pub(crate) fn generation(&self) -> u64 {
        self.generation.get()
    }

    /// The `alg` of keystore tokens (`KmsConfig::token_alg`).
    pub(crate) fn alg(&self) -> Algorithm {
        self.alg
    }

    /// Whether keystore keys of `purpose` issue and verify tokens
    /// (`KmsConfig::token_purposes`).
    pub(crate) fn is_token_purpose(&self, purpose: &str) -> bool {
        self.purposes.iter().any(|p| p == purpose)
    }

    /// The request topic's name.
    pub(crate) fn topic(&self) -> &str {
        &self.topic
    }

    /// Replaces every trusted JWK Set at once, keeping the keys of
    /// remote issuers (`KmsHandle::reload_trusted_jwks`); how many keys
    /// are trusted afterwards.
    ///
    /// # Errors
    /// [`KmsError::InvalidConfig`] as `TrustedKeys::load` and
    /// `TrustedKeys::keeping_remote` say; the old sets stay.
    pub(crate) fn reload(&self, sets: &[TrustedJwkSet]) -> Result<usize, KmsError> {
        let loaded = TrustedKeys::load(sets, &self.topic)?;
        self.swap(|trusted| loaded.keeping_remote(trusted))
    }

    /// Replaces `issuer`'s keys with `set`'s (`IssuerKeys::replace`); how
    /// many keys are trusted afterwards.
    ///
    /// # Errors
    /// [`KmsError::InvalidConfig`] as `TrustedKeys::replacing_issuer`
    /// says; the old keys stay.
    pub(crate) fn replace_issuer(
        &self,
        issuer: &str,
        set: &TrustedJwkSet,
    ) -> Result<usize, KmsError> {
        self.swap(|trusted| trusted.replacing_issuer(issuer, set, &self.topic))
    }

    /// Sets or removes `issuer`'s own claims policy
    /// (`IssuerKeys::set_validation`).
    pub(crate) fn set_validation(&self, issuer: &str, validation: Option<Validation>) {
        let mut trusted = self.trusted.write().unwrap_or_else(PoisonError::into_inner);
        *trusted = Arc::new(trusted.with_policy(issuer, validation));
    }

    /// Installs who refetches issuers' keys (`IssuerKeys::set_refetch`).
    pub(crate) fn set_refetch(&self, refetch: Arc<dyn JwksRefetch>) {
        *self.refetch.write().unwrap_or_else(PoisonError::into_inner) = Some(refetch);
    }

    /// Replaces the trusted keys with what `replace` makes of them, then
    /// advances the generation (module docs); how many keys are trusted.
    fn swap(
        &self,
        replace: impl FnOnce(&TrustedKeys) -> Result<TrustedKeys, KmsError>,
    ) -> Result<usize, KmsError> {
        let mut trusted = self.trusted.write().unwrap_or_else(PoisonError::into_inner);
        let replaced = replace(&trusted)?;
        let count = replaced.len();
        *trusted = Arc::new(replaced);
        drop(trusted);
        self.generation.advance();
        Ok(count)
    }
}
