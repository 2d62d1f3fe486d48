//! [`KmsConfig`]: how the actor is sized, validated at spawn.

use kms_bus::{Backend, Overflow};
use kms_core::KmsError;

/// The largest `max_batch` accepted (count): beyond it a batch's memory
/// and latency grow with no gain in throughput.
pub const MAX_BATCH_LIMIT: usize = 4096;

/// Name of the bus topic the actor takes requests from by default.
pub const DEFAULT_REQUEST_TOPIC: &str = "kms.requests";

/// Configuration of a [`crate::KmsActor`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KmsConfig {
    /// Threads in the dedicated verify pool (count, ≥ 1). Default: the
    /// number of available cores.
    pub threads: usize,
    /// Most verify requests in one batch (count, 1..=[`MAX_BATCH_LIMIT`]).
    /// Default: 256.
    pub max_batch: usize,
    /// Name of the request topic on the bus. Default: `"kms.requests"`.
    pub request_topic: String,
    /// Capacity of the request topic (messages, ≥ `max_batch`). Default: 8192.
    pub queue_capacity: usize,
    /// What a full request topic does. Default: [`Overflow::Reject`], so a
    /// caller gets a retryable [`KmsError::Overloaded`] instead of waiting.
    pub overflow: Overflow,
    /// Ring backend of the request topic. Default: [`Backend::Soa`], the
    /// lock-free ring: the actor is the only subscriber, so every request is
    /// moved out of the ring, never cloned, and a burst of requests wakes
    /// the actor once.
    pub backend: Backend,
}

impl Default for KmsConfig {
    fn default() -> Self {
        KmsConfig {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            max_batch: 256,
            request_topic: DEFAULT_REQUEST_TOPIC.to_owned(),
            queue_capacity: 8192,
            overflow: Overflow::Reject,
            backend: Backend::Soa,
        }
    }
}

impl KmsConfig {
    /// Checks that the numbers make sense.
    ///
    /// # Errors
    /// [`KmsError::InvalidConfig`] for zero threads, a `max_batch` of 0 or
    /// above [`MAX_BATCH_LIMIT`], or a queue smaller than `max_batch`.
    pub fn validate(&self) -> Result<(), KmsError> {
        let reason = if self.threads == 0 {
            "threads must be at least 1"
        } else if self.max_batch == 0 {
            "max_batch must be at least 1"
        } else if self.max_batch > MAX_BATCH_LIMIT {
            "max_batch must be at most 4096"
        } else if self.queue_capacity < self.max_batch {
            "queue_capacity must be at least max_batch"
        } else {
            return Ok(());
        };
        Err(KmsError::InvalidConfig {
            reason: reason.to_owned(),
        })
    }
}
