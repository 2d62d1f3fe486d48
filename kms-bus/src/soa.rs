//! The SoA backend: a lock-free broadcast ring kept as parallel arrays.
//!
//! # Sources
//!
//! * Slot stamps, reserve-then-commit and "re-check readiness after
//!   registering the waiter" come from crossbeam-channel's array flavor
//!   (Dmitry Vyukov's bounded MPMC queue,
//!   <https://www.1024cores.net/home/lock-free-algorithms/queues/bounded-mpmc-queue>).
//! * One payload per slot with a count of readers still to come, the last of
//!   which releases the value, and `Lagged(n)` with the exact count, come
//!   from tokio's `sync::broadcast`.
//! * A per-slot set of readers that still have to read it, rather than a
//!   count, comes from jonhoo/bus (`bus::Bus`), which keeps a reader count
//!   per seat; a bitmask lets the last reader be recognised before it reads,
//!   so it moves the payload out instead of cloning it.
//!
//! # Layout
//!
//! Message `x` (sequence numbers `0, 1, 2, ...`, never reused) lives in slot
//! `i = x % capacity`. The slot is four parallel arrays indexed by `i`:
//!
//! | array | type | meaning |
//! |---|---|---|
//! | `stamps[i]` | `u64` | which message the slot holds and whether it is written |
//! | `masks[i]` | `u64` | bit `b` set: the subscriber with bit `b` has not read it yet |
//! | `pins[i]` | `usize` | readers inside a read of the slot (used by `Lag` only) |
//! | `payloads[i]` | `MaybeUninit<T>` | the message, initialised exactly while `masks[i] != 0` |
//!
//! A stamp is `(x + capacity) << 1 | 1` once message `x` is written
//! ("ready") and `(x + capacity) << 1` while a `Lag` publish is overwriting
//! the slot for `x` ("writing"). Stamps only grow. The slot `i` starts as if
//! it held a message `i - capacity` that everybody has read (stamp
//! `i << 1 | 1`, mask 0), so a publisher reserves message `x` only when the
//! slot's stamp is `x << 1 | 1`, meaning the message one lap earlier is
//! fully written. 63 bits of sequence number do not wrap in practice.
//!
//! # Invariants
//!
//! 1. **Reservation.** `tail` is the next sequence number to reserve. A
//!    publisher reserves `tail .. tail + k` with one compare-and-swap, after
//!    checking that each of those slots holds the fully written message one
//!    lap earlier and (under `Reject` and `Wait`) that it has been read by
//!    everybody (`mask == 0`). Tail values are therefore always reservation
//!    boundaries, and a reserved slot belongs to its publisher alone until it
//!    stores the ready stamp.
//! 2. **Membership.** A subscriber owns one bit `b` of `active` and starts at
//!    `start = tail` read after setting its bit. A message `x` carries bit `b`
//!    exactly when the subscriber was a member at `x`: the publisher reads
//!    `active` after its reservation and drops bits whose `start > x` (a
//!    subscriber that set its bit while the message was being reserved).
//!    Since `start` is a tail value, a reservation lies wholly before or
//!    wholly after it, so every message of one batch has the same mask.
//! 3. **Reading.** A subscriber at `next = x` reads only after seeing
//!    `stamps[i] == ready(x)` with its bit set in `masks[i]`. A reader that is
//!    not the last clones the payload, then clears its bit with a
//!    compare-and-swap (never to zero). The reader whose bit is the only one
//!    left moves the payload out and then stores mask 0. Hence `masks[i]`
//!    reaches 0 only after the payload was taken, and a reader that clears
//!    its bit has finished touching the payload.
//! 4. **Overwriting** (`Lag`). A publisher that finds `masks[i] != 0` stores
//!    the "writing" stamp, waits until `pins[i] == 0`, takes the old payload
//!    (dropped after the publish returns) and writes the new one. A `Lag`
//!    reader increments `pins[i]` before its re-check of the stamp and
//!    decrements it after its mask update, so a pinned reader that saw the
//!    ready stamp finishes before the payload is overwritten, and a reader
//!    that pins after the writing stamp never touches the payload. Under
//!    `Reject` and `Wait` a slot is only reused at `mask == 0`, so readers
//!    never pin.
//! 5. **Lag count.** A reader whose slot holds a later message reads `tail`:
//!    every message below `tail - capacity` has been (or is being)
//!    overwritten, so it reports `tail - capacity - next` missed messages and
//!    resumes at `tail - capacity`. Each message is either delivered or
//!    counted once: delivered + lagged = published.
//! 6. **Wrap.** The stamp encodes the full sequence number, so a reader that
//!    finds its slot reused for a later lap sees a larger stamp and never
//!    delivers a wrong or duplicate message.
//! 7. **Leaving.** A departing subscriber clears its bit in `active`, reads
//!    `tail` as `end`, and for every message in `max(next, end - capacity) ..
//!    end` waits until it is written and clears its bit there (taking and
//!    dropping the payload if it was the last claim). Messages from `end` on
//!    never carry its bit. Only then is the bit free for another subscriber.
//!
//! # Wake-ups (edge-coalesced)
//!
//! A subscriber that found nothing creates its `Notified`, sets `parked`,
//! issues a `SeqCst` fence and re-checks its slot. A publisher stores its
//! ready stamps, issues a `SeqCst` fence (or, for a single message, stores
//! the stamp with a `SeqCst` swap) and reads `parked`; only if it is set does
//! it clear it and call `notify_waiters`. The two fences order the flag and
//! the stamp (Dekker's pattern): either the subscriber's re-check sees the
//! message, or the publisher sees the flag and wakes it. A burst of messages
//! into a parked topic therefore costs one wake-up, by the first publish.
//! Publishers waiting for room under `Wait` use the same pattern with
//! `room_waiters`, signalled by the reader that frees a slot.
//!
//! # Panics
//!
//! The only user code that runs inside the protocol is `T::clone`, in a read,
//! before the reader changes any shared state except its pin, which a guard
//! releases on unwind. A panicking clone therefore leaves the ring as it
//! was, and the subscriber can read the message again. Payloads that a
//! publish overwrote or that a departing subscriber released are dropped by
//! the caller after the protocol step returns.

