//! [`KmsConfig`]: how the actor is sized, validated at spawn.
//!
//! How to choose the numbers from what the metrics show is in
//! `docs/RUNBOOK.md`.

use std::time::Duration;

use kms_bus::{Backend, Overflow};
use kms_core::KmsError;
use kms_jose::{Algorithm, TrustedJwkSet};

/// The largest `max_batch` accepted (count): beyond it a batch's memory
/// and latency grow with no gain in throughput.
pub const MAX_BATCH_LIMIT: usize = 4096;

/// The longest `max_wait` accepted: beyond it a request's latency is
/// dominated by waiting, which no batch gain pays for.
pub const MAX_WAIT_LIMIT: Duration = Duration::from_secs(1);

/// The largest [`KmsConfig::combine_max`] accepted (count): 128
/// signatures hold a caller's tokio worker ~2 ms, the most a task should
/// run between two yields.
pub const MAX_COMBINE_LIMIT: usize = 128;

/// The smallest [`KmsConfig::origin_table`] accepted (slots): one probe
/// window.
pub const MIN_ORIGIN_TABLE: usize = 8;

/// The largest [`KmsConfig::origin_table`] accepted (slots): 2^20, 24 MiB.
pub const MAX_ORIGIN_TABLE: usize = 1 << 20;

/// Name of the bus topic the actor takes requests from by default.
pub const DEFAULT_REQUEST_TOPIC: &str = "kms.requests";

/// The longest [`KmsConfig::auto_rotate_check`]: one minute, so a key is
/// rotated at most a minute after it falls due.
pub const MAX_AUTO_ROTATE_CHECK: Duration = Duration::from_secs(60);

