//! What several of this binary's modules share.

use std::borrow::Borrow;

use kms_actor::VerifiedJwt;
use kms_core::KmsError;

/// The code of a token refusal ([`KmsError::InvalidToken`]); panics on
/// anything else. Takes the result or a reference to it.
pub(crate) fn code(result: impl Borrow<Result<VerifiedJwt, KmsError>>) -> &'static str {
    match result.borrow() {
        Err(KmsError::InvalidToken { code, .. }) => code,
        other => panic!("expected InvalidToken, got {other:?}"),
    }
}