// The one module allowed `unsafe`: payload cells whose ownership the slot
// protocol hands between threads (see the crate's lint notes).
#![allow(unsafe_code)]

use std::mem::MaybeUninit;

use crossbeam_utils::CachePadded;

use crate::config::Overflow;
use crate::error::RejectCause;
use crate::sync::{
    fence, lock, spin_loop, yield_now, AtomicBool, AtomicU64, AtomicUsize, Mutex, Ordering,
    UnsafeCell,
};

/// Most subscribers one SoA topic can have at once: one bit each in a `u64`
/// mask.
pub(crate) const MAX_SUBSCRIBERS: usize = 64;

/// `starts[b]` while the subscriber taking bit `b` has set its bit but not yet
/// read its start; a publisher that meets it waits.
const JOINING: u64 = u64::MAX;

/// How many spin hints a busy-wait issues before it starts yielding.
const SPINS_BEFORE_YIELD: u32 = 64;

/// A SoA ring. See the module docs for the algorithm and its invariants.
pub(crate) struct Soa<T> {
    /// Next sequence number to reserve (invariant 1). Written by every
    /// publish, so it has a cache line of its own.
    tail: CachePadded<AtomicU64>,
    /// Bits of the live subscribers (invariant 2). Read by every publish;
    /// written only under `membership`.
    active: CachePadded<AtomicU64>,
    /// The largest `start` of any subscriber, or [`JOINING`] while a
    /// subscribe is between setting its bit and storing its start. A
    /// publication at or above it needs no per-bit start check.
    newest_start: AtomicU64,
    /// `starts[b]`: first sequence number the subscriber with bit `b` reads,
    /// or [`JOINING`].
    starts: Box<[AtomicU64]>,
    /// Bits handed out to subscribers, including departing ones still
    /// clearing their claims. Subscribe and unsubscribe hold this lock; the
    /// publish and read paths never take it. Poisoning is recovered: the
    /// only panics possible inside are in `T`'s drop, which runs after the
    /// lock is released.
    membership: Mutex<u64>,
    /// Set by a subscriber about to park; cleared by the publisher that wakes
    /// the topic's waiters.
    parked: CachePadded<AtomicBool>,
    /// Number of publishers waiting for room in `publish_wait`.
    room_waiters: AtomicUsize,
    /// Per-slot stamps (see the module docs).
    stamps: Box<[AtomicU64]>,
    /// Per-slot sets of subscribers that have not read the slot's message.
    masks: Box<[AtomicU64]>,
    /// Per-slot counts of `Lag` readers inside a read.
    pins: Box<[AtomicUsize]>,
    /// Per-slot payloads, initialised exactly while the slot's mask is not 0.
    payloads: Box<[UnsafeCell<MaybeUninit<T>>]>,
    /// Number of slots (`1 ..= TopicConfig::MAX_CAPACITY`), as a sequence
    /// distance.
    capacity: u64,
    /// Fixed at creation.
    overflow: Overflow,
}

