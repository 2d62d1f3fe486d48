//! [`CallerGate`]: the state the caller path (`coalesce.rs`) reads, shared by
//! every client of one actor.
//!
//! Invariants:
//! * At most one caller verifies on its own task at a time: the one whose
//!   compare-and-swap set `busy` ([`CallerGate::try_enter`]); it clears it
//!   when its [`Permit`] drops, whatever happened.
//! * `last` is read and written only by that caller, so its lock is never
//!   contended (it is a lock only because this crate has no `unsafe`).
//! * `outstanding` counts verify requests that the caller path refused
//!   (published to the actor, or queued for combining's leaders) whose
//!   callers are still waiting; a caller that gives up (drops its future)
//!   stops counting its request at once, so the count may briefly be lower
//!   than what is held, which only lets one more caller verify on its own
//!   task.
//!
//! `outstanding` and the first look at `busy` are hints that order no
//! other memory (`Relaxed`); the compare-and-swap on `busy` (Acquire) and
//! its clearing (Release) make each caller-side verification, and its
//! write of `last`, happen before the next one's read of `last`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use crate::dispatch::coalesce::{CallerView, Dispatch};

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct CallerGate {
    /// Verify requests published and not yet answered (count).
    outstanding: AtomicUsize,
    /// Set while a caller verifies on its own task.
    busy: AtomicBool,
    /// When the previous caller-side verification ended, and how many had
    /// run back to back up to it (each starting within the policy's quiet
    /// gap of the previous one's end); `None` before the first.
    last: Mutex<Option<(Instant, u32)>>,
}

impl CallerGate {
    /// Counts a verify request about to be published or queued until the
    /// returned guard drops (when its caller has its answer or gives up).
    pub(crate) fn publishing(&self) -> Outstanding<'_> {
        let before = self.outstanding.fetch_add(1, Ordering::Relaxed);
        Outstanding {
            gate: self,
            at_start: before + 1,
        }
    }

    /// Verify requests published or queued and not yet answered (count; a
    /// hint, see the module docs).
    pub(crate) fn outstanding(&self) -> usize {
        self.outstanding.load(Ordering::Relaxed)
    }

    /// The caller path: `Ok` if the caller verifies its `message_len`-byte
    /// request on its own task now; it holds the gate until the permit drops.
    ///
    /// # Errors
    /// Why the caller path refused: [`Refused::Run`] when only the run of
    /// back-to-back caller-side verifications did, [`Refused::Busy`]
    /// otherwise.
    pub(crate) fn try_enter(
        &self,
        dispatch: &Dispatch,
        message_len: usize,
    ) -> Result<Permit<'_>, Refused> {
        let first_look = CallerView {
            outstanding: self.outstanding.load(Ordering::Relaxed),
            gate_free: !self.busy.load(Ordering::Relaxed),
            since_last: None,
            streak: 0,
            message_len,
        };
        // The cheap conditions first: under load callers turn back here,
        // without writing the gate's cache line.
        if !dispatch.at_caller(first_look) {
            return Err(Refused::Busy);
        }
        // Acquire pairs with the Release in `Permit::drop`.
        if self
            .busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Err(Refused::Busy);
        }
        let last = *self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let since_last = last.map(|(ended, _)| ended.elapsed());
        let streak = last.map_or(0, |(_, streak)| streak);
        let view = CallerView {
            gate_free: true,
            since_last,
            streak,
            ..first_look
        };
        if !dispatch.at_caller(view) {
            // Refused: nothing ran, so `last` stays. Release: as in
            // `Permit::drop`.
            self.busy.store(false, Ordering::Release);
            return Err(Refused::Run);
        }
        let back_to_back = since_last.is_some_and(|gap| gap < dispatch.quiet_gap());
        Ok(Permit {
            gate: self,
            streak: if back_to_back { streak + 1 } else { 1 },
        })
    }
}

/// Why the caller path refused a caller ([`CallerGate::try_enter`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Something is outstanding, another caller verifies on its task, or
    /// the message is too long.
    Busy,
    /// The node is quiet but this call ends a run of back-to-back
    /// caller-side verifications: requests made together, which combining
    /// gathers into one batch.
    Run,
}

/// One verify request counted as outstanding ([`CallerGate::publishing`]).
pub(crate) struct Outstanding<'a> {
    gate: &'a CallerGate,
    /// The count once this one was added (a hint, see the module docs).
    at_start: usize,
}

impl Outstanding<'_> {
    /// Verify requests outstanding when this one was counted, itself
    /// included: combining's input, from the increment itself rather than a
    /// second look at the shared counter.
    pub(crate) fn outstanding(&self) -> usize {
        self.at_start
    }
}

impl Drop for Outstanding<'_> {
    fn drop(&mut self) {
        self.gate.outstanding.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The right to verify one request on the caller's task
/// ([`CallerGate::try_enter`]); dropping it records when that ended and
/// opens the gate.
pub(crate) struct Permit<'a> {
    gate: &'a CallerGate,
    /// The streak this verification makes (see `CallerGate::last`).
    streak: u32,
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        *self
            .gate
            .last
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some((Instant::now(), self.streak));
        // Release pairs with the Acquire of the next `try_enter`.
        self.gate.busy.store(false, Ordering::Release);
    }
}
