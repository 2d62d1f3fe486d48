//! The Soa backend: a lock-free broadcast ring of slots, each a stamp, a
//! mask word and a payload side by side.
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
//! * Covering a drain (announce the first message the drain may read,
//!   fence, then validate the stamp; the overwriter writes its stamp,
//!   fences, then scans the announcements) follows the hazard-pointer
//!   pattern of Maged Michael, "Hazard Pointers: Safe Memory Reclamation
//!   for Lock-Free Objects" (IEEE TPDS 15(6), 2004). It differs on two
//!   points: one announcement covers every later message (an era, closer
//!   to Ramalhete and Correia's hazard eras, SPAA 2017), and the
//!   overwriter waits instead of deferring the reclamation.
//!
//! # Layout
//!
//! Message `x` (sequence numbers `0, 1, 2, ...`, never reused) lives in slot
//! `i = x % capacity`, `slots[i]`, with three fields:
//!
//! | field | type | meaning |
//! |---|---|---|
//! | `stamp` | `u64` | which message the slot holds and whether it is written |
//! | `mask` | `u64` | bits 0..56: bit `b` set means the subscriber with bit `b` has not read it yet; bits 56..64: `Lag` readers inside a read |
//! | `payload` | `MaybeUninit<T>` | the message, initialised exactly while `mask` has a subscriber bit |
//!
//! Despite the backend's name (a structure of arrays), the three fields sit
//! in one slot struct, not in arrays (`stamps[i]`, `masks[i]`,
//! `payloads[i]`). Across threads the arrays would make a publish and a
//! read pull three cache lines per message from the other core where a
//! slot struct pulls one, or two when a slot straddles a line (a 24-byte
//! slot of a `u64` payload does for 2 slots in 8); crossbeam-channel keeps
//! its stamp beside the value for the same reason. Side by side with every
//! other part of the code equal, four producer threads into one consumer
//! took 78–192 µs per 4096 messages with the struct and 213–577 µs with
//! the arrays (`docs/PERFORMANCE.md`, "Bus: figures the code rests on").
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
//! Each invariant names the accesses whose ordering it relies on, as
//! "writer (ordering) → reader (ordering)": the reader's Acquire reads the
//! value the writer's Release wrote (or a later read-modify-write of it, in
//! its release sequence), so everything the writer did before is visible.
//!
//! 1. **Reservation.** `tail` is the next sequence number to reserve. A
//!    publisher reserves `tail .. tail + k` with one compare-and-swap, after
//!    checking that each of those slots holds the fully written message one
//!    lap earlier and (under `Reject` and `Wait`) that it has been read by
//!    everybody (`mask == 0`). Tail values are therefore always reservation
//!    boundaries, and a reserved slot belongs to its publisher alone until it
//!    stores the ready stamp. Synchronises: the previous lap's ready stamp
//!    (Release) → the reservation's stamp load (Acquire); the last reader's
//!    `mask = 0` (Release, `free_slot`) → the reservation's mask load
//!    (Acquire), so the old payload was moved out before it is overwritten.
//! 2. **Membership.** A subscriber owns one bit `b` of `active` and starts at
//!    `start = tail` read after setting its bit. A message `x` carries bit `b`
//!    exactly when the subscriber was a member at `x`: the publisher reads
//!    `active` after its reservation and drops bits whose `start > x` (a
//!    subscriber that set its bit while the message was being reserved).
//!    Since `start` is a tail value, a reservation lies wholly before or
//!    wholly after it, so every message of one batch has the same mask.
//!    Synchronises: a store-load (Dekker) argument over `active` and `tail`,
//!    so every access to them in `subscribe`, `unsubscribe`, `reserve` and
//!    `mask_for` is `SeqCst` (one total order), with a loom-only fence after
//!    the read-modify-writes (`sync::seqcst_fence_for_loom`).
//! 3. **Reading.** A subscriber at `next = x` reads only after seeing
//!    `slots[i].stamp == ready(x)` with its bit set in its `mask`. A reader that is
//!    not the last clones the payload, then clears its bit with a
//!    compare-and-swap (never to zero). The reader whose bit is the only one
//!    left moves the payload out and then stores mask 0. Hence the mask
//!    reaches 0 only after the payload was taken, and a reader that clears
//!    its bit has finished touching the payload. Synchronises: `commit`'s
//!    ready stamp (Release) → the reader's stamp load (Acquire), so the
//!    payload and mask written before it are visible; each reader's bit
//!    clear (AcqRel) → the next reader's mask load or compare-and-swap
//!    (Acquire), so every clone happens before the last reader's move.
//! 4. **Overwriting** (`Lag`). A `Lag` reader (except a read inside a
//!    covered drain whose mask has other bits than its own, invariant 8)
//!    counts itself in the mask
//!    word's top bits with the compare-and-swap that claims (the last claim
//!    clears the bits and counts in one step), re-checks the stamp, and
//!    uncounts itself after its clone or move. A publisher that finds
//!    the slot's mask `!= 0` stores the "writing" stamp, fences and waits
//!    for covered drains (invariant 8), waits until the count is
//!    0 and then takes the whole word with a compare-and-swap, with it the
//!    old payload (dropped after the publish returns). A reader whose claim
//!    landed on a later lap sees a changed stamp in its re-check and undoes
//!    the claim. Under `Reject` and `Wait` a slot is only reused at
//!    `mask == 0`, so readers never count themselves. Synchronises:
//!    * a reader's uncount or bit clear (Release) → `evict`'s mask load and
//!      compare-and-swap (Acquire), so the reader's clone or move happens
//!      before the payload is taken or overwritten;
//!    * `evict`'s writing stamp (Release) and mask compare-and-swap (AcqRel),
//!      then `commit`'s new mask (**Release**) → the claiming reader's
//!      compare-and-swap (Acquire) that reads that mask or a later value of
//!      its release sequence. The writing stamp precedes the new mask in the
//!      publisher's program order, so the reader's re-check sees at least
//!      the writing stamp and undoes the claim. (A `Relaxed` store there
//!      would head no release sequence: the re-check could read the old
//!      ready stamp and clone the payload being written. The `Lag` loom
//!      models report that as a causality violation.)
//!    * When `make_room` finds mask 0 it stores no writing stamp: every
//!      subscriber at `x` still has its bit in `x`'s mask (invariant 2), so
//!      a mask of 0 means nobody will read `x` and no reader can claim on
//!      this lap by mistake.
//! 5. **Lag count.** A reader whose slot holds a later message reads `tail`,
//!    bounded below by the message its slot's stamp names: every message
//!    below `tail - capacity` has been (or is being) overwritten, so it
//!    reports `tail - capacity - next` missed messages and resumes at
//!    `tail - capacity`. Each message is either delivered or counted once:
//!    delivered + lagged = published. Synchronises: nothing beyond the stamp
//!    load (Acquire) of invariant 3; the stamp itself bounds the tail from
//!    below, so a stale `tail` cannot under-count.
//! 6. **Wrap.** The stamp encodes the full sequence number, so a reader that
//!    finds its slot reused for a later lap sees a larger stamp and never
//!    delivers a wrong or duplicate message. Stamps only grow, and every
//!    stamp store is Release (read with Acquire).
//! 7. **Leaving.** A departing subscriber clears its bit in `active`, reads
//!    `tail` as `end`, and for every message in `max(next, end - capacity) ..
//!    end` waits until it is written and clears its bit there (taking and
//!    dropping the payload if it was the last claim). Messages from `end` on
//!    never carry its bit. Only then is the bit free for another subscriber.
//!    Synchronises: as invariant 2 for `active`/`tail`; as invariant 3 (or
//!    4 under `Lag`) for each claim it clears; the `membership` mutex orders
//!    it with the next `subscribe` that takes the bit.
//! 8. **Covered drains** (`Lag`, more than one subscriber). A `drain`
//!    first publishes its start `next` in `reading[b]` and issues a
//!    `SeqCst` fence (`cover`); until it stores [`NOT_READING`] there
//!    (`uncover`, when the drain ends or unwinds), its reads of a message
//!    whose mask has other bits than its own clone the payload without
//!    counting themselves, and clear their bit with one compare-and-swap
//!    (which registers them instead if the bit turned out to be the last
//!    claim, to move the payload out as in invariant 4; no stamp re-check
//!    is needed, the cover keeps the slot on this lap). Only a subscriber
//!    clears its own bit in a live message's mask, so while its bit is
//!    set nobody else moves the payload out (invariant 3). A publisher that
//!    overwrites a message `old` with claims left (`evict`) stores the
//!    writing stamp, issues a `SeqCst` fence, and waits while a subscriber
//!    whose bit is still in the mask has `reading[b] <= old`. Synchronises:
//!    a store-load (Dekker) argument over (`reading[b]`, the slot's stamp):
//!    either the drain's stamp load (after its fence) sees the writing
//!    stamp and does not read `old`, or `evict`'s load of `reading[b]`
//!    (after its fence) sees the cover and waits; `uncover`'s store
//!    (Release) → `evict`'s load (Acquire), and each bit clear (Release) →
//!    `evict`'s mask load (Acquire), so the drain's clones happen before
//!    the payload is taken or overwritten; `cover`'s store (Release) → the
//!    same load, so a publisher that reads a later drain's cover also sees
//!    the earlier drain's accesses. A drain never waits for a publisher (a
//!    slot being written ends it as `Empty`, one overwritten as `Lagged`),
//!    so the wait ends after a bounded number of the drain's steps; in
//!    time it lasts until the drain reads past `old` or ends, also while
//!    its thread is descheduled, where a counted read held a publisher for
//!    one clone only. Hence a `Clone` impl must not publish to the same
//!    topic. Each read that is not the last claim costs one
//!    compare-and-swap instead of two; a `drain` of 256 into 4 subscribers
//!    on one thread spent most of its time in those
//!    (`docs/PERFORMANCE.md`). A drain of at most one message is not
//!    covered (nothing to save).
//!
//! # Wake-ups (edge-coalesced)
//!
//! A subscriber that found nothing creates its `Notified`, sets `parked`,
//! issues a `SeqCst` fence and reads `tail`. A publisher reads `parked` after
//! the `SeqCst` compare-and-swap that reserved its messages, and only if it
//! is set does it clear it and call `notify_waiters`, after its ready
//! stamps. Dekker's pattern on (`tail`, `parked`): either the subscriber
//! sees the reservation (then it re-checks, and while the message is not yet
//! written it yields rather than sleeps), or the publisher sees the flag and
//! wakes it. A burst of messages into a parked topic therefore costs one
//! wake-up, by the first publish.
//! Publishers waiting for room under `Wait` use the same pattern with
//! `room_waiters`, signalled by the reader that frees a slot. A reader's
//! side of it is one `SeqCst` fence per batch of frees (`room_wanted`,
//! after the last read of a `drain`), not one per message: the fence
//! orders every mask store before it with the load of the waiter count.
//!
//! # Panics
//!
//! The only user code that runs inside the protocol is `T::clone`, in a read,
//! before the reader changes any shared state except its `Lag` count, which
//! a guard releases on unwind, and its drain's cover, which the drain's
//! guard (`Cover` in `subscriber.rs`) ends on unwind. A panicking clone therefore leaves the ring as it
//! was, and the subscriber can read the message again. Payloads that a
//! publish overwrote, that a departing subscriber released, or that a reader
//! cloned before becoming the last claimant are dropped by the caller after
//! the protocol step returns (after the slot is freed).

