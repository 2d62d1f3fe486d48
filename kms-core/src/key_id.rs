//! [`KeyId`]: the name of one version of one key, and its text form.
//!
//! Text form (one form, documented here, parsed by [`FromStr`] and printed by
//! [`Display`], which round-trip):
//!
//! ```text
//! kms:<tenant>:<purpose>:<alg>:<uuid>:v<version>
//! kms:acme:tokens:ed25519:67e55044-10b1-426f-9247-bb680e5fe0c8:v3
//! ```
//!
//! * `tenant`, `purpose`: 1 to 64 bytes of `[A-Za-z0-9._-]`.
//! * `alg`: `ed25519`, `ml-dsa-44`, `ml-dsa-65` or `ml-dsa-87` ([`Alg`]).
//! * `uuid`: lowercase hyphenated UUID (RFC 9562 text form), 36 bytes.
//! * `version`: decimal, 1 to 4294967295, no sign and no leading zero.

use core::fmt;
use core::str::FromStr;

use thiserror::Error;
use uuid::Uuid;

/// Longest tenant or purpose name, in bytes.
pub const MAX_NAME_LEN: usize = 64;

/// A signature algorithm a key can have, chosen when the key is created
/// and kept by every version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Alg {
    /// Ed25519 (RFC 8032 §5.1), verified under docs/DESIGN.md §3.2.
    Ed25519,
    /// ML-DSA-44 (FIPS 204, security category 2).
    MlDsa44,
    /// ML-DSA-65 (FIPS 204, security category 3).
    MlDsa65,
    /// ML-DSA-87 (FIPS 204, security category 5).
    MlDsa87,
}

impl Alg {
    /// Every algorithm, Ed25519 first.
    pub const ALL: [Alg; 4] = [Alg::Ed25519, Alg::MlDsa44, Alg::MlDsa65, Alg::MlDsa87];

    /// The text form used in [`KeyId`]: `"ed25519"`, `"ml-dsa-44"`,
    /// `"ml-dsa-65"`, `"ml-dsa-87"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Alg::Ed25519 => "ed25519",
            Alg::MlDsa44 => "ml-dsa-44",
            Alg::MlDsa65 => "ml-dsa-65",
            Alg::MlDsa87 => "ml-dsa-87",
        }
    }

    /// The algorithm whose text form ([`Alg::as_str`]) is `name`.
    pub fn from_name(name: &str) -> Option<Alg> {
        Alg::ALL.into_iter().find(|alg| alg.as_str() == name)
    }

    /// Whether this is one of the ML-DSA parameter sets.
    pub fn is_ml_dsa(&self) -> bool {
        !matches!(self, Alg::Ed25519)
    }

    /// A public key's length (bytes): Ed25519 32 (RFC 8032 §5.1.5);
    /// ML-DSA-44/65/87 1312/1952/2592 (FIPS 204 Table 2, pkEncode).
    pub fn public_key_len(&self) -> usize {
        match self {
            Alg::Ed25519 => 32,
            Alg::MlDsa44 => 1312,
            Alg::MlDsa65 => 1952,
            Alg::MlDsa87 => 2592,
        }
    }

    /// A signature's length (bytes): Ed25519 64 (RFC 8032 §5.1.6);
    /// ML-DSA-44/65/87 2420/3309/4627 (FIPS 204 Table 2).
    pub fn signature_len(&self) -> usize {
        match self {
            Alg::Ed25519 => 64,
            Alg::MlDsa44 => 2420,
            Alg::MlDsa65 => 3309,
            Alg::MlDsa87 => 4627,
        }
    }
}

impl fmt::Display for Alg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Names one version of one key: `tenant`, `purpose`, `alg`, `uuid`, `version`.
///
/// `(uuid)` identifies the key; `version` (1-based) one of its versions.
/// See the module docs for the text form.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyId {
    tenant: String,
    purpose: String,
    alg: Alg,
    uuid: Uuid,
    version: u32,
}

