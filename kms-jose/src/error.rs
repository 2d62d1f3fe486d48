//! [`JoseError`]: every reason a token, header, key or claims set is
//! refused, each with a stable [`JoseError::code`].

use kms_core::ed25519::SignatureError;

/// Which part of a compact JWS (RFC 7515 §7.1) an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The JOSE header (first part).
    Header,
    /// The payload (second part).
    Payload,
    /// The signature (third part).
    Signature,
}

impl Part {
    /// `header`, `payload` or `signature`.
    pub fn as_str(self) -> &'static str {
        match self {
            Part::Header => "header",
            Part::Payload => "payload",
            Part::Signature => "signature",
        }
    }
}

/// Why a token, header, JWK or claims set was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum JoseError {
    /// The token is longer than [`crate::MAX_TOKEN_BYTES`].
    #[error("token of {len} bytes is over the limit of {max}")]
    TokenTooLong {
        /// The token's length (bytes).
        len: usize,
        /// The limit (bytes).
        max: usize,
    },
    /// Not three non-empty-header parts separated by `.` (RFC 7515 §7.1).
    #[error("malformed compact JWS: {reason}")]
    Malformed {
        /// What is wrong.
        reason: &'static str,
    },
    /// A part is not strict base64url without padding (RFC 7515 §2,
    /// RFC 4648 §5): padding, a character outside the alphabet, or
    /// non-zero trailing bits.
    #[error("{} is not strict base64url without padding", .0.as_str())]
    Base64(Part),
    /// The decoded JOSE header is longer than [`crate::MAX_HEADER_BYTES`].
    #[error("JOSE header of at least {len} bytes is over the limit of {max}")]
    HeaderTooLong {
        /// The decoded header's length, or a lower bound on it computed
        /// from its base64url length before decoding (bytes).
        len: usize,
        /// The limit (bytes).
        max: usize,
    },
    /// The header or the claims are not a JSON object.
    #[error("{} is not a JSON object: {reason}", part.as_str())]
    NotAnObject {
        /// Which part.
        part: Part,
        /// The parser's message.
        reason: String,
    },
    /// A member name appears twice in the header (RFC 7515 §5.2), the
    /// claims (RFC 7519 §4) or a JWK.
    #[error("duplicate member `{name}` in the {}", part.as_str())]
    Duplicate {
        /// Which part.
        part: Part,
        /// The repeated name, quoted and escaped, at most 64 characters.
        name: String,
    },
    /// The header has no `alg`, or it is not a string.
    #[error("the JOSE header has no string `alg`")]
    MissingAlg,
    /// `alg` is not one this build verifies, exactly, case included:
    /// `EdDSA` and `Ed25519` always; `RS256`, `RS384`, `RS512`, `PS256`,
    /// `PS384`, `PS512`, `ES256` and `ES384` with the `rsa-ecdsa` feature
    /// (so `none` and `HS*` never).
    #[error("alg `{alg}` is not accepted")]
    UnsupportedAlg {
        /// The `alg` the token names: its first 32 characters, escaped
        /// (`char::escape_debug`).
        alg: String,
    },
    /// The key the token names cannot verify the token's `alg`: the key's
    /// type decides the algorithms (RFC 8725 §3.1: an `OKP` Ed25519 key
    /// only `EdDSA`/`Ed25519`, an `RSA` key only `RS*`/`PS*`, an `EC` key
    /// only the `ES*` of its curve), and a JWK with an `alg` member only
    /// that one.
    #[error("alg `{got}` does not match the key's `{expected}`")]
    AlgMismatch {
        /// What the key verifies: its `alg`, or its type's algorithms.
        expected: &'static str,
        /// The token's `alg`.
        got: &'static str,
    },
    /// A header parameter this crate refuses: `crit` (no extension is
    /// understood, RFC 7515 §4.1.11), or a key named by URL or carried in
    /// the token (`jku`, `x5u`, `x5c`, `jwk`).
    #[error("header parameter `{name}` is refused")]
    RefusedHeader {
        /// The parameter.
        name: &'static str,
    },
    /// `kid` is present but not a string.
    #[error("kid is not a string")]
    KidNotString,
    /// The signature's decoded length does not fit the token's `alg`: 64
    /// bytes for `EdDSA`, `Ed25519` and `ES256` (RFC 8037 §3.1, RFC 7518
    /// §3.4), 96 for `ES384`, 256 to 1024 for the RSA algorithms (moduli
    /// of 2048 to 8192 bits).
    #[error("signature of {len} bytes does not fit alg {alg}")]
    SignatureLength {
        /// Its decoded length (bytes).
        len: usize,
        /// The token's `alg`.
        alg: &'static str,
    },
    /// The Ed25519 signature does not verify (kms-core names the rule).
    #[error("invalid signature: {0}")]
    Signature(SignatureError),
    /// The RSA or ECDSA signature does not verify (aws-lc-rs says no
    /// more).
    #[error("invalid {alg} signature")]
    SignatureRejected {
        /// The token's `alg`.
        alg: &'static str,
    },
    /// `exp` is at or before now minus the leeway (RFC 7519 §4.1.4).
    #[error("expired at {exp} (now {now})")]
    Expired {
        /// The `exp` claim (seconds since the epoch).
        exp: f64,
        /// The time it was checked at (seconds since the epoch).
        now: f64,
    },
    /// `nbf` is after now plus the leeway (RFC 7519 §4.1.5).
    #[error("not valid before {nbf} (now {now})")]
    NotYetValid {
        /// The `nbf` claim (seconds since the epoch).
        nbf: f64,
        /// The time it was checked at (seconds since the epoch).
        now: f64,
    },
    /// `iat` is after now plus the leeway: a token issued in the future
    /// (RFC 7519 §4.1.6; a clock that runs ahead, or a forged `iat`).
    #[error("issued in the future at {iat} (now {now})")]
    IssuedInTheFuture {
        /// The `iat` claim (seconds since the epoch).
        iat: f64,
        /// The time it was checked at (seconds since the epoch).
        now: f64,
    },
    /// A claim the validation requires is absent.
    #[error("required claim `{name}` is missing")]
    MissingClaim {
        /// The claim.
        name: String,
    },
    /// A registered claim has the wrong type (`exp`/`nbf`/`iat` not a number,
    /// `iss` not a string, `aud` not a string or array of strings).
    #[error("claim `{name}` is malformed: {reason}")]
    InvalidClaim {
        /// The claim.
        name: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
    /// `iss` is not one the validation accepts.
    #[error("issuer is not accepted")]
    WrongIssuer,
    /// No `aud` value is one the validation accepts.
    #[error("audience is not accepted")]
    WrongAudience,
    /// `exp − iat` is over the `Validation::max_lifetime`.
    #[error("a lifetime of {lifetime} s is over the limit of {max} s")]
    LifetimeTooLong {
        /// `exp − iat` (seconds).
        lifetime: f64,
        /// The limit (seconds).
        max: u64,
    },
    /// The header's `typ` is not the one `Validation::typ` requires.
    #[error("typ `{typ}` is not the one required")]
    WrongType {
        /// The token's `typ` (empty when it has none): its first 32
        /// characters, escaped.
        typ: String,
    },
    /// The claims do not deserialize into the caller's type.
    #[error("claims do not fit the expected type: {reason}")]
    ClaimsType {
        /// The deserializer's message.
        reason: String,
    },
    /// A JWK or JWK Set that cannot be used (RFC 7517), naming the key.
    #[error("JWK {}: {reason}", kid.as_deref().unwrap_or("without kid"))]
    InvalidJwk {
        /// The key's `kid`, if it has one.
        kid: Option<String>,
        /// What is wrong.
        reason: String,
    },
    /// Two keys share a `kid`.
    #[error("kid `{kid}` appears more than once")]
    DuplicateKid {
        /// The repeated `kid`.
        kid: String,
    },
}

