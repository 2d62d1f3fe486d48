//! Verification dispatch: where each verify request is verified, and how
//! it gets its one answer.
//!
//! A verify call's path, hop by hop:
//! 1. `crate::client` (`KmsClient::verify`) admits the call (the actor is
//!    not shutting down) and hands it to [`caller`].
//! 2. [`caller`] (`CallerSide::dispatch`), on the caller's task: the
//!    caller path verifies it there when the node is quiet ([`gate`] holds
//!    what that rule reads); else combining queues it ([`combine`]) and the
//!    caller leads, gathers or joins; else it is published to the request
//!    topic ([`publish`]).
//! 3. The actor (`crate::actor`) reads the topic into [`pending`], which
//!    decides by the rules of [`coalesce`] when the requests it holds go
//!    out as one batch: on the actor's task (inline) or split into jobs on
//!    the [`pool`].
//! 4. [`batch`] resolves the keys, runs one multiscalar verification and
//!    answers each request on its own [`reply`] handle, wherever it runs:
//!    a pool thread, the actor's task, or a leading caller's task; it
//!    verifies the requests of origins that have been failing apart from
//!    the others ([`origins`] keeps the record).
//!
//! [`coalesce`] holds every decision as a plain function of explicit
//! inputs, with table tests; the other files carry out its answers.
//! [`request`] is what travels on the bus. No file here calls back into
//! the file that called it: [`caller`] uses [`combine`] and [`publish`],
//! [`combine`] uses [`publish`] for its hand-off, and [`batch`] knows
//! only requests and replies.

pub(crate) mod batch;
pub(crate) mod caller;
pub(crate) mod coalesce;
pub(crate) mod combine;
pub(crate) mod gate;
pub(crate) mod origins;
pub(crate) mod pending;
pub(crate) mod pool;
pub(crate) mod publish;
pub(crate) mod reply;
pub(crate) mod request;
