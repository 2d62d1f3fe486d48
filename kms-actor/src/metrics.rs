//! The actor's metrics (docs/DESIGN.md §7), through the `metrics` facade: this crate
//! records, the embedding program chooses and installs the exporter (the
//! gateway example serves Prometheus text).
//!
//! | name | kind | labels | unit |
//! |---|---|---|---|
//! | `kms_ops_total` | counter | `topic`, `op`, `outcome` | requests |
//! | `kms_op_duration_seconds` | histogram | `topic`, `op` | seconds, from the call to its answer |
//! | `kms_batch_size` | histogram | `topic` | verify requests per batch |
//! | `kms_batch_wait_seconds` | histogram | `topic` | seconds the oldest request of a batch was held |
//! | `kms_batches_in_flight` | gauge | `topic` | jobs running or queued on the pool |
//! | `kms_dispatch_total` | counter | `topic`, `reason` | verify batches dispatched, a request verified alone counting as one |
//! | `kms_dispatch_items_total` | counter | `topic`, `reason` | verify requests in them |
//! | `kms_token_refusals_total` | counter | `topic`, `code` | tokens `verify_jwt` refused |
//! | `kms_token_cache_hits_total` | counter | `topic` | `verify_jwt` calls answered from the verified-token cache |
//! | `kms_token_cache_misses_total` | counter | `topic` | calls the cache (on) could not answer |
//! | `kms_token_cache_evictions_total` | counter | `topic` | entries evicted to stay within its bounds |
//! | `kms_token_cache_entries` | gauge | `topic` | tokens it holds |
//! | `kms_build_info` | gauge | `version`, `curve_backend`, `missed_curve_backend` | always 1 |
//!
//! `topic` is the actor's request topic ([`crate::KmsConfig::request_topic`]),
//! so two actors in one process record apart, as the bus's `kms_bus_*`
//! counters do.
//! `reason` is the dispatch path, as the `dispatch` events of target
//! `kms_actor::coalesce` name it: `caller`, `combined`, `inline`,
//! `idle_thread`, `target_batch`, `max_wait` or `shutdown`; every verify
//! request that reaches a verification is counted under exactly one.
//! `op` is `verify`, `sign`, `create_key`, `rotate`, `attest`, `policy`,
//! `set_policy`, `trim`, `destroy`, `export` or `import`; `outcome`
//! is `ok` or the error's stable code without its `kms.` prefix
//! ([`KmsError::code`]: `invalid_signature`, `overloaded`, `dropped`, …),
//! so no label value has a dot. `kms_bisections_total` and
//! `kms_weighted_searches_total{outcome}` are recorded by kms-core and the
//! `kms_bus_*` counters by kms-bus.
//!
//! `kms_build_info{version, curve_backend, missed_curve_backend}` (gauge,
//! always 1) says which build runs, which curve25519-dalek backend it
//! verifies with (`avx512ifma`, `avx2`, `serial`, `fiat`), and the faster
//! one the CPU could run but the build lacks (`avx512ifma`, else `none`;
//! `kms_core::ed25519::missed_curve_backend`).
//!
//! Handles are taken once, at [`crate::KmsActor::spawn`], from the recorder
//! installed then: install the exporter before spawning the actor, or the
//! actor records into the no-op recorder.

use std::time::Duration;

use kms_core::KmsError;
use metrics::{Counter, Gauge, Histogram, Unit};

use crate::dispatch::coalesce::Reason;