// The one module allowed `unsafe`: payload cells whose ownership the slot
// protocol hands between threads (see the crate's lint notes).
#![allow(unsafe_code)]

use std::mem::MaybeUninit;

use crossbeam_utils::CachePadded;

use crate::config::Overflow;
use crate::error::RejectCause;
use crate::outcome::{Published, PublishedOne, Read, Step};
use crate::sync::{
    fence, lock, seqcst_fence_for_loom, spin_loop, yield_now, AtomicBool, AtomicU64, AtomicUsize,
    Mutex, Ordering, UnsafeCell,
};

/// Most subscribers one Soa topic can have at once: bits 0..56 of a slot's
/// mask word; the top 8 bits count `Lag` readers inside a read.
pub(crate) const MAX_SUBSCRIBERS: usize = 56;

/// The subscriber bits of a mask word.
const BITS: u64 = (1 << MAX_SUBSCRIBERS) - 1;

/// One `Lag` reader inside a read, in a mask word's top 8 bits (at most
/// 56 at once, so the count never overflows into nothing).
const ONE_READER: u64 = 1 << MAX_SUBSCRIBERS;

/// `starts[b]` while the subscriber taking bit `b` has set its bit but not yet
/// read its start; a publisher that meets it waits.
const JOINING: u64 = u64::MAX;

