//! The main job's flags, and the [`JobConfig`] they make.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;

use crate::config::{self, JobConfig};

/// The main job's flags.
#[derive(Args)]
pub(crate) struct JobArgs {
    /// Concurrent client tasks (≥ 1).
    #[arg(long, default_value_t = config::CLIENTS, value_parser = clap::value_parser!(u64).range(1..))]
    clients: u64,
    /// Seconds of tokens after the vectors.
    #[arg(long, default_value_t = config::DURATION_SECS, value_parser = seconds)]
    duration: f64,
    /// Share of forged tokens (0..=1).
    #[arg(long, default_value_t = config::INVALID_SHARE, value_parser = share)]
    invalid_share: f64,
    /// Signing keys (1..=1000).
    #[arg(long, default_value_t = config::KEYS, value_parser = clap::value_parser!(u64).range(1..=1000))]
    keys: u64,
    /// Where the Prometheus metrics are served while the job runs.
    #[arg(long, default_value_t = config::METRICS_ADDR)]
    metrics_addr: SocketAddr,
}

impl JobArgs {
    /// The main job's configuration (every value was checked by its
    /// parser).
    pub(crate) fn config(&self) -> JobConfig {
        JobConfig {
            clients: usize::try_from(self.clients).unwrap_or(usize::MAX),
            duration: Duration::from_secs_f64(self.duration),
            invalid_share: self.invalid_share,
            keys: usize::try_from(self.keys).unwrap_or(usize::MAX),
            metrics_addr: self.metrics_addr,
        }
    }
}

/// A number of seconds a `Duration` can hold (fractions allowed).
fn seconds(text: &str) -> Result<f64, String> {
    let secs: f64 = text.parse().map_err(|e| format!("{e}"))?;
    Duration::try_from_secs_f64(secs).map_err(|e| e.to_string())?;
    Ok(secs)
}

/// A share between 0 and 1.
fn share(text: &str) -> Result<f64, String> {
    let share: f64 = text.parse().map_err(|e| format!("{e}"))?;
    if (0.0..=1.0).contains(&share) {
        Ok(share)
    } else {
        Err("must be between 0 and 1".to_owned())
    }
}
