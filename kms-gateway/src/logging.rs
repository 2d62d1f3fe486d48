//! The gateway's `tracing` subscriber: events as text lines on stderr,
//! filtered by `RUST_LOG` (tracing-subscriber's `EnvFilter` syntax); when it
//! is unset or invalid, warnings, and for `serve` [`SERVE_FILTER`]: the
//! audit events too (target `kms::audit`, docs/SECURITY.md), one per key
//! change and token issued (the main job signs thousands of tokens, so it
//! leaves them out). `RUST_LOG=kms_actor::coalesce=debug` turns
//! on the coalescer's per-dispatch events (docs/RUNBOOK.md);
//! `RUST_LOG=info` adds the actor's start event with its curve backend.

use tracing_subscriber::EnvFilter;

/// `serve`'s filter when `RUST_LOG` is unset or invalid.
pub const SERVE_FILTER: &str = "warn,kms::audit=info";

/// Installs the subscriber for the whole process (with the audit events
/// by default if `audit`); a second call (or one after another
/// subscriber) leaves the first in place.
pub fn install(audit: bool) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(if audit { SERVE_FILTER } else { "warn" }));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}