// SAFETY: a `Soa<T>` owns `T` values (moved in by publishers on one thread
// and out by readers on another: `T: Send`) and lets several readers clone
// the same value through `&T` at the same time (`T: Sync`). Every other field
// is an atomic or a mutex.
unsafe impl<T: Send + Sync> Send for Soa<T> {}
// SAFETY: as above; all shared mutation goes through atomics, and access to
// each payload is arbitrated by the slot protocol in the module docs.
unsafe impl<T: Send + Sync> Sync for Soa<T> {}

/// What one publish did.
pub(crate) struct Published<T> {
    /// Number of messages published from the front of the batch.
    pub(crate) published: usize,
    /// The messages not published, in order, and why.
    pub(crate) rejected: Option<(Vec<T>, RejectCause)>,
    /// Unread payloads that `Lag` publishes overwrote; the caller drops them.
    pub(crate) evicted: Vec<T>,
    /// Whether a subscriber was parked and must be woken.
    pub(crate) wake: bool,
}

/// Result of one read attempt.
pub(crate) enum Read<T> {
    /// The next message for this subscriber.
    Message(T),
    /// Nothing ready at `next`.
    Empty,
    /// The subscriber missed this many messages and was moved to the oldest
    /// one still retained.
    Lagged(u64),
}

/// Result of one read step, with what the caller must do afterwards.
pub(crate) struct Step<T> {
    /// The read result.
    pub(crate) read: Read<T>,
    /// A payload this reader became the last claimant of after cloning; the
    /// caller drops it.
    pub(crate) spare: Option<T>,
    /// Whether the read freed a slot while publishers wait for room.
    pub(crate) room: bool,
}

impl<T> Soa<T> {
    /// An empty ring of `capacity` slots (`1 ..= TopicConfig::MAX_CAPACITY`,
    /// checked by `TopicConfig::validate`).
    pub(crate) fn new(capacity: usize, overflow: Overflow) -> Self {
        let atomics = |f: &dyn Fn(u64) -> u64| -> Box<[AtomicU64]> {
            (0..capacity as u64).map(|i| AtomicU64::new(f(i))).collect()
        };
        Self {
            tail: CachePadded::new(AtomicU64::new(0)),
            active: CachePadded::new(AtomicU64::new(0)),
            newest_start: AtomicU64::new(0),
            starts: (0..MAX_SUBSCRIBERS).map(|_| AtomicU64::new(0)).collect(),
            membership: Mutex::new(0),
            parked: CachePadded::new(AtomicBool::new(false)),
            room_waiters: AtomicUsize::new(0),
            // Slot `i` holds the fully read message `i - capacity`.
            stamps: atomics(&|i| (i << 1) | 1),
            masks: atomics(&|_| 0),
            pins: (0..capacity).map(|_| AtomicUsize::new(0)).collect(),
            payloads: (0..capacity)
                .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
                .collect(),
            capacity: capacity as u64,
            overflow,
        }
    }

