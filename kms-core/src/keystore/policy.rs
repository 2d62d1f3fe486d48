//! [`KeyPolicy`]: what a key may do (docs/DESIGN.md §3.1, "Lifecycle"),
//! with names from HashiCorp Vault's transit engine
//! (`min_decryption_version` becomes `min_verify_version` for signatures).
//!
//! Invariants, checked by [`check_change`] before any change is written:
//! * `1 <= min_available_version <= min_verify_version <= head`: a trimmed
//!   version (no secret) never verifies, and raising `min_verify_version`
//!   past the head would refuse every signature the key can still make.
//! * `exportable` is never turned off once on (Vault's rule: the key may
//!   already have left, so pretending otherwise would mislead).
//! * `auto_rotate_after`, when set, is at least [`MIN_AUTO_ROTATE`].

use std::time::Duration;

use crate::error::KmsError;

/// The shortest `auto_rotate_after` accepted: one second.
pub const MIN_AUTO_ROTATE: Duration = Duration::from_secs(1);

/// A key's policy, read with [`crate::Keystore::policy`] and written with
/// [`crate::Keystore::set_policy`]: read it, change a field, write it back.
/// The default is what a newly created key gets.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct KeyPolicy {
    /// Versions below it do not verify: [`KmsError::VersionDisallowed`]
    /// through `verify`, the actor's batches and JWTs, and they leave the
    /// JWK Set. They are kept (not deleted) until trimmed. From 1 (the
    /// default: every version verifies) to the head.
    pub min_verify_version: u32,
    /// Whether the key signs (default on). A disabled key answers
    /// [`KmsError::KeyDisabled`] to signing; it still verifies, rotates
    /// and (if `exportable`) exports, as in Vault: to keep a suspect key
    /// from leaving, leave `exportable` off, or trim or destroy it.
    pub enabled: bool,
    /// Whether `export_sealed` may export it (default off; on for a key
    /// whose stored head carries no policy, as in format 1). Once on it
    /// cannot be turned off.
    pub exportable: bool,
    /// Rotate the key when its head is older than this (default never); the
    /// KMS actor checks at start and at least once a minute. At least
    /// [`MIN_AUTO_ROTATE`].
    pub auto_rotate_after: Option<Duration>,
}

impl Default for KeyPolicy {
    fn default() -> Self {
        KeyPolicy {
            min_verify_version: 1,
            enabled: true,
            exportable: false,
            auto_rotate_after: None,
        }
    }
}

impl KeyPolicy {
    /// The policy of a key whose stored head carries none (format 1, or a
    /// head without the state): what a key without a policy may do, so
    /// every version verifies, signs and exports.
    pub(crate) fn legacy() -> Self {
        KeyPolicy {
            exportable: true,
            ..KeyPolicy::default()
        }
    }
}

/// Checks that `old` may become `new` for a key whose head is `head` and
/// whose versions below `min_available_version` are trimmed (module
/// invariants).
///
/// # Errors
/// [`KmsError::InvalidArgument`] (`what` = `"key policy"`) naming the rule
/// broken.
pub(crate) fn check_change(
    old: &KeyPolicy,
    new: &KeyPolicy,
    head: u32,
    min_available_version: u32,
) -> Result<(), KmsError> {
    let refuse = |reason: String| {
        Err(KmsError::InvalidArgument {
            what: "key policy",
            reason,
        })
    };
    if new.min_verify_version < min_available_version.max(1) {
        return refuse(format!(
            "min_verify_version {} is below {}, the lowest version not trimmed",
            new.min_verify_version,
            min_available_version.max(1)
        ));
    }
    if new.min_verify_version > head {
        return refuse(format!(
            "min_verify_version {} is above the head, v{head}",
            new.min_verify_version
        ));
    }
    if old.exportable && !new.exportable {
        return refuse("exportable cannot be turned off once on".to_owned());
    }
    if let Some(after) = new.auto_rotate_after {
        if after < MIN_AUTO_ROTATE {
            return refuse(format!(
                "auto_rotate_after {after:?} is shorter than {MIN_AUTO_ROTATE:?}"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{check_change, KeyPolicy};
    use std::time::Duration;

    #[test]
    fn changes_are_checked() {
        let old = KeyPolicy::default();
        let ok = |new: &KeyPolicy| check_change(&old, new, 5, 2).is_ok();
        assert!(ok(&KeyPolicy {
            min_verify_version: 2,
            ..old.clone()
        }));
        assert!(ok(&KeyPolicy {
            min_verify_version: 5,
            exportable: true,
            auto_rotate_after: Some(Duration::from_secs(1)),
            ..old.clone()
        }));
        for bad in [
            KeyPolicy {
                min_verify_version: 1,
                ..old.clone()
            },
            KeyPolicy {
                min_verify_version: 6,
                ..old.clone()
            },
            KeyPolicy {
                min_verify_version: 3,
                auto_rotate_after: Some(Duration::from_millis(999)),
                ..old.clone()
            },
        ] {
            assert!(!ok(&bad), "{bad:?}");
        }
        let exportable = KeyPolicy {
            exportable: true,
            ..KeyPolicy::default()
        };
        assert!(check_change(&exportable, &KeyPolicy::default(), 1, 1).is_err());
    }
}