impl KeyId {
    /// Builds a key id, checking every field.
    ///
    /// # Errors
    /// [`KeyIdParseError`] naming the first invalid field: a tenant or
    /// purpose that is empty, longer than [`MAX_NAME_LEN`] bytes or has a
    /// byte outside `[A-Za-z0-9._-]`, or version 0.
    pub fn new(
        tenant: &str,
        purpose: &str,
        alg: Alg,
        uuid: Uuid,
        version: u32,
    ) -> Result<Self, KeyIdParseError> {
        check_name(KeyIdField::Tenant, tenant)?;
        check_name(KeyIdField::Purpose, purpose)?;
        if version == 0 {
            return Err(KeyIdParseError::new(
                KeyIdField::Version,
                "versions start at 1",
            ));
        }
        Ok(KeyId {
            tenant: tenant.to_owned(),
            purpose: purpose.to_owned(),
            alg,
            uuid,
            version,
        })
    }

    /// The tenant that owns the key.
    pub fn tenant(&self) -> &str {
        &self.tenant
    }
    /// What the key is for (`tokens`, `passports`, ...).
    pub fn purpose(&self) -> &str {
        &self.purpose
    }
    /// The key's algorithm.
    pub fn alg(&self) -> Alg {
        self.alg
    }
    /// The key's UUID, the same for every version.
    pub fn uuid(&self) -> Uuid {
        self.uuid
    }
    /// The version, 1-based.
    pub fn version(&self) -> u32 {
        self.version
    }
    /// The same key at another version (`version` ≥ 1 is the caller's duty:
    /// the keystore only hands out versions it has).
    pub(crate) fn with_version(&self, version: u32) -> KeyId {
        KeyId {
            version,
            ..self.clone()
        }
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kms:{}:{}:{}:{}:v{}",
            self.tenant,
            self.purpose,
            self.alg,
            self.uuid.hyphenated(),
            self.version
        )
    }
}

impl FromStr for KeyId {
    type Err = KeyIdParseError;

    /// Parses the text form of the module docs.
    ///
    /// # Errors
    /// [`KeyIdParseError`] naming the field that is wrong.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut parts = s.split(':');
        let mut next = |field| {
            parts
                .next()
                .ok_or_else(|| KeyIdParseError::new(field, "missing"))
        };
        let prefix = next(KeyIdField::Prefix)?;
        if prefix != "kms" {
            return Err(KeyIdParseError::new(KeyIdField::Prefix, "must be `kms`"));
        }
        let tenant = next(KeyIdField::Tenant)?;
        let purpose = next(KeyIdField::Purpose)?;
        let alg = Alg::from_name(next(KeyIdField::Alg)?)
            .ok_or_else(|| KeyIdParseError::new(KeyIdField::Alg, "unknown algorithm"))?;
        let uuid_text = next(KeyIdField::Uuid)?;
        let uuid = Uuid::try_parse(uuid_text)
            .ok()
            .filter(|u| u.hyphenated().to_string() == uuid_text)
            .ok_or_else(|| {
                KeyIdParseError::new(KeyIdField::Uuid, "not a lowercase hyphenated UUID")
            })?;
        let version_text = next(KeyIdField::Version)?;
        let version = parse_version(version_text)?;
        if parts.next().is_some() {
            return Err(KeyIdParseError::new(
                KeyIdField::Version,
                "unexpected `:` after the version",
            ));
        }
        KeyId::new(tenant, purpose, alg, uuid, version)
    }
}

fn parse_version(text: &str) -> Result<u32, KeyIdParseError> {
    let digits = text
        .strip_prefix('v')
        .ok_or_else(|| KeyIdParseError::new(KeyIdField::Version, "must start with `v`"))?;
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
    {
        return Err(KeyIdParseError::new(
            KeyIdField::Version,
            "must be decimal digits without a leading zero",
        ));
    }
    digits
        .parse::<u32>()
        .map_err(|_| KeyIdParseError::new(KeyIdField::Version, "out of range 1..=4294967295"))
}