/// Configuration of a [`crate::KmsActor`].
///
/// With the `serde` feature it is `Serialize` and `Deserialize`, for a
/// configuration file: absent fields take their defaults, unknown fields
/// are refused, `max_wait` is written `max_wait_us` (µs), and
/// `trusted_jwks` is not serialized (load each set from its file with
/// `TrustedJwkSet::from_json`, then [`KmsConfig::with_trusted_jwks`]).
/// Deserializing does not [`validate`](KmsConfig::validate); spawning does.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(default, deny_unknown_fields)
)]
pub struct KmsConfig {
    /// Threads in the dedicated verify pool (count, ≥ 1). Default: the
    /// number of available cores.
    pub threads: usize,
    /// Batch size (count, ≥ 1) the coalescer lets a batch grow to while
    /// every pool thread is busy; a batch this big is dispatched without
    /// waiting for a thread to free up (it queues behind a busy one). At
    /// 16 keys a batch of 256 costs 6.6 µs per signature against 7.9 µs at
    /// 64 and 18 µs alone (docs/PERFORMANCE.md). Default: 256.
    pub target_batch: usize,
    /// Most verify requests in one batch (count, `target_batch`..=
    /// [`MAX_BATCH_LIMIT`]); the coalescer stops reading the request topic
    /// when this many are pending. Default: 512.
    pub max_batch: usize,
    /// Longest the coalescer holds a verify request before dispatching it
    /// (> 0, ≤ 1 s). Only matters while every pool thread is busy: with a
    /// thread idle a request is dispatched at once. Default: 1 ms.
    #[cfg_attr(feature = "serde", serde(rename = "max_wait_us", with = "micros"))]
    pub max_wait: Duration,
    /// Whether a verify request that arrives alone while every pool thread is
    /// idle is verified on the actor's own task instead of on the pool (the
    /// inline path of the coalescer, `Reason::Inline`): no pool thread is
    /// woken (an OS wake-up of a parked thread, tens of µs on a quiet host),
    /// at the cost of one verification (~20 µs) on the actor's tokio worker.
    /// Under load (more than one request pending, or a batch in flight) it
    /// never applies. Default: `true`.
    pub inline_when_idle: bool,
    /// Whether a verify request made while the node is quiet is verified
    /// on the caller's own task, with no hop at all (the caller path of the
    /// coalescer): nothing outstanding at the actor, no other caller doing
    /// the same, a message of at most 1 KiB, not while the node is in a
    /// run of back-to-back requests, and not the 9th of a streak of
    /// caller-side verifications back to back (each starting within four
    /// times the measured cost of one after the previous one's end), so
    /// that requests made together or under steady load still form
    /// batches, on a core of any speed. It saves the thread wake-ups of a round trip through
    /// the actor, at the cost of one verification (~20 µs) on the caller's
    /// tokio worker. Under load (anything outstanding) it never applies.
    /// Default: `true`.
    pub verify_on_caller_when_idle: bool,
    /// Whether an ML-DSA token ([`crate::KmsClient::sign_jwt`] with an
    /// ML-DSA key) asked for while the verify pool has nothing in flight,
    /// no verify request is outstanding at the actor and no other caller is
    /// signing on its own task is signed on the caller's own task, with no
    /// hop at all; otherwise the actor signs it on the pool. A lone
    /// signature (~130 µs for ML-DSA-65) then saves the thread wake-ups of
    /// a round trip through the actor and the pool (70–100 µs on a quiet
    /// 2-vCPU host, docs/PERFORMANCE.md), at the cost of one signature on
    /// the caller's tokio worker. At most one caller signs on its task at a
    /// time; while the pool is busy every token goes to it. Ed25519 tokens
    /// (~20 µs) are signed on the actor's task either way. Default: `true`.
    pub sign_on_caller_when_idle: bool,
    /// Most signatures (count, 0..=[`MAX_COMBINE_LIMIT`]) a caller verifies
    /// on its own task under load (combining in the coalescer,
    /// `coalesce.rs`): when the caller path refuses it, a caller queues its
    /// request and, if fewer callers lead than the pool has threads, verifies
    /// what is queued (its own and other callers' requests) in batches on its
    /// own tokio worker (while another lead is free and another caller is
    /// gathering, the larger half first: what it leaves is led by a gatherer
    /// or taken in its next batch), again while more is queued, up to this
    /// many signatures per lead (64 at ~15 µs each in a batch of 64: ~1 ms of
    /// its worker, less than the same requests verified inline would take; a
    /// lead spends a unit of tokio's cooperative budget per signature, so a
    /// task whose futures lead again and again yields); what is left when the
    /// last leader is done is published to the actor. It saves the hops
    /// through the actor and the pool at moderate load
    /// (`benches/actor/main.rs`, `actor/concurrency` and `actor/starvation`);
    /// floods (more than `4 · threads · combine_max` outstanding) and
    /// messages over 1 KiB still go to the pool. `0` turns it off. Default:
    /// 64.
    pub combine_max: usize,
    /// Slots (count, [`MIN_ORIGIN_TABLE`]..=[`MAX_ORIGIN_TABLE`], rounded
    /// up to a power of two) of the origin table: the decaying record of
    /// how often each [`crate::Origin`]'s signatures fail, which keeps a
    /// failing origin's requests out of other origins' batches (verified
    /// alone, after them). 24 bytes each, allocated at spawn. An origin
    /// that finds no slot shares one overflow record with every other
    /// such origin. Only requests made through
    /// [`crate::KmsClient::for_origin`] use it. Default: 16 384 (384 KiB).
    pub origin_table: usize,
    /// Most tokens (count) the verified-token cache holds
    /// ([`crate::KmsClient::verify_jwt`]): a token that verified is answered
    /// from it while the key set does not change (any key created or
    /// imported, rotation, policy change, trim, destroy, fleet update or
    /// trusted JWK Set reload empties it in effect), its claims still checked
    /// against the clock and the call's `Validation`. Keyed by the token's
    /// SHA-256; refusals are never cached. `0` turns it off. Default: 65 536.
    pub token_cache: usize,
    /// Most bytes (estimated from each entry's decoded claims: 32 per JSON
    /// value plus its text, 48 per member, 256 per entry) the
    /// verified-token cache holds; each entry counts at least
    /// `token_cache_bytes / token_cache`, so both bounds hold. At least
    /// `token_cache` when the cache is on. Default: 64 MiB.
    pub token_cache_bytes: usize,
    /// External issuers' JWK Sets whose tokens
    /// [`crate::KmsClient::verify_jwt`] accepts, by `kid` (each key decoded
    /// and checked once, when the set was loaded with
    /// `TrustedJwkSet::from_json`); a set bound to an issuer
    /// (`TrustedJwkSet::bound_to`) verifies only tokens whose `iss` is that
    /// issuer, and that issuer's tokens only under its keys. Replace them
    /// while the actor runs with [`crate::KmsHandle::reload_trusted_jwks`].
    /// Default: none.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub trusted_jwks: Vec<TrustedJwkSet>,
    /// The `alg` of tokens [`crate::KmsClient::sign_jwt`] issues and of the
    /// JWKs [`crate::KmsClient::jwks`] publishes: `EdDSA` (RFC 8037, what
    /// most verifiers know) or `Ed25519` (RFC 9864). The actor's own keys
    /// verify tokens under either. Default: `EdDSA`.
    pub token_alg: Algorithm,
    /// Purposes of keystore keys that issue and verify tokens: a token
    /// whose `kid` names a keystore key of another purpose is refused, and
    /// `sign_jwt` refuses such a key, so a key made for something else
    /// (say, signing passports) never mints a bearer token. Default:
    /// `["tokens"]`.
    pub token_purposes: Vec<String>,
    /// Name of the request topic on the bus; the priority lane (sign,
    /// rotate, attest, create) is the topic named this plus `".priority"`.
    /// Default: `"kms.requests"`.
    pub request_topic: String,
    /// Capacity of the request topic (messages, ≥ `max_batch`). Default: 8192.
    pub queue_capacity: usize,
    /// Capacity of the priority topic (messages, ≥ 1). Default: 1024.
    pub priority_capacity: usize,
    /// Most keystore writes (create, rotate, set_policy, trim, destroy,
    /// import) accepted and not yet done (count, ≥ 1): waiting to be written,
    /// or being written. They are written one at a time, in order, off the
    /// actor's task; one more is answered [`KmsError::Overloaded`]
    /// (retryable) at once. On a durable keystore each is one fsynced commit
    /// of a few records, whatever the store's size, except that a trim or
    /// destroy then copies the whole store (the purge, docs/SECURITY.md).
    /// Default: 64.
    pub write_backlog: usize,
    /// What a full request or priority topic does. Default:
    /// [`Overflow::Reject`], so a caller gets a retryable
    /// [`KmsError::Overloaded`] instead of waiting.
    pub overflow: Overflow,
    /// Ring backend of the request topic. Default: [`Backend::Soa`], the
    /// lock-free ring: the actor is the only subscriber, so every request is
    /// moved out of the ring, never cloned, and a burst of requests wakes
    /// the actor once.
    pub backend: Backend,
    /// How often the actor looks for keys whose policy's
    /// `auto_rotate_after` has passed since their head was made, and
    /// rotates them (`kms_core::Keystore::due_for_rotation`); also once at
    /// start. More than 0 and at most 60 s. Default: 60 s.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "auto_rotate_check_us", with = "micros")
    )]
    pub auto_rotate_check: Duration,
}

