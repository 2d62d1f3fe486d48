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
//! * `run` is set by the caller that ends a streak (only if combining is
//!   on) and cleared by a leader that led alone and verified only its own
//!   request ([`CallerGate::end_run`]); while it is set the caller path
//!   refuses everyone, and combining gathers.
//!
//! `outstanding`, `run` and the first look at `busy` are hints that order
//! no other memory (`Relaxed`): a stale `run` sends one caller down the
//! other path, which answers it all the same. The compare-and-swap on
//! `busy` (Acquire) and its clearing (Release) make each caller-side
//! verification, and its write of `last`, happen before the next one's
//! read of `last`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::dispatch::coalesce::{CallerView, Dispatch};

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct CallerGate {
    /// Verify requests published and not yet answered (count).
    outstanding: AtomicUsize,
    /// Set while a caller verifies on its own task.
    busy: AtomicBool,
    /// Set while the node is in a run (`coalesce.rs`).
    run: AtomicBool,
    /// The previous caller-side verification; `None` before the first.
    last: Mutex<Option<Last>>,
}

/// What the caller path remembers of the previous caller-side
/// verification.
#[derive(Debug, Clone, Copy)]
struct Last {
    /// When it ended.
    ended: Instant,
    /// How many had run back to back up to it (each starting within the
    /// quiet gap of the previous one's end).
    streak: u32,
    /// What a caller-side verification costs: an average over the recent
    /// ones, each weighing [`COST_WEIGHT`] of it.
    cost: Duration,
}

/// The weight of each new caller-side verification's duration in the
/// cost average (1/8: a preempted verification moves it by an eighth of
/// its excess).
const COST_WEIGHT: u32 = 8;

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

    /// Ends the run (module docs): a leader that led alone verified only
    /// its own request.
    pub(crate) fn end_run(&self) {
        self.run.store(false, Ordering::Relaxed);
    }

    /// The caller path: `Ok` if the caller verifies its `message_len`-byte
    /// request on its own task now; it holds the gate until the permit drops.
    ///
    /// # Errors
    /// Why the caller path refused: [`Refused::Run`] while the node is in
    /// a run or when this call ends a streak of back-to-back caller-side
    /// verifications, [`Refused::Busy`] otherwise.
    pub(crate) fn try_enter(
        &self,
        dispatch: &Dispatch,
        message_len: usize,
    ) -> Result<Permit<'_>, Refused> {
        let first_look = CallerView {
            outstanding: self.outstanding.load(Ordering::Relaxed),
            gate_free: !self.busy.load(Ordering::Relaxed),
            run: self.run.load(Ordering::Relaxed),
            since_last: None,
            verify_cost: Duration::ZERO,
            streak: 0,
            message_len,
        };
        let refused = if first_look.run && dispatch.combines() {
            Refused::Run
        } else {
            Refused::Busy
        };
        // The cheap conditions first: under load callers turn back here,
        // without writing the gate's cache line.
        if !dispatch.at_caller(first_look) {
            return Err(refused);
        }
        // Acquire pairs with the Release in `Permit::drop`.
        if self
            .busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Err(refused);
        }
        let last = *self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let since_last = last.map(|last| last.ended.elapsed());
        let verify_cost = last.map_or(Duration::ZERO, |last| last.cost);
        let streak = last.map_or(0, |last| last.streak);
        let view = CallerView {
            gate_free: true,
            since_last,
            verify_cost,
            streak,
            ..first_look
        };
        if !dispatch.at_caller(view) {
            // A streak ended: requests made together or under steady load.
            // Combining gathers them from now on, until a lead finds no
            // company. Nothing ran, so `last` stays. Release: as in
            // `Permit::drop`.
            if dispatch.combines() {
                self.run.store(true, Ordering::Relaxed);
            }
            self.busy.store(false, Ordering::Release);
            return Err(Refused::Run);
        }
        let streak = if dispatch.back_to_back(since_last, verify_cost) {
            streak + 1
        } else {
            1
        };
        Ok(Permit {
            gate: self,
            streak,
            cost: last.map(|last| last.cost),
            started: Instant::now(),
        })
    }
}

/// Why the caller path refused a caller ([`CallerGate::try_enter`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Something is outstanding, another caller verifies on its task, or
    /// the message is too long.
    Busy,
    /// The node is in a run, or this call ends a streak of back-to-back
    /// caller-side verifications: requests made together or under steady
    /// load, which combining gathers into batches.
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
    /// The streak this verification makes (see `Last::streak`).
    streak: u32,
    /// The cost average before this verification (`None`: the first).
    cost: Option<Duration>,
    /// When the permit was given: the verification's start.
    started: Instant,
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let ended = Instant::now();
        let took = ended.duration_since(self.started);
        let cost = match self.cost {
            // cost + (took - cost) / COST_WEIGHT, in whole nanoseconds.
            Some(cost) => cost.saturating_mul(COST_WEIGHT - 1).saturating_add(took) / COST_WEIGHT,
            None => took,
        };
        *self
            .gate
            .last
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Last {
            ended,
            streak: self.streak,
            cost,
        });
        // Release pairs with the Acquire of the next `try_enter`.
        self.gate.busy.store(false, Ordering::Release);
    }
}