/// `reading[b]` while the subscriber with bit `b` is not inside a covered
/// drain.
const NOT_READING: u64 = u64::MAX;

/// The first round of a reservation's back-off after it lost the tail to
/// another publisher: `2^2 = 4` spin hints (about 36 ns here, ~9 ns a
/// hint). crossbeam-channel's `send` starts at 1; chosen side by side
/// with 0 and 4 (`docs/PERFORMANCE.md`, "Bus under sustained fan-in").
const CONTENDED_FIRST_ROUND: u32 = 2;

/// The last round of that back-off, crossbeam-utils' `SPIN_LIMIT` in
/// `Backoff::spin`: `2^6 = 64` spin hints.
const CONTENDED_LAST_ROUND: u32 = 6;

/// How many spin hints a busy-wait issues before it starts yielding.
const SPINS_BEFORE_YIELD: u32 = 64;

/// A Soa ring. See the module docs for the algorithm and its invariants.
pub(crate) struct Soa<T> {
    /// Next sequence number to reserve (invariant 1). Written by every
    /// publish, so it has a cache line of its own.
    tail: CachePadded<AtomicU64>,
    /// Bits of the live subscribers (invariant 2). Read by every publish;
    /// written only under `membership`.
    active: CachePadded<AtomicU64>,
    /// The largest `start` of any subscriber, or [`JOINING`] while a
    /// subscribe is between setting its bit and storing its start. A
    /// reservation at or above it needs no per-bit start check.
    newest_start: AtomicU64,
    /// `starts[b]`: first sequence number the subscriber with bit `b` reads,
    /// or [`JOINING`].
    starts: Box<[AtomicU64]>,
    /// Bits handed out to subscribers, including departing ones still
    /// clearing their claims. Subscribe and unsubscribe hold this lock; the
    /// publish and read paths never take it. Poisoning is recovered: nothing
    /// inside can panic between two changes of shared state (payloads taken
    /// out are dropped by the caller after the lock is released).
    membership: Mutex<u64>,
    /// `reading[b]`: while the subscriber with bit `b` is inside a covered
    /// `Lag` drain, the first message that drain may read; [`NOT_READING`]
    /// otherwise (invariant 8). Each on its own cache line: written by its
    /// subscriber once per drain, read by an overwriting publisher.
    reading: Box<[CachePadded<AtomicU64>]>,
    /// Set by a subscriber about to park; cleared by the publisher that wakes
    /// the topic's waiters.
    parked: CachePadded<AtomicBool>,
    /// Number of publishers waiting for room in `publish_wait`.
    room_waiters: AtomicUsize,
    /// The slots (see the module docs), each with its stamp, mask word and
    /// payload side by side.
    slots: Box<[Slot<T>]>,
    /// Number of slots (`1 ..= TopicConfig::MAX_CAPACITY`), as a sequence
    /// distance.
    capacity: u64,
    /// Whether `capacity` is a power of two, so a slot index is a mask
    /// rather than a 64-bit division (about 40 cycles here).
    pow2: bool,
    /// Fixed at creation.
    overflow: Overflow,
}

/// One slot of the ring: which message it holds, who has still to read it,
/// and the message. The three sit side by side (24 bytes for a `u64`
/// payload), so a publish or a read touches one cache line per message, as
/// in crossbeam-channel's array flavor, where the stamp sits beside the
/// value.
struct Slot<T> {
    /// Which message the slot holds and whether it is written.
    stamp: AtomicU64,
    /// Bits of the subscribers that have not read the message, and the
    /// count of `Lag` readers inside a read (top 8 bits).
    mask: AtomicU64,
    /// The message, initialised exactly while `mask` has a subscriber bit.
    payload: UnsafeCell<MaybeUninit<T>>,
}

// SAFETY: a `Soa<T>` owns `T` values (moved in by publishers on one thread
// and out by readers on another: `T: Send`) and lets several readers clone
// the same value through `&T` at the same time (`T: Sync`). The payload cells
// sit in the `slots` beside atomics; every other field is an atomic, a mutex
// or fixed at creation.
unsafe impl<T: Send + Sync> Send for Soa<T> {}
// SAFETY: as above; all shared mutation goes through atomics, and access to
// each payload is arbitrated by the slot protocol in the module docs.
unsafe impl<T: Send + Sync> Sync for Soa<T> {}

impl<T> Soa<T> {
    /// An empty ring of `capacity` slots (`1 ..= TopicConfig::MAX_CAPACITY`,
    /// checked by `TopicConfig::validate`).
    pub(crate) fn new(capacity: usize, overflow: Overflow) -> Self {
        let cap = capacity as u64;
        Self {
            tail: CachePadded::new(AtomicU64::new(0)),
            active: CachePadded::new(AtomicU64::new(0)),
            newest_start: AtomicU64::new(0),
            starts: (0..MAX_SUBSCRIBERS).map(|_| AtomicU64::new(0)).collect(),
            reading: (0..MAX_SUBSCRIBERS)
                .map(|_| CachePadded::new(AtomicU64::new(NOT_READING)))
                .collect(),
            membership: Mutex::new(0),
            parked: CachePadded::new(AtomicBool::new(false)),
            room_waiters: AtomicUsize::new(0),
            // Slot `i` holds the fully read message `i - capacity`.
            slots: (0..cap)
                .map(|i| Slot {
                    stamp: AtomicU64::new((i << 1) | 1),
                    mask: AtomicU64::new(0),
                    payload: UnsafeCell::new(MaybeUninit::uninit()),
                })
                .collect(),
            capacity: cap,
            pow2: cap.is_power_of_two(),
            overflow,
        }
    }

