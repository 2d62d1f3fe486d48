//! The dispatch rules of docs/DESIGN.md §5 ([`Dispatch`]), as pure
//! functions of what the actor sees: how many verify requests are pending,
//! how long the oldest has waited, and how many batches are in flight on
//! the pool; and of what a caller sees before it publishes a verify
//! request. Each path a request takes is named as the `reason` of its
//! dispatch event ([`Reason`]): `caller`, `combined`, `inline`,
//! `idle_thread`, `target_batch`, `max_wait`, `shutdown`. ("Rule 1-4" in
//! this crate's docs means the verification rules of docs/DESIGN.md §3.2
//! alone.)
//!
//! The caller path ([`Reason::Caller`], [`Dispatch::at_caller`], if
//! `KmsConfig::verify_on_caller_when_idle`): the caller verifies on its own
//! task, with no hop at all, when its request is alone on a quiet node:
//! nothing is outstanding at the actor (published and not yet answered),
//! no other caller is verifying on its own task, the message is at most
//! [`INLINE_MAX_MESSAGE`] bytes, the node is not in a run, and the
//! caller-side verifications before it were not a run of
//! [`CALLER_MAX_STREAK`] back to back (each starting within
//! [`CALLER_QUIET_RATIO`] times the measured cost of one caller-side
//! verification after the previous one's end). No rule names a duration:
//! on a core where a verification costs five times as much, the gap that
//! counts as quiet is five times as long.
//!
//! The run keeps batching: requests made together (tasks woken in one
//! wave on one worker, or many calls joined in one task), or made under
//! steady load (many clients, each request verified before the next is
//! read), reach the client one after another, each finding the previous
//! one done. After a short streak the next caller is refused and the node
//! enters a run (if combining is on): from then on every caller goes to
//! combining and gathers, so what the tasks ready on its worker ask joins
//! one batch. The run ends when a leader, leading alone, verified only its
//! own request: the gather found no company, the load has gone. One client
//! calling back to back pays one gather per `CALLER_MAX_STREAK + 1`
//! requests; requests that arrive apart never form a streak. Without
//! combining, a caller that ends a streak is published, and the actor's
//! rules apply.
//!
//! Combining ([`Reason::Combined`], [`Dispatch::at_combine`], if
//! `KmsConfig::combine_max` is not 0): when the caller path refuses, a
//! caller puts its request on the combining queue (`combine.rs`) and
//! leads, joins or publishes.
//! * It leads when fewer callers lead than the pool has threads: it
//!   verifies what is queued in batches on its own task, again while the
//!   queue holds more, until it has verified `combine_max` signatures
//!   ([`Dispatch::combine_take`]), all in one poll: a lead is never held
//!   across an `.await`, so no request waits on another caller's future.
//!   While another lead is free and another caller is gathering, its
//!   first batch is the larger half of what it may take ([`SHARE_FROM`]):
//!   a gatherer on another worker may lead the rest at the same time, or
//!   this leader takes it next.
//! * It gathers instead when the node is in a run or its call ended a
//!   streak (requests made together, or steady load), when requests are already
//!   queued (another caller is gathering: join its gathering), or when
//!   more than [`GATHER_FACTOR`] requests per thread are outstanding: its
//!   request queued, it lets the tasks ready on its worker run once, so
//!   that what they ask is queued too, then leads if a lead is free and
//!   its own request is still queued (the first to resume takes what the
//!   others queued, or the larger half of it, as above). Otherwise it
//!   leads at once, so that at low concurrency each worker verifies its
//!   own callers' requests, as inline verification would.
//! * It joins (waits for a leader's answer) when every lead is taken.
//! * It publishes to the actor, which batches for the pool, when the
//!   queue already holds what the leaders can take (`threads ·
//!   combine_max`), the node is flooded (more than [`FLOOD_FACTOR`] times
//!   that outstanding), or the message is longer than
//!   [`INLINE_MAX_MESSAGE`]: floods and long messages go to the pool, the
//!   home of large batches.
//!
//! The last leader to leave publishes what is left on the queue (the
//! hand-off), so no request waits on a leader that has gone.
//!
//! The actor's paths, in order (the first that holds dispatches every
//! pending request as one batch; [`Dispatch::decide`]):
//! * [`Reason::Inline`] (if `KmsConfig::inline_when_idle`): one request
//!   pending, of at most [`INLINE_MAX_MESSAGE`] bytes, nothing in flight,
//!   and no other request outstanding (published and not yet read, or
//!   queued for combining: on a runtime of one worker, callers publish one
//!   at a time between the actor's wakes, and the inline path would verify
//!   a flood one by one). The actor verifies it on its own task: a quiet
//!   node pays no wake-up of a parked pool thread, and the actor's task is
//!   held for one short verification (a priority request waits at most
//!   that). Under load (more pending, or anything in flight) or for a
//!   longer message the paths below apply.
//! * [`Reason::IdleThread`]: fewer batches in flight than pool threads. At
//!   low load a lone request goes out at once; nothing waits for a batch
//!   to fill.
//! * [`Reason::TargetBatch`]: `target_batch` requests are pending and
//!   fewer than [`Dispatch::queue_limit`] batches are in flight, so one
//!   batch at most waits queued behind each busy thread and a thread that
//!   frees up starts the next batch without a round trip through the
//!   actor.
//! * [`Reason::MaxWait`]: the oldest pending request has waited
//!   `max_wait`. This dispatches even past the queue limit; that overshoot
//!   is bounded by one batch, because the actor reads nothing while the
//!   queue is full.
//!
//! A dispatched batch is split into [`Dispatch::chunks`] jobs, one per idle
//! pool thread, each of at least [`MIN_CHUNK_ITEMS`] requests; each chunk
//! counts as one job in flight. The actor is the one owner of
//! parallelism: `kms_core::ed25519::verify_batch` runs on the thread that
//! calls it and never forks, so a job in flight occupies exactly one pool
//! thread and "fewer jobs in flight than threads" means a thread is idle.
//!
//! Invariants: pending never exceeds `max_batch` (the actor reads at most
//! the room left, [`Dispatch::room`]); batches in flight never exceed
//! `queue_limit + 1`; so the memory the actor holds is bounded by
//! `(queue_limit + 2) · max_batch` requests plus the topic's capacity.