/// `kms_ops_total{op,outcome}`: requests answered (counter).
pub const OPS_TOTAL: &str = "kms_ops_total";
/// `kms_op_duration_seconds{op}`: from a client call to its answer
/// (histogram, seconds).
pub const OP_DURATION_SECONDS: &str = "kms_op_duration_seconds";
/// `kms_batch_size`: verify requests per dispatched batch (histogram).
pub const BATCH_SIZE: &str = "kms_batch_size";
/// `kms_batch_wait_seconds`: how long the oldest request of a batch was
/// held by the coalescer before dispatch (histogram, seconds).
pub const BATCH_WAIT_SECONDS: &str = "kms_batch_wait_seconds";
/// `kms_batches_in_flight`: batches running or queued on the pool (gauge).
pub const BATCHES_IN_FLIGHT: &str = "kms_batches_in_flight";
/// `kms_dispatch_total{topic,reason}`: verify batches dispatched, by the
/// path that dispatched them (a request verified alone on the caller path
/// is a batch of one) (counter).
pub const DISPATCH_TOTAL: &str = "kms_dispatch_total";
/// `kms_dispatch_items_total{topic,reason}`: verify requests in those
/// batches, by path (counter); with [`DISPATCH_TOTAL`], the mean batch
/// size of each path.
pub const DISPATCH_ITEMS_TOTAL: &str = "kms_dispatch_items_total";

/// `kms_verify_set_apart_total{topic}`: verify requests verified alone,
/// apart from their batch, because their origin's signatures have been
/// failing (`crate::Origin`; counter).
pub const VERIFY_SET_APART_TOTAL: &str = "kms_verify_set_apart_total";
/// `kms_origins_tracked{topic}`: slots of the origin table holding a
/// record, stale ones included until a new origin takes them (gauge; at
/// most `KmsConfig::origin_table` rounded up to a power of two).
pub const ORIGINS_TRACKED: &str = "kms_origins_tracked";
/// `kms_origin_table_overflows_total{topic}`: failed verdicts of origins
/// that found no record in the full origin table (they share one
/// overflow record; counter).
pub const ORIGIN_TABLE_OVERFLOWS_TOTAL: &str = "kms_origin_table_overflows_total";

/// `kms_token_refusals_total{topic,code}`: tokens `verify_jwt` refused,
/// by the refusal's stable code (`jose.malformed`, `jose.unknown_kid`,
/// `jose.expired`, `kms.version_disallowed`, …: a bounded set, the codes of
/// `kms_jose::JoseError` and the KMS's token refusals), whether refused
/// before the signature was checked or after; kms-http's bearer layer adds
/// the requests it refuses before a token reaches the KMS
/// (`http.no_credentials`, `http.invalid_request`) (counter).
pub const TOKEN_REFUSALS_TOTAL: &str = "kms_token_refusals_total";

/// `kms_token_cache_hits_total{topic}`: `verify_jwt` calls answered from
/// the token cache (counter).
pub const TOKEN_CACHE_HITS_TOTAL: &str = "kms_token_cache_hits_total";
/// `kms_token_cache_misses_total{topic}`: `verify_jwt` calls the token
/// cache could not answer (absent, or computed before the key set last
/// changed), with the cache on (counter).
pub const TOKEN_CACHE_MISSES_TOTAL: &str = "kms_token_cache_misses_total";
/// `kms_token_cache_evictions_total{topic}`: entries evicted to stay
/// within the cache's bounds (counter).
pub const TOKEN_CACHE_EVICTIONS_TOTAL: &str = "kms_token_cache_evictions_total";
/// `kms_token_cache_entries{topic}`: tokens held (gauge; set every 64
/// inserts, so at most 63 inserts behind).
pub const TOKEN_CACHE_ENTRIES: &str = "kms_token_cache_entries";

/// `kms_build_info{version,curve_backend,missed_curve_backend}`: 1,
/// labelled with this crate's version, the curve backend in use and the
/// faster one the build lacks (`none` if none) (gauge).
pub const BUILD_INFO: &str = "kms_build_info";

/// Bucket bounds (seconds) that fit the actor's latencies, 10 µs to 100 ms:
/// a lone verify answers in tens of µs, a saturated pool in a few ms. Pass
/// to the exporter for [`OP_DURATION_SECONDS`] and [`BATCH_WAIT_SECONDS`].
pub const LATENCY_BUCKETS_SECONDS: &[f64] = &[
    10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3,
];

/// Bucket bounds for [`BATCH_SIZE`]: powers of two, 1 to 1024 requests.
pub const BATCH_SIZE_BUCKETS: &[f64] = &[
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
];