    /// Slot index of message `x`.
    #[inline(always)]
    fn index(&self, x: u64) -> usize {
        // `x % capacity < capacity <= 2^24`, which fits in `usize`.
        (x % self.capacity) as usize
    }

    /// The stamp of slot `x % capacity` once message `x` is written.
    #[inline(always)]
    fn ready(&self, x: u64) -> u64 {
        ((x + self.capacity) << 1) | 1
    }

    /// The stamp a `Lag` publish of message `x` stores while it overwrites.
    #[inline(always)]
    fn writing(&self, x: u64) -> u64 {
        (x + self.capacity) << 1
    }

    /// Number of live subscribers (a snapshot).
    pub(crate) fn subscriber_count(&self) -> usize {
        // Relaxed: a snapshot for monitoring.
        self.active.load(Ordering::Relaxed).count_ones() as usize
    }

    /// Registers a subscriber: returns its bit and its first sequence
    /// number, or `None` if [`MAX_SUBSCRIBERS`] are live.
    pub(crate) fn subscribe(&self) -> Option<(u32, u64)> {
        let mut taken = lock(&self.membership);
        let bit = (!*taken).trailing_zeros();
        if bit as usize >= MAX_SUBSCRIBERS {
            return None;
        }
        // SeqCst throughout: invariant 2 is a store-load argument across
        // `active` and `tail` (this side: set the bit, then read the tail;
        // the publisher: move the tail, then read `active`), which needs a
        // single total order of the four operations.
        self.newest_start.store(JOINING, Ordering::SeqCst);
        self.starts[bit as usize].store(JOINING, Ordering::SeqCst);
        self.active.fetch_or(1 << bit, Ordering::SeqCst);
        let start = self.tail.load(Ordering::SeqCst);
        self.starts[bit as usize].store(start, Ordering::SeqCst);
        self.newest_start.store(start, Ordering::SeqCst);
        *taken |= 1 << bit;
        Some((bit, start))
    }

    /// Unregisters the subscriber with `bit` whose next unread message is
    /// `next`, clearing its claim on every message it has not read
    /// (invariant 7). Returns the payloads whose last claim that was, for the
    /// caller to drop, and whether a slot was freed while publishers wait.
    pub(crate) fn unsubscribe(&self, bit: u32, next: u64) -> (Vec<T>, bool) {
        let mut taken = lock(&self.membership);
        // SeqCst: see `subscribe`; a publish that moves the tail after this
        // read of it reads `active` without the bit.
        self.active.fetch_and(!(1 << bit), Ordering::SeqCst);
        let end = self.tail.load(Ordering::SeqCst);
        let mut released = Vec::new();
        let mut room = false;
        for x in next.max(end.saturating_sub(self.capacity))..end {
            let i = self.index(x);
            let mut spins = 0;
            loop {
                // Acquire: pairs with the publisher's ready store, so the
                // payload and mask it wrote are visible.
                let stamp = self.stamps[i].load(Ordering::Acquire);
                if stamp == self.ready(x) {
                    let step = self.release_claim(i, x, 1 << bit);
                    released.extend(step.0);
                    room |= step.1;
                    break;
                }
                if stamp > self.ready(x) {
                    // Overwritten (`Lag`): the overwriting publish took the
                    // claim with the payload.
                    break;
                }
                // Reserved but not yet written: that publish is in flight
                // and may have put our bit in the mask; wait for it.
                backoff(&mut spins);
            }
        }
        *taken &= !(1 << bit);
        (released, room)
    }