impl Default for KmsConfig {
    fn default() -> Self {
        KmsConfig {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            target_batch: 256,
            max_batch: 512,
            max_wait: Duration::from_millis(1),
            inline_when_idle: true,
            verify_on_caller_when_idle: true,
            sign_on_caller_when_idle: true,
            combine_max: 64,
            origin_table: 16_384,
            token_cache: 65_536,
            token_cache_bytes: 64 << 20,
            trusted_jwks: Vec::new(),
            token_alg: Algorithm::EdDSA,
            token_purposes: vec!["tokens".to_owned()],
            request_topic: DEFAULT_REQUEST_TOPIC.to_owned(),
            queue_capacity: 8192,
            priority_capacity: 1024,
            write_backlog: 64,
            overflow: Overflow::Reject,
            backend: Backend::Soa,
            auto_rotate_check: MAX_AUTO_ROTATE_CHECK,
        }
    }
}

impl KmsConfig {
    /// Checks that the numbers make sense.
    ///
    /// # Errors
    /// [`KmsError::InvalidConfig`], naming the field, for: zero threads; a
    /// `target_batch` of 0; a `combine_max` above [`MAX_COMBINE_LIMIT`]; an
    /// `origin_table` outside [`MIN_ORIGIN_TABLE`]..=[`MAX_ORIGIN_TABLE`]; a
    /// `token_alg` other than `EdDSA`/`Ed25519`; a `token_cache_bytes` below
    /// `token_cache` (cache on); a `max_batch` below `target_batch` or above
    /// [`MAX_BATCH_LIMIT`]; a `max_wait` of zero or above 1 s; a request
    /// queue smaller than `max_batch`; a priority queue of 0; a
    /// `write_backlog` of 0 or above `tokio::sync::Semaphore::MAX_PERMITS`.
    pub fn validate(&self) -> Result<(), KmsError> {
        let reason = if self.threads == 0 {
            "threads must be at least 1"
        } else if self.target_batch == 0 {
            "target_batch must be at least 1"
        } else if self.max_batch < self.target_batch {
            "max_batch must be at least target_batch"
        } else if self.max_batch > MAX_BATCH_LIMIT {
            "max_batch must be at most 4096"
        } else if self.max_wait.is_zero() || self.max_wait > MAX_WAIT_LIMIT {
            "max_wait must be more than 0 and at most 1 s"
        } else if self.combine_max > MAX_COMBINE_LIMIT {
            "combine_max must be at most 128"
        } else if !(MIN_ORIGIN_TABLE..=MAX_ORIGIN_TABLE).contains(&self.origin_table) {
            "origin_table must be at least 8 and at most 1 048 576"
        } else if !self.token_alg.is_ed25519() {
            "token_alg must be EdDSA or Ed25519 (tokens are signed with Ed25519)"
        } else if self.token_cache > 0 && self.token_cache_bytes < self.token_cache {
            "token_cache_bytes must be at least token_cache (one byte per entry)"
        } else if self.queue_capacity < self.max_batch {
            "queue_capacity must be at least max_batch"
        } else if self.priority_capacity == 0 {
            "priority_capacity must be at least 1"
        } else if self.write_backlog == 0
            || self.write_backlog > tokio::sync::Semaphore::MAX_PERMITS
        {
            "write_backlog must be at least 1 and at most tokio::sync::Semaphore::MAX_PERMITS"
        } else if self.auto_rotate_check.is_zero() || self.auto_rotate_check > MAX_AUTO_ROTATE_CHECK
        {
            "auto_rotate_check must be more than 0 and at most 60 s"
        } else {
            return Ok(());
        };
        Err(KmsError::InvalidConfig {
            reason: reason.to_owned(),
        })
    }

