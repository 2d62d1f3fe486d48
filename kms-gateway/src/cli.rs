//! The command line (a contract, docs/DESIGN.md §5c: add flags, never
//! rename them): no command runs the main job with [`JobArgs`], `serve`
//! the HTTP gateway with `serve::ServeArgs`. Usage errors exit 2 and
//! `--help` 0, both through clap.

use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::{job, serve, telemetry};

/// The whole command line.
#[derive(Parser)]
#[command(
    name = "kms-gateway",
    version,
    about = "The KMS gateway: the main job (no command) or `serve`, an HTTP gateway.",
    args_conflicts_with_subcommands = true
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
    #[command(flatten)]
    pub(crate) job: JobArgs,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Serve HTTP until SIGINT or SIGTERM: the public face (JWKS, /whoami,
    /// /healthz) and the admin face (POST /tokens, POST /keys/rotate,
    /// GET /metrics).
    Serve(serve::ServeArgs),
}

/// The main job's flags.
#[derive(Args)]
pub(crate) struct JobArgs {
    /// Concurrent client tasks (≥ 1).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) clients: u64,
    /// Seconds of tokens after the vectors.
    #[arg(long, default_value_t = 3.0, value_parser = seconds)]
    pub(crate) duration: f64,
    /// Share of forged tokens (0..=1).
    #[arg(long, default_value_t = 0.05, value_parser = share)]
    pub(crate) invalid_share: f64,
    /// Signing keys (1..=1000).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub(crate) keys: u64,
    /// Where the Prometheus metrics are served while the job runs.
    #[arg(long, default_value = telemetry::DEFAULT_METRICS_ADDR)]
    pub(crate) metrics_addr: std::net::SocketAddr,
}

fn seconds(text: &str) -> Result<f64, String> {
    let secs: f64 = text.parse().map_err(|e| format!("{e}"))?;
    Duration::try_from_secs_f64(secs).map_err(|e| e.to_string())?;
    Ok(secs)
}

/// `serve`'s flags with every default (for the main job's HTTP phase,
/// which serves the public face as `serve` does).
pub(crate) fn serve_defaults() -> Result<serve::ServeArgs, String> {
    match Cli::try_parse_from(["kms-gateway", "serve"]) {
        Ok(Cli {
            command: Some(Command::Serve(args)),
            ..
        }) => Ok(args),
        Ok(_) => Err("serve's defaults did not parse as serve".to_owned()),
        Err(e) => Err(e.to_string()),
    }
}

/// The longest timeout a flag takes (a day): deadlines past it are no
/// limit at all, and far larger ones would overflow the clock.
const MAX_TIMEOUT: Duration = Duration::from_secs(86_400);

/// A timeout flag's value: seconds, fractions allowed, more than 0 and at
/// most a day.
pub(crate) fn timeout(text: &str) -> Result<Duration, String> {
    let secs: f64 = text.parse().map_err(|e| format!("{e}"))?;
    match Duration::try_from_secs_f64(secs) {
        Ok(d) if d.is_zero() => Err("must be more than 0".to_owned()),
        Ok(d) if d > MAX_TIMEOUT => Err("must be at most 86400 (a day)".to_owned()),
        Ok(d) => Ok(d),
        Err(e) => Err(e.to_string()),
    }
}

fn share(text: &str) -> Result<f64, String> {
    let share: f64 = text.parse().map_err(|e| format!("{e}"))?;
    if (0.0..=1.0).contains(&share) {
        Ok(share)
    } else {
        Err("must be between 0 and 1".to_owned())
    }
}

impl JobArgs {
    /// The main job's options.
    pub(crate) fn options(&self) -> job::Options {
        job::Options {
            clients: usize::try_from(self.clients).unwrap_or(usize::MAX),
            duration: Duration::from_secs_f64(self.duration),
            invalid_share: self.invalid_share,
            keys: usize::try_from(self.keys).unwrap_or(usize::MAX),
            metrics_addr: self.metrics_addr,
        }
    }
}