    /// Slot index of message `x`.
    #[inline(always)]
    fn index(&self, x: u64) -> usize {
        // `x % capacity < capacity <= 2^24`, which fits in `usize`.
        if self.pow2 {
            (x & (self.capacity - 1)) as usize
        } else {
            (x % self.capacity) as usize
        }
    }

    /// The slot of message `x`, indexed once: the functions of one slot's
    /// protocol take it by reference, so the ring's slot pointer and length
    /// are not read again (and re-checked) after each atomic access.
    #[inline(always)]
    fn slot(&self, x: u64) -> &Slot<T> {
        &self.slots[self.index(x)]
    }

    /// The stamp of slot `x % capacity` once message `x` is written.
    #[inline(always)]
    fn ready(&self, x: u64) -> u64 {
        ((x + self.capacity) << 1) | 1
    }

    /// The stamp a `Lag` publish of message `x` stores while it overwrites
    /// an unread message.
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
        let bit = (!*taken & BITS).trailing_zeros();
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
        seqcst_fence_for_loom();
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
        seqcst_fence_for_loom();
        let end = self.tail.load(Ordering::SeqCst);
        let mut released = Vec::new();
        let mut room = false;
        for x in next.max(end.saturating_sub(self.capacity))..end {
            let slot = self.slot(x);
            let mut spins = 0;
            loop {
                // Acquire: pairs with the publisher's ready store, so the
                // payload and mask it wrote are visible.
                let stamp = slot.stamp.load(Ordering::Acquire);
                if stamp == self.ready(x) {
                    match self.claim(slot, x, 1 << bit, None, false) {
                        Claim::Last(value, spare) => {
                            room |= self.free_slot(slot);
                            released.push(value);
                            released.extend(spare);
                        }
                        Claim::Shared(_) | Claim::Released | Claim::Gone => {}
                    }
                    break;
                }
                if stamp > self.ready(x) {
                    // Overwritten (`Lag`): the overwriting publish took the
                    // claim with the payload.
                    break;
                }
                // Reserved but not yet written: that publish is in flight
                // and may put our bit in the mask; wait for it.
                backoff(&mut spins);
            }
        }
        *taken &= !(1 << bit);
        (released, room && self.room_wanted())
    }

    /// Stores mask 0 after the last claimant took the payload. Returns
    /// whether the ring is a `Wait` ring, where a publisher may be waiting
    /// for this slot: the caller then asks [`Soa::room_wanted`] once, after
    /// the last slot it frees in a batch.
    #[inline]
    fn free_slot(&self, slot: &Slot<T>) -> bool {
        // Release: the payload move happens before a publisher that reads
        // this 0 (with Acquire) writes the slot again.
        slot.mask.store(0, Ordering::Release);
        self.overflow == Overflow::Wait
    }

    /// Whether publishers wait for room, after the caller freed one or more
    /// slots with [`Soa::free_slot`]: they must then be woken.
    ///
    /// Dekker with `start_waiting`: here the mask stores of every slot freed
    /// since the last call, a `SeqCst` fence, then the waiter count; there
    /// the count, a `SeqCst` fence, then the re-check of the mask. Either
    /// the waiter's re-check sees a freed slot or this load sees the waiter.
    /// One fence per batch of frees (a `drain`), not one per message.
    pub(crate) fn room_wanted(&self) -> bool {
        fence(Ordering::SeqCst);
        self.room_waiters.load(Ordering::Relaxed) > 0
    }

    /// Publishes one message (the common case, without the batch's
    /// allocation).
    ///
    /// # Errors
    ///
    /// The message and why, if the topic has no subscriber or a `Reject` or
    /// `Wait` ring is full.
    #[inline]
    pub(crate) fn publish_one(&self, msg: T) -> Result<PublishedOne<T>, (T, RejectCause)> {
        let first = match self.reserve(1) {
            Ok((first, _)) => first,
            Err(cause) => return Err((msg, cause)),
        };
        let mask = self.mask_for(first);
        let slot = self.slot(first);
        let evicted = self.make_room(slot, first);
        if mask == 0 {
            // No member at this message (every subscriber left since the
            // check in `reserve`): mark the slot written with no claim, so
            // no reader ever reads it, and hand the message back.
            slot.stamp.store(self.ready(first), Ordering::Release);
            drop(evicted);
            return Err((msg, RejectCause::NoSubscribers));
        }
        self.commit(slot, first, mask, msg);
        Ok(PublishedOne {
            seq: first,
            evicted,
            wake: self.take_parked(),
        })
    }

    /// Publishes `msgs` in order: normally one reservation for the whole
    /// batch, then one wake-up decision. Stops at the first message that
    /// cannot go in (`Full` under `Reject` and `Wait`; `NoSubscribers` when
    /// the topic has no subscriber).
    pub(crate) fn publish_batch(&self, msgs: Vec<T>) -> Published<T> {
        let mut msgs = msgs.into_iter();
        let mut outcome = Published {
            published: 0,
            end: 0,
            rejected: None,
            evicted: Vec::new(),
            wake: false,
        };
        // A `Lag` batch that meets another publisher's slot still being
        // written takes what it can and comes back for the rest.
        while msgs.len() > 0 {
            let (first, count) = match self.reserve(msgs.len() as u64) {
                Ok(range) => range,
                Err(cause) => {
                    outcome.rejected = Some((msgs.collect(), cause));
                    break;
                }
            };
            // Every message of one reservation gets the same mask
            // (invariant 2).
            let mask = self.mask_for(first);
            if mask == 0 {
                // No member (see `publish_one`): every reserved slot becomes
                // an empty written slot, and every message goes back,
                // including the ones this reservation was for.
                for x in first..first + count {
                    let slot = self.slot(x);
                    outcome.evicted.extend(self.make_room(slot, x));
                    slot.stamp.store(self.ready(x), Ordering::Release);
                }
                outcome.rejected = Some((msgs.collect(), RejectCause::NoSubscribers));
                break;
            }
            // `count <= msgs.len()`, so the zip takes exactly `count`.
            for (x, msg) in (first..first + count).zip(msgs.by_ref()) {
                let slot = self.slot(x);
                outcome.evicted.extend(self.make_room(slot, x));
                self.commit(slot, x, mask, msg);
                outcome.published += 1;
                outcome.end = x + 1;
            }
        }
        if outcome.published > 0 {
            outcome.wake = self.take_parked();
        }
        outcome
    }

    /// Writes message `x` into its reserved `slot` for the subscribers in
    /// `mask` and makes it readable.
    #[inline(always)]
    fn commit(&self, slot: &Slot<T>, x: u64, mask: u64, msg: T) {
        // SAFETY: message `x`'s slot is ours alone (invariant 1), and
        // `make_room` made sure no reader touches the old payload and took
        // it out if it was unread, so the cell is free to overwrite.
        slot.payload.with_mut(|p| unsafe { (*p).write(msg) });
        // Release: a `Lag` reader may claim this mask before it sees the
        // ready stamp below (it saw the previous lap's ready stamp and then
        // compare-and-swapped the mask word). Its Acquire compare-and-swap
        // synchronises with this store, so it also sees the writing stamp
        // `evict` stored before it (program order) and its stamp re-check
        // fails (invariant 4). A `Relaxed` store here heads no release
        // sequence and gives that reader nothing: loom reports the payload
        // write below racing the reader's clone. On x86 a `Release` store is
        // a plain store.
        slot.mask.store(mask, Ordering::Release);
        // Release: pairs with the reader's Acquire of the stamp, so the
        // payload and mask are visible to it.
        slot.stamp.store(self.ready(x), Ordering::Release);
    }

    /// Sequence numbers taken so far: the messages published, plus any a
    /// batch reserved and handed back because every subscriber had left.
    pub(crate) fn sequence(&self) -> u64 {
        // Relaxed: a count for reporting, and `blocking_recv`'s hint
        // whether a stream still flows; it orders nothing.
        self.tail.load(Ordering::Relaxed)
    }

    /// After a publish: whether a subscriber announced it parks, clearing
    /// the flag (so of racing publishers one wakes the waiters).
    #[inline(always)]
    fn take_parked(&self) -> bool {
        // SeqCst: this load follows the reservation's SeqCst
        // compare-and-swap of `tail`; `park` stores the flag, fences and
        // reads `tail`. Dekker: either the subscriber sees our reservation
        // (and does not sleep) or we see its flag (and wake it).
        self.parked.load(Ordering::SeqCst) && self.parked.swap(false, Ordering::SeqCst)
    }

    /// Reserves up to `wanted` consecutive sequence numbers (invariant 1).
    /// Returns the first and how many.
    #[inline]
    fn reserve(&self, wanted: u64) -> Result<(u64, u64), RejectCause> {
        let mut spins = 0;
        // Compare-and-swaps of the tail lost to another publisher so far.
        let mut contended = 0u32;
        loop {
            // SeqCst: the tail and `active` accesses are ordered with
            // subscribe and unsubscribe (invariant 2).
            if self.active.load(Ordering::SeqCst) == 0 {
                return Err(RejectCause::NoSubscribers);
            }
            let tail = self.tail.load(Ordering::SeqCst);
            let mut free = 0;
            let mut in_flight = false;
            let mut unread = false;
            while free < wanted {
                let x = tail + free;
                let slot = self.slot(x);
                // Acquire: pairs with the ready store of the previous lap,
                // and (through the mask read) with the last reader's Release
                // of mask 0, so its move happens before our write.
                let stamp = slot.stamp.load(Ordering::Acquire);
                let previous_lap = (x << 1) | 1;
                if stamp != previous_lap {
                    // Below: the previous lap is still being written.
                    // Above: `tail` is stale.
                    in_flight = stamp < previous_lap;
                    break;
                }
                if self.overflow != Overflow::Lag && slot.mask.load(Ordering::Acquire) != 0 {
                    unread = true;
                    break;
                }
                free += 1;
            }
            if free > 0 {
                // SeqCst: see above, and `take_parked`.
                match self.tail.compare_exchange_weak(
                    tail,
                    tail + free,
                    Ordering::SeqCst,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        seqcst_fence_for_loom();
                        return Ok((tail, free));
                    }
                    // Another publisher moved the tail: back off before
                    // looking again, longer each time, as crossbeam-channel's
                    // `send` does (crossbeam-utils' `Backoff::spin`), so that
                    // publishers on other cores are not all pulling the
                    // tail's cache line at once. A spurious failure (the
                    // tail unchanged) retries at once.
                    Err(actual) if actual != tail => {
                        delay(1 << (CONTENDED_FIRST_ROUND + contended).min(CONTENDED_LAST_ROUND));
                        contended = contended.saturating_add(1);
                    }
                    Err(_) => {}
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
    #[inline(always)]
    fn mask_for(&self, first: u64) -> u64 {
        // SeqCst: see `subscribe`.
        let mask = self.active.load(Ordering::SeqCst);
        if first >= self.newest_start.load(Ordering::SeqCst) {
            return mask;
        }
        self.mask_for_joining(first, mask)
    }

    /// [`Soa::mask_for`] when a subscribe raced the reservation: drops the
    /// bits of subscribers that start after `first`.
    #[cold]
    fn mask_for_joining(&self, first: u64, mut mask: u64) -> u64 {
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

    /// Under `Lag`, takes the reserved `slot` for message `x` from the message
    /// one lap earlier: if that one is unread, stores the writing stamp,
    /// waits until no reader is inside a read, and takes the mask and the
    /// payload (invariant 4). Under `Reject` and `Wait` the reservation
    /// already saw the slot read by everybody.
    #[inline(always)]
    fn make_room(&self, slot: &Slot<T>, x: u64) -> Option<T> {
        if self.overflow != Overflow::Lag {
            return None;
        }
        // Acquire: pairs with the last reader's Release of mask 0.
        if slot.mask.load(Ordering::Acquire) == 0 {
            // Everybody read it: no reader will touch the old payload.
            return None;
        }
        self.evict(slot, x)
    }

    /// The slow half of [`Soa::make_room`].
    #[cold]
    fn evict(&self, slot: &Slot<T>, x: u64) -> Option<T> {
        // Release: a reader that sees this stamp also sees our reservation
        // of `x` in `tail` (its lag count relies on it). Readers that claim
        // the mask after our compare-and-swap below see it through that
        // compare-and-swap's Release.
        slot.stamp.store(self.writing(x), Ordering::Release);
        // SeqCst: Dekker with `cover` (its `reading` store, a SeqCst fence,
        // then the stamp loads of the drain): either the drain sees the
        // writing stamp above and does not read the old message, or the
        // loads of `reading` below see its cover and we wait (invariant 8).
        fence(Ordering::SeqCst);
        let mut spins = 0;
        // The message being overwritten; the slot had a claim, so it held a
        // real message and `x >= capacity`.
        let old = x.saturating_sub(self.capacity);
        while self.covered_reader(slot, old) {
            backoff(&mut spins);
        }
        let mut mask = slot.mask.load(Ordering::Acquire);
        loop {
            if mask >> MAX_SUBSCRIBERS != 0 {
                // A reader is inside a read of the old message; it finishes
                // without waiting for anything.
                backoff(&mut spins);
                mask = slot.mask.load(Ordering::Acquire);
                continue;
            }
            // AcqRel: Acquire pairs with readers' Release (their clones
            // happen before we drop the payload); Release publishes the
            // writing stamp to readers that claim after us.
            match slot
                .mask
                .compare_exchange_weak(mask, 0, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) if mask & BITS != 0 => {
                    // SAFETY: the mask had claims, so the payload is
                    // initialised; we removed every claim while no reader
                    // was inside a read, and no reader can claim any more
                    // (its re-check sees the writing stamp).
                    return Some(slot.payload.with(|p| unsafe { (*p).assume_init_read() }));
                }
                Ok(_) => return None,
                Err(actual) => mask = actual,
            }
        }
    }

    /// Whether a subscriber that still has a claim on message `old` in `slot`
    /// is inside a covered drain that may read it (invariant 8).
    fn covered_reader(&self, slot: &Slot<T>, old: u64) -> bool {
        // Acquire: a bit cleared here was cleared by its reader's Release
        // compare-and-swap after its clone.
        let mut bits = slot.mask.load(Ordering::Acquire) & BITS;
        while bits != 0 {
            let b = bits.trailing_zeros();
            bits &= bits - 1;
            // Acquire: pairs with `uncover`'s Release, so a drain that ended
            // finished its clones before we take or overwrite the payload.
            if self.reading[b as usize].load(Ordering::Acquire) <= old {
                return true;
            }
        }
        false
    }

    /// Starts a covered drain for the subscriber with `bit` at `next`
    /// (invariant 8) of at most `max` messages, under `Lag` when the topic
    /// has more than one subscriber and `max >= 2`: publishes `next` in
    /// `reading[bit]` and fences. The
    /// drain's reads that are not the last claim then clone without
    /// registering in the mask word, one compare-and-swap per message
    /// instead of two. Returns whether it covered; if so, call
    /// [`Soa::uncover`] when the drain ends (also on unwind).
    pub(crate) fn cover(&self, bit: u32, next: u64, max: usize) -> bool {
        // Relaxed: a snapshot deciding whether covering pays; with one
        // subscriber every read is the last claim, which registers anyway,
        // and a drain of one message saves nothing.
        if self.overflow != Overflow::Lag
            || max < 2
            || self.active.load(Ordering::Relaxed).count_ones() < 2
        {
            return false;
        }
        // Release: pairs with `covered_reader`'s Acquire, so a publisher
        // that reads this cover also sees this subscriber's earlier drains
        // (a later store by the same thread is not in `uncover`'s release
        // sequence; the bit clears give the same, this states it).
        self.reading[bit as usize].store(next, Ordering::Release);
        // SeqCst: Dekker with `evict` (its writing stamp, a SeqCst fence,
        // then `covered_reader`): either `evict` sees this cover (or a
        // later value), or every stamp load of the drain (all after this
        // fence) sees that writing stamp or a later one.
        fence(Ordering::SeqCst);
        true
    }

    /// Ends the covered drain of the subscriber with `bit`.
    pub(crate) fn uncover(&self, bit: u32) {
        // Release: every clone of the drain happens before the payload is
        // taken or overwritten by a publisher that reads this (Acquire, in
        // `covered_reader`).
        self.reading[bit as usize].store(NOT_READING, Ordering::Release);
    }

    /// Counts the caller as a publisher waiting for room and orders that
    /// with the readers' frees (Dekker, see `room_wanted`). Call before the
    /// final re-check, and [`Soa::stop_waiting`] after.
    pub(crate) fn start_waiting(&self) {
        self.room_waiters.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// Undoes [`Soa::start_waiting`].
    pub(crate) fn stop_waiting(&self) {
        self.room_waiters.fetch_sub(1, Ordering::Relaxed);
    }

    /// Whether the slot of message `next + ahead` (at most one lap ahead)
    /// holds it written, or a later message (a hint for `blocking_recv`'s
    /// back-off and its wait for a run; a read decides).
    #[cfg_attr(kms_loom, allow(dead_code))]
    pub(crate) fn looks_ready(&self, next: u64, ahead: u64) -> bool {
        // At most one lap ahead: the slot of a message further on holds an
        // earlier one.
        let x = next + ahead.min(self.capacity - 1);
        // Relaxed: a hint that makes nothing visible; the read that follows
        // acquires the stamp itself (invariant 3).
        self.slot(x).stamp.load(Ordering::Relaxed) >= self.ready(x)
    }

    /// Announces a subscriber at `next` about to park; call after creating
    /// the `Notified` and before the final re-check (Dekker, module docs).
    /// Returns `true` if a message at `next` is reserved but not yet
    /// written: its publisher may have looked at the flag before we set it,
    /// so the caller must not sleep but yield and look again.
    pub(crate) fn park(&self, next: u64) -> bool {
        self.parked.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        self.tail.load(Ordering::SeqCst) > next
    }

    /// Takes the claim `bit` on `slot`, which held message `x` when the
    /// caller saw its ready stamp, cloning the payload if `clone` and other
    /// claims remain.
    #[inline]
    fn claim(
        &self,
        slot: &Slot<T>,
        x: u64,
        bit: u64,
        clone: Option<fn(&T) -> T>,
        covered: bool,
    ) -> Claim<T> {
        if self.overflow == Overflow::Lag {
            return self.claim_lag(slot, x, bit, clone, covered);
        }
        // Reject and Wait: the slot is not reused while our bit is set, so
        // the message is `x` for as long as we hold the claim.
        // Acquire: pairs with the other readers' Release mask updates (their
        // clones happen before we move the payload out).
        let mut mask = slot.mask.load(Ordering::Acquire);
        let mut copy: Option<T> = None;
        loop {
            if mask & bit == 0 {
                return Claim::Gone;
            }
            if mask == bit {
                // SAFETY: the only claim left is ours (invariant 3) and the
                // slot is not reused before the mask is 0. The mask is not
                // 0, so the payload is initialised.
                let value = slot.payload.with(|p| unsafe { (*p).assume_init_read() });
                // A clone taken before the other readers left is equal to
                // the original; the caller drops it after freeing the slot.
                return Claim::Last(value, copy);
            }
            if let (Some(clone), None) = (clone, &copy) {
                // SAFETY: our bit is set, so the payload is initialised and
                // is neither moved out (another reader moves it only when
                // its bit is the last) nor overwritten until we clear it.
                // Shared access only: other readers may clone it too.
                copy = Some(
                    slot.payload
                        .with(|p| clone(unsafe { (*p).assume_init_ref() })),
                );
            }
            // AcqRel: Release orders our clone before the last reader's move
            // and the slot's reuse; Acquire as for the load above.
            match slot.mask.compare_exchange_weak(
                mask,
                mask & !bit,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return copy.map_or(Claim::Released, Claim::Shared),
                Err(actual) => mask = actual,
            }
        }
    }

    /// [`Soa::claim`] under `Lag`, where an overwriting publisher may take
    /// the slot: readers register in the mask word's reader count while they
    /// touch the payload, and re-check the stamp after registering
    /// (invariant 4). A `covered` reader (inside a covered drain, invariant
    /// 8) that is not the last claim clones without registering.
    #[inline]
    fn claim_lag(
        &self,
        slot: &Slot<T>,
        x: u64,
        bit: u64,
        clone: Option<fn(&T) -> T>,
        covered: bool,
    ) -> Claim<T> {
        let mut mask = slot.mask.load(Ordering::Acquire);
        if covered && mask & bit != 0 && mask & BITS != bit {
            return self.read_covered(slot, bit, clone, mask);
        }
        loop {
            if mask & bit == 0 {
                return Claim::Gone;
            }
            let last = mask == bit;
            // Last claim: clear it and count ourselves, so neither another
            // reader nor the overwriting publisher touches the payload.
            // Otherwise just count ourselves; our bit stays until we cloned.
            let claimed = if last { ONE_READER } else { mask + ONE_READER };
            // Acquire: pairs with the Release of the publisher's mask writes
            // and of other readers' updates; see the re-check below.
            if let Err(actual) =
                slot.mask
                    .compare_exchange_weak(mask, claimed, Ordering::Acquire, Ordering::Acquire)
            {
                mask = actual;
                continue;
            }
            // The mask we changed may already belong to a later lap: an
            // overwrite stores the writing stamp before it takes the mask,
            // and we acquired the mask, so if the stamp is still `ready(x)`
            // the claim is on message `x`.
            if slot.stamp.load(Ordering::Acquire) != self.ready(x) {
                // Undo. While we are counted nobody else changes a
                // last-claim word, and a shared claim only needs our count
                // back.
                if last {
                    slot.mask.store(mask, Ordering::Release);
                } else {
                    slot.mask.fetch_sub(ONE_READER, Ordering::Release);
                }
                return Claim::Gone;
            }
            if last {
                // SAFETY: we cleared the last claim while counted, so no
                // reader will touch the payload and the overwriting
                // publisher waits for our count; the mask had a claim, so
                // the payload is initialised.
                let value = slot.payload.with(|p| unsafe { (*p).assume_init_read() });
                return Claim::Last(value, None);
            }
            // Uncounts us if `T::clone` panics; our bit stays, so the
            // message can be read again.
            let guard = Counted(&slot.mask);
            let copy = clone.map(|clone| {
                // SAFETY: our bit is set and we are counted, so the payload
                // is initialised and is neither moved out nor overwritten
                // until we leave. Shared access only.
                slot.payload
                    .with(|p| clone(unsafe { (*p).assume_init_ref() }))
            });
            std::mem::forget(guard);
            return self.leave(slot, bit, copy, claimed, true);
        }
    }

    /// A covered `Lag` reader that is not the last claim on message `x`
    /// (invariant 8): clones the payload without registering, then clears its
    /// bit. If the others left meanwhile, so that its bit is the last claim,
    /// it registers with the same compare-and-swap and takes the payload out
    /// (the caller delivers it and drops the clone).
    #[inline]
    fn read_covered(
        &self,
        slot: &Slot<T>,
        bit: u64,
        clone: Option<fn(&T) -> T>,
        mask: u64,
    ) -> Claim<T> {
        let copy = clone.map(|clone| {
            // SAFETY: the caller saw the ready stamp of `x` after its cover
            // was published (`cover`'s fence), so an overwriting publisher
            // of this slot fenced after us and its `covered_reader` sees our
            // cover and waits before it takes the mask or writes the payload
            // (invariant 8); our bit is set and only we clear it, so no
            // other reader moves the payload out (invariant 3). Shared
            // access only. A panicking clone leaves our bit set (the
            // message can be read again); the drain's guard ends the cover.
            slot.payload
                .with(|p| clone(unsafe { (*p).assume_init_ref() }))
        });
        self.leave(slot, bit, copy, mask, false)
    }

    /// A `Lag` reader with a shared claim leaves after its clone (if any):
    /// clears its bit, and its count if `counted` (`claim_lag`; a covered
    /// read, invariant 8, is not counted). If its bit was the last claim,
    /// it keeps (or takes) one count and takes the payload out, returned
    /// for the caller to drop, or delivered if it did not clone; the
    /// caller's `free_slot` clears the count. `mask` is the caller's last
    /// view of the word (a guess for the first compare-and-swap).
    fn leave(
        &self,
        slot: &Slot<T>,
        bit: u64,
        copy: Option<T>,
        mut mask: u64,
        counted: bool,
    ) -> Claim<T> {
        let own = if counted { ONE_READER } else { 0 };
        loop {
            // Only this subscriber clears its own bit (invariants 3 and 8).
            debug_assert!(mask & bit != 0, "a reader's bit was cleared by another");
            let last = mask & BITS == bit;
            // Last claim: one count (ours) while we take the payload out.
            let left = if last {
                mask - bit - own + ONE_READER
            } else {
                mask - bit - own
            };
            // AcqRel: Release orders our clone before the payload's move and
            // the slot's reuse; Acquire pairs with other readers' Release.
            match slot
                .mask
                .compare_exchange_weak(mask, left, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) if last => {
                    // SAFETY: we cleared the last claim while counted (so the
                    // overwriting publisher waits for our count, and for a
                    // covered read also for our cover), and the payload is
                    // initialised because it had a claim until now. Nothing
                    // else changes a word without claims except that
                    // publisher.
                    let value = slot.payload.with(|p| unsafe { (*p).assume_init_read() });
                    return Claim::Last(value, copy);
                }
                Ok(_) => return copy.map_or(Claim::Released, Claim::Shared),
                Err(actual) => mask = actual,
            }
        }
    }
}

/// What taking a claim gave.
enum Claim<T> {
    /// The last claim: the payload, moved out, and a clone taken before the
    /// claim became the last (equal to it; `None` if there was none). The
    /// caller stores mask 0 with [`Soa::free_slot`] and drops the spare only
    /// after that, so no `T::drop` runs while the slot is still claimed.
    Last(T, Option<T>),
    /// A clone; other claims remain.
    Shared(T),
    /// The claim was cleared without a clone (a departing subscriber).
    Released,
    /// No claim: the bit was not set, or the slot moved to a later lap.
    Gone,
}

impl<T: Clone> Soa<T> {
    /// One read for the subscriber with `bit` at `*next`.
    #[inline]
    pub(crate) fn read(&self, bit: u32, next: &mut u64, covered: bool) -> Step<T> {
        loop {
            if let Some(step) = self.read_at(1 << bit, next, covered) {
                return step;
            }
        }
    }

    /// One read attempt at `*next`; `None` if the message there does not
    /// carry `bit` and was skipped (then `*next` has advanced).
    #[inline(always)]
    fn read_at(&self, bit: u64, next: &mut u64, covered: bool) -> Option<Step<T>> {
        let x = *next;
        let slot = self.slot(x);
        // Acquire: pairs with the publisher's ready store.
        let stamp = slot.stamp.load(Ordering::Acquire);
        if stamp < self.ready(x) {
            return Some(Step::of(Read::Empty));
        }
        if stamp > self.ready(x) {
            return Some(Step::of(self.lagged(next, stamp)));
        }
        match self.claim(slot, x, bit, Some(T::clone), covered) {
            Claim::Last(value, spare) => {
                *next = x + 1;
                Some(Step {
                    read: Read::Message(value),
                    spare,
                    room: self.free_slot(slot),
                })
            }
            Claim::Shared(value) => {
                *next = x + 1;
                Some(Step::of(Read::Message(value)))
            }
            Claim::Released | Claim::Gone => {
                let stamp = slot.stamp.load(Ordering::Acquire);
                if stamp > self.ready(x) {
                    // Overwritten while we looked (`Lag`).
                    return Some(Step::of(self.lagged(next, stamp)));
                }
                // Not a member at `x`: invariant 2 makes this unreachable
                // for `x >= start`, and only this reader clears its own bit.
                // Skip the message without delivering or counting it.
                *next = x + 1;
                None
            }
        }
    }

    /// The lag report for a subscriber whose slot holds a later message
    /// (its `stamp`), invariant 5: repositions `next` to the oldest retained
    /// message.
    fn lagged(&self, next: &mut u64, stamp: u64) -> Read<T> {
        // The stamp names the message `y` the slot was reserved for, so the
        // tail is at least `y + 1` even if our read of it is older.
        let reserved = (stamp >> 1) - self.capacity + 1;
        // SeqCst: together with the bound above, the tail as far as this
        // thread can see it; a newer reservation only makes a later read
        // report more.
        let tail = self.tail.load(Ordering::SeqCst).max(reserved);
        let oldest = tail.saturating_sub(self.capacity);
        if oldest <= *next {
            // Unreachable: the slot holds `y >= next + capacity`, so
            // `oldest >= next + 1`. Report nothing rather than a wrong count.
            return Read::Empty;
        }
        let missed = oldest - *next;
        *next = oldest;
        Read::Lagged(missed)
    }
}

impl<T> Drop for Soa<T> {
    fn drop(&mut self) {
        for slot in self.slots.iter() {
            // Relaxed: `&mut self`, no other thread can access the ring.
            if slot.mask.load(Ordering::Relaxed) & BITS != 0 {
                // SAFETY: a mask with claims means the payload is
                // initialised, and nothing else can access it during drop.
                slot.payload
                    .with_mut(|p| unsafe { (*p).assume_init_drop() });
            }
        }
    }
}

/// A `Lag` reader counted in a slot's mask word; uncounts it on drop (used
/// only to unwind from a panicking `T::clone`).
struct Counted<'a>(&'a AtomicU64);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        // Release: our (aborted) payload access happens before the
        // overwriting publisher's Acquire of a count of zero.
        self.0.fetch_sub(ONE_READER, Ordering::Release);
    }
}

/// A pause of `hints` CPU spin hints: a delay, not a wait for another
/// thread, so it is the CPU's hint itself in both builds (under loom no
/// scheduling point: it adds no branch to the models). The one
/// spin hint in the crate not taken from `sync.rs` (see there).
#[inline]
fn delay(hints: u32) {
    for _ in 0..hints {
        std::hint::spin_loop();
    }
}

/// One step of a busy-wait for another thread's in-flight operation (a
/// publish between reservation and ready stamp, a `Lag` reader inside a
/// read, or a subscribe between setting its bit and its start): spins
/// first, then yields.
fn backoff(spins: &mut u32) {
    if *spins < SPINS_BEFORE_YIELD {
        *spins += 1;
        spin_loop();
    } else {
        yield_now();
    }
}