    /// Name of the priority topic: `request_topic` + `".priority"`.
    pub fn priority_topic(&self) -> String {
        format!("{}.priority", self.request_topic)
    }
}

/// One `with_<field>` per field: `KmsConfig::default().with_threads(2)`.
/// (`KmsConfig` is `#[non_exhaustive]`, so other crates build it from
/// `Default` with these, or assign its public fields.)
macro_rules! setters {
    ($($field:ident / $with:ident: $ty:ty;)*) => {
        impl KmsConfig {
            $(
                #[doc = concat!("This configuration with [`KmsConfig::", stringify!($field), "`] set to `value`.")]
                #[must_use]
                pub fn $with(mut self, value: $ty) -> Self {
                    self.$field = value;
                    self
                }
            )*
        }
    };
}

setters! {
    threads / with_threads: usize;
    target_batch / with_target_batch: usize;
    max_batch / with_max_batch: usize;
    max_wait / with_max_wait: Duration;
    inline_when_idle / with_inline_when_idle: bool;
    verify_on_caller_when_idle / with_verify_on_caller_when_idle: bool;
    sign_on_caller_when_idle / with_sign_on_caller_when_idle: bool;
    combine_max / with_combine_max: usize;
    origin_table / with_origin_table: usize;
    token_cache / with_token_cache: usize;
    token_cache_bytes / with_token_cache_bytes: usize;
    trusted_jwks / with_trusted_jwks: Vec<TrustedJwkSet>;
    token_alg / with_token_alg: Algorithm;
    token_purposes / with_token_purposes: Vec<String>;
    request_topic / with_request_topic: String;
    queue_capacity / with_queue_capacity: usize;
    priority_capacity / with_priority_capacity: usize;
    write_backlog / with_write_backlog: usize;
    overflow / with_overflow: Overflow;
    backend / with_backend: Backend;
    auto_rotate_check / with_auto_rotate_check: Duration;
}

/// A [`Duration`] as whole microseconds (feature `serde`).
#[cfg(feature = "serde")]
mod micros {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_micros)
    }
}