use std::time::Duration;

use crate::config::KmsConfig;

/// Longest message (bytes) the inline path verifies on the actor's task:
/// hashing it costs ~2 µs on top of the ~20 µs of the curve arithmetic, so
/// the actor's task is held briefly; a longer message goes to the pool.
pub(crate) const INLINE_MAX_MESSAGE: usize = 1024;

/// How soon after a caller-side verification ended the next must start to
/// count as back to back (the caller path), in multiples of what a
/// caller-side verification has been costing on this machine (measured,
/// `CallerGate`): calls made together reach the client within a few µs of
/// each other, and a client under steady load comes back after its other
/// work per request, which for an HTTP request costs about one to two
/// verifications (docs/PERFORMANCE.md, "Where the CPU goes"); 4 leaves
/// room for another process sharing the cores. A ratio, not a duration,
/// so the rule holds on a core of any speed.
pub(crate) const CALLER_QUIET_RATIO: u32 = 4;

/// Longest run of back-to-back caller-side verifications (the caller path): the
/// next request is published. 8 bounds what a burst pays before it is
/// batched (8 verifications, ~160 µs, one after another) while one client
/// calling back to back still verifies 8 in 9 on its own task.
pub(crate) const CALLER_MAX_STREAK: u32 = 8;

/// What a caller sees before it publishes a verify request: the inputs of
/// the caller path ([`Dispatch::at_caller`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallerView {
    /// Verify requests published to the actor and not yet answered.
    pub(crate) outstanding: usize,
    /// Whether no other caller is verifying on its own task now.
    pub(crate) gate_free: bool,
    /// Whether the node is in a run: callers have been arriving back to
    /// back, and combining's gathers have been finding company (module
    /// docs).
    pub(crate) run: bool,
    /// How long ago the previous caller-side verification ended (`None`:
    /// there was none).
    pub(crate) since_last: Option<Duration>,
    /// What a caller-side verification has been costing (measured; zero
    /// before the first).
    pub(crate) verify_cost: Duration,
    /// How many caller-side verifications ran back to back up to the
    /// previous one.
    pub(crate) streak: u32,
    /// The message's length (bytes).
    pub(crate) message_len: usize,
}