/// Registers units and help texts with the installed recorder, for this
/// crate's metrics and kms-core's and kms-bus's. Optional; call it after
/// installing the exporter.
pub fn describe() {
    metrics::describe_counter!(
        OPS_TOTAL,
        Unit::Count,
        "KMS requests answered, by operation and outcome"
    );
    metrics::describe_histogram!(
        OP_DURATION_SECONDS,
        Unit::Seconds,
        "Time from a KmsClient call to its answer"
    );
    metrics::describe_histogram!(
        BATCH_SIZE,
        Unit::Count,
        "Verify requests per dispatched batch"
    );
    metrics::describe_histogram!(
        BATCH_WAIT_SECONDS,
        Unit::Seconds,
        "How long the oldest request of a batch was held before dispatch"
    );
    metrics::describe_counter!(
        TOKEN_REFUSALS_TOTAL,
        Unit::Count,
        "Tokens verify_jwt refused, by the refusal's code"
    );
    metrics::describe_counter!(
        TOKEN_CACHE_HITS_TOTAL,
        Unit::Count,
        "verify_jwt calls answered from the verified-token cache"
    );
    metrics::describe_counter!(
        TOKEN_CACHE_MISSES_TOTAL,
        Unit::Count,
        "verify_jwt calls the verified-token cache could not answer"
    );
    metrics::describe_counter!(
        TOKEN_CACHE_EVICTIONS_TOTAL,
        Unit::Count,
        "Verified-token cache entries evicted to stay within its bounds"
    );
    metrics::describe_gauge!(
        TOKEN_CACHE_ENTRIES,
        Unit::Count,
        "Tokens the verified-token cache holds"
    );
    metrics::describe_gauge!(
        BUILD_INFO,
        Unit::Count,
        "1, labelled with the kms version and the curve25519-dalek backend in use"
    );
    metrics::describe_gauge!(
        BATCHES_IN_FLIGHT,
        Unit::Count,
        "Verify batches running or queued on the pool"
    );
    metrics::describe_counter!(
        DISPATCH_TOTAL,
        Unit::Count,
        "Verify batches dispatched, by dispatch path"
    );
    metrics::describe_counter!(
        DISPATCH_ITEMS_TOTAL,
        Unit::Count,
        "Verify requests in the batches dispatched, by dispatch path"
    );
    metrics::describe_counter!(
        VERIFY_SET_APART_TOTAL,
        Unit::Count,
        "Verify requests verified apart from their batch because their origin has been failing"
    );
    metrics::describe_gauge!(
        ORIGINS_TRACKED,
        Unit::Count,
        "Origins holding a record in the origin table"
    );
    metrics::describe_counter!(
        ORIGIN_TABLE_OVERFLOWS_TOTAL,
        Unit::Count,
        "Failed verdicts of origins that found no record in the full origin table"
    );
    kms_core::ed25519::describe_metrics();
    kms_core::storage::describe_metrics();
    kms_bus::describe_metrics();
}

/// The operations, as the `op` label names them.
#[derive(Debug, Clone, Copy)]
pub(crate) enum OpKind {
    Verify = 0,
    Sign,
    CreateKey,
    Rotate,
    Attest,
    Policy,
    SetPolicy,
    Trim,
    Destroy,
    Export,
    Import,
}

impl OpKind {
    const ALL: [OpKind; 11] = [
        OpKind::Verify,
        OpKind::Sign,
        OpKind::CreateKey,
        OpKind::Rotate,
        OpKind::Attest,
        OpKind::Policy,
        OpKind::SetPolicy,
        OpKind::Trim,
        OpKind::Destroy,
        OpKind::Export,
        OpKind::Import,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            OpKind::Verify => "verify",
            OpKind::Sign => "sign",
            OpKind::CreateKey => "create_key",
            OpKind::Rotate => "rotate",
            OpKind::Attest => "attest",
            OpKind::Policy => "policy",
            OpKind::SetPolicy => "set_policy",
            OpKind::Trim => "trim",
            OpKind::Destroy => "destroy",
            OpKind::Export => "export",
            OpKind::Import => "import",
        }
    }
}