    /// Clears `bit` in slot `i`, which held message `x` when the caller saw
    /// its ready stamp. Returns the payload if this was its last claim.
    fn release_claim(&self, i: usize, x: u64, bit: u64) -> (Option<T>, bool) {
        let _pin = self.pin(i);
        if self.overflow == Overflow::Lag && self.stamps[i].load(Ordering::SeqCst) != self.ready(x)
        {
            // Overwrite started before the pin: the publisher owns the claim.
            return (None, false);
        }
        // Acquire: pairs with the Release of other readers' mask updates, so
        // their clones happen before a payload taken here is dropped.
        let mut mask = self.masks[i].load(Ordering::Acquire);
        loop {
            if mask & bit == 0 {
                return (None, false);
            }
            if mask == bit {
                // SAFETY: our bit is the only claim left, so no other reader
                // will touch the payload (invariant 3); the publisher cannot
                // reuse the slot before the mask is 0 (Reject, Wait) or while
                // we are pinned after the ready stamp (Lag, invariant 4). The
                // payload is initialised because the mask is not 0.
                let value = self.payloads[i].with(|p| unsafe { (*p).assume_init_read() });
                let room = self.free_slot(i);
                return (Some(value), room);
            }
            // AcqRel: Release orders our (absent) payload access before the
            // last reader's move; Acquire as for the load above.
            match self.masks[i].compare_exchange_weak(
                mask,
                mask & !bit,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return (None, false),
                Err(actual) => mask = actual,
            }
        }
    }

    /// Stores mask 0 after the last claimant took the payload. Returns
    /// whether publishers wait for room and must be woken.
    fn free_slot(&self, i: usize) -> bool {
        // Release: the payload move happens before a publisher that reads
        // this 0 (with Acquire) writes the slot again.
        self.masks[i].store(0, Ordering::Release);
        if self.overflow != Overflow::Wait {
            return false;
        }
        // Dekker with `wait_for_room`: mask store, fence, read waiters here;
        // waiters increment, fence, mask read there.
        fence(Ordering::SeqCst);
        self.room_waiters.load(Ordering::Relaxed) > 0
    }