/// What a caller sees when the caller path refused it: the inputs of combining
/// ([`Dispatch::at_combine`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CombineView {
    /// Requests on the combining queue, not yet taken by a leader.
    pub(crate) queued: usize,
    /// Callers leading now (verifying, or about to, on their own tasks).
    pub(crate) leaders: usize,
    /// Verify requests outstanding (published or queued, not answered),
    /// this one included.
    pub(crate) outstanding: usize,
    /// Whether the caller path refused this caller because the node is in
    /// a run, or because this call ended one (requests made together, or
    /// steady load).
    pub(crate) run: bool,
    /// The message's length (bytes).
    pub(crate) message_len: usize,
}

/// Combining's answer for one caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Combine {
    /// Queue the request and lead now: verify what is queued on this task.
    Lead,
    /// Queue the request, let the tasks ready on this worker run once (so
    /// that what they ask is queued too), then lead if a lead is free and
    /// something is still queued ([`Dispatch::lead_free`]).
    Gather,
    /// Queue the request; a leader verifies it.
    Join,
    /// Publish the request to the actor.
    Publish,
}

/// Combining: a leader gathers (lets the tasks ready on its worker queue
/// their requests first) when it ends a run of back-to-back caller-side
/// verifications (the caller path's run: requests made together), or when more
/// than this many requests per pool thread are outstanding; with fewer,
/// a batch would gain little over
/// verifying each alone (2 per thread: 51 k/s against 57 k/s on 2
/// threads, `benches/actor/main.rs`) and would run on one worker while the
/// other idles.
pub(crate) const GATHER_FACTOR: usize = 2;

/// Combining: a leader's first take of this many requests or more, while
/// another lead is free and another caller is gathering, is shared: it
/// takes the larger half and leaves the rest to a gatherer that may be
/// on another worker ([`Dispatch::combine_take`]). Otherwise the first
/// caller to resume from its gather takes what every worker's callers
/// queued, and the other workers, their callers all waiting on that one
/// batch, idle until it is verified. At 16 clients on 2 threads
/// `actor/concurrency`'s median ratio to the best comparator is
/// 0.87–0.91 with the share and 0.83–0.86 without (docs/PERFORMANCE.md,
/// "Actor: figures the code rests on").
pub(crate) const SHARE_FROM: usize = 4;

/// Combining: with more than this many times `threads · combine_max` requests
/// outstanding, the node is flooded and the pool's larger batches cost
/// less per signature than a leader's (512 per thread: 12.4 µs against
/// ~15 µs at 64, `benches/actor/main.rs`): every request is published.
pub(crate) const FLOOD_FACTOR: usize = 4;

/// Fewest requests worth a pool thread of their own: below this the fixed
/// cost of a second combination and of a second job outweighs the gain
/// (the split threshold kms-core's batch verification used when it split
/// batches itself; `benches/batch_verify/main.rs`).
pub(crate) const MIN_CHUNK_ITEMS: usize = 32;

/// Why a batch was dispatched; a label on the `tracing` event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    /// The caller path: a request on a quiet node, verified on its caller's
    /// task (never published; a batch of one).
    Caller,
    /// A lone request with the pool idle, verified on the actor's task.
    Inline,
    /// A pool thread was idle.
    IdleThread,
    /// `target_batch` requests were pending.
    TargetBatch,
    /// The oldest pending request had waited `max_wait`.
    MaxWait,
    /// Combining: what was on the combining queue, verified on a leading
    /// caller's task (never published).
    Combined,
    /// The actor is shutting down and answers what it holds.
    Shutdown,
}

impl Reason {
    /// Every reason, in declaration order (`reason as usize` is its
    /// index here).
    pub(crate) const ALL: [Reason; 7] = [
        Reason::Caller,
        Reason::Inline,
        Reason::IdleThread,
        Reason::TargetBatch,
        Reason::MaxWait,
        Reason::Combined,
        Reason::Shutdown,
    ];

