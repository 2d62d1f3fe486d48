//! `Subscriber<T>`: the receiving side of a topic.

use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::task::{ready, Context, Poll};

use tokio::task::coop;

use crate::backend::{Crowded, Position};
use crate::config::{Backend, Overflow};
use crate::error::{RecvError, TryRecvError};
use crate::outcome::{Read, Step};
use crate::shared::Shared;
use crate::sync::Arc;

/// Receives every message published to one topic after it subscribed, in
/// publish order.
///
/// Obtained from [`Topic::subscribe`](crate::Topic::subscribe). A message is
/// cloned for every subscriber except the last one to read it, which gets
/// the original. Dropping a subscriber releases its claim on every message
/// it has not read, so no payload is kept alive by a subscriber that is
/// gone.
pub struct Subscriber<T> {
    /// The topic; this subscriber is registered in its ring from
    /// construction until drop.
    shared: Arc<Shared<T>>,
    /// Where this subscriber reads next. Every message from `position.next`
    /// on that is still in the ring counts this subscriber as a reader.
    position: Position,
    /// A lag found by [`drain`](Subscriber::drain) after it had taken some
    /// messages: reported (and cleared) by the next read.
    pending_lag: u64,
    /// The round `blocking_recv`'s back-off starts at, `0 ..=
    /// MAX_BACKOFF_START`; adapted after every wait (`blocking.rs`,
    /// "Adaptive start"). Used by nothing else.
    #[cfg_attr(kms_loom, allow(dead_code))]
    pub(crate) backoff_start: u32,
    /// Where the last [`drain`](Subscriber::drain) that took messages found
    /// the topic empty (a sequence number): it caught up with the
    /// publishers of a stream there (`blocking.rs`, "Waiting for a run");
    /// `None` after any other drain. Used by nothing else.
    #[cfg_attr(kms_loom, allow(dead_code))]
    pub(crate) caught_up_at: Option<u64>,
}

impl<T> Subscriber<T> {
    /// Registers a new subscriber of `shared`, starting at the tail.
    pub(crate) fn new(shared: Arc<Shared<T>>) -> Result<Self, Crowded> {
        let position = shared.ring.subscribe()?;
        Ok(Self {
            shared,
            position,
            pending_lag: 0,
            backoff_start: 0,
            caught_up_at: None,
        })
    }

    /// The name of the topic this subscriber reads.
    pub fn topic_name(&self) -> &str {
        &self.shared.name
    }
}