    /// Pins slot `i` for a `Lag` read; a no-op for other policies.
    #[inline(always)]
    fn pin(&self, i: usize) -> Pin<'_> {
        if self.overflow == Overflow::Lag {
            // SeqCst: Dekker with the overwriting publisher (it stores the
            // writing stamp, then reads the pins; we add our pin, then read
            // the stamp), so one of the two sees the other.
            self.pins[i].fetch_add(1, Ordering::SeqCst);
            Pin(Some(&self.pins[i]))
        } else {
            Pin(None)
        }
    }

    /// Publishes `msgs` in order: reserves as many slots as it can in one
    /// compare-and-swap, writes them, and reports whether to wake parked
    /// subscribers (the caller wakes them once for the whole batch).
    ///
    /// Stops at the first message that cannot go in (`Full` under `Reject`
    /// and `Wait`; `NoSubscribers` when the topic has no subscriber).
    pub(crate) fn publish(&self, msgs: impl ExactSizeIterator<Item = T>) -> Published<T> {
        let mut msgs = msgs;
        let mut outcome = Published {
            published: 0,
            rejected: None,
            evicted: Vec::new(),
            wake: false,
        };
        // Normally one reservation takes the whole batch; a `Lag` batch that
        // meets another publisher's slot still being written takes what it
        // can and comes back for the rest.
        while msgs.len() > 0 {
            let (first, count) = match self.reserve(msgs.len() as u64) {
                Ok(range) => range,
                Err(cause) => {
                    outcome.rejected = Some((msgs.collect(), cause));
                    break;
                }
            };
            let mask = self.mask_for(first);
            for x in first..first + count {
                let i = self.index(x);
                self.make_room(i, x, &mut outcome.evicted);
                let msg = if mask == 0 { None } else { msgs.next() };
                let Some(msg) = msg else {
                    // No member at these messages (every subscriber left, or
                    // is still joining past `first`, since the check in
                    // `reserve`): mark the slot written with no claim, so no
                    // reader ever reads it, and hand the message back below.
                    self.stamps[i].store(self.ready(x), Ordering::Release);
                    continue;
                };
                // SAFETY: message `x`'s slot is ours alone (invariant 1), and
                // `make_room` waited until no reader touches the old payload
                // and took it out, so the cell is free to overwrite.
                self.payloads[i].with_mut(|p| unsafe { (*p).write(msg) });
                // Relaxed: published by the Release of the ready stamp below.
                self.masks[i].store(mask, Ordering::Relaxed);
                // SeqCst: the ready stamp and the `parked` read below form the
                // publisher's half of the wake-up Dekker (for a batch, the
                // fence after the loop does it and Release suffices here, as
                // it pairs with the reader's Acquire of the stamp).
                if count == 1 {
                    self.stamps[i].swap(self.ready(x), Ordering::SeqCst);
                } else {
                    self.stamps[i].store(self.ready(x), Ordering::Release);
                }
                outcome.published += 1;
            }
            if mask == 0 {
                outcome.rejected = Some((msgs.collect(), RejectCause::NoSubscribers));
                break;
            }
        }
        if outcome.published > 1 {
            fence(Ordering::SeqCst);
        }
        if outcome.published > 0 {
            // SeqCst: after the swap or fence above (Dekker, module docs).
            // The swap that clears the flag makes exactly one of racing
            // publishers wake the waiters.
            outcome.wake = self.parked.load(Ordering::SeqCst)
                && self.parked.swap(false, Ordering::SeqCst);
        }
        outcome
    }

    /// Reserves up to `wanted` consecutive sequence numbers (invariant 1).
    /// Returns the first and how many.
    fn reserve(&self, wanted: u64) -> Result<(u64, u64), RejectCause> {
        let mut spins = 0;
        loop {
            // SeqCst: the tail and `active` reads are ordered with subscribe
            // and unsubscribe (invariant 2).
            if self.active.load(Ordering::SeqCst) == 0 {
                return Err(RejectCause::NoSubscribers);
            }
            let tail = self.tail.load(Ordering::SeqCst);
            let mut free = 0;
            let mut in_flight = false;
            let mut unread = false;
            while free < wanted {
                let x = tail + free;
                let i = self.index(x);
                // Acquire: pairs with the ready store of the previous lap,
                // and (through the mask read) with the last reader's Release
                // of mask 0, so its move happens before our write.
                let stamp = self.stamps[i].load(Ordering::Acquire);
                if stamp != (x << 1 | 1) {
                    // Below: the previous lap is still being written.
                    // Above: `tail` is stale.
                    in_flight = stamp < (x << 1 | 1);
                    break;
                }
                if self.overflow != Overflow::Lag && self.masks[i].load(Ordering::Acquire) != 0 {
                    unread = true;
                    break;
                }
                free += 1;
            }
            if free > 0 {
                // SeqCst: see above; AcqRel would do for the slots, but the
                // membership argument needs the total order.
                if self
                    .tail
                    .compare_exchange_weak(tail, tail + free, Ordering::SeqCst, Ordering::Relaxed)
                    .is_ok()
                {
                    return Ok((tail, free));
                }
                continue;
            }
            if unread && self.tail.load(Ordering::SeqCst) == tail {
                // The tail did not move while we looked, so the oldest
                // message really is unread: the ring is full.
                return Err(RejectCause::Full);
            }
            if in_flight {
                backoff(&mut spins);
            }
        }
    }

    /// The mask for messages reserved from `first` (invariant 2).
    fn mask_for(&self, first: u64) -> u64 {
        // SeqCst: see `subscribe`.
        let mut mask = self.active.load(Ordering::SeqCst);
        if first >= self.newest_start.load(Ordering::SeqCst) {
            return mask;
        }
        let mut bits = mask;
        while bits != 0 {
            let b = bits.trailing_zeros();
            bits &= bits - 1;
            let mut spins = 0;
            let start = loop {
                let start = self.starts[b as usize].load(Ordering::SeqCst);
                if start != JOINING {
                    break start;
                }
                backoff(&mut spins);
            };
            if first < start {
                mask &= !(1 << b);
            }
        }
        mask
    }

    /// Under `Lag`, takes slot `i` from the message one lap before `x`:
    /// stores the writing stamp, waits for pinned readers and takes the
    /// unread payload into `evicted` (invariant 4). Under `Reject` and
    /// `Wait` the reservation already saw the slot read by everybody.
    fn make_room(&self, i: usize, x: u64, evicted: &mut Vec<T>) {
        if self.overflow != Overflow::Lag {
            return;
        }
        // Acquire: pairs with the last reader's Release of mask 0.
        if self.masks[i].load(Ordering::Acquire) == 0 {
            // Everybody read it: no reader will touch the old payload.
            return;
        }
        // SeqCst: Dekker with `pin` (see there).
        self.stamps[i].store(self.writing(x), Ordering::SeqCst);
        let mut spins = 0;
        while self.pins[i].load(Ordering::SeqCst) != 0 {
            backoff(&mut spins);
        }
        // No reader is pinned and none can start reading the old message,
        // so the mask is ours. Acquire: pairs with readers' Release.
        if self.masks[i].swap(0, Ordering::Acquire) != 0 {
            // SAFETY: the mask was not 0, so the payload is initialised, and
            // no reader can access it any more (invariant 4).
            evicted.push(self.payloads[i].with(|p| unsafe { (*p).assume_init_read() }));
        }
    }

    /// Waits-for-room support: counts the caller as waiting and orders that
    /// with the readers' frees (Dekker, see `free_slot`). Call before the
    /// final re-check, and [`Soa::stop_waiting`] after.
    pub(crate) fn start_waiting(&self) {
        self.room_waiters.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// Undoes [`Soa::start_waiting`].
    pub(crate) fn stop_waiting(&self) {
        self.room_waiters.fetch_sub(1, Ordering::Relaxed);
    }

    /// Marks the topic as having a parked subscriber; call after creating
    /// the `Notified` and before the final re-check (Dekker, module docs).
    pub(crate) fn park(&self) {
        self.parked.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }
}

