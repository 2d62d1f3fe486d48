//! The gateway's `tracing` subscriber: events as text lines on stderr,
//! filtered by `RUST_LOG` (tracing-subscriber's `EnvFilter` syntax), `warn`
//! when it is unset or invalid. `RUST_LOG=kms_actor::coalesce=debug` turns
//! on the coalescer's per-dispatch events (docs/RUNBOOK.md);
//! `RUST_LOG=info` adds the actor's start event with its curve backend.

use tracing_subscriber::EnvFilter;

/// Installs the subscriber for the whole process; a second call (or one
/// after another subscriber) leaves the first in place.
pub fn install() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}