impl<T: Clone> Subscriber<T> {
    /// Waits for the next message.
    ///
    /// # Errors
    ///
    /// * [`RecvError::Lagged`]`(n)`: on an [`Overflow::Lag`](crate::Overflow::Lag)
    ///   topic this subscriber fell behind and exactly `n` messages were
    ///   overwritten before it read them. Reported once; the next call
    ///   returns the oldest message still in the ring.
    /// * [`RecvError::Closed`]: no [`Publisher`](crate::Publisher) is alive
    ///   and this subscriber has read every message. (A publisher created
    ///   later from a [`Topic`](crate::Topic) handle opens the topic again.)
    ///
    /// # Cooperative scheduling
    ///
    /// Inside a tokio runtime every message taken consumes one unit of the
    /// task's cooperative budget (`tokio::task::coop`, as tokio's own
    /// channels do). When the budget is spent, `recv` returns `Pending` once
    /// (waking the task at once) *before* taking a message, so a task that
    /// loops on a topic that always has messages still lets the other tasks
    /// of its worker run. Outside a runtime (or under
    /// `tokio::task::coop::unconstrained`) there is no budget.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe. Its await points (a spent budget, a
    /// wake-up, a yield to an in-flight publish) all come before a message
    /// is taken; a message is taken from the ring and returned in the same
    /// poll, so dropping the future (for example in `tokio::select!`) never
    /// loses a message.
    pub async fn recv(&mut self) -> Result<T, RecvError> {
        loop {
            // One unit of tokio's cooperative budget per message taken
            // (`budgeted`): a task looping on a busy topic yields to its
            // worker's other tasks once its budget is spent, before it takes
            // anything, so the message stays in the ring.
            if let Some(result) = poll_fn(|cx| budgeted(cx, || recv_result(self.try_recv()))).await
            {
                return result;
            }
            // Register for a wake-up first, then re-check (as crossbeam does
            // before parking: "has the channel become ready just now?").
            // `notify_waiters` wakes every `Notified` created before it is
            // called. A Classic publisher calls it after every publish; a
            // Soa publisher calls it when it sees the `parked` flag, which
            // `park` sets after this registration and orders with the
            // re-check below by a fence (Dekker, see `soa.rs`). The last
            // publisher's drop always calls it. So either the re-check sees
            // the message (or `Closed`), or the wake-up reaches us.
            let shared = Arc::clone(&self.shared);
            let mut notified = pin!(shared.notify.notified());
            notified.as_mut().enable();
            let in_flight = shared.ring.park(&self.position);
            match recv_result(self.try_recv()) {
                Some(result) => return result,
                // A publish between reservation and ready stamp: it may have
                // missed our flag, so give the runtime a turn and look again
                // (it finishes without waiting for anything).
                None if in_flight => YieldNow(false).await,
                None => {
                    // Caught up: a good moment to bring the published count
                    // up to date (see `metrics.rs`), off the per-message path.
                    let sequence = shared.ring.sequence();
                    shared.metrics.published.absolute(sequence);
                    notified.await
                }
            }
        }
    }

