//! [`publish`]: a request onto the actor's request or priority topic, with
//! the bus's refusals turned into the errors callers get. Used by the
//! client for every published call and by the last combining leader for
//! what it hands off (`combine.rs`).

use kms_bus::{PublishError, Publisher};
use kms_core::KmsError;

use crate::dispatch::request::Request;

/// Publishes `request` on `lane` (the request or priority topic).
///
/// # Errors
/// [`KmsError::Overloaded`] if the topic is full (and refuses),
/// [`KmsError::ShuttingDown`] if the actor no longer subscribes,
/// [`KmsError::Internal`] for any other refusal of the bus.
pub(crate) fn publish(lane: &Publisher<Request>, request: Request) -> Result<(), KmsError> {
    match lane.publish(request) {
        Ok(()) => Ok(()),
        Err(PublishError::Full(_)) => Err(KmsError::Overloaded),
        Err(PublishError::NoSubscribers(_)) => Err(KmsError::ShuttingDown),
        Err(e) => Err(KmsError::Internal {
            reason: format!("publishing the request failed: {e}"),
        }),
    }
}
