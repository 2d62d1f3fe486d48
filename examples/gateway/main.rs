//! The gateway: the main job, and `serve`, an HTTP gateway on the KMS.
//!
//! ```text
//! cargo run --release --example gateway [-- --clients N] [--duration SECS]
//!     [--invalid-share F] [--keys N] [--metrics-addr HOST:PORT]
//! cargo run --release --example gateway -- serve [--listen ADDR]
//!     [--admin-listen ADDR] [--admin-token-file FILE] [--trust-jwks FILE]...
//!     [--store DIR | --etcd URL[,URL...] [--etcd-prefix P]] [--master-key-file FILE] [--key TENANT:PURPOSE]
//!     [--alg EdDSA|Ed25519]
//! ```
//!
//! With no command, the main job (`job.rs`): a bus and a KMS actor over an
//! in-memory keystore, metrics as Prometheus text at
//! `http://127.0.0.1:9600/metrics` while it runs, `--keys` signing keys
//! created through the actor, and `--clients` concurrent client tasks that
//! verify through the actor
//! * first, every vector in `testdata/` (sign.input, Wycheproof, RFC 8032,
//!   speccheck, CCTV, ZIP-215) with the verdict `expected_verdicts.tsv`
//!   requires, by raw public key, and
//! * then, for `--duration` seconds, tokens signed by the keystore and
//!   verified by key id (half of the keys are rotated after signing, so
//!   those tokens verify under a version that is no longer the head), of
//!   which a share `--invalid-share` is forged and must be rejected.
//!
//! A live line shows throughput, p99 latency and mean batch size over the
//! last half second. It reports (requests, verdicts against expectation,
//! throughput, latency p50/p99, mean batch size, requests verified on their
//! caller's task), then runs the HTTP phase (`http_phase.rs`): the public
//! face of `gateway serve` on an ephemeral loopback port, `--clients`
//! keep-alive HTTP/1.1 connections sending real tokens of eight kinds for
//! `--duration` seconds, every status checked, and a second report. It
//! exits 1 if any verdict or status differs from its expectation.
//! Defaults: 256 clients, 3 s, 5 % forged, 8 keys; nothing to set up.
//!
//! `serve` (`serve.rs`) serves HTTP until SIGINT or SIGTERM: a public face
//! (JWKS, `/whoami` behind the bearer layer, `/healthz`) and an admin face
//! (token issuance, rotation, metrics).
//!
//! Events go to stderr through a `tracing` subscriber filtered by
//! `RUST_LOG` (default `warn`; `logging.rs`).
//!
//! Exit codes: 0 success (and `--help`), 1 a wrong verdict or a start-up
//! error, 2 a usage error.

mod http_phase;
mod job;
mod logging;
mod serve;
mod telemetry;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "gateway",
    about = "The KMS gateway: the main job (no command) or `serve`, an HTTP gateway.",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    job: JobArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Serve HTTP until SIGINT or SIGTERM: the public face (JWKS, /whoami,
    /// /healthz) and the admin face (POST /tokens, POST /keys/rotate,
    /// GET /metrics).
    Serve(serve::ServeArgs),
}

/// The main job's flags.
#[derive(Args)]
struct JobArgs {
    /// Concurrent client tasks (≥ 1).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    clients: u64,
    /// Seconds of tokens after the vectors.
    #[arg(long, default_value_t = 3.0, value_parser = seconds)]
    duration: f64,
    /// Share of forged tokens (0..=1).
    #[arg(long, default_value_t = 0.05, value_parser = share)]
    invalid_share: f64,
    /// Signing keys (1..=1000).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=1000))]
    keys: u64,
    /// Where the Prometheus metrics are served while the job runs.
    #[arg(long, default_value = telemetry::DEFAULT_METRICS_ADDR)]
    metrics_addr: std::net::SocketAddr,
}

fn seconds(text: &str) -> Result<f64, String> {
    let secs: f64 = text.parse().map_err(|e| format!("{e}"))?;
    Duration::try_from_secs_f64(secs).map_err(|e| e.to_string())?;
    Ok(secs)
}

fn share(text: &str) -> Result<f64, String> {
    let share: f64 = text.parse().map_err(|e| format!("{e}"))?;
    if (0.0..=1.0).contains(&share) {
        Ok(share)
    } else {
        Err("must be between 0 and 1".to_owned())
    }
}

fn main() -> ExitCode {
    // Usage errors exit 2 and `--help` 0, both by clap.
    let cli = Cli::parse();
    if let Some(Command::Serve(args)) = &cli.command {
        if let Err(message) = serve::check_build(args) {
            // A usage error: exit 2, as clap's own.
            <Cli as clap::CommandFactory>::command()
                .error(clap::error::ErrorKind::ArgumentConflict, message)
                .exit();
        }
    }
    logging::install(matches!(cli.command, Some(Command::Serve(_))));
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("gateway: cannot start tokio: {e}");
            return ExitCode::from(1);
        }
    };
    match cli.command {
        Some(Command::Serve(args)) => match runtime.block_on(serve::run(args)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("gateway serve: {e}");
                ExitCode::from(1)
            }
        },
        None => {
            let options = job::Options {
                clients: cli.job.clients as usize,
                duration: Duration::from_secs_f64(cli.job.duration),
                invalid_share: cli.job.invalid_share,
                keys: cli.job.keys as usize,
                metrics_addr: cli.job.metrics_addr,
            };
            let both = async {
                let verdicts = job::run(&options).await?;
                let statuses = http_phase::run(&options).await?;
                Ok::<bool, String>(verdicts && statuses)
            };
            match runtime.block_on(both) {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::from(1),
                Err(e) => {
                    eprintln!("gateway: {e}");
                    ExitCode::from(1)
                }
            }
        }
    }
}
