//! The gateway's log lines on stderr: its `tracing` events, filtered by
//! `RUST_LOG` (tracing-subscriber's `EnvFilter` syntax; when it is unset or
//! invalid, warnings, and for `serve` [`SERVE_FILTER`]: the audit events
//! too, target `kms::audit`, docs/SECURITY.md, one per key change and token
//! issued), and its own lines ([`say`]: `gateway serve: …`, the start, the
//! reloads, the stop). `RUST_LOG=kms_actor::coalesce=debug` turns on the
//! coalescer's per-dispatch events (docs/RUNBOOK.md); `RUST_LOG=info` adds
//! the actor's start event with its curve backend.
//!
//! `serve --log-format json` writes every one of these as one JSON object
//! per line, in tracing-subscriber's JSON shape (`timestamp`, `level`,
//! `fields.message`, `target`), the gateway's own lines with the target
//! `kms_gateway`; `text` (the default) writes tracing's text lines and the
//! gateway's own as they read. The access log (stdout) is JSON either way
//! (`serve/access_log.rs`).

use std::fmt;
use std::io::Write;
use std::sync::OnceLock;

use tracing_subscriber::EnvFilter;

/// `serve`'s filter when `RUST_LOG` is unset or invalid.
pub const SERVE_FILTER: &str = "warn,kms::audit=info";

/// How log lines are written (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// Plain text lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// The format [`install`] chose, for [`say`].
static FORMAT: OnceLock<LogFormat> = OnceLock::new();

/// Installs the subscriber for the whole process (with the audit events
/// by default if `audit`), writing `format`; a second call (or one after
/// another subscriber) leaves the first in place.
pub(crate) fn install(audit: bool, format: LogFormat) {
    let _ = FORMAT.set(format);
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(if audit { SERVE_FILTER } else { "warn" }));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// How important one of the gateway's own lines is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    /// What it does (start, reloads, stop).
    Info,
    /// Something an operator should look at; it goes on.
    Warn,
    /// Why it stops (a start-up error).
    Error,
}

/// Writes one of the gateway's own lines to stderr, `message` as it reads
/// in text, or as a JSON object (module docs). Never fails: a line that
/// cannot be written is lost, as `eprintln!`'s would panic instead.
pub(crate) fn say(level: Level, message: fmt::Arguments<'_>) {
    let mut stderr = std::io::stderr().lock();
    let _ = match FORMAT.get().copied().unwrap_or_default() {
        LogFormat::Text => writeln!(stderr, "{message}"),
        LogFormat::Json => {
            let level = match level {
                Level::Info => "INFO",
                Level::Warn => "WARN",
                Level::Error => "ERROR",
            };
            let line = serde_json::json!({
                "timestamp": crate::timestamp::rfc3339_micros(std::time::SystemTime::now()),
                "level": level,
                "fields": {"message": message.to_string()},
                "target": "kms_gateway",
            });
            writeln!(stderr, "{line}")
        }
    };
}

/// [`say`] at [`Level::Info`], with `format!`'s syntax.
macro_rules! info_line {
    ($($arg:tt)*) => {
        $crate::logging::say($crate::logging::Level::Info, format_args!($($arg)*))
    };
}

/// [`say`] at [`Level::Warn`], with `format!`'s syntax.
macro_rules! warn_line {
    ($($arg:tt)*) => {
        $crate::logging::say($crate::logging::Level::Warn, format_args!($($arg)*))
    };
}

pub(crate) use {info_line, warn_line};
