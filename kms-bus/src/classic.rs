//! The Classic backend: a bounded ring of slots behind one mutex.
//!
//! This is the baseline: every operation takes the one lock, so its
//! correctness argument is sequential. Other backends are tested against the
//! same contract.
//!
//! # Algorithm
//!
//! Messages get consecutive sequence numbers `0, 1, 2, ...`; message `seq`
//! lives in slot `seq % capacity`. `tail` is the sequence number the next
//! message will get, so the ring holds at most the messages
//! `tail - capacity .. tail`. Each subscriber keeps its own `next` (the
//! sequence number it reads next; `next <= tail`). Each slot counts the
//! subscribers that have not read its message yet; the reader that brings
//! the count to zero moves the payload out, every earlier reader clones it.
//!
//! * Lag: a publish overwrites the slot of message `tail - capacity` even if
//!   it is unread. A subscriber whose `next` slot holds a newer sequence
//!   number has lost the messages `next .. tail - capacity`; it is told that
//!   count once and moves to `tail - capacity`, the oldest retained message.
//! * Reject: a publish whose slot still has readers is refused (`Full`).
//!
//! # Panics and poisoning
//!
//! The only user code run while the ring lock is held is `T::clone` (in a
//! read), and each read step clones *before* it changes any field. Payloads
//! that a publish overwrites or that a departing subscriber releases are
//! returned to the caller and dropped after the lock is released, so a
//! payload's `Drop` never runs under the lock (it may even use this topic).
//! Hence a panic under the lock leaves the ring consistent, and
//! [`lock`] may recover a poisoned guard.

use crate::config::Overflow;
use crate::error::RejectCause;
use crate::outcome::{Published, PublishedOne, Read, Step};
use crate::sync::{lock, AtomicUsize, Mutex, Ordering};

/// A Classic ring and its subscriber count.
pub(crate) struct Classic<T> {
    /// The ring. This is the only lock of a topic; no other lock is taken
    /// while it is held (the topic's `Notify` is signalled after release).
    ring: Mutex<Ring<T>>,
    /// Number of live subscribers (a count).
    ///
    /// Changed only while `ring` is locked, so a publish (which reads it
    /// under the same lock to set a slot's `remaining`) always sees the
    /// value that matches the subscribers' positions; `Relaxed` suffices
    /// because the mutex orders every write with every locked read. Reads
    /// without the lock ([`Classic::subscriber_count`]) are snapshots.
    subscribers: AtomicUsize,
    /// Number of publishers waiting for room in `publish_wait` (a count).
    ///
    /// Changed outside the lock; read under it by a read that frees a slot.
    /// A waiting publisher counts itself before it re-checks the ring under
    /// the lock, so either that re-check sees the freed slot or the freeing
    /// read (later in lock order) sees the count: `Relaxed` suffices because
    /// the ring lock orders the two critical sections.
    room_waiters: AtomicUsize,
}

/// The ring state protected by [`Classic::ring`].
struct Ring<T> {
    /// `capacity` slots (`capacity >= 1`, checked by `TopicConfig::validate`).
    /// Message `seq` is in `slots[seq % capacity]`.
    slots: Box<[Slot<T>]>,
    /// Sequence number of the next message to publish; equal to the number
    /// of messages published so far. Every slot holds a `seq < tail`, and
    /// the slots of `tail.saturating_sub(capacity) .. tail` hold exactly
    /// those messages. (`u64` does not wrap in practice: 2^64 messages.)
    tail: u64,
    /// Whether a publish into an unread slot overwrites it or is refused.
    overflow: Overflow,
}

/// One ring slot.
struct Slot<T> {
    /// Sequence number of the message last written here (meaningless while
    /// the slot was never written; then `remaining == 0`).
    seq: u64,
    /// Remaining number of subscribers that are expected to read this
    /// message and have not yet; when zero, the payload has been released.
    /// Invariant: `value.is_some() == (remaining > 0)`.
    remaining: usize,
    /// The payload, until its last reader moves it out or a Lag publish
    /// overwrites it.
    value: Option<T>,
}

impl<T> Classic<T> {
    /// An empty ring of `capacity` slots. `capacity` must be at least 1
    /// (checked by `TopicConfig::validate` before any topic is built).
    pub(crate) fn new(capacity: usize, overflow: Overflow) -> Self {
        let slots = (0..capacity)
            .map(|_| Slot {
                seq: 0,
                remaining: 0,
                value: None,
            })
            .collect();
        Self {
            ring: Mutex::new(Ring {
                slots,
                tail: 0,
                overflow,
            }),
            subscribers: AtomicUsize::new(0),
            room_waiters: AtomicUsize::new(0),
        }
    }