    /// Takes the next message if one is ready, without waiting.
    ///
    /// # Errors
    ///
    /// * [`TryRecvError::Empty`]: nothing to read now, and a publisher is
    ///   alive.
    /// * [`TryRecvError::Lagged`]`(n)`: as [`RecvError::Lagged`].
    /// * [`TryRecvError::Closed`]: as [`RecvError::Closed`].
    #[inline]
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        if self.pending_lag > 0 {
            return Err(TryRecvError::Lagged(std::mem::take(&mut self.pending_lag)));
        }
        match self.read() {
            Read::Message(msg) => Ok(msg),
            Read::Lagged(missed) => Err(TryRecvError::Lagged(missed)),
            Read::Empty => self.after_empty(),
        }
    }

    /// Appends up to `max` ready messages (a count) to `out`, in order,
    /// without waiting. Returns `Ok(n)` with `1 <= n <= max`, the number
    /// appended.
    ///
    /// `max == 0` returns `Ok(0)` and reads nothing.
    ///
    /// # Errors
    ///
    /// Only when nothing was appended:
    /// * [`TryRecvError::Empty`]: nothing to read now, and a publisher is
    ///   alive.
    /// * [`TryRecvError::Lagged`]`(n)`: this subscriber missed exactly `n`
    ///   messages before the first one it could read; it is repositioned
    ///   to the oldest retained message, which the next call returns. If the
    ///   lag is found after some messages were appended, this call returns
    ///   `Ok` with those and the next call reports the lag.
    /// * [`TryRecvError::Closed`]: as [`RecvError::Closed`].
    pub fn drain(&mut self, out: &mut Vec<T>, max: usize) -> Result<usize, TryRecvError> {
        if max == 0 {
            return Ok(0);
        }
        if self.pending_lag > 0 {
            return Err(TryRecvError::Lagged(std::mem::take(&mut self.pending_lag)));
        }
        let mut taken = 0;
        self.caught_up_at = None;
        // A `Lag` drain among several subscribers is covered (`Soa::cover`,
        // invariant 8) until `cover` drops, also on unwind.
        let cover = Cover::new(&self.shared, self.position, max);
        // Publishers waiting for room are woken once per drain, not once
        // per freed slot, when `room` drops: also if a `T::clone` or a
        // spare's drop panics after earlier reads freed slots.
        let mut room = RoomWake::new(&self.shared);
        while taken < max {
            match room.read(&mut self.position, cover.covered) {
                Read::Message(msg) => {
                    out.push(msg);
                    taken += 1;
                }
                Read::Lagged(missed) if taken == 0 => {
                    return Err(TryRecvError::Lagged(missed));
                }
                Read::Lagged(missed) => {
                    self.pending_lag = missed;
                    break;
                }
                Read::Empty => {
                    if taken > 0 {
                        self.caught_up_at = Some(self.position.next);
                    }
                    break;
                }
            }
        }
        drop(room);
        drop(cover);
        if taken > 0 {
            return Ok(taken);
        }
        let msg = self.after_empty()?;
        out.push(msg);
        Ok(1)
    }

    /// Whether the message `ahead` after this subscriber's position looks
    /// written already (or overwritten): a hint that reads nothing, for
    /// `blocking_recv`'s back-off (`ahead` 0) and its wait for a run.
    #[cfg_attr(kms_loom, allow(dead_code))]
    pub(crate) fn looks_ready_ahead(&self, ahead: u64) -> bool {
        self.shared.ring.looks_ready(&self.position, ahead)
    }

    /// The sequence number this subscriber reads next.
    #[cfg_attr(kms_loom, allow(dead_code))]
    pub(crate) fn next_position(&self) -> u64 {
        self.position.next
    }

    /// How far ahead `blocking_recv`'s wait for a run looks, at most
    /// `run` messages (`blocking.rs`, "Waiting for a run"), or `None` on
    /// topics where it does not wait: only an [`Overflow::Wait`] Soa topic
    /// waits, whose publishers wait for room rather than overwrite unread
    /// messages (`Lag`) or be refused (`Reject`) while the subscriber lets
    /// the ring fill, and it looks at most half the ring ahead (none below
    /// 4 slots). Classic takes its lock for every look and is left out.
    #[cfg_attr(kms_loom, allow(dead_code))]
    pub(crate) fn run_ahead(&self, run: u64) -> Option<u64> {
        let config = &self.shared.config;
        let half = (config.capacity / 2) as u64;
        (config.backend == Backend::Soa && config.overflow == Overflow::Wait && half >= 2)
            .then(|| run.min(half))
    }

    /// Sequence numbers the topic's publishers have taken so far: whether
    /// a stream still flows, for `blocking_recv`'s wait for a run.
    #[cfg_attr(kms_loom, allow(dead_code))]
    pub(crate) fn sequence(&self) -> u64 {
        self.shared.ring.sequence()
    }

    /// One read step; wakes publishers waiting for room if it freed a slot
    /// they may want, and drops a spare copy if the ring asks for it.
    #[inline]
    fn read(&mut self) -> Read<T> {
        RoomWake::new(&self.shared).read(&mut self.position, false)
    }

    /// After a read found nothing: `Empty` while a publisher is alive;
    /// otherwise a second read, whose `Empty` means `Closed`.
    ///
    /// The second read is what makes `Closed` exact: `publishers_gone`
    /// acquires the last publisher's drop, which follows all its publishes,
    /// so every message published before that drop is visible to it.
    fn after_empty(&mut self) -> Result<T, TryRecvError> {
        if !self.shared.publishers_gone() {
            return Err(TryRecvError::Empty);
        }
        match self.read() {
            Read::Message(msg) => Ok(msg),
            Read::Lagged(missed) => Err(TryRecvError::Lagged(missed)),
            Read::Empty => Err(TryRecvError::Closed),
        }
    }
}

/// Reads for one subscriber and wakes the publishers waiting for room when
/// dropped, if a read freed a slot they may want and the ring says some
/// wait (`Ring::room_wanted`: for Soa one fence for all the reads). Being a
/// guard, it wakes them on unwind too: a panicking `T::clone` or spare drop
/// after earlier reads freed slots does not strand a parked `publish_wait`.
struct RoomWake<'a, T> {
    /// The subscriber's topic.
    shared: &'a Shared<T>,
    /// Whether a read so far freed a slot of a ring where publishers may
    /// wait for room.
    freed: bool,
}