impl JoseError {
    /// A stable, machine-readable code (`jose.<reason>`), for logs, metrics
    /// and HTTP error bodies.
    pub fn code(&self) -> &'static str {
        match self {
            JoseError::TokenTooLong { .. } => "jose.token_too_long",
            JoseError::Malformed { .. } => "jose.malformed",
            JoseError::Base64(_) => "jose.base64",
            JoseError::HeaderTooLong { .. } => "jose.header_too_long",
            JoseError::NotAnObject { .. } => "jose.not_an_object",
            JoseError::Duplicate { .. } => "jose.duplicate_member",
            JoseError::MissingAlg => "jose.missing_alg",
            JoseError::UnsupportedAlg { .. } => "jose.unsupported_alg",
            JoseError::AlgMismatch { .. } => "jose.alg_mismatch",
            JoseError::RefusedHeader { .. } => "jose.refused_header",
            JoseError::KidNotString => "jose.kid_not_string",
            JoseError::SignatureLength { .. } => "jose.signature_length",
            JoseError::Signature(_) | JoseError::SignatureRejected { .. } => {
                "jose.invalid_signature"
            }
            JoseError::Expired { .. } => "jose.expired",
            JoseError::NotYetValid { .. } => "jose.not_yet_valid",
            JoseError::IssuedInTheFuture { .. } => "jose.issued_in_the_future",
            JoseError::MissingClaim { .. } => "jose.missing_claim",
            JoseError::InvalidClaim { .. } => "jose.invalid_claim",
            JoseError::WrongIssuer => "jose.wrong_issuer",
            JoseError::WrongAudience => "jose.wrong_audience",
            JoseError::LifetimeTooLong { .. } => "jose.lifetime_too_long",
            JoseError::WrongType { .. } => "jose.wrong_typ",
            JoseError::ClaimsType { .. } => "jose.claims_type",
            JoseError::InvalidJwk { .. } => "jose.invalid_jwk",
            JoseError::DuplicateKid { .. } => "jose.duplicate_kid",
        }
    }
}