    /// Number of live subscribers (a snapshot).
    pub(crate) fn subscriber_count(&self) -> usize {
        self.subscribers.load(Ordering::Relaxed)
    }

    /// Registers a subscriber and returns its starting `next`: the tail, so
    /// it sees only messages published after this call.
    pub(crate) fn subscribe(&self) -> u64 {
        let ring = lock(&self.ring);
        // Relaxed: see the field docs; the ring lock is held.
        self.subscribers.fetch_add(1, Ordering::Relaxed);
        ring.tail
    }

    /// Unregisters a subscriber whose next unread message is `next`,
    /// releasing its claim on every message it has not read. Returns the
    /// payloads whose last claim this was, for the caller to drop after the
    /// lock is released, and whether publishers waiting for room must be
    /// woken.
    pub(crate) fn unsubscribe(&self, next: u64) -> (Vec<T>, bool) {
        let mut ring = lock(&self.ring);
        // Relaxed: see the field docs; the ring lock is held.
        self.subscribers.fetch_sub(1, Ordering::Relaxed);
        let mut released = Vec::new();
        // Messages before `tail - capacity` were overwritten, and their
        // claims with them; the ones after are all in the ring and all count
        // this subscriber, which existed when they were published.
        let start = next.max(ring.oldest());
        for seq in start..ring.tail {
            let slot = ring.slot_mut(seq);
            // By the `tail` invariant the slot holds `seq`, and it counts
            // this subscriber; the checks only keep a broken invariant from
            // underflowing the count.
            if slot.seq == seq && slot.remaining > 0 {
                slot.remaining -= 1;
                if slot.remaining == 0 {
                    released.extend(slot.value.take());
                }
            }
        }
        let room = !released.is_empty() && self.waiting(&ring);
        (released, room)
    }

    /// Whether a slot freed under `ring`'s lock must wake publishers
    /// waiting for room.
    fn waiting(&self, ring: &Ring<T>) -> bool {
        // Relaxed: see the field docs; the ring lock is held.
        ring.overflow == Overflow::Wait && self.room_waiters.load(Ordering::Relaxed) > 0
    }

    /// Counts a publisher waiting for room (see the field docs).
    pub(crate) fn start_waiting(&self) {
        self.room_waiters.fetch_add(1, Ordering::Relaxed);
    }

    /// Undoes [`Classic::start_waiting`].
    pub(crate) fn stop_waiting(&self) {
        self.room_waiters.fetch_sub(1, Ordering::Relaxed);
    }

    /// Publishes one message and asks for a wake-up.
    ///
    /// # Errors
    ///
    /// The message and why, if there is no subscriber or a `Reject`/`Wait`
    /// ring is full.
    pub(crate) fn publish_one(&self, msg: T) -> Result<PublishedOne<T>, (T, RejectCause)> {
        let mut ring = lock(&self.ring);
        // Relaxed: only changed under the ring lock, which is held.
        let receivers = self.subscribers.load(Ordering::Relaxed);
        let seq = ring.tail;
        let evicted = ring.push(msg, receivers)?;
        Ok(PublishedOne {
            seq,
            evicted,
            wake: true,
        })
    }

    /// Messages published so far (the ring's sequence count).
    pub(crate) fn sequence(&self) -> u64 {
        lock(&self.ring).tail
    }

    /// Whether message `next + ahead` (at most one lap ahead) has been
    /// published (a hint for `blocking_recv`).
    #[cfg_attr(kms_loom, allow(dead_code))]
    pub(crate) fn looks_ready(&self, next: u64, ahead: u64) -> bool {
        let ring = lock(&self.ring);
        ring.tail > next + ahead.min(ring.capacity() - 1)
    }

    /// Publishes `msgs` in order under one lock acquisition, stopping at
    /// the first message that cannot go in (no subscriber, or a full
    /// `Reject`/`Wait` ring). Every publish wakes parked subscribers.
    pub(crate) fn publish(&self, msgs: impl ExactSizeIterator<Item = T>) -> Published<T> {
        let mut outcome = Published {
            published: 0,
            end: 0,
            rejected: None,
            evicted: Vec::new(),
            wake: false,
        };
        let mut msgs = msgs;
        let mut ring = lock(&self.ring);
        // Relaxed: only changed under the ring lock, which is held for the
        // whole batch, so the count is the same for every message.
        let receivers = self.subscribers.load(Ordering::Relaxed);
        while let Some(msg) = msgs.next() {
            match ring.push(msg, receivers) {
                Ok(evicted) => {
                    outcome.published += 1;
                    outcome.evicted.extend(evicted);
                }
                Err((msg, cause)) => {
                    let mut rejected = Vec::with_capacity(1 + msgs.len());
                    rejected.push(msg);
                    rejected.extend(msgs);
                    outcome.rejected = Some((rejected, cause));
                    break;
                }
            }
        }
        outcome.wake = outcome.published > 0;
        outcome.end = ring.tail;
        outcome
    }
}