    /// The label used in `tracing` events and as the `reason` label of
    /// `kms_dispatch_total` and `kms_dispatch_items_total`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Reason::Caller => "caller",
            Reason::Inline => "inline",
            Reason::IdleThread => "idle_thread",
            Reason::TargetBatch => "target_batch",
            Reason::MaxWait => "max_wait",
            Reason::Combined => "combined",
            Reason::Shutdown => "shutdown",
        }
    }
}

/// The dispatch rules (module docs), with the numbers they need from
/// [`KmsConfig`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dispatch {
    inline: bool,
    on_caller: bool,
    /// `None`: the quiet gap is [`CALLER_QUIET_RATIO`] times the measured
    /// verification cost. A fixed gap only in tests that must not depend
    /// on how fast the machine runs.
    quiet_gap: Option<Duration>,
    threads: usize,
    combine_max: usize,
    target_batch: usize,
    max_batch: usize,
    max_wait: Duration,
}

impl Dispatch {
    pub(crate) fn new(config: &KmsConfig) -> Self {
        Dispatch {
            inline: config.inline_when_idle,
            on_caller: config.verify_on_caller_when_idle,
            quiet_gap: None,
            threads: config.threads,
            combine_max: config.combine_max,
            target_batch: config.target_batch,
            max_batch: config.max_batch,
            max_wait: config.max_wait,
        }
    }

    /// Longest a request is held before dispatch.
    pub(crate) fn max_wait(&self) -> Duration {
        self.max_wait
    }

    /// Batches in flight (running or queued on the pool) beyond which the
    /// actor neither reads nor dispatches by size: one queued per thread.
    pub(crate) fn queue_limit(&self) -> usize {
        self.threads.saturating_mul(2)
    }

    /// The caller path: whether a caller verifies its request on its own task
    /// instead of publishing it (module docs).
    pub(crate) fn at_caller(&self, view: CallerView) -> bool {
        self.on_caller
            && view.outstanding == 0
            && view.gate_free
            && !(view.run && self.combines())
            && view.message_len <= INLINE_MAX_MESSAGE
            && (view.streak < CALLER_MAX_STREAK
                || !self.back_to_back(view.since_last, view.verify_cost))
    }

    /// Whether a caller-side verification starting `since_last` after the
    /// previous one ended is back to back with it, when one has been
    /// costing `verify_cost`: within [`CALLER_QUIET_RATIO`] times that
    /// cost (or the fixed gap tests set).
    pub(crate) fn back_to_back(&self, since_last: Option<Duration>, verify_cost: Duration) -> bool {
        let gap = self
            .quiet_gap
            .unwrap_or_else(|| verify_cost.saturating_mul(CALLER_QUIET_RATIO));
        since_last.is_some_and(|since| since < gap)
    }

    /// Whether combining is on (`combine_max` is not 0): only then does a
    /// run refuse the caller path, since only combining's leads end one.
    pub(crate) fn combines(&self) -> bool {
        self.combine_max > 0
    }

    /// Combining: whether a caller that the caller path refused leads, joins or
    /// publishes (module docs).
    pub(crate) fn at_combine(&self, view: CombineView) -> Combine {
        let share = self.threads.saturating_mul(self.combine_max);
        if self.combine_max == 0
            || view.message_len > INLINE_MAX_MESSAGE
            || view.queued >= share
            || view.outstanding > FLOOD_FACTOR.saturating_mul(share)
        {
            Combine::Publish
        } else if !self.lead_free(view.leaders) {
            Combine::Join
        } else if view.run
            || view.queued > 0
            || view.outstanding > GATHER_FACTOR.saturating_mul(self.threads)
        {
            Combine::Gather
        } else {
            Combine::Lead
        }
    }

    /// Combining: whether a caller may lead while `leaders` callers do (fewer
    /// than the pool has threads).
    pub(crate) fn lead_free(&self, leaders: usize) -> bool {
        leaders < self.threads
    }