/// Handles for one operation: `ok` is cached, other outcomes are looked up
/// when they happen.
struct OpHandles {
    ok: Counter,
    duration: Histogram,
}

/// Handles taken at spawn, shared by the actor, its pool and its clients.
pub(crate) struct Metrics {
    /// The `topic` label: the actor's request topic.
    topic: String,
    ops: [OpHandles; OpKind::ALL.len()],
    /// `verify`'s other common outcome, also cached.
    verify_invalid: Counter,
    pub(crate) batch_size: Histogram,
    pub(crate) batch_wait: Histogram,
    pub(crate) in_flight: Gauge,
    /// `kms_dispatch_total` and `kms_dispatch_items_total` by
    /// [`Reason`], at `reason as usize`.
    dispatch: [DispatchHandles; Reason::ALL.len()],
}

/// The dispatch counters of one path.
struct DispatchHandles {
    batches: Counter,
    items: Counter,
}

impl Metrics {
    /// Takes handles from the recorder installed now, labelled with the
    /// actor's request `topic`.
    pub(crate) fn new(topic: &str) -> Self {
        metrics::gauge!(
            BUILD_INFO,
            "version" => env!("CARGO_PKG_VERSION"),
            "curve_backend" => kms_core::ed25519::curve_backend().name(),
            "missed_curve_backend" => kms_core::ed25519::missed_curve_backend().map_or("none", |b| b.name())
        )
        .set(1.0);
        let t = || topic.to_owned();
        let ops = OpKind::ALL.map(|op| OpHandles {
            ok: metrics::counter!(OPS_TOTAL, "topic" => t(), "op" => op.label(), "outcome" => "ok"),
            duration: metrics::histogram!(OP_DURATION_SECONDS, "topic" => t(), "op" => op.label()),
        });
        let invalid = KmsError::InvalidSignature(kms_core::ed25519::SignatureError::Equation);
        Metrics {
            topic: t(),
            ops,
            verify_invalid: metrics::counter!(
                OPS_TOTAL,
                "topic" => t(),
                "op" => OpKind::Verify.label(),
                "outcome" => outcome(&invalid)
            ),
            batch_size: metrics::histogram!(BATCH_SIZE, "topic" => t()),
            batch_wait: metrics::histogram!(BATCH_WAIT_SECONDS, "topic" => t()),
            in_flight: metrics::gauge!(BATCHES_IN_FLIGHT, "topic" => t()),
            dispatch: Reason::ALL.map(|reason| DispatchHandles {
                batches: metrics::counter!(DISPATCH_TOTAL, "topic" => t(), "reason" => reason.as_str()),
                items: metrics::counter!(DISPATCH_ITEMS_TOTAL, "topic" => t(), "reason" => reason.as_str()),
            }),
        }
    }

    /// Counts one dispatch of `items` verify requests by `reason`.
    pub(crate) fn dispatched(&self, reason: Reason, items: u64) {
        let handles = &self.dispatch[reason as usize];
        handles.batches.increment(1);
        handles.items.increment(items);
    }

    /// Counts one answered request and its duration.
    pub(crate) fn record_op<T>(&self, op: OpKind, answer: &Result<T, KmsError>, took: Duration) {
        let handles = &self.ops[op as usize];
        match answer {
            Ok(_) => handles.ok.increment(1),
            Err(KmsError::InvalidSignature(_)) if matches!(op, OpKind::Verify) => {
                self.verify_invalid.increment(1)
            }
            Err(e) => metrics::counter!(
                OPS_TOTAL,
                "topic" => self.topic.clone(),
                "op" => op.label(),
                "outcome" => outcome(e)
            )
            .increment(1),
        }
        handles.duration.record(took.as_secs_f64());
    }
}

/// The `outcome` label of an error: its code without the `kms.` prefix
/// (also the `outcome` field of the audit events).
pub(crate) fn outcome(e: &KmsError) -> &'static str {
    let code = e.code();
    code.strip_prefix("kms.").unwrap_or(code)
}