impl<T: Clone> Classic<T> {
    /// Reads the message at `*next` for one subscriber, advancing `*next`.
    pub(crate) fn read(&self, next: &mut u64) -> Step<T> {
        let mut ring = lock(&self.ring);
        let (read, freed) = ring.read(next);
        let room = freed && self.waiting(&ring);
        Step {
            read,
            spare: None,
            room,
        }
    }
}

impl<T> Ring<T> {
    /// Number of slots, as a sequence-number distance.
    fn capacity(&self) -> u64 {
        // `usize` fits in `u64` on every supported target, and the capacity
        // is at most 2^24 anyway.
        self.slots.len() as u64
    }

    /// Sequence number of the oldest message that can still be in the ring.
    fn oldest(&self) -> u64 {
        self.tail.saturating_sub(self.capacity())
    }

    /// The slot that holds (or held, or will hold) message `seq`.
    fn slot_mut(&mut self, seq: u64) -> &mut Slot<T> {
        // In bounds: `seq % capacity < capacity == slots.len()`, and the
        // remainder of a `u64` by a value that came from a `usize` fits in a
        // `usize`. `capacity >= 1`, so the remainder cannot divide by zero.
        let index = (seq % self.capacity()) as usize;
        &mut self.slots[index]
    }

    /// The slot that holds (or held, or will hold) message `seq`.
    fn slot(&self, seq: u64) -> &Slot<T> {
        // In bounds, as in `slot_mut`.
        let index = (seq % self.capacity()) as usize;
        &self.slots[index]
    }

    /// If a subscriber at `next` cannot read message `next` because it was
    /// overwritten, returns `(missed, resume)`: how many messages it missed
    /// (a count) and the sequence number it resumes at.
    fn lag(&self, next: u64) -> Option<(u64, u64)> {
        let oldest = self.oldest();
        // `next < tail - capacity`: message `next` and the ones after it up
        // to `oldest` were overwritten by Lag publishes.
        if next < oldest {
            return Some((oldest - next, oldest));
        }
        // By the `tail` invariant, for `oldest <= next < tail` the slot holds
        // message `next` with its payload (this subscriber has not read it),
        // so this branch is never taken. Were it taken, the message would be
        // reported as one missed message rather than a panic, so that
        // delivered + lagged still equals published.
        let slot = self.slot(next);
        if next < self.tail && (slot.seq != next || slot.value.is_none()) {
            return Some((1, next + 1));
        }
        None
    }

    /// Writes `msg` at the tail for `receivers` subscribers.
    fn push(&mut self, msg: T, receivers: usize) -> Result<Option<T>, (T, RejectCause)> {
        if receivers == 0 {
            return Err((msg, RejectCause::NoSubscribers));
        }
        let tail = self.tail;
        let overflow = self.overflow;
        let slot = self.slot_mut(tail);
        match overflow {
            // Overwrite: subscribers that had not read the old message find
            // `next < oldest` on their next read and are told their lag.
            Overflow::Lag => {}
            Overflow::Reject | Overflow::Wait => {
                if slot.remaining > 0 {
                    return Err((msg, RejectCause::Full));
                }
            }
        }
        let evicted = slot.value.replace(msg);
        slot.seq = tail;
        slot.remaining = receivers;
        self.tail = tail + 1;
        Ok(evicted)
    }
}

impl<T: Clone> Ring<T> {
    /// One read step for a subscriber at `*next`; also returns whether it
    /// freed the slot (it was the message's last reader).
    fn read(&mut self, next: &mut u64) -> (Read<T>, bool) {
        if *next >= self.tail {
            return (Read::Empty, false);
        }
        if let Some((missed, oldest)) = self.lag(*next) {
            *next = oldest;
            return (Read::Lagged(missed), false);
        }
        let seq = *next;
        let slot = self.slot_mut(seq);
        // `lag` returned `None`, so the slot holds `seq` with its payload
        // and counts this subscriber, which has not read it:
        // `remaining >= 1`. Clone first (user code that may panic), then
        // change state, so a panicking clone leaves the ring as it was.
        let msg = if slot.remaining <= 1 {
            // Last reader: move the payload out instead of cloning it.
            slot.value.take()
        } else {
            slot.value.clone()
        };
        *next = seq + 1;
        match msg {
            Some(msg) => {
                slot.remaining = slot.remaining.saturating_sub(1);
                (Read::Message(msg), slot.remaining == 0)
            }
            // Never taken: `lag` checked under this same lock that the
            // payload is present. Reported as one missed message if it were.
            None => (Read::Lagged(1), false),
        }
    }
}
