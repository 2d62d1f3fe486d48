//! [`TokenKeys`]: which keys a verifier accepts as a token's signer.
//!
//! A keystore shared by several tenants (a durable store, a fleet on etcd)
//! holds every tenant's token keys; a token signed by any of them is a
//! valid signature, but only the keys of the tenant a service serves may
//! vouch for its users. So [`KmsClient::verify_jwt`](crate::KmsClient::verify_jwt)
//! takes the keystore keys it accepts, by tenant and purpose: a token
//! whose `kid` names another keystore key is refused as an unknown `kid`
//! before any signature is checked. Trusted external keys (the actor's
//! `trusted_jwks`) are accepted unless [`TokenKeys::without_trusted`]
//! says otherwise.

/// The signers a token may have (module docs). Build it with
/// [`TokenKeys::keystore`] or [`TokenKeys::of`], add more with
/// [`TokenKeys::and_keystore`]; [`TokenKeys::trusted_only`] accepts no
/// keystore key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenKeys {
    /// `(tenant, purpose)` of the keystore keys accepted (each purpose
    /// must also be one of `KmsConfig::token_purposes`).
    keystore: Vec<(String, String)>,
    /// Whether the trusted external JWK Sets' keys are accepted.
    trusted: bool,
}

impl TokenKeys {
    /// The keystore keys of `tenant` with `purpose`, and the trusted
    /// external keys.
    pub fn keystore(tenant: impl Into<String>, purpose: impl Into<String>) -> Self {
        TokenKeys {
            keystore: vec![(tenant.into(), purpose.into())],
            trusted: true,
        }
    }

    /// The keystore keys with `key`'s tenant and purpose (any key and
    /// version of them: a key the signing pointer moves to later
    /// included), and the trusted external keys.
    pub fn of(key: &kms_core::KeyId) -> Self {
        TokenKeys::keystore(key.tenant(), key.purpose())
    }

    /// No keystore key; the trusted external keys only.
    pub fn trusted_only() -> Self {
        TokenKeys {
            keystore: Vec::new(),
            trusted: true,
        }
    }

    /// These keys and the keystore keys of `tenant` with `purpose`.
    #[must_use]
    pub fn and_keystore(mut self, tenant: impl Into<String>, purpose: impl Into<String>) -> Self {
        self.keystore.push((tenant.into(), purpose.into()));
        self
    }

    /// These keys without the trusted external keys.
    #[must_use]
    pub fn without_trusted(mut self) -> Self {
        self.trusted = false;
        self
    }

    /// Whether a keystore key of `tenant` with `purpose` is accepted.
    pub fn accepts_keystore(&self, tenant: &str, purpose: &str) -> bool {
        self.keystore
            .iter()
            .any(|(t, p)| t == tenant && p == purpose)
    }

    /// Whether the trusted external keys are accepted.
    pub fn accepts_trusted(&self) -> bool {
        self.trusted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_named_tenants_and_purposes_are_accepted() {
        let keys = TokenKeys::keystore("acme", "tokens").and_keystore("acme", "passports");
        assert!(keys.accepts_keystore("acme", "tokens"));
        assert!(keys.accepts_keystore("acme", "passports"));
        assert!(!keys.accepts_keystore("beta", "tokens"));
        assert!(!keys.accepts_keystore("acme", "other"));
        assert!(keys.accepts_trusted());
        assert!(!keys.clone().without_trusted().accepts_trusted());
        let none = TokenKeys::trusted_only();
        assert!(!none.accepts_keystore("acme", "tokens") && none.accepts_trusted());
    }
}
