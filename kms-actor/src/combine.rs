//! [`CombineQueue`]: the caller-side combining of rule K (`coalesce.rs`),
//! shared by every client of one actor.
//!
//! A caller that rule C refused offers its request here
//! ([`CombineQueue::offer`]): it is queued and the caller leads or joins,
//! or it is handed back to be published. A leader takes what is queued in
//! batches ([`Leader::take`]) and verifies each on its own task; a joiner
//! waits for the answer on its request's own [`crate::reply::Reply`], as a
//! published request does.
//!
//! Invariants (all kept under the one lock):
//! * Something is queued only while someone leads: a leader leaves only
//!   under the lock (when its [`Leader`] drops, however its caller ended),
//!   and the last to leave takes what is queued and publishes it to the
//!   actor (the hand-off). So no request waits on a leader that has gone,
//!   and none is lost: each is verified by a leader, published, or
//!   answered with the error its publication got.
//! * At most `threads` callers lead at once, and each takes at most
//!   `combine_max` requests in all (`Policy::combine_take`).
//! * The queue holds fewer than `threads · combine_max` requests
//!   (`Policy::at_combine` publishes the rest).

use std::sync::{Mutex, MutexGuard, PoisonError};

use kms_bus::Publisher;

use crate::coalesce::{Combine, CombineView, Policy};
use crate::request::{Op, Request, VerifyRequest};

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct CombineQueue {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Requests waiting for a leader, oldest first.
    queued: Vec<VerifyRequest>,
    /// Callers leading now.
    leaders: usize,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("queued", &self.queued.len())
            .field("leaders", &self.leaders)
            .finish()
    }
}

/// What the caller knows when it offers its request: the rest of rule K's
/// inputs (`CombineView`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Offer {
    /// Verify requests outstanding, this one included
    /// (`CallerGate::outstanding`).
    pub(crate) outstanding: usize,
    /// Whether rule C refused it only for ending a back-to-back run
    /// (`gate::Refused::Run`).
    pub(crate) run: bool,
}

/// What became of an offered request that was queued
/// ([`CombineQueue::offer`]).
pub(crate) enum Offered<'a> {
    /// Queued, and this caller leads.
    Lead(Leader<'a>),
    /// Queued; a leader answers it.
    Joined,
}

impl CombineQueue {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the lock is held leaves a valid `State` (every
        // change under it is a push, a drain or a count), so poisoning is
        // ignored.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Rule K for `request`, whose caller rule C refused; a leader hands
    /// what it leaves behind to `publisher` (the request topic).
    ///
    /// # Errors
    /// The request itself, not queued, when rule K publishes it.
    pub(crate) fn offer<'a>(
        &'a self,
        policy: &'a Policy,
        publisher: &'a Publisher<Request>,
        offer: Offer,
        request: VerifyRequest,
    ) -> Result<Offered<'a>, Box<VerifyRequest>> {
        let mut state = self.lock();
        let view = CombineView {
            queued: state.queued.len(),
            leaders: state.leaders,
            outstanding: offer.outstanding,
            run: offer.run,
            message_len: request.message.len(),
        };
        match policy.at_combine(view) {
            // Boxed: the request is ~300 bytes (a decoded key), and the
            // error stays small.
            Combine::Publish => Err(Box::new(request)),
            Combine::Join => {
                state.queued.push(request);
                Ok(Offered::Joined)
            }
            Combine::Lead { gather } => {
                state.queued.push(request);
                state.leaders += 1;
                Ok(Offered::Lead(Leader {
                    gather,
                    queue: self,
                    policy,
                    publisher,
                    taken: 0,
                }))
            }
        }
    }
}

/// A caller leading (rule K): takes batches off the queue until it has
/// taken `combine_max` requests or the queue is empty. Dropping it leaves
/// the lead; the last leader to leave publishes what is queued.
pub(crate) struct Leader<'a> {
    /// Whether to let the tasks ready on this worker run first
    /// (`Combine::Lead`).
    pub(crate) gather: bool,
    queue: &'a CombineQueue,
    policy: &'a Policy,
    publisher: &'a Publisher<Request>,
    /// Requests taken so far.
    taken: usize,
}

impl Leader<'_> {
    /// The next batch to verify, oldest first; empty when this leader has
    /// taken its `combine_max` or nothing is queued (then it is done).
    pub(crate) fn take(&mut self) -> Vec<VerifyRequest> {
        let mut state = self.queue.lock();
        let n = self.policy.combine_take(state.queued.len(), self.taken);
        self.taken += n;
        state.queued.drain(..n).collect()
    }
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        let left = {
            let mut state = self.queue.lock();
            state.leaders -= 1;
            if state.leaders == 0 {
                std::mem::take(&mut state.queued)
            } else {
                Vec::new()
            }
        };
        if left.is_empty() {
            return;
        }
        tracing::debug!(
            target: "kms_actor::coalesce",
            handed_off = left.len() as u64,
            "the last leader publishes what is queued"
        );
        for request in left {
            let reply = request.reply.clone();
            let published = crate::client::publish(
                self.publisher,
                Request {
                    op: Op::Verify(request),
                    principal: None,
                },
            );
            if let Err(e) = published {
                reply.send(Err(e));
            }
        }
    }
}