impl<T: Clone> Soa<T> {
    /// One read for the subscriber with `bit` at `*next`.
    pub(crate) fn read(&self, bit: u32, next: &mut u64) -> Step<T> {
        loop {
            if let Some(step) = self.read_at(1 << bit, next) {
                return step;
            }
        }
    }

    /// One read attempt at `*next`; `None` if the message there does not
    /// carry `bit` and was skipped (then `*next` has advanced).
    fn read_at(&self, bit: u64, next: &mut u64) -> Option<Step<T>> {
        let mut step = Step {
            read: Read::Empty,
            spare: None,
            room: false,
        };
        let x = *next;
        let i = self.index(x);
        // Acquire: pairs with the publisher's ready store.
        let stamp = self.stamps[i].load(Ordering::Acquire);
        if stamp < self.ready(x) {
            return Some(step);
        }
        if stamp > self.ready(x) {
            step.read = self.lagged(next);
            return Some(step);
        }
        let pin = self.pin(i);
        if self.overflow == Overflow::Lag {
            // Re-check under the pin (invariant 4).
            if self.stamps[i].load(Ordering::SeqCst) != self.ready(x) {
                drop(pin);
                step.read = self.lagged(next);
                return Some(step);
            }
        }
        // Acquire: pairs with the other readers' Release mask updates (their
        // clones happen before we move the payload out).
        let mut mask = self.masks[i].load(Ordering::Acquire);
        let mut copy: Option<T> = None;
        loop {
            if mask & bit == 0 {
                // Not a member at `x`: invariant 2 makes this unreachable for
                // `x >= start`, and only this reader clears its own bit.
                // Skip the message without delivering or counting it.
                *next = x + 1;
                return None;
            }
            if mask == bit {
                // SAFETY: the only claim left is ours (invariant 3), and the
                // slot cannot be reused while it is (Reject, Wait) or while we
                // are pinned after seeing the ready stamp (Lag). The mask is
                // not 0, so the payload is initialised.
                let value = self.payloads[i].with(|p| unsafe { (*p).assume_init_read() });
                step.room = self.free_slot(i);
                *next = x + 1;
                // A clone taken before the other readers left is equal to
                // the original; the caller drops it.
                step.spare = copy;
                step.read = Read::Message(value);
                return Some(step);
            }
            let value = match copy.take() {
                Some(value) => value,
                // SAFETY: our bit is set, so the payload is initialised and
                // is neither moved out (another reader moves it only when its
                // bit is the last) nor overwritten (as above) until we clear
                // it. Shared access only: other readers may clone it too.
                None => self.payloads[i].with(|p| unsafe { (*p).assume_init_ref().clone() }),
            };
            // AcqRel: Release orders our clone before the last reader's move
            // and the slot's reuse; Acquire as for the load above.
            match self.masks[i].compare_exchange_weak(
                mask,
                mask & !bit,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    *next = x + 1;
                    step.read = Read::Message(value);
                    return Some(step);
                }
                Err(actual) => {
                    mask = actual;
                    copy = Some(value);
                }
            }
        }
    }

    /// The lag report for a subscriber whose slot holds a later message
    /// (invariant 5): repositions `next` to the oldest retained message.
    fn lagged(&self, next: &mut u64) -> Read<T> {
        // SeqCst: a reservation that overwrote our slot is in the tail's
        // modification order before this read.
        let oldest = self
            .tail
            .load(Ordering::SeqCst)
            .saturating_sub(self.capacity);
        if oldest <= *next {
            // Unreachable by invariant 5 (our slot's overwrite was reserved,
            // so tail >= next + capacity + 1); report nothing rather than a
            // wrong count.
            return Read::Empty;
        }
        let missed = oldest - *next;
        *next = oldest;
        Read::Lagged(missed)
    }
}

