//! The command line, the one place that sees clap (a contract,
//! docs/DESIGN.md §5c: add flags, never rename them): no command runs the
//! main job with [`job::JobArgs`], `serve` the HTTP gateway with
//! [`serve::ServeArgs`]; each turns into its typed configuration
//! (`config.rs`) in one function, `ServeArgs::config`, which makes every
//! cross-flag check and decides its exit code. `serve --config
//! FILE` reads its keys through the same parser (`config_file.rs`). Usage
//! errors exit 2 and `--help` 0, both through clap.

mod config_file;
pub(crate) mod job;
pub(crate) mod serve;

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::config::{ConfigError, JobConfig, ServeConfig};

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
    pub(crate) job: job::JobArgs,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Serve HTTP until SIGINT or SIGTERM: the public face (JWKS, /whoami,
    /// /healthz) and the admin face (POST /tokens, POST /keys/rotate,
    /// GET /metrics).
    Serve(serve::ServeArgs),
}

/// What to run, configured.
pub(crate) enum Program {
    /// The main job (no command).
    Job(JobConfig),
    /// `serve` (boxed: many times the main job's size).
    Serve(Box<ServeConfig>),
}

/// The command line, parsed ([`parse`]) and configured: exits 2 on a usage
/// error (clap's, or a cross-flag check's) and 0 for `--help` and
/// `--version`.
///
/// # Errors
/// The two checks of the flags alone that exit 1
/// ([`ConfigError::Start`]), as their message.
pub(crate) fn configure() -> Result<Program, String> {
    let cli = parse();
    match cli.command {
        None => Ok(Program::Job(cli.job.config())),
        Some(Command::Serve(args)) => match args.config() {
            Ok(config) => Ok(Program::Serve(Box::new(config))),
            Err(ConfigError::Usage(message)) => Cli::command()
                .error(ErrorKind::ArgumentConflict, message)
                .exit(),
            Err(ConfigError::Start(message)) => Err(message),
        },
    }
}

/// The command line, with `serve --config FILE`'s keys put before the
/// command line's own flags (`config_file.rs`); exits 2 on a usage error
/// (naming the file, line and column when it is the file's) and 0 for
/// `--help` and `--version`.
fn parse() -> Cli {
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

/// The longest timeout a flag takes (a day): deadlines past it are no
/// limit at all, and far larger ones would overflow the clock.
const MAX_TIMEOUT: Duration = Duration::from_secs(86_400);

/// A duration given in seconds, fractions allowed. Its `Display` is what
/// `--help` shows as a default, and what clap parses back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Seconds(pub(crate) Duration);

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.as_secs_f64())
    }
}

/// A timeout flag's value: seconds, fractions allowed, more than 0 and at
/// most a day.
fn timeout(text: &str) -> Result<Seconds, String> {
    let secs: f64 = text.parse().map_err(|e| format!("{e}"))?;
    match Duration::try_from_secs_f64(secs) {
        Ok(d) if d.is_zero() => Err("must be more than 0".to_owned()),
        Ok(d) if d > MAX_TIMEOUT => Err("must be at most 86400 (a day)".to_owned()),
        Ok(d) => Ok(Seconds(d)),
        Err(e) => Err(e.to_string()),
    }
}
