//! The command line (a contract, docs/DESIGN.md §5c: add flags, never
//! rename them): no command runs the main job with [`JobArgs`], `serve`
//! the HTTP gateway with `serve::ServeArgs`. Usage errors exit 2 and
//! `--help` 0, both through clap.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::{config_file, job, serve, telemetry};

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

/// The command line, with `serve --config FILE`'s keys put before the
/// command line's own flags (`config_file.rs`); exits 2 on a usage error
/// (naming the file, line and column when it is the file's) and 0 for
/// `--help` and `--version`.
pub(crate) fn parse() -> Cli {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let mut command = Cli::command();
    let matches = match command.clone().try_get_matches_from(&argv) {
        Ok(matches) => matches,
        // A flag may need another that only the file gives (--trusted-proxy
        // needs --upstream): find --config leniently, and let the parse of
        // the whole below judge.
        Err(e) => match command
            .clone()
            .ignore_errors(true)
            .try_get_matches_from(&argv)
        {
            Ok(lenient) if config_of(&lenient).is_some() => lenient,
            _ => e.exit(),
        },
    };
    let (Some((path, given)), Some(serve)) =
        (config_of(&matches), command.find_subcommand("serve"))
    else {
        return Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    };
    let (file_args, origins) = match config_file::arguments(path, serve, given) {
        Ok(found) => found,
        Err(message) => command.error(ErrorKind::InvalidValue, message).exit(),
    };
    // [program, "serve", the file's flags, the command line's after serve]
    let at = argv.iter().position(|a| a == "serve").unwrap_or(1);
    let mut all = argv[..=at].to_vec();
    all.extend(file_args);
    all.extend(argv[at + 1..].iter().cloned());
    match Cli::try_parse_from(all) {
        Ok(cli) => cli,
        Err(e) => {
            // A value of the file's refused by its flag: say where it is.
            let flag = match e.get(ContextKind::InvalidArg) {
                Some(ContextValue::String(arg)) => arg
                    .trim_start_matches('-')
                    .split([' ', '='])
                    .next()
                    .map(str::to_owned),
                _ => None,
            };
            match flag.and_then(|flag| origins.get(&flag)) {
                Some((line, col)) => {
                    let text = e.to_string();
                    let first = text.lines().next().unwrap_or_default();
                    let message = first.trim_start_matches("error: ");
                    command
                        .error(
                            e.kind(),
                            format!("{}:{line}:{col}: {message}", path.display()),
                        )
                        .exit()
                }
                None => e.exit(),
            }
        }
    }
}

/// `serve --config`'s path, if given, and `serve`'s matches.
fn config_of(matches: &clap::ArgMatches) -> Option<(&PathBuf, &clap::ArgMatches)> {
    match matches.subcommand() {
        Some(("serve", serve)) => serve.get_one::<PathBuf>("config").map(|path| (path, serve)),
        _ => None,
    }
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
