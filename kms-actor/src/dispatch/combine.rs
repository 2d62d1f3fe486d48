//! [`CombineQueue`]: the caller-side combining (`coalesce.rs`),
//! shared by every client of one actor.
//!
//! A caller that the caller path refused offers its request here
//! ([`CombineQueue::offer`]): it is queued and the caller leads, gathers or
//! joins, or it is handed back to be published. A leader takes what is queued
//! in batches ([`Leader::take`]) and verifies each on its own task; a
//! gatherer lets the tasks ready on its worker run, then leads if its own
//! request is still queued and a lead is free ([`Gatherer::lead`]: a gatherer
//! whose request a leader took does not lead the few requests queued since,
//! which would verify them one by one); a joiner waits for the answer on its
//! request's own [`crate::dispatch::reply::Reply`], as a published request does.
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
//!   off by the last leader: none waits on another caller's future. Each
//!   request is verified by a leader, published, or answered with the
//!   error its publication got; once the actor has finished (its keystore
//!   released), a leader answers `ShuttingDown`.
//! * At most `threads` callers lead at once, and each takes at most
//!   `combine_max` requests (`Dispatch::combine_take`; while another lead
//!   is free and another caller gathers, its first batch is the larger
//!   half of what it may take, and what it leaves is led by a gatherer,
//!   taken by a running leader's next batch, or handed off as above).
//! * `gathering` counts the callers between [`CombineQueue::offer`]'s
//!   `Gather` and [`Gatherer::lead`] (or the drop of their future): it
//!   only steers how much a leader's first take leaves, never whether a
//!   request is answered.
//! * The queue holds at most `threads · combine_max` requests
//!   (`Dispatch::at_combine` publishes the rest).

use std::sync::{Mutex, MutexGuard, PoisonError};

use kms_bus::Publisher;

use crate::dispatch::coalesce::{Combine, CombineView, Dispatch};
use crate::dispatch::publish::publish;
use crate::dispatch::request::{Op, Request, VerifyRequest};

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
    /// Callers gathering now: their requests queued (some may already be
    /// taken by a leader), and yet to resume ([`Gatherer`]). A hint for
    /// how much a leader's first take leaves; a future kept but not
    /// polled stays counted until it is polled or dropped.
    gathering: usize,
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
            .field("gathering", &self.gathering)
            .finish()
    }
}

/// What the caller knows when it offers its request: the rest of combining's
/// inputs (`CombineView`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Offer {
    /// Verify requests outstanding, this one included
    /// (`CallerGate::outstanding`).
    pub(crate) outstanding: usize,
    /// Whether the caller path refused it for a run: the node is in one,
    /// or this call ended a streak (`gate::Refused::Run`).
    pub(crate) run: bool,
}

/// What became of an offered request that was queued
/// ([`CombineQueue::offer`]).
pub(crate) enum Offered<'a> {
    /// Queued, and this caller leads now: take and verify before any
    /// `.await`.
    Lead(Leader<'a>),
    /// Queued; this caller lets the tasks ready on its worker run, then
    /// calls [`Gatherer::lead`].
    Gather(Gatherer<'a>),
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

    /// Combining for `request`, whose caller the caller path refused; a
    /// leader hands what it leaves behind to `publisher` (the request topic).
    ///
    /// # Errors
    /// The request itself, not queued, when combining publishes it.
    pub(crate) fn offer<'a>(
        &'a self,
        dispatch: &'a Dispatch,
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
        match dispatch.at_combine(view) {
            // Boxed: the request is ~300 bytes (a decoded key), and the
            // error stays small.
            Combine::Publish => Err(Box::new(request)),
            Combine::Join => {
                state.push(request);
                Ok(Offered::Joined)
            }
            Combine::Gather => {
                let ticket = state.push(request);
                state.gathering += 1;
                Ok(Offered::Gather(Gatherer {
                    queue: self,
                    dispatch,
                    publisher,
                    ticket,
                    counted: true,
                }))
            }
            Combine::Lead => {
                state.push(request);
                Ok(Offered::Lead(self.enter(&mut state, dispatch, publisher)))
            }
        }
    }

    /// Takes a lead, under the lock.
    fn enter<'a>(
        &'a self,
        state: &mut State,
        dispatch: &'a Dispatch,
        publisher: &'a Publisher<Request>,
    ) -> Leader<'a> {
        state.leaders += 1;
        Leader {
            queue: self,
            dispatch,
            publisher,
            taken: 0,
            alone: false,
        }
    }
}

/// A caller gathering (combining): its request is queued under `ticket`, and
/// it is counted in `gathering` until it resumes ([`Gatherer::lead`]) or
/// its future is dropped.
pub(crate) struct Gatherer<'a> {
    queue: &'a CombineQueue,
    dispatch: &'a Dispatch,
    publisher: &'a Publisher<Request>,
    ticket: u64,
    /// Whether it is still counted in `gathering`.
    counted: bool,
}