impl<T> Drop for Soa<T> {
    fn drop(&mut self) {
        for (i, mask) in self.masks.iter().enumerate() {
            // Relaxed: `&mut self`, no other thread can access the ring.
            if mask.load(Ordering::Relaxed) != 0 {
                // SAFETY: a non-zero mask means the payload is initialised,
                // and nothing else can access it during drop.
                self.payloads[i].with_mut(|p| unsafe { (*p).assume_init_drop() });
            }
        }
    }
}

/// A `Lag` reader's pin on a slot; released on drop, including on unwind
/// from a panicking `T::clone`.
struct Pin<'a>(Option<&'a AtomicUsize>);

impl Drop for Pin<'_> {
    fn drop(&mut self) {
        if let Some(pins) = self.0 {
            // Release: our payload access and mask update happen before the
            // overwriting publisher's SeqCst read of the pins.
            pins.fetch_sub(1, Ordering::Release);
        }
    }
}

/// One step of a busy-wait for another thread's in-flight operation (a
/// publish between reservation and ready stamp, or a subscribe between
/// setting its bit and its start): spins first, then yields.
fn backoff(spins: &mut u32) {
    if *spins < SPINS_BEFORE_YIELD {
        *spins += 1;
        spin_loop();
    } else {
        yield_now();
    }
}
