//! [`CombineQueue`]: the caller-side combining of rule K (`coalesce.rs`),
//! shared by every client of one actor.
//!
//! A caller that rule C refused offers its request here
//! ([`CombineQueue::offer`]): it is queued and the caller leads, gathers
//! or joins, or it is handed back to be published. A leader takes what is
//! queued in batches ([`Leader::take`]) and verifies each on its own task;
//! a gatherer lets the tasks ready on its worker run, then leads if its
//! own request is still queued and a lead is free
//! ([`CombineQueue::lead_after_gather`]: a gatherer whose request a leader
//! took does not lead the few requests queued since, which would verify
//! them one by one);
//! a joiner waits for the answer on its request's own
//! [`crate::reply::Reply`], as a published request does.
//!
//! Invariants (all kept under the one lock):
//! * A lead is taken and left in one poll of its caller: the caller takes
//!   its batches and verifies them with no `.await` in between, and the
//!   [`Leader`] guard leaves the lead when it drops. So `leaders` counts
//!   only callers running right now, and a joiner, queued only while every
//!   lead is taken, waits on work in progress, never on a future that
//!   might not be polled again.
//! * The last leader to leave publishes what is still queued (the
//!   hand-off). A request queued by a gatherer while nobody leads is led by
//!   its own caller after the gather, or taken by a caller that leads
//!   before that (one whose own request was queued after it), or handed
//!   off by the last leader: none waits on another caller's future. Each request is verified by a leader, published, or
//!   answered with the error its publication got; once the actor has
//!   finished (its keystore released), a leader answers `ShuttingDown`.
//! * At most `threads` callers lead at once, and each takes at most
//!   `combine_max` requests (`Policy::combine_take`; while another lead
//!   is free, its first batch is the larger half of what it may take, and
//!   what it leaves is led by another caller or taken by a running
//!   leader's next batch, or handed off as above).
//! * The queue holds at most `threads · combine_max` requests
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
    /// The ticket of `queued[0]`: each request queued gets the next
    /// ticket, and every one below this has been taken off the queue.
    first_ticket: u64,
    /// Callers leading now.
    leaders: usize,
}

impl State {
    /// Queues `request`; its ticket.
    fn push(&mut self, request: VerifyRequest) -> u64 {
        let ticket = self.first_ticket + self.queued.len() as u64;
        self.queued.push(request);
        ticket
    }

    /// Takes the `n` oldest requests off the queue.
    fn take(&mut self, n: usize) -> Vec<VerifyRequest> {
        self.first_ticket += n as u64;
        self.queued.drain(..n).collect()
    }
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
    /// Queued, and this caller leads now: take and verify before any
    /// `.await`.
    Lead(Leader<'a>),
    /// Queued under this ticket; this caller lets the tasks ready on its
    /// worker run, then calls [`CombineQueue::lead_after_gather`].
    Gather(u64),
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
                state.push(request);
                Ok(Offered::Joined)
            }
            Combine::Gather => Ok(Offered::Gather(state.push(request))),
            Combine::Lead => {
                state.push(request);
                Ok(Offered::Lead(self.enter(&mut state, policy, publisher)))
            }
        }
    }

    /// After a gather: a lead, if the caller's request (its `ticket`) is
    /// still queued and a lead is free. Otherwise its request was taken (a
    /// leader is verifying it, or it was handed off), or the leaders
    /// running now take it or hand it off.
    pub(crate) fn lead_after_gather<'a>(
        &'a self,
        policy: &'a Policy,
        publisher: &'a Publisher<Request>,
        ticket: u64,
    ) -> Option<Leader<'a>> {
        let mut state = self.lock();
        if ticket < state.first_ticket || !policy.lead_free(state.leaders) {
            return None;
        }
        Some(self.enter(&mut state, policy, publisher))
    }

    /// Takes a lead, under the lock.
    fn enter<'a>(
        &'a self,
        state: &mut State,
        policy: &'a Policy,
        publisher: &'a Publisher<Request>,
    ) -> Leader<'a> {
        state.leaders += 1;
        Leader {
            queue: self,
            policy,
            publisher,
            taken: 0,
        }
    }
}

/// A caller leading (rule K): takes batches off the queue until it has
/// taken `combine_max` requests or the queue is empty, all before its
/// caller next awaits. Dropping it leaves the lead; the last leader to
/// leave publishes what is queued.
pub(crate) struct Leader<'a> {
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
        let n = self
            .policy
            .combine_take(state.queued.len(), self.taken, state.leaders);
        self.taken += n;
        state.take(n)
    }

    /// Requests taken so far (count).
    pub(crate) fn taken(&self) -> usize {
        self.taken
    }
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        let left = {
            let mut state = self.queue.lock();
            state.leaders -= 1;
            if state.leaders == 0 {
                let n = state.queued.len();
                state.take(n)
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
