#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

/// Keys, key ids, the keystore, Ed25519 verification, [`core::KmsError`].
pub use kms_core as core;

/// The in-process bus: typed topics, publishers, subscribers.
pub use kms_bus as bus;

/// The KMS actor, its client and handle.
pub use kms_actor as actor;

/// JWS, JWK and JWT: parsing, issuing (Ed25519), verifying (Ed25519; RSA
/// and ECDSA with feature `rsa-ecdsa`), claims validation.
pub use kms_jose as jose;

/// Access rules: request paths normalized as served, ordered rules on
/// paths and methods, and a verified token's scopes and claims checked.
pub use kms_access as access;

/// HTTP faces: the bearer-token tower layer, the JWKS, the admin router.
pub use kms_http as http;

/// Identity providers' keys: OpenID Connect discovery and remote JWK Sets
/// kept current for the actor (feature `oidc`).
#[cfg(feature = "oidc")]
pub use kms_oidc as oidc;

/// The durable store's master key wrapped by a PKCS#11 token's AES key
/// (feature `pkcs11`).
#[cfg(feature = "pkcs11")]
pub use kms_pkcs11 as pkcs11;

/// The durable store's master key wrapped by an AWS KMS key (feature
/// `aws-kms`).
#[cfg(feature = "aws-kms")]
pub use kms_aws_kms as aws_kms;

/// A fleet's shared keystore on etcd v3 (feature `etcd`).
#[cfg(feature = "etcd")]
pub use kms_etcd as etcd;
