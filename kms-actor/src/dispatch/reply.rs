//! [`Reply`]: the one-shot answer handle a request carries on the bus.
//!
//! Invariant: a reply is sent at most once (the sender is taken out of the
//! slot), and when the last clone of a [`Reply`] is dropped unanswered the
//! sender drops with it, so the waiting caller is woken with "closed" and
//! never hangs. The bus needs `Clone` payloads; the actor is the topic's one
//! subscriber, so either backend moves the request out rather than
//! cloning it, and clones, when they happen, share the one slot.

use std::sync::{Arc, Mutex, PoisonError};

use kms_core::KmsError;
use tokio::sync::oneshot;

/// What a caller waits on.
pub(crate) type Answer<T> = oneshot::Receiver<Result<T, KmsError>>;

/// The sending half, taken out of the slot when the answer is sent.
type Slot<T> = Mutex<Option<oneshot::Sender<Result<T, KmsError>>>>;

/// The answer handle of one request.
pub(crate) struct Reply<T>(Arc<Slot<T>>);

impl<T> Clone for Reply<T> {
    fn clone(&self) -> Self {
        Reply(Arc::clone(&self.0))
    }
}

impl<T> Reply<T> {
    /// A reply handle and the receiver its answer arrives on.
    pub(crate) fn new() -> (Self, Answer<T>) {
        let (tx, rx) = oneshot::channel();
        (Reply(Arc::new(Mutex::new(Some(tx)))), rx)
    }

    /// Sends the answer; a second send, or a send after the caller gave up,
    /// does nothing.
    pub(crate) fn send(&self, answer: Result<T, KmsError>) {
        // A poisoned slot still holds a valid `Option`: take() is atomic
        // under the lock, so poisoning cannot tear it.
        let sender = self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(sender) = sender {
            // The caller may have dropped its future; then nobody waits.
            let _ = sender.send(answer);
        }
    }

    /// Whether the caller has stopped waiting (its future was dropped), so
    /// the work can be skipped.
    pub(crate) fn is_abandoned(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_none_or(|s| s.is_closed())
    }
}
