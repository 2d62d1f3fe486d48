//! kms-jose: compact JWS, JWK / JWK Set and JWT claims, with names from
//! the RFCs: RFC 7515 (JWS), RFC 7517 (JWK), RFC 7518 (the RSA and ECDSA
//! algorithms), RFC 7519 (JWT), RFC 8037 (`OKP` keys, `alg: "EdDSA"`) and
//! RFC 9864 (`alg: "Ed25519"`, which deprecates the polymorphic `EdDSA`)
//! and RFC 9964 (`AKP` keys, `alg: "ML-DSA-44"`, `-65`, `-87`). It builds
//! tokens for the KMS's keys (Ed25519, and ML-DSA with the `ml-dsa`
//! feature), and verifies Ed25519 always, ML-DSA with `ml-dsa`, and, with
//! the `rsa-ecdsa` feature, what identity providers sign with: `RS256`,
//! `RS384`, `RS512`, `PS256`, `PS384`, `PS512`, `ES256` and `ES384`,
//! through aws-lc-rs (either feature brings aws-lc's C build). No async,
//! no bus: the KMS actor and the HTTP layer build on it.
//!
//! What it accepts, and refuses with a typed [`JoseError`] naming the
//! reason:
//! * compact serialization only, at most [`MAX_TOKEN_BYTES`]; strict
//!   base64url without padding (padding, characters outside the alphabet
//!   and non-zero trailing bits are errors);
//! * a JOSE header of at most [`MAX_HEADER_BYTES`], a JSON object with no
//!   duplicate member names (RFC 7515 §5.2), an `alg` this build verifies,
//!   named exactly ([`Algorithm::parse`]: `none`, `HS*` and other
//!   spellings are refused), a `kid` that is a string if present, and none
//!   of `crit`, `jku`, `x5u`, `x5c`, `jwk`; `typ` is read
//!   ([`Header::typ`]), other parameters are ignored;
//! * a signature whose length fits the `alg`, verified under a key whose
//!   type verifies that `alg` (RFC 8725 §3.1, [`PublicKey`]): Ed25519
//!   under the rule of `kms_core::ed25519`;
//! * claims: a JSON object with no duplicate names, validated by
//!   [`Validation`] (`exp`, `nbf` with leeway, `iss`, `aud`, required
//!   claims, the token's lifetime, its `typ`).
//!
//! Not supported, on purpose: the JSON serializations of JWS, JWE,
//! unencoded payloads (`b64: false`, which needs `crit`), symmetric keys
//! (`HS*`), and keys named by URL or carried in the token (`jku`, `x5u`,
//! `x5c`, `jwk`).
//!
//! ```
//! use kms_jose::{Algorithm, CompactJws, Header, Validation};
//! # let seed = [7u8; 32];
//! # let signing = ed25519_dalek::SigningKey::from_bytes(&seed);
//! # let public = signing.verifying_key().to_bytes();
//! use ed25519_dalek::Signer;
//! let header = Header::new(Algorithm::EdDSA, Some("acme:tokens:1".to_owned()));
//! let claims = serde_json::json!({"sub": "alice", "exp": 4_000_000_000u64});
//! let token = kms_jose::sign_compact(&header, &claims, |input| signing.sign(input).to_bytes())?;
//! let jws = CompactJws::parse(&token)?;
//! assert_eq!(jws.header().kid(), Some("acme:tokens:1"));
//! let key = kms_core::ed25519::VerifyingKey::from_bytes(&public).expect("key");
//! jws.verify(&key)?;
//! let claims = jws.claims()?;
//! Validation::default().validate(&claims, std::time::SystemTime::now())?;
//! # Ok::<(), kms_jose::JoseError>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used)]
#![warn(missing_debug_implementations, unreachable_pub)]

mod alg;
#[cfg(feature = "rsa-ecdsa")]
mod aws_lc;
mod b64;
mod claims;
mod error;
mod header;
mod jwk;
mod jws;
mod object;
mod public_key;

pub use alg::Algorithm;
#[cfg(feature = "rsa-ecdsa")]
pub use aws_lc::{MAX_RSA_BITS, MIN_RSA_BITS};
pub use claims::{Claims, Validation, DEFAULT_LEEWAY};
pub use error::{JoseError, Part};
pub use header::{Header, MAX_HEADER_BYTES};
pub use jwk::{Jwk, JwkSet, SkippedJwk, TrustedJwk, TrustedJwkSet};
pub use jws::{
    claims_json, finish_compact, sign_compact, signing_input, verify_with_public_key, CompactJws,
    MAX_TOKEN_BYTES,
};
pub use public_key::PublicKey;
