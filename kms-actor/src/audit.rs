//! Audit events: one `tracing` event per operation that changes or uses a
//! secret (create, rotate, sign, export, import, policy change, trim,
//! destroy, and the actor's scheduled rotations), emitted when its outcome
//! is known.
//!
//! The target is [`AUDIT_TARGET`] (`kms::audit`), the level `INFO`, and
//! the fields are stable (docs/SECURITY.md, "Audit events"):
//! * `operation`: `create_key`, `rotate`, `auto_rotate`, `sign`, `export`,
//!   `import`, `set_policy`, `trim`, `destroy`;
//! * `key`: the key id in its text form (for a success, the version the
//!   operation made or used: the new head of a rotation, the head that
//!   signed, an import's new key); for a failure, the id the caller gave;
//!   `tenant:purpose` for a create or import that failed;
//! * `version`: that id's version (0 when there is none);
//! * `outcome`: `ok`, or the error's code without its `kms.` prefix
//!   (`key_disabled`, `unknown_key`, …), as the metrics' `outcome` label;
//! * `principal`: who asked ([`crate::KmsClient::with_principal`]),
//!   `unspecified` when the client named no one, `kms` for the actor's own
//!   scheduled rotations;
//! * `detail`: what a change asked for, empty for the other operations:
//!   the policy written (`min_verify_version=2 enabled=true
//!   exportable=false auto_rotate_after=none`) or the trim's `below=N`.
//!
//! An event never carries a secret, a message or a signature.

use kms_core::{KeyId, KmsError};

use crate::metrics::outcome;

/// The target of every audit event.
pub const AUDIT_TARGET: &str = "kms::audit";

/// The principal of the actor's own scheduled rotations.
pub(crate) const SCHEDULER: &str = "kms";

/// Emits the audit event of `operation` on `key` (the text and version
/// the event names) by `principal` (`None`: the client named no one) with
/// `outcome` and `detail`.
fn record(
    operation: &'static str,
    key: &str,
    version: u32,
    principal: Option<&str>,
    outcome_of: Result<(), &KmsError>,
    detail: &str,
) {
    let outcome = outcome_of.map_or_else(outcome, |()| "ok");
    tracing::info!(
        target: AUDIT_TARGET,
        operation,
        key,
        version,
        outcome,
        principal = principal.unwrap_or("unspecified"),
        detail,
        "audit"
    );
}

/// Emits the audit event of an operation on `asked`: a success names the
/// key version `ok_key` returns (or `asked`), a failure `asked`.
pub(crate) fn key_op<T>(
    operation: &'static str,
    asked: &KeyId,
    principal: Option<&str>,
    result: &Result<T, KmsError>,
    ok_key: impl FnOnce(&T) -> Option<&KeyId>,
    detail: &str,
) {
    let (key, outcome) = match result {
        Ok(value) => (ok_key(value).unwrap_or(asked), Ok(())),
        Err(e) => (asked, Err(e)),
    };
    record(
        operation,
        &key.to_string(),
        key.version(),
        principal,
        outcome,
        detail,
    );
}

/// Emits the audit event of an operation that makes a key for `tenant`
/// and `purpose` (a create or an import): its version 1, or, for a
/// failure, `tenant:purpose` at version 0.
pub(crate) fn new_key(
    operation: &'static str,
    tenant: &str,
    purpose: &str,
    principal: Option<&str>,
    result: &Result<KeyId, KmsError>,
) {
    match result {
        Ok(id) => key_op(operation, id, principal, result, |_| None, ""),
        Err(e) => record(
            operation,
            &format!("{tenant}:{purpose}"),
            0,
            principal,
            Err(e),
            "",
        ),
    }
}

/// The `detail` of a policy change.
pub(crate) fn policy_detail(policy: &kms_core::KeyPolicy) -> String {
    format!(
        "min_verify_version={} enabled={} exportable={} auto_rotate_after={}",
        policy.min_verify_version,
        policy.enabled,
        policy.exportable,
        policy
            .auto_rotate_after
            .map_or_else(|| "none".to_owned(), |d| format!("{}s", d.as_secs_f64()))
    )
}