    /// Combining: how many of the `queued` requests a leader that has
    /// verified `taken` already takes next (0: it leaves), while `leaders`
    /// callers lead (this one included) and `gathering` callers are yet to
    /// resume from their gathers. Its first take, while another lead is
    /// free and another caller is gathering, leaves the smaller half of a
    /// take of [`SHARE_FROM`] or more, so that a gatherer on another worker
    /// may lead it at the same time; what nobody else takes, it takes next.
    pub(crate) fn combine_take(
        &self,
        queued: usize,
        taken: usize,
        leaders: usize,
        gathering: usize,
    ) -> usize {
        let n = queued.min(self.combine_max.saturating_sub(taken));
        if taken == 0 && self.lead_free(leaders) && gathering > 0 && n >= SHARE_FROM {
            n.div_ceil(2)
        } else {
            n
        }
    }

    /// These rules with a fixed quiet gap: tests of the caller path use a
    /// wide one, so their outcome does not depend on the machine's speed.
    #[cfg(any(test, feature = "test-hooks"))]
    pub(crate) fn with_quiet_gap(self, quiet_gap: Duration) -> Self {
        Dispatch {
            quiet_gap: Some(quiet_gap),
            ..self
        }
    }

    /// Whether to dispatch the `pending` requests now, and why.
    /// `oldest_wait` is how long the oldest of them has waited;
    /// `first_len` is the length in bytes of the first pending message;
    /// `outstanding` counts the verify requests callers wait for (the
    /// pending ones included; `CallerGate::outstanding`).
    pub(crate) fn decide(
        &self,
        pending: usize,
        oldest_wait: Duration,
        in_flight: usize,
        first_len: usize,
        outstanding: usize,
    ) -> Option<Reason> {
        if pending == 0 {
            None
        } else if self.inline
            && pending == 1
            && in_flight == 0
            && outstanding <= 1
            && first_len <= INLINE_MAX_MESSAGE
        {
            Some(Reason::Inline)
        } else if in_flight < self.threads {
            Some(Reason::IdleThread)
        } else if pending >= self.target_batch && in_flight < self.queue_limit() {
            Some(Reason::TargetBatch)
        } else if oldest_wait >= self.max_wait {
            Some(Reason::MaxWait)
        } else {
            None
        }
    }

    /// How many jobs to split a batch of `n` requests into when
    /// `in_flight` jobs are running or queued: one per idle thread, each of
    /// at least [`MIN_CHUNK_ITEMS`] requests, and at least one.
    pub(crate) fn chunks(&self, n: usize, in_flight: usize) -> usize {
        let idle = self.threads.saturating_sub(in_flight);
        idle.min(n / MIN_CHUNK_ITEMS).max(1)
    }

    /// The sizes of the `chunks` jobs a batch of `n` requests is cut into,
    /// in order: they differ by at most one and add up to `n`; none is
    /// empty when `1 <= chunks <= n`.
    pub(crate) fn chunk_sizes(n: usize, chunks: usize) -> impl Iterator<Item = usize> {
        let chunks = chunks.max(1);
        (0..chunks).map(move |i| n / chunks + usize::from(i < n % chunks))
    }