impl<'a> Gatherer<'a> {
    /// After the gather: a lead, if the caller's request is still queued
    /// and a lead is free. Otherwise its request was taken (a leader is
    /// verifying it, or it was handed off), or the leaders running now
    /// take it or hand it off.
    pub(crate) fn lead(mut self) -> Option<Leader<'a>> {
        let mut state = self.queue.lock();
        // Cleared first: if the count were ever broken and this panicked,
        // `Drop` must not decrement it again while unwinding.
        self.counted = false;
        state.gathering -= 1;
        if self.ticket < state.first_ticket || !self.dispatch.lead_free(state.leaders) {
            return None;
        }
        Some(self.queue.enter(&mut state, self.dispatch, self.publisher))
    }
}

impl Drop for Gatherer<'_> {
    /// A gatherer whose future was dropped before it resumed is no longer
    /// gathering. Its request stays queued: a leader skips it or answers
    /// it into the dropped receiver (`batch.rs`), or the last leader hands
    /// it off.
    fn drop(&mut self) {
        if self.counted {
            self.queue.lock().gathering -= 1;
        }
    }
}

/// A caller leading (combining): takes batches off the queue until it has
/// taken `combine_max` requests or the queue is empty, all before its
/// caller next awaits. Dropping it leaves the lead; the last leader to
/// leave publishes what is queued.
pub(crate) struct Leader<'a> {
    queue: &'a CombineQueue,
    dispatch: &'a Dispatch,
    publisher: &'a Publisher<Request>,
    /// Requests taken so far.
    taken: usize,
    /// Whether it was the only leader when it found nothing more to take.
    alone: bool,
}

impl Leader<'_> {
    /// The next batch to verify, oldest first; empty when this leader has
    /// taken its `combine_max` or nothing is queued (then it is done).
    pub(crate) fn take(&mut self) -> Vec<VerifyRequest> {
        let mut state = self.queue.lock();
        let n = self.dispatch.combine_take(
            state.queued.len(),
            self.taken,
            state.leaders,
            state.gathering,
        );
        if n == 0 {
            self.alone = state.leaders == 1;
        }
        self.taken += n;
        state.take(n)
    }

    /// Requests taken so far (count).
    pub(crate) fn taken(&self) -> usize {
        self.taken
    }

    /// Whether this leader, done, verified only one request while nobody
    /// else led: the caller's own, with no company (the run is over,
    /// `gate.rs`).
    pub(crate) fn led_alone(&self) -> bool {
        self.alone && self.taken <= 1
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
            let published = publish(
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

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use kms_bus::{Bus, TopicConfig};

    use super::*;
    use crate::dispatch::coalesce::tests::combining;
    use crate::dispatch::reply::Reply;
    use crate::dispatch::request::VerifyBy;

    fn request() -> VerifyRequest {
        VerifyRequest {
            by: VerifyBy::PublicKey([1; 32]),
            message: Bytes::from_static(b"m"),
            signature: [0; 64],
            reply: Reply::new().0,
            origin: None,
        }
    }

    /// An offer that combining answers with a gather (more than 2 per thread
    /// outstanding).
    const BUSY: Offer = Offer {
        outstanding: 64,
        run: false,
    };

    fn gatherer<'a>(
        queue: &'a CombineQueue,
        dispatch: &'a Dispatch,
        publisher: &'a Publisher<Request>,
    ) -> Gatherer<'a> {
        match queue.offer(dispatch, publisher, BUSY, request()) {
            Ok(Offered::Gather(g)) => g,
            _ => panic!("expected a gather"),
        }
    }

    #[test]
    fn a_gatherer_is_counted_until_it_resumes_or_is_dropped() {
        let dispatch = combining(2, 16);
        let topic = Bus::new()
            .topic::<Request>("t", TopicConfig::default())
            .expect("topic");
        let publisher = topic.publisher();
        let queue = CombineQueue::default();
        let first = gatherer(&queue, &dispatch, &publisher);
        let dropped = gatherer(&queue, &dispatch, &publisher);
        let others: Vec<_> = (0..6)
            .map(|_| gatherer(&queue, &dispatch, &publisher))
            .collect();
        assert_eq!(queue.lock().gathering, 8);
        drop(dropped);
        assert_eq!(queue.lock().gathering, 7, "a dropped future counts out");

        // The first resumes and leads: 8 queued, 6 others still gathering
        // and a lead free, so its first batch is the larger half.
        let mut leader = first.lead().expect("its request is queued");
        assert_eq!(queue.lock().gathering, 6);
        assert_eq!(leader.take().len(), 4);
        // The 4 oldest (tickets 0 to 3) were taken: the gatherers of
        // tickets 2 and 3 resume and do not lead; that of ticket 4 does,
        // on the second lead, and takes what the first left.
        let mut others = others.into_iter();
        assert!(others.next().expect("six").lead().is_none());
        assert!(others.next().expect("six").lead().is_none());
        let mut second = others.next().expect("six").lead().expect("queued");
        assert_eq!(second.take().len(), 4, "what the first left");
        assert!(leader.take().is_empty() && second.take().is_empty());
        drop((leader, second));
        // The rest resume after their requests were taken: none leads.
        assert!(others.all(|g| g.lead().is_none()));
        assert_eq!(queue.lock().gathering, 0);
        assert!(queue.lock().queued.is_empty());
    }
}
