//! [`Writer`]: runs the actor's keystore writes (create, rotate,
//! set_policy, trim, destroy, and its scheduled rotations) off its task,
//! one at a time, in the order the actor took them.
//!
//! Create and rotate write the keystore, and a durable one fsyncs, so they
//! must not stall the actor's task (and with it every lane). They run on
//! one thread of tokio's blocking pool; a durable store serialises its
//! writes anyway.
//!
//! Invariants:
//! * Bounded: at most `backlog` callers' requests are accepted and not done
//!   (waiting, or being written). Each job carries a semaphore permit,
//!   released when it is done; with none left, [`Writer::submit`] answers
//!   [`KmsError::Overloaded`] at once.
//! * A job whose caller has dropped its future before the job starts is
//!   skipped: nothing is written for it.
//! * [`Writer::finish`] returns once every accepted job is done and the
//!   thread has exited (dropping its keystore clone), so when the actor's
//!   shutdown returns no write is in progress and a durable store is free
//!   to be opened again.
//! * Every request submitted gets one answer: its result, `Overloaded`,
//!   `Internal` (the job panicked, or the thread is gone), or none if its
//!   caller has gone.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use kms_core::{Keystore, KmsError};
use tokio::runtime::Handle;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

use crate::dispatch::reply::Reply;

/// One accepted request: the work, and its place in the backlog.
struct Job {
    run: Box<dyn FnOnce(&Keystore) + Send>,
    /// Released when the job is done (run or skipped); `None` for the
    /// actor's own jobs ([`Writer::submit_detached`]).
    _room: Option<OwnedSemaphorePermit>,
}

/// The actor's queue of keystore writes and the thread that runs it.
pub(crate) struct Writer {
    jobs: mpsc::UnboundedSender<Job>,
    /// Permits left in the backlog.
    room: Arc<Semaphore>,
    thread: JoinHandle<()>,
}

impl Writer {
    /// Starts the writer on `runtime`'s blocking pool, with room for
    /// `backlog` (≥ 1) requests.
    pub(crate) fn spawn(runtime: &Handle, keystore: Keystore, backlog: usize) -> Writer {
        let (jobs, mut queue) = mpsc::unbounded_channel::<Job>();
        let thread = runtime.spawn_blocking(move || {
            // Ends when the actor drops its sender and the queue is empty.
            while let Some(job) = queue.blocking_recv() {
                (job.run)(&keystore);
            }
        });
        Writer {
            jobs,
            room: Arc::new(Semaphore::new(backlog)),
            thread,
        }
    }

    /// Queues `op` with the keystore, answering `reply` with its result;
    /// answers [`KmsError::Overloaded`] at once if the backlog is full.
    pub(crate) fn submit<T: Send + 'static>(
        &self,
        reply: Reply<T>,
        op: impl FnOnce(&Keystore) -> Result<T, KmsError> + Send + 'static,
    ) {
        let Ok(room) = Arc::clone(&self.room).try_acquire_owned() else {
            reply.send(Err(KmsError::Overloaded));
            return;
        };
        let answer = reply.clone();
        let run = Box::new(move |keystore: &Keystore| {
            if reply.is_abandoned() {
                return;
            }
            // A panic answers `Internal` and leaves the writer running.
            let result = catch_unwind(AssertUnwindSafe(|| op(keystore))).unwrap_or_else(|_| {
                Err(KmsError::Internal {
                    reason: "a keystore write panicked".to_owned(),
                })
            });
            reply.send(result);
        });
        if self
            .jobs
            .send(Job {
                run,
                _room: Some(room),
            })
            .is_err()
        {
            answer.send(Err(KmsError::Internal {
                reason: "the keystore writer has stopped".to_owned(),
            }));
        }
    }

    /// Queues `op`, which answers no one: the actor's own scheduled work,
    /// which it keeps to one job at a time itself, so it takes no room
    /// from callers' requests. Returns `false` if the writer has stopped.
    pub(crate) fn submit_detached(&self, op: impl FnOnce(&Keystore) + Send + 'static) -> bool {
        let run = Box::new(move |keystore: &Keystore| {
            // A panic is caught so the writer keeps running; the next
            // check tries again.
            let _ = catch_unwind(AssertUnwindSafe(|| op(keystore)));
        });
        self.jobs.send(Job { run, _room: None }).is_ok()
    }

    /// Closes the queue and waits until every accepted job is done and the
    /// thread has exited.
    pub(crate) async fn finish(self) {
        drop(self.jobs);
        // A join error means the thread panicked outside a job: nothing is
        // left to wait for.
        let _ = self.thread.await;
    }
}