impl<'a, T> RoomWake<'a, T> {
    /// No read yet.
    #[inline(always)]
    fn new(shared: &'a Shared<T>) -> Self {
        Self {
            shared,
            freed: false,
        }
    }
}

impl<T: Clone> RoomWake<'_, T> {
    /// One read at `position` (`covered` inside a covered drain); counts a
    /// lag in the topic's metrics and drops a spare copy after noting
    /// whether the read freed a slot.
    #[inline(always)]
    fn read(&mut self, position: &mut Position, covered: bool) -> Read<T> {
        let Step { read, spare, room } = self.shared.ring.read(position, covered);
        self.freed |= room;
        drop(spare);
        if let Read::Lagged(missed) = read {
            self.shared.metrics.lagged.increment(missed);
        }
        read
    }
}

impl<T> Drop for RoomWake<'_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.freed && self.shared.ring.room_wanted() {
            self.shared.room.notify_waiters();
        }
    }
}

/// A drain's cover (`Ring::cover`): ends it when dropped, also on unwind
/// (a panicking `T::clone` inside the drain), so an overwriting publisher
/// never waits for a drain that is over.
struct Cover<'a, T> {
    /// The subscriber's topic.
    shared: &'a Shared<T>,
    /// The subscriber's position when the drain started (its bit names
    /// the cover).
    position: Position,
    /// Whether the ring covered the drain.
    covered: bool,
}

impl<'a, T> Cover<'a, T> {
    /// Covers a drain of at most `max` messages starting at `position` if
    /// the ring does so.
    #[inline(always)]
    fn new(shared: &'a Shared<T>, position: Position, max: usize) -> Self {
        let covered = shared.ring.cover(&position, max);
        Self {
            shared,
            position,
            covered,
        }
    }
}

impl<T> Drop for Cover<'_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.covered {
            self.shared.ring.uncover(&self.position);
        }
    }
}

/// Runs one attempt `f` under tokio's cooperative budget: `Pending` (with a
/// wake-up scheduled by tokio) if the task's budget is spent, without
/// running `f`; otherwise runs `f` and keeps the unit of budget only if `f`
/// made progress (`Some`). `coop::poll_proceed` is public since tokio 1.47.
fn budgeted<R>(cx: &mut Context<'_>, f: impl FnOnce() -> Option<R>) -> Poll<Option<R>> {
    let coop = ready!(coop::poll_proceed(cx));
    let outcome = f();
    if outcome.is_some() {
        coop.made_progress();
    }
    Poll::Ready(outcome)
}

/// A future that is pending once (waking itself at once), then ready: a
/// turn for the other tasks of the runtime.
struct YieldNow(bool);

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        crate::sync::yield_in_model();
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// `recv`'s error for a `try_recv` result that is not `Empty`.
pub(crate) fn recv_result<T>(result: Result<T, TryRecvError>) -> Option<Result<T, RecvError>> {
    match result {
        Ok(msg) => Some(Ok(msg)),
        Err(TryRecvError::Lagged(missed)) => Some(Err(RecvError::Lagged(missed))),
        Err(TryRecvError::Closed) => Some(Err(RecvError::Closed)),
        Err(TryRecvError::Empty) => None,
    }
}

impl<T> Drop for Subscriber<T> {
    /// Unregisters this subscriber and releases its claim on every message
    /// it has not read; payloads whose last claim that was are dropped here,
    /// after the topic lock is released.
    fn drop(&mut self) {
        let (released, room) = self.shared.ring.unsubscribe(self.position);
        if room {
            self.shared.room.notify_waiters();
        }
        drop(released);
    }
}

impl<T> fmt::Debug for Subscriber<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscriber")
            .field("topic", &self.shared.name)
            .field("next", &self.position.next)
            .finish_non_exhaustive()
    }
}