/// Whether `b` may appear in a tenant or purpose: `[A-Za-z0-9._-]`.
pub(crate) fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')
}

fn check_name(field: KeyIdField, name: &str) -> Result<(), KeyIdParseError> {
    if name.is_empty() {
        return Err(KeyIdParseError::new(field, "empty"));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(KeyIdParseError::new(field, "longer than 64 bytes"));
    }
    if !name.bytes().all(is_name_byte) {
        return Err(KeyIdParseError::new(
            field,
            "only ASCII letters, digits, `.`, `_` and `-` are allowed",
        ));
    }
    Ok(())
}

/// A field of the [`KeyId`] text form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyIdField {
    /// The leading `kms`.
    Prefix,
    /// The tenant.
    Tenant,
    /// The purpose.
    Purpose,
    /// The algorithm.
    Alg,
    /// The UUID.
    Uuid,
    /// The `v<version>` suffix.
    Version,
}

impl fmt::Display for KeyIdField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyIdField::Prefix => "prefix",
            KeyIdField::Tenant => "tenant",
            KeyIdField::Purpose => "purpose",
            KeyIdField::Alg => "alg",
            KeyIdField::Uuid => "uuid",
            KeyIdField::Version => "version",
        })
    }
}

/// A [`KeyId`] text or field that is wrong: which field, and why.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid key id: {field}: {reason}")]
#[non_exhaustive]
pub struct KeyIdParseError {
    /// The field that is wrong.
    pub field: KeyIdField,
    /// Why, in words.
    pub reason: &'static str,
}

impl KeyIdParseError {
    fn new(field: KeyIdField, reason: &'static str) -> Self {
        KeyIdParseError { field, reason }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "kms:acme:tokens:ed25519:67e55044-10b1-426f-9247-bb680e5fe0c8:v3";

    #[test]
    fn round_trips() {
        let id: KeyId = TEXT.parse().expect("valid");
        assert_eq!(id.tenant(), "acme");
        assert_eq!(id.version(), 3);
        assert_eq!(id.to_string(), TEXT);
    }

    #[test]
    fn names_the_wrong_field() {
        let cases = [
            (
                "kmz:acme:tokens:ed25519:67e55044-10b1-426f-9247-bb680e5fe0c8:v3",
                KeyIdField::Prefix,
            ),
            (
                "kms::tokens:ed25519:67e55044-10b1-426f-9247-bb680e5fe0c8:v3",
                KeyIdField::Tenant,
            ),
            (
                "kms:acme:tok ens:ed25519:67e55044-10b1-426f-9247-bb680e5fe0c8:v3",
                KeyIdField::Purpose,
            ),
            (
                "kms:acme:tokens:rsa:67e55044-10b1-426f-9247-bb680e5fe0c8:v3",
                KeyIdField::Alg,
            ),
            (
                "kms:acme:tokens:ed25519:67E55044-10B1-426F-9247-BB680E5FE0C8:v3",
                KeyIdField::Uuid,
            ),
            (
                "kms:acme:tokens:ed25519:67e55044-10b1-426f-9247-bb680e5fe0c8:v0",
                KeyIdField::Version,
            ),
            (
                "kms:acme:tokens:ed25519:67e55044-10b1-426f-9247-bb680e5fe0c8:v03",
                KeyIdField::Version,
            ),
            (
                "kms:acme:tokens:ed25519:67e55044-10b1-426f-9247-bb680e5fe0c8:3",
                KeyIdField::Version,
            ),
            (
                "kms:acme:tokens:ed25519:67e55044-10b1-426f-9247-bb680e5fe0c8:v3:x",
                KeyIdField::Version,
            ),
            (
                "kms:acme:tokens:ed25519:67e55044-10b1-426f-9247-bb680e5fe0c8:v99999999999",
                KeyIdField::Version,
            ),
            ("kms:acme:tokens", KeyIdField::Alg),
        ];
        for (text, field) in cases {
            let err = text.parse::<KeyId>().expect_err(text);
            assert_eq!(err.field, field, "{text}: {err}");
        }
    }
}