    /// How many more requests the actor may read now: the room left under
    /// `max_batch`, or 0 while the pool's queue is full (backpressure: the
    /// request topic fills, and a `Reject` topic answers `Overloaded`).
    pub(crate) fn room(&self, pending: usize, in_flight: usize) -> usize {
        if in_flight >= self.queue_limit() {
            0
        } else {
            self.max_batch.saturating_sub(pending)
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn every_reason_is_listed_at_its_own_index() {
        for (i, reason) in Reason::ALL.into_iter().enumerate() {
            assert_eq!(reason as usize, i, "{}", reason.as_str());
        }
    }

    const MS: Duration = Duration::from_millis(1);

    /// The combining rules on `threads` threads with leads of at most
    /// `combine_max` signatures, the rest of the configuration default.
    pub(crate) fn combining(threads: usize, combine_max: usize) -> Dispatch {
        Dispatch::new(&KmsConfig {
            threads,
            combine_max,
            ..KmsConfig::default()
        })
    }

    /// The pool's paths alone (neither inline nor the caller path).
    fn dispatch() -> Dispatch {
        Dispatch::new(&KmsConfig {
            inline_when_idle: false,
            verify_on_caller_when_idle: false,
            threads: 2,
            target_batch: 64,
            max_batch: 256,
            max_wait: MS,
            ..KmsConfig::default()
        })
    }

    #[test]
    fn a_lone_request_on_an_idle_pool_is_verified_inline() {
        let p = Dispatch::new(&KmsConfig {
            threads: 2,
            ..KmsConfig::default()
        });
        assert_eq!(p.decide(1, Duration::ZERO, 0, 0, 1), Some(Reason::Inline));
        assert_eq!(
            p.decide(2, Duration::ZERO, 0, 0, 1),
            Some(Reason::IdleThread),
            "two pending: the pool"
        );
        assert_eq!(
            p.decide(1, Duration::ZERO, 1, 0, 1),
            Some(Reason::IdleThread),
            "a batch in flight: the pool"
        );
        assert_eq!(p.decide(0, Duration::ZERO, 0, 0, 1), None);
        assert_eq!(
            p.decide(1, Duration::ZERO, 0, INLINE_MAX_MESSAGE + 1, 1),
            Some(Reason::IdleThread),
            "a long message: the pool"
        );
        assert_eq!(
            p.decide(1, Duration::ZERO, 0, INLINE_MAX_MESSAGE, 1),
            Some(Reason::Inline)
        );
        assert_eq!(
            p.decide(1, Duration::ZERO, 0, 0, 2),
            Some(Reason::IdleThread),
            "another request outstanding: load, the pool"
        );
    }

    const COST: Duration = Duration::from_micros(50);

    fn quiet() -> CallerView {
        CallerView {
            outstanding: 0,
            gate_free: true,
            run: false,
            since_last: None,
            verify_cost: COST,
            streak: 0,
            message_len: 100,
        }
    }

    #[test]
    fn a_caller_verifies_on_its_own_task_only_when_the_node_is_quiet() {
        let p = Dispatch::new(&KmsConfig::default());
        assert!(p.at_caller(quiet()));
        assert!(p.at_caller(CallerView {
            message_len: INLINE_MAX_MESSAGE,
            ..quiet()
        }));
        assert!(
            !p.at_caller(CallerView {
                outstanding: 1,
                ..quiet()
            }),
            "the actor has work: join its batch"
        );
        assert!(
            !p.at_caller(CallerView {
                gate_free: false,
                ..quiet()
            }),
            "another caller is verifying on its task"
        );
        // Three verifications' time apart on a core where one costs 50 µs:
        // back to back (a request's other work comes between them).
        let soon = Some(COST * 3);
        assert!(
            p.at_caller(CallerView {
                since_last: soon,
                streak: CALLER_MAX_STREAK - 1,
                ..quiet()
            }),
            "a short run of back-to-back calls"
        );
        assert!(
            !p.at_caller(CallerView {
                since_last: soon,
                streak: CALLER_MAX_STREAK,
                ..quiet()
            }),
            "a long run: a burst, published"
        );
        assert!(
            p.at_caller(CallerView {
                since_last: Some(COST * CALLER_QUIET_RATIO),
                streak: CALLER_MAX_STREAK,
                ..quiet()
            }),
            "after a pause the run is over"
        );
        assert!(
            !p.at_caller(CallerView {
                since_last: Some(COST * CALLER_QUIET_RATIO),
                streak: CALLER_MAX_STREAK,
                verify_cost: COST * 2,
                ..quiet()
            }),
            "on a core twice as slow the same pause is back to back"
        );
        assert!(
            !p.at_caller(CallerView {
                run: true,
                ..quiet()
            }),
            "in a run: combining gathers"
        );
        let no_combining = Dispatch::new(&KmsConfig {
            combine_max: 0,
            ..KmsConfig::default()
        });
        assert!(
            no_combining.at_caller(CallerView {
                run: true,
                ..quiet()
            }),
            "without combining a run refuses nothing (none could end it)"
        );
        assert!(!p.at_caller(CallerView {
            message_len: INLINE_MAX_MESSAGE + 1,
            ..quiet()
        }));
        assert!(
            !dispatch().at_caller(quiet()),
            "verify_on_caller_when_idle off"
        );
    }

    #[test]
    fn under_load_callers_lead_up_to_one_per_thread_then_join_then_publish() {
        let p = combining(2, 16);
        let view = |queued, leaders, message_len| CombineView {
            queued,
            leaders,
            outstanding: queued + 1,
            run: false,
            message_len,
        };
        let lead = Combine::Lead;
        let gather = Combine::Gather;
        assert_eq!(p.at_combine(view(0, 0, 64)), lead);
        assert_eq!(p.at_combine(view(5, 1, 64)), gather);
        assert_eq!(p.at_combine(view(5, 2, 64)), Combine::Join);
        assert_eq!(p.at_combine(view(31, 2, 64)), Combine::Join);
        assert_eq!(
            p.at_combine(view(32, 2, 64)),
            Combine::Publish,
            "the leaders have all they can take: the pool"
        );
        assert_eq!(
            p.at_combine(view(0, 0, INLINE_MAX_MESSAGE + 1)),
            Combine::Publish,
            "a long message: the pool"
        );
        assert_eq!(p.at_combine(view(0, 0, INLINE_MAX_MESSAGE)), lead);
        assert_eq!(
            p.at_combine(CombineView {
                outstanding: 4,
                ..view(0, 0, 64)
            }),
            lead,
            "2 per thread: each verified alone, no gathering"
        );
        assert_eq!(
            p.at_combine(CombineView {
                run: true,
                ..view(0, 0, 64)
            }),
            gather,
            "the end of a run of calls made together: gather them"
        );
        assert_eq!(
            p.at_combine(CombineView {
                outstanding: 2,
                ..view(1, 0, 64)
            }),
            gather,
            "another caller is gathering: join its gathering"
        );
        assert_eq!(
            p.at_combine(CombineView {
                outstanding: 5,
                ..view(0, 0, 64)
            }),
            gather
        );
        let flood = FLOOD_FACTOR * 2 * 16;
        assert_eq!(
            p.at_combine(CombineView {
                outstanding: flood,
                ..view(0, 0, 64)
            }),
            gather
        );
        assert_eq!(
            p.at_combine(CombineView {
                outstanding: flood + 1,
                ..view(0, 0, 64)
            }),
            Combine::Publish,
            "a flood: the pool"
        );
        let off = Dispatch::new(&KmsConfig {
            combine_max: 0,
            ..KmsConfig::default()
        });
        assert_eq!(off.at_combine(view(0, 0, 64)), Combine::Publish);
    }

    #[test]
    fn a_leader_verifies_at_most_combine_max_in_all() {
        let p = combining(2, 16);
        // Every lead taken (2 threads, 2 leaders): no share is left.
        assert_eq!(p.combine_take(3, 0, 2, 1), 3);
        assert_eq!(p.combine_take(40, 0, 2, 1), 16);
        assert_eq!(p.combine_take(40, 10, 2, 1), 6);
        assert_eq!(p.combine_take(40, 16, 2, 1), 0);
        assert_eq!(p.combine_take(0, 4, 2, 1), 0);
    }

    #[test]
    fn a_first_take_leaves_half_for_a_free_lead() {
        let p = combining(2, 16);
        // One leader of two threads, one caller gathering: its first take
        // leaves the smaller half.
        assert_eq!(p.combine_take(9, 0, 1, 1), 5);
        assert_eq!(p.combine_take(SHARE_FROM, 0, 1, 1), SHARE_FROM.div_ceil(2));
        assert_eq!(p.combine_take(40, 0, 1, 3), 8, "half of its combine_max");
        // Fewer than SHARE_FROM, not its first take, nobody gathering or
        // no lead free: all it may take.
        assert_eq!(p.combine_take(SHARE_FROM - 1, 0, 1, 1), SHARE_FROM - 1);
        assert_eq!(p.combine_take(4, 5, 1, 1), 4);
        assert_eq!(p.combine_take(40, 8, 1, 1), 8);
        assert_eq!(p.combine_take(9, 0, 1, 0), 9);
        assert_eq!(p.combine_take(9, 0, 2, 1), 9);
        // One thread: never a free lead beside its own.
        let one = combining(1, 16);
        assert_eq!(one.combine_take(9, 0, 1, 1), 9);
    }

    #[test]
    fn chunks_differ_by_at_most_one_and_cover_the_batch() {
        assert_eq!(
            Dispatch::chunk_sizes(100, 3).collect::<Vec<_>>(),
            [34, 33, 33]
        );
        assert_eq!(Dispatch::chunk_sizes(64, 2).collect::<Vec<_>>(), [32, 32]);
        assert_eq!(Dispatch::chunk_sizes(5, 1).collect::<Vec<_>>(), [5]);
        for n in 1..300 {
            for k in 1..=8.min(n) {
                let sizes: Vec<usize> = Dispatch::chunk_sizes(n, k).collect();
                assert_eq!(sizes.iter().sum::<usize>(), n);
                assert!(sizes.iter().all(|&s| s >= n / k && s <= n / k + 1 && s > 0));
            }
        }
    }

    #[test]
    fn an_idle_thread_takes_even_a_lone_request_at_once() {
        let p = dispatch();
        assert_eq!(
            p.decide(1, Duration::ZERO, 0, 0, 1),
            Some(Reason::IdleThread)
        );
        assert_eq!(
            p.decide(1, Duration::ZERO, 1, 0, 1),
            Some(Reason::IdleThread)
        );
        assert_eq!(
            p.decide(0, MS, 0, 0, 1),
            None,
            "nothing pending, nothing sent"
        );
    }

    #[test]
    fn while_every_thread_is_busy_a_batch_grows_to_the_target() {
        let p = dispatch();
        assert_eq!(p.decide(63, Duration::ZERO, 2, 0, 1), None);
        assert_eq!(
            p.decide(64, Duration::ZERO, 2, 0, 1),
            Some(Reason::TargetBatch)
        );
        assert_eq!(
            p.decide(64, Duration::ZERO, 3, 0, 1),
            Some(Reason::TargetBatch)
        );
        assert_eq!(
            p.decide(200, Duration::ZERO, 4, 0, 1),
            None,
            "the queue is full: one batch waits behind each thread"
        );
    }

    #[test]
    fn nothing_is_held_longer_than_max_wait() {
        let p = dispatch();
        assert_eq!(p.decide(1, MS, 2, 0, 1), Some(Reason::MaxWait));
        assert_eq!(p.decide(1, MS, 4, 0, 1), Some(Reason::MaxWait));
        assert_eq!(p.decide(1, MS / 2, 4, 0, 1), None);
    }

    #[test]
    fn a_batch_is_split_only_for_idle_threads_and_in_worthwhile_chunks() {
        let p = dispatch();
        assert_eq!(p.chunks(1, 0), 1, "a lone request is one job");
        assert_eq!(p.chunks(2 * MIN_CHUNK_ITEMS - 1, 0), 1);
        assert_eq!(p.chunks(2 * MIN_CHUNK_ITEMS, 0), 2, "two idle threads");
        assert_eq!(p.chunks(256, 1), 1, "one idle thread");
        assert_eq!(p.chunks(256, 2), 1, "none idle: queued as one job");
        assert_eq!(p.chunks(256, 5), 1);
        let wide = Dispatch::new(&KmsConfig {
            threads: 8,
            ..KmsConfig::default()
        });
        assert_eq!(wide.chunks(1024, 0), 8);
        assert_eq!(wide.chunks(100, 0), 3);
    }

    #[test]
    fn reading_stops_at_max_batch_and_when_the_queue_is_full() {
        let p = dispatch();
        assert_eq!(p.room(0, 0), 256);
        assert_eq!(p.room(250, 3), 6);
        assert_eq!(p.room(256, 0), 0);
        assert_eq!(p.room(0, 4), 0);
        assert_eq!(p.room(0, 5), 0);
    }
}
